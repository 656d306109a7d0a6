//! Writes a self-contained GPU check of the PTX backend: every small
//! representative kernel with random inputs and the interpreter's outputs,
//! plus benchmark kernels, and a Python runner that launches them through
//! the CUDA driver (ctypes + torch for memory) on a machine with a GPU.
//!
//! `SMELT_PTX_DUMP=DIR cargo test --test ptx_gpu` writes DIR; then on the
//! GPU machine `python3 DIR/check.py [--bench]` (`SMELT_PTX_TUNE=1` adds
//! every launch variant, `=matmul` only the matmul tiles; `SMELT_BENCH_KIND`
//! picks one kind). Without the variable the
//! test does nothing.

mod ptx_cases;

use smelt_codegen::ptx::launch::{self, Elementwise, Plan, Rows};
use smelt_codegen::ptx::{emit, emit_plan, scalar_param, Target};
use smelt_codegen::rng::SplitMix64;
use smelt_codegen::{cpu, DType, Kernel};
use std::fmt::Write;
use std::path::Path;

const H100: Target = Target {
    sm: 90,
    num_sms: 132,
};

/// Largest buffer (elements) of a checked case.
const MAX_CHECK: usize = 1 << 21;

/// A standard normal from two uniforms (Box-Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let (u, v) = (rng.next_f64().max(1e-300), rng.next_f64());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

const SPECIAL: [f64; 10] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1e-40,
    88.5,
    -100.0,
    1e30,
    1.0,
];

/// Random contents for input `i` of `k`.
fn input(k: &Kernel, i: usize, rng: &mut SplitMix64) -> Vec<u8> {
    let a = k.inputs[i];
    let mut buf = vec![0u8; a.len * a.dtype.size()];
    let elementwise = k.name.starts_with("elementwise");
    let small_ints = k.name.contains("pow") || k.name.contains("square");
    let row_len = k.row_len().max(1);
    for j in 0..a.len {
        let v = match a.dtype {
            DType::Bool => rng.below(2) as f64,
            dt if dt.is_int() => {
                // Full-width bit patterns (wrapped to the type) now and then.
                let v = if !small_ints && rng.next_u64().is_multiple_of(10) {
                    rng.next_u64() as i64
                } else {
                    rng.below(13) as i64 - 6
                };
                dt.write_int(&mut buf, j, v);
                continue;
            }
            _ => {
                let r = rng.below(16);
                if elementwise && r == 0 {
                    SPECIAL[rng.below(SPECIAL.len() as u64) as usize]
                } else if k.name.starts_with("multireduce")
                    && a.len >= 4 * row_len
                    && j < 4 * row_len
                {
                    // Rows of -inf, some -inf, a NaN, a +inf.
                    let (row, col) = (j / row_len, j % row_len);
                    match row {
                        0 => f64::NEG_INFINITY,
                        1 if col % 7 == 0 => f64::NEG_INFINITY,
                        2 if col == row_len / 2 => f64::NAN,
                        3 if col == 1 => f64::INFINITY,
                        _ => 3.0 * normal(rng),
                    }
                } else {
                    3.0 * normal(rng)
                }
            }
        };
        a.dtype.write(&mut buf, j, v);
    }
    buf
}

/// The value a check passes for scalar parameter `slot` of dtype `dt`
/// (numbers other than 0 and 1, so a kernel that ignores them fails).
fn scalar_value(dt: DType, slot: usize) -> f64 {
    match dt {
        DType::Bool => (slot % 2) as f64,
        _ if !dt.is_float() => [3.0, -7.0][slot % 2],
        _ => [0.75, -1.5][slot % 2],
    }
}

fn dtype_name(dt: DType) -> &'static str {
    dt.short_name()
}

/// Relative and absolute tolerance for output dtype `dt` of `k`.
fn tolerance(k: &Kernel, dt: DType) -> (f64, f64) {
    match dt {
        DType::F64 => (1e-13, 1e-13),
        _ if !dt.is_float() => (0.0, 0.0),
        DType::BF16 => (1.6e-2, 1e-2),
        DType::F16 => (2e-3, 1e-3),
        DType::F32 if k.name.starts_with("elementwise") && k.name.contains("pow") => (4e-5, 1e-6),
        DType::F32 if k.name.starts_with("elementwise") => (4e-6, 1e-6),
        DType::F32 if k.name.contains("prod") => (1e-4, 1e-30),
        // A sum of n unit-scale values that cancels keeps an absolute error
        // of about eps * log2(n) * sum |x| (tree order vs sequential).
        DType::F32 if k.name.contains("sum") => (1e-4, (1e-6 * k.row_len() as f64).max(1e-4)),
        _ => (1e-4, 1e-4),
    }
}

/// The launch of a case's kernel (the cases have one launch each: no
/// long-row sorts among them).
fn launch_json(p: &smelt_codegen::ptx::PtxKernel) -> String {
    let [l] = &p.launches[..] else {
        panic!("a case with {} launches", p.launches.len())
    };
    format!(
        "\"entry\": \"{}\", \"grid\": [{}, {}, {}], \"block\": [{}, {}, {}], \"shared\": {}",
        l.entry, l.grid.0, l.grid.1, l.grid.2, l.block.0, l.block.1, l.block.2, l.shared_bytes
    )
}

fn write_checks(dir: &Path, rng: &mut SplitMix64) -> Vec<String> {
    let mut entries = Vec::new();
    for (n, k) in ptx_cases::all().into_iter().enumerate() {
        let big = k.inputs.iter().chain(&k.outputs).any(|a| a.len > MAX_CHECK);
        if big {
            continue;
        }
        let p = emit(&k, &H100).unwrap();
        let ins: Vec<Vec<u8>> = (0..k.inputs.len()).map(|i| input(&k, i, rng)).collect();
        let mut outs: Vec<Vec<u8>> = k
            .outputs
            .iter()
            .map(|a| vec![0u8; a.len * a.dtype.size()])
            .collect();
        let scalars: Vec<f64> = k
            .scalars
            .iter()
            .enumerate()
            .map(|(slot, dt)| scalar_value(*dt, slot))
            .collect();
        {
            let in_refs: Vec<&[u8]> = ins.iter().map(|v| v.as_slice()).collect();
            let mut out_refs: Vec<&mut [u8]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
            cpu::run(&k, &in_refs, &scalars, &mut out_refs).unwrap();
        }
        let scalar_params: Vec<String> = k
            .scalars
            .iter()
            .zip(&scalars)
            .map(|(dt, v)| scalar_param(*dt, *v).to_string())
            .collect();
        std::fs::write(dir.join(format!("k{n}.ptx")), &p.ptx).unwrap();
        let mut args = Vec::new();
        for (i, (a, data)) in k.inputs.iter().zip(&ins).enumerate() {
            let f = format!("k{n}_in{i}.bin");
            std::fs::write(dir.join(&f), data).unwrap();
            args.push(format!(
                "{{\"file\": \"{f}\", \"dtype\": \"{}\", \"len\": {}, \"out\": false}}",
                dtype_name(a.dtype),
                a.len
            ));
        }
        for (i, (a, data)) in k.outputs.iter().zip(&outs).enumerate() {
            let f = format!("k{n}_out{i}.bin");
            std::fs::write(dir.join(&f), data).unwrap();
            let (rtol, atol) = tolerance(&k, a.dtype);
            args.push(format!(
                "{{\"file\": \"{f}\", \"dtype\": \"{}\", \"len\": {}, \"out\": true, \"rtol\": {rtol:e}, \"atol\": {atol:e}}}",
                dtype_name(a.dtype),
                a.len
            ));
        }
        entries.push(format!(
            "{{\"name\": \"{} {:?}\", \"ptx\": \"k{n}.ptx\", {}, \"args\": [{}], \"scalars\": [{}]}}",
            k.name,
            k.ranges,
            launch_json(&p),
            args.join(", "),
            scalar_params.join(", ")
        ));
    }
    entries
}

/// Alternative mappings of a row kernel, for comparison with the
/// heuristic's: every power-of-two team that holds the row in 4 to 64
/// elements per thread, several rows per CTA for sub-CTA teams, a
/// persistent or a one-pass grid, one or two CTAs per SM reserved; and for
/// rows too long for that, streamed passes with 512 or 1024 threads.
fn variants(k: &Kernel) -> Vec<Plan> {
    let base = match launch::choose(k, &H100) {
        Plan::Rows(base) => base,
        Plan::Elementwise(e) => return elementwise_variants(k, e),
        Plan::Scan(_) | Plan::Sort(_) => return Vec::new(),
    };
    let groups = k.row_len() / base.lanes;
    let rows = k.rows() as u32;
    let mut out = Vec::new();
    let mut push = |tpr: u32, block: u32, slots: usize, cached: bool, cluster: u32| {
        let full = rows.div_ceil(block / tpr) * cluster;
        let persistent = full.min(132 * (2048 / block)) / cluster * cluster;
        // A persistent grid only pays where it saves reloading weights.
        let grids = if k.inputs.len() > 1 {
            vec![persistent, full]
        } else {
            vec![full]
        };
        for grid in grids {
            for min_ctas in [1, 2] {
                let p = Plan::Rows(Rows {
                    lanes: base.lanes,
                    tpr,
                    block,
                    slots,
                    cached,
                    grid,
                    min_ctas,
                    cluster,
                });
                if !out.contains(&p) && launch::valid(k, &p).is_ok() {
                    out.push(p);
                }
            }
        }
    };
    for tpr in [8, 16, 32, 64, 128, 256, 512, 1024] {
        for cluster in [1, 2, 4, 8] {
            let slots = groups.div_ceil((tpr * cluster) as usize);
            if !(4..=64).contains(&(slots * base.lanes)) || (cluster > 1 && tpr < 128) {
                continue;
            }
            let blocks: &[u32] = if tpr <= 32 { &[128, 256] } else { &[tpr] };
            for &block in blocks {
                push(tpr, block, slots, true, cluster);
            }
        }
    }
    if groups * base.lanes > 16384 {
        for tpr in [512, 1024] {
            for slots in [2, 4, 8] {
                push(tpr, tpr, slots, false, 1);
            }
        }
    }
    out.retain(|p| *p != Plan::Rows(base));
    out
}

/// Alternative mappings of an elementwise kernel: 1, 2 or 4 groups per
/// thread and iteration, 256 or 512 threads, a persistent or a one-pass
/// grid.
fn elementwise_variants(k: &Kernel, base: Elementwise) -> Vec<Plan> {
    let groups = (k.ranges.iter().product::<i64>() as u64).div_ceil(base.lanes as u64);
    let mut out = Vec::new();
    for unroll in [1, 2, 4] {
        for block in [256u32, 512] {
            let full = groups
                .div_ceil(block as u64 * unroll as u64)
                .min(i32::MAX as u64) as u32;
            for grid in [full.min(132 * 2048 / block), full] {
                let p = Plan::Elementwise(Elementwise {
                    unroll,
                    block,
                    grid,
                    ..base
                });
                if p != Plan::Elementwise(base) && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

fn write_benches(dir: &Path) -> Vec<String> {
    let mut entries = Vec::new();
    let mut add = |kind: &str, k: Kernel, dt: DType, m: i64, n: i64, plan: Option<Plan>| {
        let p = match &plan {
            Some(plan) => emit_plan(&k, &H100, plan).unwrap(),
            None => emit(&k, &H100).unwrap(),
        };
        let f = format!("b{}.ptx", entries.len());
        std::fs::write(dir.join(&f), &p.ptx).unwrap();
        let plan = plan.unwrap_or_else(|| launch::choose(&k, &H100));
        entries.push(format!(
            "{{\"kind\": \"{kind}\", \"dtype\": \"{}\", \"m\": {m}, \"n\": {n}, \"ptx\": \"{f}\", \"plan\": \"{}{plan:?}\", {}}}",
            dtype_name(dt),
            if plan == launch::choose(&k, &H100) { "* " } else { "  " },
            launch_json(&p)
        ));
    };
    // `SMELT_PTX_TUNE=matmul` dumps only the matmul variants.
    let tune_var = std::env::var("SMELT_PTX_TUNE").ok();
    let tune_mm = tune_var.is_some();
    let tune = tune_var.is_some_and(|v| v != "matmul");
    for e in [20, 22, 24, 26, 28] {
        let n = 1i64 << e;
        let k = ptx_cases::binary(smelt_codegen::BinaryOp::Add, DType::F32, n);
        add("add", k.clone(), DType::F32, 1, n, None);
        if tune {
            for v in variants(&k) {
                add("add", k.clone(), DType::F32, 1, n, Some(v));
            }
        }
    }
    for dt in [DType::F32, DType::BF16] {
        for n in [256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072] {
            for (kind, k) in [
                ("softmax", ptx_cases::softmax(4096, n, dt)),
                ("layernorm", ptx_cases::layernorm(4096, n, dt)),
            ] {
                add(kind, k.clone(), dt, 4096, n, None);
                // Tuned: both kinds in f32, softmax in bf16, 256..=65536.
                let tuned = (dt == DType::F32 || kind == "softmax") && (256..=65536).contains(&n);
                if tune && tuned {
                    for v in variants(&k) {
                        add(kind, k.clone(), dt, 4096, n, Some(v));
                    }
                }
            }
        }
    }
    // Matmuls: the heuristic tile, and with SMELT_PTX_TUNE every candidate.
    use ptx_cases::MatLayout;
    use smelt_codegen::ptx::matmul::{self, Elem};
    let shapes = [
        (4096, 4096, 4096, Elem::F16, MatLayout::Nt),
        (4096, 4096, 4096, Elem::F16, MatLayout::Nn),
        (4096, 4096, 4096, Elem::F16, MatLayout::Tn),
        (8192, 8192, 8192, Elem::BF16, MatLayout::Nt),
        (4096, 4096, 4096, Elem::Tf32, MatLayout::Nt),
        (4096, 4096, 4096, Elem::Tf32, MatLayout::Nn),
    ];
    for (m, n, kk, elem, layout) in shapes {
        let k = ptx_cases::matmul_layout(1, m, n, kk, elem, layout, false);
        let heuristic = emit(&k, &H100).unwrap();
        let names = if tune_mm {
            matmul::variants(&k, &H100)
        } else {
            vec![]
        };
        let mut add = |p: &smelt_codegen::ptx::PtxKernel, name: &str| {
            let f = format!("b{}.ptx", entries.len());
            std::fs::write(dir.join(&f), &p.ptx).unwrap();
            entries.push(format!(
                "{{\"kind\": \"matmul\", \"dtype\": \"{}\", \"elem\": \"{elem:?}\", \"layout\": \"{layout:?}\", \"m\": {m}, \"n\": {n}, \"k\": {kk}, \"ptx\": \"{f}\", \"plan\": \"{name}\", {}}}",
                dtype_name(elem.dtypes()[0]),
                launch_json(p)
            ));
        };
        add(&heuristic, "* heuristic");
        for name in names {
            let p = matmul::emit_variant(&k, &H100, &name).unwrap();
            add(&p, &format!("  {name}"));
        }
    }
    entries
}

#[test]
fn dump_gpu_check() {
    let Some(dir) = std::env::var_os("SMELT_PTX_DUMP") else {
        println!("skipped: SMELT_PTX_DUMP not set");
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = SplitMix64::new(1);
    let checks = write_checks(dir, &mut rng);
    let benches = write_benches(dir);
    let mut manifest = String::new();
    write!(
        manifest,
        "{{\"checks\": [\n{}\n], \"benches\": [\n{}\n]}}\n",
        checks.join(",\n"),
        benches.join(",\n")
    )
    .unwrap();
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    std::fs::write(dir.join("check.py"), RUNNER).unwrap();
    println!(
        "wrote {} checks and {} benches to {}",
        checks.len(),
        benches.len(),
        dir.display()
    );
}

const RUNNER: &str = r#"
import ctypes, json, os, sys, statistics
import torch

D = os.path.dirname(os.path.abspath(__file__))
M = json.load(open(os.path.join(D, "manifest.json")))
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
cu.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
TD = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "bool": torch.uint8}
SZ = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "bool": 1}

def ck(r, what):
    if r != 0:
        s = ctypes.c_char_p(); cu.cuGetErrorString(r, ctypes.byref(s)); raise RuntimeError(f"{what}: {r} {s.value}")

# With --hints, every heuristic kernel is also timed with cache hints
# written into its PTX: (name, [(old, new)]).
HINTS = [
    ("L2::256B", [("ld.global.", "ld.global.L2::256B.")]),
    ("no_allocate", [("ld.global.", "ld.global.L1::no_allocate.")]),
    ("st.cs", [("st.global.", "st.global.cs.")]),
    ("256B+st.cs", [("ld.global.", "ld.global.L2::256B."), ("st.global.", "st.global.cs.")]),
    ("nc+256B", [("ld.global.", "ld.global.nc.L2::256B.")]),
]

def load(e, subs=()):
    mod = ctypes.c_void_p()
    text = open(os.path.join(D, e["ptx"])).read()
    for old, new in subs:
        text = text.replace(old, new)
    ck(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(text.encode() + b"\0")), "load " + e["ptx"])
    fn = ctypes.c_void_p()
    ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, e["entry"].encode()), "function")
    if e["shared"] > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        ck(cu.cuFuncSetAttribute(fn, 8, e["shared"]), "shared memory")
    return fn

def launch(fn, e, ptrs):
    vals = [ctypes.c_uint64(p) for p in ptrs]
    arr = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
    g, b = e["grid"], e["block"]
    ck(cu.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], e["shared"], ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), arr, None), "launch")

def compare(got, exp, a):
    dt = a["dtype"]
    g = got.view(TD[dt]).double() if dt != "bool" else got.double()
    x = exp.view(TD[dt]).double() if dt != "bool" else exp.double()
    nan_ok = torch.isnan(g) == torch.isnan(x)
    both = ~torch.isnan(g) & ~torch.isnan(x)
    inf = torch.isinf(x) | torch.isinf(g)
    eq_inf = torch.where(inf & both, g == x, torch.ones_like(nan_ok))
    fin = both & ~inf
    tol = a["atol"] + a["rtol"] * x.abs()
    close = torch.where(fin, (g - x).abs() <= tol, torch.ones_like(nan_ok))
    ok = nan_ok & eq_inf & close
    bad = (~ok).nonzero().flatten()
    rel = ((g - x).abs() / x.abs().clamp_min(1e-30))[fin]
    return len(bad), bad[:5].tolist(), g, x, (rel.max().item() if rel.numel() else 0.0)

def checks():
    fails = 0
    for e in M["checks"]:
        fn = load(e)
        bufs, outs = [], []
        for a in e["args"]:
            data = open(os.path.join(D, a["file"]), "rb").read()
            host = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.zeros(0, dtype=torch.uint8)
            dev = torch.zeros(len(data) + 16, dtype=torch.uint8, device="cuda")
            if not a["out"]:
                dev[:len(data)] = host.cuda()
            bufs.append(dev)
            if a["out"]:
                outs.append((a, dev, host))
        launch(fn, e, [b.data_ptr() for b in bufs] + e["scalars"])
        torch.cuda.synchronize()
        msgs = []
        for a, dev, host in outs:
            n = a["len"] * SZ[a["dtype"]]
            nbad, first, g, x, rel = compare(dev[:n].cpu(), host, a)
            if dev[n:].any():
                msgs.append("wrote past the end")
            if nbad:
                msgs.append(f"{a['file']}: {nbad}/{a['len']} off, max rel {rel:.2e}, e.g. " + ", ".join(f"[{i}] {g[i].item()!r} vs {x[i].item()!r}" for i in first))
        status = "FAIL" if msgs else "ok"
        fails += bool(msgs)
        print(f"{status:4} {e['name']} grid {e['grid'][0]} block {e['block'][0]} " + "; ".join(msgs), flush=True)
    print(f"{len(M['checks']) - fails} passed, {fails} failed")
    return fails

def timeit(fn, reps=50):
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2000000)
        s.record(); fn(); t.record()
        t.synchronize(); ts.append(s.elapsed_time(t))
    return statistics.median(ts) * 1e-3

def matmul_bench(e, fn):
    # A [m, k]; B stored [n, k] (Nt), [k, n] (Nn) or A stored [k, m] (Tn).
    dt, m, n, k, lay = TD[e["dtype"]], e["m"], e["n"], e["k"], e["layout"]
    a = torch.randn(k, m, device="cuda").to(dt).t() if lay == "Tn" else torch.randn(m, k, device="cuda").to(dt)
    b = torch.randn(n, k, device="cuda").to(dt).t() if lay == "Nt" else torch.randn(k, n, device="cuda").to(dt)
    ac, bc = a.t().contiguous() if lay == "Tn" else a, b.t().contiguous() if lay == "Nt" else b
    out = torch.empty(m * n, dtype=dt, device="cuda")
    args = [ac.data_ptr(), bc.data_ptr(), out.data_ptr()]
    launch(fn, e, args)
    torch.cuda.synchronize()
    if e["elem"] == "Tf32":
        r = (a.double() @ b.double()).flatten()
    else:
        r = (a.float() @ b.float()).flatten()
    err = ((out.double() - r.double()).norm() / r.double().norm()).item()
    t = timeit(lambda: [launch(fn, e, args) for _ in range(5)], 20) / 5
    tf = 2 * m * n * k / t / 1e12
    print(f"matmul {e['elem']:5} {lay} {m}x{n}x{k}: {t*1e3:8.3f} ms {tf:6.1f} TFLOP/s  rel err {err:.1e}  grid {e['grid'][0]} block {e['block'][0]} smem {e['shared']}  {e['plan']}", flush=True)

def benches():
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda"); y = torch.empty_like(x)
    ceiling = 2 * x.numel() * 4 / timeit(lambda: y.copy_(x), 20) / 1e9
    print(f"copy ceiling {ceiling:.0f} GB/s", flush=True)
    todo = [(e, "", ()) for e in M["benches"]]
    if os.environ.get("SMELT_TUNE_N"):
        keep = {int(x) for x in os.environ["SMELT_TUNE_N"].split(",")}
        todo = [t for t in todo if t[0]["n"] in keep]
    if os.environ.get("SMELT_BENCH_KIND"):
        todo = [t for t in todo if t[0]["kind"] == os.environ["SMELT_BENCH_KIND"]]
    if "--hints" in sys.argv:
        todo = [(e, name, subs) for e in M["benches"] if e["plan"].startswith("*") for name, subs in [("", ())] + HINTS]
    for e, hint, subs in todo:
        fn = load(e, subs)
        dt, m, n = TD[e["dtype"]], e["m"], e["n"]
        el = torch.tensor([], dtype=dt).element_size()
        rot = max(1, min(8, (256 << 20) // max(1, m * n * el)))
        if e["kind"] == "matmul":
            matmul_bench(e, fn)
            continue
        if e["kind"] == "add":
            ins = [[torch.randn(n, device="cuda"), torch.randn(n, device="cuda")] for _ in range(rot)]
            ref = lambda a: a[0] + a[1]
            byt = 3 * n * 4
        elif e["kind"] == "softmax":
            ins = [[torch.randn(m, n, device="cuda").to(dt)] for _ in range(rot)]
            ref = lambda a: torch.softmax(a[0].float(), -1)
            byt = 2 * m * n * el
        else:
            w, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            ins = [[torch.randn(m, n, device="cuda").to(dt), w, b] for _ in range(rot)]
            ref = lambda a: torch.nn.functional.layer_norm(a[0].float(), (n,), a[1], a[2], 1e-5)
            byt = 2 * m * n * el
        out = torch.empty(m * n, dtype=dt, device="cuda")
        launch(fn, e, [t.data_ptr() for t in ins[0]] + [out.data_ptr()])
        torch.cuda.synchronize()
        r = ref(ins[0]).flatten()
        err = ((out.float() - r).norm() / r.norm()).item()
        k = [0]
        # --single: one launch per timing (what an isolated kernel costs,
        # ramp and tail included), else ten back to back (throughput).
        per = 1 if "--single" in sys.argv else 10
        def run():
            for _ in range(per):
                k[0] = (k[0] + 1) % rot
                launch(fn, e, [t.data_ptr() for t in ins[k[0]]] + [out.data_ptr()])
        t = timeit(run, int(os.environ.get("SMELT_TUNE_REPS", "50"))) / per
        tt = None
        if e["kind"] == "softmax" and e["plan"].startswith("*") and not hint:
            tt = timeit(lambda: [torch.softmax(ins[i % rot][0], -1) for i in range(10)]) / 10
        print(f"{e['kind']:9} {e['dtype']:4} m={m} n={n}: {t*1e6:8.1f} us {byt/t/1e9:7.0f} GB/s ({100*byt/t/1e9/ceiling:5.1f}%)  rel err {err:.1e}  grid {e['grid'][0]} block {e['block'][0]}" + (f"  torch {byt/tt/1e9:.0f} GB/s" if tt else "") + "  " + e["plan"] + (f" hint {hint}" if hint else ""), flush=True)

fails = checks() if "--bench-only" not in sys.argv else 0
if "--bench" in sys.argv or "--bench-only" in sys.argv:
    benches()
sys.exit(1 if fails else 0)
"#;
