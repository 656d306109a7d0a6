//! Pictures of what fusion does: the schedules of a softmax over a
//! [4096, 1024] f32 tensor (fused, and one kernel per op for contrast) and
//! of a transformer MLP block (`x @ w1 + b1 -> gelu -> @ w2 + b2 -> + x ->
//! layer_norm`, f16 weights and activations). Nothing is computed: the
//! schedules are planned on the CPU and drawn with `Schedule::to_dot`.
//!
//! ```text
//! cargo run --example viz -- docs   # docs/{fused_softmax,unfused_softmax,mlp_block}.svg
//! cargo run --example viz           # prints the DOT of the fused softmax
//! ```
//!
//! With a directory, each picture is rendered by Graphviz's `dot` (on
//! `PATH`) to `NAME.svg`, or written as `NAME.dot` when there is no `dot`.

use smelt::{DType, Device, Fusion, Schedule, Tensor};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn softmax(fusion: Fusion) -> Schedule {
    let x = Tensor::randn([4096, 1024], DType::F32, 0, &Device::Cpu);
    x.softmax(-1).schedule(fusion)
}

/// One MLP block of a transformer layer over 4096 tokens of width 1024.
fn mlp_block() -> Schedule {
    let dev = Device::Cpu;
    let (tokens, d, hidden) = (4096, 1024, 4096);
    let t = |shape: &[usize], seed: u64| Tensor::randn(shape, DType::F16, seed, &dev);
    let x = t(&[tokens, d], 0);
    let (w1, b1) = (t(&[d, hidden], 1), t(&[hidden], 2));
    let (w2, b2) = (t(&[hidden, d], 3), t(&[d], 4));
    let (gamma, beta) = (t(&[d], 5), t(&[d], 6));
    let h = (x.matmul(&w1) + &b1).gelu();
    let y = h.matmul(&w2) + &b2 + &x;
    y.layer_norm(-1, Some(&gamma), Some(&beta), 1e-5)
        .schedule(Fusion::On)
}

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args().nth(1) else {
        print!("{}", softmax(Fusion::On).to_dot());
        return Ok(());
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let pictures = [
        ("fused_softmax", softmax(Fusion::On)),
        ("unfused_softmax", softmax(Fusion::Off)),
        ("mlp_block", mlp_block()),
    ];
    for (name, schedule) in pictures {
        println!("{name}: {schedule}");
        let dot = schedule.to_dot();
        let svg = dir.join(format!("{name}.svg"));
        let child = Command::new("dot")
            .arg("-Tsvg")
            .arg("-o")
            .arg(&svg)
            .stdin(Stdio::piped())
            .spawn();
        match child {
            Ok(mut child) => {
                child
                    .stdin
                    .take()
                    .expect("piped stdin")
                    .write_all(dot.as_bytes())?;
                let status = child.wait()?;
                if !status.success() {
                    return Err(std::io::Error::other(format!("dot failed on {name}")));
                }
                println!("wrote {}", svg.display());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let path = dir.join(format!("{name}.dot"));
                std::fs::write(&path, dot)?;
                println!("wrote {} (no Graphviz `dot` on PATH)", path.display());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
