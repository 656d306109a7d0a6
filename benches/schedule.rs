//! Cost of scheduling itself: planning a 1,000-op graph from scratch, and
//! realizing the same structure again (new data, same shapes) through the
//! schedule cache. Issue target: a plan in at most 5 ms. Then a wide
//! `realize_all`: 10,000 and 20,000 independent small tensors planned
//! together (planning must stay near linear in the number of tensors).
//!
//! `cargo bench --bench schedule`

use smelt::{DType, Device, Fusion, Schedule, Tensor};
use smelt_fusion::dag::KernelDag;
use std::time::Instant;

/// A graph of 1,000 compute ops (not counting views and constants):
/// elementwise math with broadcasts and views, a row reduction every 25
/// steps and a column reduction every 100 (so the planner must split
/// kernels).
fn graph(seed: u64) -> Tensor {
    let dev = Device::Cpu;
    let x = Tensor::randn([64, 256], DType::F32, seed, &dev);
    let b = Tensor::randn([256], DType::F32, seed + 1, &dev);
    // Inputs are data: the random generators stay out of the planned graph.
    smelt::realize_all(&[&x, &b], smelt::Fusion::On).expect("CPU inputs");
    let mut y = x.clone();
    let mut step = 0;
    while count_compute_ops(&y) < 1000 {
        step += 1;
        y = match step % 100 {
            99 => &y - y.mean_keepdim(0),
            s if s % 25 == 24 => &y - y.max_keepdim(1),
            s if s % 3 == 0 => (&y + &b).tanh(),
            s if s % 3 == 1 => &y * 0.5 + x.flip(1),
            _ => y.t().t().relu() - 0.1,
        };
    }
    y
}

/// `n` independent tensors `x_i * 2 + 1`, each over its own buffer.
fn wide(n: usize) -> Vec<Tensor> {
    (0..n)
        .map(|i| Tensor::from_slice(&[i as f32; 4], [4], &Device::Cpu) * 2.0 + 1.0)
        .collect()
}

/// Plans `ys` together from scratch: (seconds, kernels), median of 3.
fn plan_wide(ys: &[Tensor]) -> (f64, usize) {
    let nodes: Vec<_> = ys.iter().map(|y| y.node().clone()).collect();
    let mut times = Vec::new();
    let mut kernels = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s = Schedule::plan(&nodes, Fusion::On);
        times.push(t0.elapsed().as_secs_f64());
        kernels = s.items.len();
    }
    (median(times), kernels)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let y = graph(0);
    let (ops, nodes) = (count_compute_ops(&y), count_nodes(&y));
    let mut plan = Vec::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        let s = Schedule::plan(
            std::slice::from_ref(y.node()),
            if std::env::var("OFF").is_ok() {
                Fusion::Off
            } else {
                Fusion::On
            },
        );
        plan.push(t0.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    let mut cached = Vec::new();
    for i in 0..20 {
        let z = graph(i + 1);
        let t0 = Instant::now();
        let s = z.schedule(Fusion::On);
        cached.push(t0.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    let kernels = y.schedule(Fusion::On).items.len();
    println!("graph: {ops} compute ops ({nodes} nodes with views and constants), {kernels} fused kernels");
    println!(
        "plan from scratch : {:8.3} ms (median of 20)",
        median(plan) * 1e3
    );
    println!(
        "cached (new data) : {:8.3} ms (median of 20)",
        median(cached) * 1e3
    );
    // Buffer lifetimes on an unfused schedule of the same graph (one
    // kernel per op): what a realize reads per run (`last_uses`, kept in
    // the schedule's kernel DAG) and what rebuilding the DAG per run would
    // cost instead (the hand-written loop it replaced took about 1.6 us on
    // 2 cores).
    let off = y.schedule(Fusion::Off);
    let results: Vec<usize> = off.results.iter().map(|(_, b)| *b).collect();
    let per_call = |f: &dyn Fn()| {
        let mut times = Vec::new();
        for _ in 0..20 {
            let t0 = Instant::now();
            for _ in 0..100 {
                f();
            }
            times.push(t0.elapsed().as_secs_f64() / 100.0);
        }
        median(times) * 1e6
    };
    let read = per_call(&|| {
        std::hint::black_box(std::hint::black_box(&off).last_uses());
    });
    let rebuild = per_call(&|| {
        let dag = KernelDag::new(&off.items, &off.buffers, &results);
        std::hint::black_box(dag.last_uses());
    });
    println!(
        "last_uses of {} kernels: {read:8.3} us per run, {rebuild:8.3} us to build the DAG (median of 20 x 100)",
        off.items.len()
    );
    for n in [10_000, 20_000] {
        let (secs, kernels) = plan_wide(&wide(n));
        println!(
            "wide realize_all of {n} tensors: {:8.3} ms to plan, {kernels} kernels (median of 3)",
            secs * 1e3
        );
    }
}

/// `(compute ops, all nodes)` below `t`.
fn count(t: &Tensor) -> (usize, usize) {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![t.node().clone()];
    let mut ops = 0;
    while let Some(n) = stack.pop() {
        if seen.insert(n.id()) {
            let op = n.op();
            ops += usize::from(smelt_fusion::graph::is_compute(&op));
            stack.extend(op.srcs().into_iter().cloned());
        }
    }
    (ops, seen.len())
}

fn count_compute_ops(t: &Tensor) -> usize {
    count(t).0
}

fn count_nodes(t: &Tensor) -> usize {
    count(t).1
}
