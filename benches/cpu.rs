//! CPU benchmark of issue 14: softmax over `[4096, 1024]`, layer norm over
//! `[4096, 4096]`, vector add of 2^24 elements, a sum of 2^24 elements,
//! row sums of `[4096, 4096]`, the exact (erf) GELU of `[4096, 1024]`,
//! matmuls of 1024^3 and 2048^3, an MLP block
//! (`x + gelu_tanh(x w1) w2`, 512x1024x4096) and a small naive attention
//! (8 heads, 512 tokens, d = 64), scans (`cumsum` along the rows and down
//! the columns of `[4096, 4096]`, of 2^24 elements, `cummax` values along
//! rows, an `int64` `cumsum` along rows), sorts (`sort`, `argsort` and
//! `topk` of 16 along the rows of `[4096, 4096]`, `sort` of 2^22 elements,
//! an `int64` `sort` along rows), all `f32` but the `int64` ones, each
//! through
//! - `exec`: smelt's default CPU executor, fused;
//! - `interp`: the same fused kernels through the interpreter
//!   (`SMELT_CPU=interp`);
//! - `exec unfused`: the executor with `Fusion::Off` (one kernel per op);
//! - `llvm`: the LLVM JIT, fused (`SMELT_CPU=llvm`; built with
//!   `--features llvm` only). Its compiles happen in the warm-up runs.
//!
//! Wall-clock time of a realize (the input already realized, the schedule
//! cached after the warm-up), median of 20 runs after 3 warm-up runs (5
//! runs for the interpreter, which is slow). `benches/reference/
//! cpu_reference.py` times NumPy (and torch on the CPU, where installed)
//! on the same workloads. `cargo bench --bench cpu` prints a table and
//! writes `cpu.json` to `$SMELT_BENCH_OUT` (default `target/bench`);
//! `-- --smoke` runs tiny sizes to check the bench end to end (its figures
//! mean nothing); `-- --only TEXT` runs the cases whose `workload mode`
//! contains `TEXT` (`--only softmax`, `--only "add 2^24 exec"`).

mod common;

use common::{median, out_dir, today, write_report};
use smelt::{DType, Device, Fusion, Result, Tensor};
use std::time::Instant;

/// One workload: its name, input shapes and the graph it times.
struct Workload {
    name: &'static str,
    shapes: Vec<Vec<usize>>,
    build: fn(&[Tensor]) -> Tensor,
}

fn workloads(smoke: bool) -> Vec<Workload> {
    let s = |full: usize, small: usize| if smoke { small } else { full };
    vec![
        Workload {
            name: "softmax 4096x1024",
            shapes: vec![vec![s(4096, 64), s(1024, 33)]],
            build: |x| x[0].softmax(-1),
        },
        Workload {
            name: "layer_norm 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].layer_norm(-1, None, None, 1e-5),
        },
        Workload {
            name: "add 2^24",
            shapes: vec![vec![s(1 << 24, 1000)], vec![s(1 << 24, 1000)]],
            build: |x| &x[0] + &x[1],
        },
        Workload {
            name: "sum 2^24",
            shapes: vec![vec![s(1 << 24, 1000)]],
            build: |x| x[0].sum(0),
        },
        Workload {
            name: "row sums 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].sum(-1),
        },
        Workload {
            name: "matmul 1024^3",
            shapes: vec![vec![s(1024, 33); 2], vec![s(1024, 33); 2]],
            build: |x| x[0].matmul(&x[1]),
        },
        Workload {
            name: "matmul 2048^3",
            shapes: vec![vec![s(2048, 65); 2], vec![s(2048, 65); 2]],
            build: |x| x[0].matmul(&x[1]),
        },
        // Scans: along rows, down columns (a strided scanned axis), one
        // long row, the max family, integers.
        Workload {
            name: "cumsum 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].cumsum(-1),
        },
        Workload {
            name: "cumsum axis0 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].cumsum(0),
        },
        Workload {
            name: "cumsum 2^24",
            shapes: vec![vec![s(1 << 24, 1000)]],
            build: |x| x[0].cumsum(0),
        },
        Workload {
            name: "cummax 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].cummax(-1).0,
        },
        Workload {
            name: "cumsum i64 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].cumsum(-1),
        },
        // Sorts: values along rows, their indices, a `topk` of 16 per
        // row, one long row, integers.
        Workload {
            name: "sort 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].sort(-1, false).0,
        },
        Workload {
            name: "argsort 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].argsort(-1, false),
        },
        Workload {
            name: "topk16 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].topk(16, -1, true).0,
        },
        Workload {
            name: "sort 2^22",
            shapes: vec![vec![s(1 << 22, 1000)]],
            build: |x| x[0].sort(0, false).0,
        },
        Workload {
            name: "sort i64 4096x4096",
            shapes: vec![vec![s(4096, 64), s(4096, 65)]],
            build: |x| x[0].sort(-1, false).0,
        },
        // A scatter: 2^20 rows of 64 added into 1024 rows at random
        // positions (the `index` input holds row numbers).
        Workload {
            name: "index_add 2^20x64",
            shapes: vec![
                vec![s(1024, 16), 64],
                vec![s(1 << 20, 1000)],
                vec![s(1 << 20, 1000), 64],
            ],
            build: |x| x[0].index_add(0, &x[1], &x[2]),
        },
        // PyTorch's default GELU, the exact one (erf), alone.
        Workload {
            name: "gelu 4096x1024",
            shapes: vec![vec![s(4096, 64), s(1024, 33)]],
            build: |x| x[0].gelu(),
        },
        // A transformer MLP block: residual + gelu(x w1) w2 (tanh gelu,
        // which NumPy can write without erf).
        Workload {
            name: "mlp 512x1024x4096",
            shapes: vec![
                vec![s(512, 17), s(1024, 33)],
                vec![s(1024, 33), s(4096, 65)],
                vec![s(4096, 65), s(1024, 33)],
            ],
            build: |x| x[0].matmul(&x[1]).gelu_tanh().matmul(&x[2]) + &x[0],
        },
        // Small attention, written naively: 8 heads, 512 tokens, d = 64.
        Workload {
            name: "attention 8x512x64",
            shapes: vec![vec![8, s(512, 33), s(64, 16)]; 3],
            build: |x| {
                let d = x[0].shape()[2] as f64;
                (x[0].matmul(&x[1].transpose(-1, -2)) * (1.0 / d.sqrt()))
                    .softmax(-1)
                    .matmul(&x[2])
            },
        },
    ]
}

/// How a workload runs.
#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    /// The value of `SMELT_CPU`.
    engine: &'static str,
    fusion: Fusion,
    runs: usize,
}

const MODES: [Mode; 4] = [
    Mode {
        name: "exec",
        engine: "exec",
        fusion: Fusion::On,
        runs: 20,
    },
    Mode {
        name: "interp",
        engine: "interp",
        fusion: Fusion::On,
        runs: 5,
    },
    Mode {
        name: "exec unfused",
        engine: "exec",
        fusion: Fusion::Off,
        runs: 20,
    },
    Mode {
        name: "llvm",
        engine: "llvm",
        fusion: Fusion::On,
        runs: 20,
    },
];

/// The modes this build can run (`llvm` needs the feature).
fn modes() -> impl Iterator<Item = Mode> {
    MODES
        .into_iter()
        .filter(|m| m.engine != "llvm" || cfg!(any(feature = "llvm", feature = "llvm-static")))
}

const WARMUP: usize = 3;

/// Median milliseconds of realizing `w` on `inputs` in `mode`.
fn time(w: &Workload, inputs: &[Tensor], mode: Mode, runs: usize) -> Result<f64> {
    // Read by the CPU backend at every kernel; this thread is the only
    // one running when it changes.
    std::env::set_var("SMELT_CPU", mode.engine);
    let mut ms = Vec::with_capacity(runs);
    for r in 0..WARMUP + runs {
        let y = (w.build)(inputs);
        let t0 = Instant::now();
        y.realize_with(mode.fusion)?;
        if r >= WARMUP {
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(median(&mut ms))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map_or("", |s| s.as_str());
    let dev = Device::Cpu;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "CPU, {threads} threads{}",
        if smoke {
            " (smoke run: tiny sizes, figures mean nothing)"
        } else {
            ""
        }
    );
    println!("{:<22} {:>14} {:>10}", "workload", "mode", "ms");
    let mut rows = Vec::new();
    for (i, w) in workloads(smoke).iter().enumerate() {
        let picked = |m: &Mode| format!("{} {}", w.name, m.name).contains(only);
        if !modes().any(|m| picked(&m)) {
            continue;
        }
        let inputs: Vec<Tensor> = w
            .shapes
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let seed = (10 * i + j) as u64;
                // The integer workloads take `int64` inputs; a scatter's
                // index holds row numbers of its first input.
                let x = if w.name.contains("i64") {
                    Tensor::randint(-1000, 1000, s.clone(), seed, &dev)
                } else if w.name.starts_with("index_add") && j == 1 {
                    Tensor::randint(0, w.shapes[0][0] as i64, s.clone(), seed, &dev)
                } else {
                    Tensor::randn(s.clone(), DType::F32, seed, &dev)
                };
                x.realize()?;
                Ok(x)
            })
            .collect::<Result<_>>()?;
        for mode in modes().filter(picked) {
            let runs = if smoke { 2 } else { mode.runs };
            let ms = time(w, &inputs, mode, runs)?;
            println!("{:<22} {:>14} {:>10.3}", w.name, mode.name, ms);
            rows.push(serde_json::json!({
                "workload": w.name,
                "impl": format!("smelt {}", mode.name),
                "ms": ms,
            }));
        }
    }
    std::env::remove_var("SMELT_CPU");
    let report = serde_json::json!({
        "date": today(),
        "threads": threads,
        "smoke": smoke,
        "results": rows,
    });
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| smelt::Error::Runtime(format!("cpu.json: {e}")))?;
    let path = write_report("cpu.json", &text)?;
    println!("wrote {} (under {})", path.display(), out_dir().display());
    Ok(())
}
