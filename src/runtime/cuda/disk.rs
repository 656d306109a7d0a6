//! The on-disk PTX cache: `$SMELT_CACHE_DIR`, else `$XDG_CACHE_HOME/smelt`,
//! else `~/.cache/smelt`, in a subdirectory per crate version and codegen
//! source hash; one file `<key as 16 hex digits>.ptx` per kernel and
//! target (`key`: the module cache's, see `modules.rs`), holding a launch
//! line and the PTX. Best effort: an unreadable or unwritable cache is
//! skipped, and a file that does not validate is removed.

use smelt_codegen::ptx::{Launch, MapElem, PtxKernel, TensorMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// First word of every cache file: a file without it (truncated,
/// foreign, an older format) is not trusted.
const MAGIC: &str = "smelt-ptx-1";

/// The cache directory (also home of the autotuner's choices, `tune.txt`).
pub(super) struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// The versioned cache directory the environment names; `None` when
    /// there is no variable to find it from. Created on the first store.
    pub fn open() -> Option<DiskCache> {
        let base = std::env::var_os("SMELT_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME")
                    .map(|d| PathBuf::from(d).join("smelt"))
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/smelt"))
                    })
            })?;
        // The crate version and the hash of codegen's sources key the
        // cache, so neither an upgrade nor an emitter change reuses old code.
        Some(DiskCache {
            dir: base.join(format!(
                "ptx-{}-{}",
                env!("CARGO_PKG_VERSION"),
                smelt_codegen::CODEGEN_HASH
            )),
        })
    }

    /// The versioned directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: u64) -> PathBuf {
        self.dir.join(format!("{key:016x}.ptx"))
    }

    /// The cached launch of `key`, or `None` (and the file removed) when
    /// it is missing, not text, or its header does not validate.
    pub fn load(&self, key: u64) -> Option<PtxKernel> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        let k = std::str::from_utf8(&bytes).ok().and_then(parse);
        if k.is_none() {
            self.evict(key);
        }
        k
    }

    /// Removes the cache file of `key` (best effort): one that failed to
    /// parse, or whose PTX the driver rejected.
    pub fn evict(&self, key: u64) {
        let _ = std::fs::remove_file(self.path(key));
    }

    /// Writes the cache file of `key` (best effort).
    pub fn store(&self, key: u64, k: &PtxKernel) {
        let p = self.path(key);
        let mut head = MAGIC.to_string();
        for l in &k.launches {
            let (g, b) = (l.grid, l.block);
            head += &format!(
                " {} {} {} {} {} {} {} {}",
                l.entry, g.0, g.1, g.2, b.0, b.1, b.2, l.shared_bytes
            );
        }
        for m in &k.maps {
            let (d, s, x) = (m.dims, m.strides, m.boxes);
            head += &format!(
                " {} {} {} {} {} {} {} {} {} {}",
                map_tag(m.elem),
                m.input,
                d[0],
                d[1],
                d[2],
                s[0],
                s[1],
                x[0],
                x[1],
                x[2]
            );
        }
        // Write then rename, so a concurrent reader never sees half a file.
        // The temporary name is unique per store, not just per process:
        // two threads storing one key through one file could rename it
        // while the other is still writing, publishing a truncated kernel.
        static STORES: AtomicU64 = AtomicU64::new(0);
        let n = STORES.fetch_add(1, Ordering::Relaxed);
        let tmp = p.with_extension(format!("tmp{}-{n}", std::process::id()));
        let ok = std::fs::create_dir_all(&self.dir).is_ok()
            && std::fs::write(&tmp, format!("{head}\n{}", k.ptx)).is_ok();
        if !ok || std::fs::rename(&tmp, &p).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A tensor map's tag in the launch line, which names its element kind
/// (`map` for 2-byte elements, the only kind before the others existed,
/// so older files still load).
fn map_tag(e: MapElem) -> &'static str {
    match e {
        MapElem::B16 => "map",
        MapElem::B8 => "map8",
        MapElem::Tf32 => "maptf32",
    }
}

/// The element kind of tag `t`, if it is a tensor map's.
fn map_elem(t: &str) -> Option<MapElem> {
    [MapElem::B16, MapElem::B8, MapElem::Tf32]
        .into_iter()
        .find(|e| map_tag(*e) == t)
}

/// Parses a cache file: the magic, the launch line (per launch its entry,
/// grid, block and shared memory: 8 fields; then per tensor map its tag
/// ([`map_tag`]), input, dims, strides and box: 10 fields), then PTX that
/// declares every entry it names.
fn parse(text: &str) -> Option<PtxKernel> {
    let (head, ptx) = text.split_once('\n')?;
    let f: Vec<&str> = head.split(' ').collect();
    let split = f
        .iter()
        .position(|t| map_elem(t).is_some())
        .unwrap_or(f.len());
    let (f, m) = f.split_at(split);
    if f.len() < 9 || !(f.len() - 1).is_multiple_of(8) || f[0] != MAGIC {
        return None;
    }
    if !m.len().is_multiple_of(10) {
        return None;
    }
    let launches = f[1..]
        .chunks(8)
        .map(|l| {
            let n = |i: usize| l[i].parse::<u32>().ok();
            let entry = l[0];
            if entry.is_empty() || !ptx.contains(&format!(".entry {entry}(")) {
                return None;
            }
            Some(Launch {
                entry: entry.to_string(),
                grid: (n(1)?, n(2)?, n(3)?),
                block: (n(4)?, n(5)?, n(6)?),
                shared_bytes: n(7)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let maps = m
        .chunks(10)
        .map(|t| {
            let n = |i: usize| t[i].parse::<u64>().ok();
            let w = |i: usize| t[i].parse::<u32>().ok();
            Some(TensorMap {
                elem: map_elem(t[0])?,
                input: t[1].parse().ok()?,
                dims: [n(2)?, n(3)?, n(4)?],
                strides: [n(5)?, n(6)?],
                boxes: [w(7)?, w(8)?, w(9)?],
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(PtxKernel {
        ptx: ptx.to_string(),
        launches,
        maps,
    })
}

#[cfg(test)]
mod tests {
    use super::{parse, DiskCache, MapElem};
    use smelt_codegen::ptx::PtxKernel;

    const PTX: &str = ".visible .entry smelt_k_1(\n)\n{\nret;\n}\n";

    fn kernel() -> PtxKernel {
        PtxKernel::single(PTX.into(), "smelt_k_1".into(), 4, 256, 0)
    }

    /// A cache in a fresh directory of its own (removed by the test).
    fn scratch(test: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!("smelt-disk-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        DiskCache { dir }
    }

    /// A cache file is trusted only with the magic, a full launch line and
    /// PTX declaring the named entry (truncated, garbage or old-format
    /// files are rejected, so `load` evicts them).
    #[test]
    fn header_is_validated() {
        let good = format!("smelt-ptx-1 smelt_k_1 4 1 1 256 1 1 0\n{PTX}");
        assert_eq!(parse(&good), Some(kernel()));
        // The pre-magic format, garbage, a truncated file, a wrong entry.
        let bad = [
            format!("smelt_k_1 4 1 1 256 1 1 0\n{PTX}"),
            "\u{0}\u{1}garbage\nmore".to_string(),
            "smelt-ptx-1 smelt_k_1 4 1 1 256 1 1".to_string(),
            format!("smelt-ptx-1 smelt_k_1 4 1 1 256 1 1 0\n{}", &PTX[..10]),
            format!("smelt-ptx-1 smelt_k_2 4 1 1 256 1 1 0\n{PTX}"),
            format!("smelt-ptx-1 smelt_k_1 4 x 1 256 1 1 0\n{PTX}"),
        ];
        for b in bad {
            assert!(parse(&b).is_none(), "accepted {b:?}");
        }
        // Several launches (a long-row sort's passes): 8 fields each.
        let two = format!("{PTX}.visible .entry smelt_k_2(\n)\n{{\nret;\n}}\n");
        let head = "smelt-ptx-1 smelt_k_1 4 1 1 256 1 1 0 smelt_k_2 9 1 1 32 1 1 0";
        let k = parse(&format!("{head}\n{two}")).expect("two launches");
        assert_eq!(k.launches.len(), 2);
        assert_eq!((k.launches[1].grid, k.launches[1].block.0), ((9, 1, 1), 32));
        assert!(parse(&format!("{head} 7\n{two}")).is_none());
        // Tensor maps after the launches: 10 fields each.
        let maps = format!("{head} map 1 128 4096 64 256 1048576 64 128 1\n{two}");
        let k = parse(&maps).expect("a tensor map");
        assert_eq!(k.maps[0].dims, [128, 4096, 64]);
        assert_eq!((k.maps[0].input, k.maps[0].boxes), (1, [64, 128, 1]));
        assert_eq!(k.maps[0].elem, MapElem::B16, "the first format's tag");
        assert!(parse(&format!("{head} map 1 128\n{two}")).is_none());
        let tf32 = format!("{head} maptf32 0 4096 4096 1 16384 16 32 256 1\n{two}");
        assert_eq!(
            parse(&tf32).expect("a TF32 map").maps[0].elem,
            MapElem::Tf32
        );
        let unknown = format!("{head} mapx 0 4096 4096 1 16384 16 32 256 1\n{two}");
        assert!(parse(&unknown).is_none());
    }

    /// What is stored loads back, in a directory created on demand.
    #[test]
    fn stored_kernels_load_back() {
        let c = scratch("round_trip");
        assert_eq!(c.load(7), None, "nothing cached yet");
        c.store(7, &kernel());
        assert_eq!(c.load(7), Some(kernel()));
        assert_eq!(c.load(8), None);
        let files: Vec<_> = std::fs::read_dir(c.dir()).unwrap().flatten().collect();
        assert_eq!(files.len(), 1, "no temporary file is left behind");
        assert_eq!(files[0].file_name(), "0000000000000007.ptx");
        let mut mapped = kernel();
        mapped.maps.push(smelt_codegen::ptx::TensorMap {
            input: 2,
            elem: smelt_codegen::ptx::MapElem::B16,
            dims: [64, 7, 1],
            strides: [128, 16],
            boxes: [64, 64, 1],
        });
        mapped.maps.push(smelt_codegen::ptx::TensorMap {
            input: 0,
            elem: smelt_codegen::ptx::MapElem::Tf32,
            dims: [4096, 4096, 1],
            strides: [16384, 16],
            boxes: [32, 256, 1],
        });
        c.store(9, &mapped);
        assert_eq!(c.load(9), Some(mapped), "tensor maps load back");
        std::fs::remove_dir_all(c.dir()).unwrap();
    }

    /// Threads storing the same kernel while others load it: every load
    /// sees the whole kernel or nothing, never a file cut short (a shared
    /// temporary file per process once published truncated PTX, which
    /// the driver then rejected).
    #[test]
    fn concurrent_stores_of_one_key_never_publish_half_a_file() {
        let c = scratch("concurrent");
        let mut big = kernel();
        // Long enough that a write is not one syscall's worth.
        big.ptx = format!(
            "{}{}",
            PTX,
            "// padding line of the kernel body\n".repeat(50_000)
        );
        std::thread::scope(|s| {
            for t in 0..8 {
                let (c, big) = (&c, &big);
                s.spawn(move || {
                    for _ in 0..200 {
                        if t % 2 == 0 {
                            c.store(3, big);
                        } else if let Some(k) = c.load(3) {
                            assert_eq!(k.ptx.len(), big.ptx.len(), "a truncated file was read");
                        }
                    }
                });
            }
        });
        assert_eq!(c.load(3).as_ref(), Some(&big));
        std::fs::remove_dir_all(c.dir()).unwrap();
    }

    /// Garbage, truncated and foreign files read as a miss and are removed,
    /// so the runtime emits the kernel and stores a good file again (its
    /// GPU side, a module the driver rejects, is
    /// `tests/reliability_caches.rs`).
    #[test]
    fn corrupt_files_are_misses_and_removed() {
        let c = scratch("corrupt");
        let good = format!("smelt-ptx-1 smelt_k_1 4 1 1 256 1 1 0\n{PTX}");
        let corrupt: [&[u8]; 4] = [
            b"\xff\xfe\x00garbage",
            &good.as_bytes()[..good.len() / 2],
            b"",
            b"smelt-ptx-1 smelt_k_1 4 1 1 256 1 1 0\n.visible .entry other(\n)",
        ];
        for bytes in corrupt {
            c.store(1, &kernel());
            let path = c.dir().join("0000000000000001.ptx");
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(c.load(1), None, "{bytes:?} was trusted");
            assert!(!path.exists(), "{bytes:?} was kept");
            c.store(1, &kernel());
            assert_eq!(c.load(1), Some(kernel()), "rewritten after {bytes:?}");
        }
        c.evict(1);
        assert_eq!(c.load(1), None);
        std::fs::remove_dir_all(c.dir()).unwrap();
    }

    /// The cache directory is keyed by the hash of codegen's sources, so
    /// an emitter change never reuses PTX cached by an older emitter.
    #[test]
    fn dir_is_keyed_by_the_codegen_sources() {
        let h = smelt_codegen::CODEGEN_HASH;
        assert!(h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        if let Some(c) = DiskCache::open() {
            assert!(c.dir().to_string_lossy().ends_with(h), "{:?}", c.dir());
        }
    }
}
