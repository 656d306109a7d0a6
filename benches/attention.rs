//! Attention on the GPU (issue 13): naive `softmax(q @ k^T * s [+ causal
//! mask]) @ v`, written as a user writes it (the softmax in f32 on f16 /
//! bf16 scores), timed under three plans:
//! - `fused`: the one attention kernel (`AttentionFusion::On`);
//! - `3-kernel`: score matmul, softmax row kernel, output matmul
//!   (`AttentionFusion::Off`);
//! - `unfused`: `Fusion::Off`, one kernel per op.
//!
//! Cases ([`CASES`]): the prefill shapes of the table, causal and
//! not, and decode shapes (one query row against a long KV cache), in f16
//! and bf16. Protocol as the other benches: GPU time by CUDA events around
//! each run with the GPU kept busy before it (launch latency hidden),
//! median after warm-up, inputs rotated when they fit L2 several times.
//! Slow plans get fewer runs (at least [`MIN_RUNS`]) so the bench ends.
//!
//! Reports TFLOP/s (4 b h sq sk d, halved for causal) and, for decode,
//! GB/s of q, k, v read and the output written. Writes `attention.json`
//! (series `"{plan} {dtype} {causal|full}"`, x the case number from 1) and
//! `attention.svg` under `$SMELT_BENCH_OUT` (else `target/bench`).
//! `benches/reference/torch_attention.py` measures torch's plans on the
//! same cases into `torch_attention.json`; `cargo bench --bench attention
//! -- --compare attention.json torch_attention.json` prints both as one
//! table; `-- --replot FILE` redraws `attention.svg` from a saved
//! `attention.json` without a GPU. `-- --smoke` runs tiny cases on the
//! default device.
//!
//! Tile sweeps: `SMELT_ATTENTION_TILE=<warps>x<rows>x<bn>[x<stages>][r]`
//! picks the tensor-core kernel's tile (printed, and named in the
//! report's device line); `-- --fused-only` times only the fused plan,
//! so each tile's run is short, and `-- --cases 7,9` only the cases of
//! those numbers; `-- --shape b,h,sq,sk,d[,causal]` (repeatable) times
//! those shapes instead of [`CASES`], numbered in order.
//! `SMELT_ATTENTION_SPLITS=<n>` forces
//! split-KV's count (1: unsplit, the baseline for the decode cases),
//! also named in the device line.

mod common;

use common::report::{read_json, svg, to_json, BandwidthReport, Point};
use common::{gpu, kernel_ms_budget, out_dir, rotation, today, write_report};
use smelt::{AttentionFusion, DType, Device, Fusion, Planning, Result, Tensor};

/// One measured shape: batch, heads, query rows, key rows, head dim, and
/// whether the mask is causal (only with `sq == sk`).
#[derive(Clone, Copy)]
struct Case {
    b: usize,
    h: usize,
    sq: usize,
    sk: usize,
    d: usize,
    causal: bool,
}

impl Case {
    const fn prefill(b: usize, h: usize, s: usize, d: usize, causal: bool) -> Case {
        Case {
            b,
            h,
            sq: s,
            sk: s,
            d,
            causal,
        }
    }

    const fn decode(b: usize, h: usize, sk: usize, d: usize) -> Case {
        Case {
            b,
            h,
            sq: 1,
            sk,
            d,
            causal: false,
        }
    }

    /// Floating-point operations of both products (the causal mask halves
    /// them).
    fn flops(&self) -> f64 {
        let f = 4.0 * (self.b * self.h * self.sq * self.sk * self.d) as f64;
        if self.causal {
            f / 2.0
        } else {
            f
        }
    }

    /// Bytes read (q, k, v) and written (the output) at `size` bytes an
    /// element: what a decode step must move.
    fn bytes(&self, size: usize) -> f64 {
        (self.b * self.h * self.d * (2 * self.sq + 2 * self.sk) * size) as f64
    }

    fn label(&self) -> String {
        format!(
            "b{} h{} q{} kv{} d{}{}",
            self.b,
            self.h,
            self.sq,
            self.sk,
            self.d,
            if self.causal { " causal" } else { "" }
        )
    }
}

/// The measured cases, numbered from 1 in reports: the prefill
/// shapes, non-causal then causal, then decode.
const CASES: [Case; 9] = [
    Case::prefill(4, 16, 2048, 128, false),
    Case::prefill(2, 16, 8192, 128, false),
    Case::prefill(4, 32, 2048, 64, false),
    Case::prefill(4, 16, 2048, 128, true),
    Case::prefill(2, 16, 8192, 128, true),
    Case::prefill(4, 32, 2048, 64, true),
    Case::decode(64, 16, 4096, 128),
    Case::decode(16, 16, 32768, 128),
    Case::decode(8, 16, 131072, 128),
];

/// The case numbers after `--cases` (comma-separated, from 1), or `None`
/// for every case.
fn picked_cases(args: &[String]) -> Result<Option<Vec<usize>>> {
    let Some(i) = args.iter().position(|a| a == "--cases") else {
        return Ok(None);
    };
    let bad = || smelt::Error::Runtime("--cases needs case numbers like 7,9".into());
    let list = args.get(i + 1).ok_or_else(bad)?;
    let picked = list
        .split(',')
        .map(|n| n.trim().parse::<usize>().map_err(|_| bad()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(picked))
}

/// The shapes after each `--shape` (`b,h,sq,sk,d`, then `causal` to mask),
/// or `None` where there is none.
fn shape_args(args: &[String]) -> Result<Option<Vec<Case>>> {
    let bad =
        |s: &str| smelt::Error::Runtime(format!("--shape needs b,h,sq,sk,d[,causal], got {s:?}"));
    let shapes = args
        .windows(2)
        .filter(|w| w[0] == "--shape")
        .map(|w| {
            let parts: Vec<&str> = w[1].split(',').map(str::trim).collect();
            let causal = match parts.get(5) {
                None => false,
                Some(&"causal") => true,
                Some(_) => return Err(bad(&w[1])),
            };
            let n: Vec<usize> = parts
                .iter()
                .take(5)
                .map(|p| p.parse::<usize>().map_err(|_| bad(&w[1])))
                .collect::<Result<_>>()?;
            if n.len() != 5 || parts.len() > 6 || (causal && n[2] != n[3]) {
                return Err(bad(&w[1]));
            }
            Ok(Case {
                b: n[0],
                h: n[1],
                sq: n[2],
                sk: n[3],
                d: n[4],
                causal,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((!shapes.is_empty()).then_some(shapes))
}

/// Tiny cases for a smoke run on the CPU.
const SMOKE: [Case; 3] = [
    Case::prefill(1, 2, 64, 32, false),
    Case::prefill(1, 2, 64, 32, true),
    Case::decode(2, 2, 256, 32),
];

/// Fewest timed runs of a slow plan.
const MIN_RUNS: usize = 5;

/// GPU milliseconds a plan's timed runs may take in all (beyond
/// [`MIN_RUNS`]).
const BUDGET_MS: f64 = 3000.0;

/// The plans timed, by name.
fn plans() -> [(&'static str, Planning); 3] {
    [
        (
            "fused",
            Planning::from(Fusion::On).attention(AttentionFusion::On),
        ),
        (
            "3-kernel",
            Planning::from(Fusion::On).attention(AttentionFusion::Off),
        ),
        ("unfused", Fusion::Off.into()),
    ]
}

/// Naive attention over `q`, `k`, `v` (`[b, h, s, d]`), as a user writes
/// it: scaled scores, the causal mask from `arange` comparisons, the
/// softmax in f32.
fn attention(c: &Case, q: &Tensor, k: &Tensor, v: &Tensor, dev: &Device) -> Tensor {
    let dt = q.dtype();
    let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / (c.d as f64).sqrt());
    let scores = if c.causal {
        let rows = Tensor::arange(0.0, c.sq as f64, 1.0, DType::I32, dev).reshape([c.sq, 1]);
        let cols = Tensor::arange(0.0, c.sk as f64, 1.0, DType::I32, dev).reshape([1, c.sk]);
        cols.le(&rows).where_(&scores, f64::NEG_INFINITY)
    } else {
        scores
    };
    scores.cast(DType::F32).softmax(-1).cast(dt).matmul(v)
}

fn dtype_name(dt: DType) -> &'static str {
    match dt {
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        _ => "float32",
    }
}

fn series(plan: &str, dt: DType, c: &Case) -> String {
    let mask = if c.causal { "causal" } else { "full" };
    format!("{plan} {} {mask}", dtype_name(dt))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--compare") {
        let [ours, theirs] = [1, 2].map(|j| {
            args.get(i + j)
                .map(|f| read_json::<BandwidthReport>(std::path::Path::new(f)))
        });
        let (Some(ours), Some(theirs)) = (ours, theirs) else {
            return Err(smelt::Error::Runtime("--compare needs 2 files".into()));
        };
        print!("{}", compare(&ours?, &theirs?));
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--replot") {
        let Some(file) = args.get(i + 1) else {
            return Err(smelt::Error::Runtime("--replot needs a file".into()));
        };
        let report = read_json::<BandwidthReport>(std::path::Path::new(file))?;
        let path = write_report("attention.svg", &plot(&report)?)?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let smoke = args.iter().any(|a| a == "--smoke");
    let fused_only = args.iter().any(|a| a == "--fused-only");
    let picked = picked_cases(&args)?;
    let tile = std::env::var("SMELT_ATTENTION_TILE").unwrap_or_else(|_| "default".into());
    println!("attention tile: {tile} (SMELT_ATTENTION_TILE)");
    let splits = std::env::var("SMELT_ATTENTION_SPLITS").unwrap_or_else(|_| "rule".into());
    println!("attention splits: {splits} (SMELT_ATTENTION_SPLITS)");
    let shapes = shape_args(&args)?;
    let (dev, cases, device): (Device, &[Case], String) = if smoke {
        let dev = Device::default_device();
        println!("smoke run on {dev}: tiny cases, figures mean nothing");
        (
            dev,
            shapes.as_deref().unwrap_or(&SMOKE),
            format!("smoke run on {dev}"),
        )
    } else {
        let Some(dev) = gpu() else { return Ok(()) };
        let props = smelt::cuda::get_device_properties(&dev)?;
        println!("device: {} (sm_{})", props.name, props.target_sm);
        let device = format!("{} (sm_{})", props.name, props.target_sm);
        (dev, shapes.as_deref().unwrap_or(&CASES), device)
    };
    let device = format!("{device}, tile {tile}, splits {splits}");
    let mut points = Vec::new();
    for dt in [DType::F16, DType::BF16] {
        println!("\n{dt}: case, plan, ms, TFLOP/s, GB/s (decode)");
        for (n, c) in cases.iter().enumerate() {
            if picked.as_ref().is_some_and(|p| !p.contains(&(n + 1))) {
                continue;
            }
            let size = dt.size();
            let rot = rotation(c.bytes(size) as usize);
            let seed = 16 * n as u64;
            let inputs: Vec<[Tensor; 3]> = (0..rot as u64)
                .map(|r| {
                    let t =
                        |len, s| Tensor::randn([c.b, c.h, len, c.d], dt, seed + 3 * r + s, &dev);
                    [t(c.sq, 0), t(c.sk, 1), t(c.sk, 2)]
                })
                .collect();
            for [q, k, v] in &inputs {
                smelt::realize_all(&[q, k, v], Fusion::On)?;
            }
            for (plan, planning) in plans() {
                if fused_only && plan != "fused" {
                    continue;
                }
                let run = |i: usize| {
                    let [q, k, v] = &inputs[i % rot];
                    attention(c, q, k, v, &dev)
                        .realize_with(planning)
                        .map(|_| ())
                };
                let ms = match kernel_ms_budget(&dev, BUDGET_MS, MIN_RUNS, run) {
                    Ok(ms) => ms,
                    Err(e) => {
                        println!("  {:>2} {:<32} {plan:<9} failed: {e}", n + 1, c.label());
                        continue;
                    }
                };
                let tflops = c.flops() / (ms * 1e-3) / 1e12;
                let gbps = c.bytes(size) / (ms * 1e-3) / 1e9;
                println!(
                    "  {:>2} {:<32} {plan:<9} {ms:9.3} {tflops:8.1} {gbps:8.0}",
                    n + 1,
                    c.label()
                );
                points.push(Point {
                    series: series(plan, dt, c),
                    x: (n + 1) as f64,
                    y: tflops,
                    ms,
                });
            }
        }
    }
    let report = BandwidthReport {
        device,
        date: today(),
        points,
    };
    write_report("attention.json", &to_json(&report)?)?;
    write_report("attention.svg", &plot(&report)?)?;
    println!("\nreport in {}", out_dir().display());
    Ok(())
}

/// The report's TFLOP/s per case and series as an SVG line chart.
fn plot(report: &BandwidthReport) -> Result<String> {
    svg(
        &report.points,
        &format!(
            "attention, TFLOP/s per case; {}, {}",
            report.device, report.date
        ),
        "case (see benches/attention.rs)",
        "TFLOP/s",
    )
}

/// Both reports' plans side by side, a markdown row per case and dtype:
/// each plan's TFLOP/s, and the fused plan's speed over the best of the
/// other report's.
fn compare(ours: &BandwidthReport, theirs: &BandwidthReport) -> String {
    let plan_names = |r: &BandwidthReport| {
        let mut names: Vec<String> = Vec::new();
        for p in &r.points {
            let plan = p.series.split(' ').next().unwrap_or("").to_string();
            if !names.contains(&plan) {
                names.push(plan);
            }
        }
        names
    };
    let (mine, other) = (plan_names(ours), plan_names(theirs));
    let mut out = format!(
        "{} vs {}\n\n| case | dtype | {} | {} | fused / best other |\n|---|---|{}\n",
        ours.device,
        theirs.device,
        mine.join(" | "),
        other.join(" | "),
        "---:|".repeat(mine.len() + other.len() + 1)
    );
    for dt in [DType::F16, DType::BF16] {
        for (n, c) in CASES.iter().enumerate() {
            let x = (n + 1) as f64;
            let find = |r: &BandwidthReport, plan: &str| {
                let s = series(plan, dt, c);
                r.points
                    .iter()
                    .find(|p| p.series == s && p.x == x)
                    .map(|p| p.y)
            };
            let cell = |v: Option<f64>| v.map_or("-".to_string(), |y| format!("{y:.1}"));
            let best = other
                .iter()
                .filter_map(|p| find(theirs, p))
                .fold(None, |m: Option<f64>, y| Some(m.map_or(y, |m| m.max(y))));
            let ratio = match (find(ours, "fused"), best) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                _ => "-".into(),
            };
            out += &format!(
                "| {} | {} | {} | {} | {ratio} |\n",
                c.label(),
                dtype_name(dt),
                mine.iter()
                    .map(|p| cell(find(ours, p)))
                    .collect::<Vec<_>>()
                    .join(" | "),
                other
                    .iter()
                    .map(|p| cell(find(theirs, p)))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
    }
    out
}
