//! Hashes this crate's sources into `SMELT_CODEGEN_HASH`, so caches of
//! generated code (the on-disk PTX cache) change key whenever the IR,
//! simplifier or emitter change, not only with the crate version.
//! FNV-1a 64 over each file's relative path and bytes, in sorted order:
//! a fixed algorithm, the same on every host and Rust release.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    println!("cargo:rerun-if-changed=src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for p in &all {
        let rel = p.strip_prefix(root).unwrap_or(p);
        feed(rel.to_string_lossy().replace('\\', "/").as_bytes());
        feed(&[0]);
        feed(&std::fs::read(p).unwrap_or_default());
        feed(&[0]);
    }
    println!("cargo:rustc-env=SMELT_CODEGEN_HASH={h:016x}");
}
