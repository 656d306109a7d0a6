//! The fusion rules of issue 3, one group of tests per rule.
//!
//! Every check looks at three things:
//! - the fused schedule: the exact number of kernels, their kinds, and the
//!   bytes each reads and writes, which must equal the minimum (every input
//!   read once, every output written once);
//! - the values: fused equal to unfused (`Fusion::Off`, one kernel per op);
//! - where cheap, a plain-loop `f64` reference on the host.

use smelt::KernelKind::{Elementwise, Matmul, MultiReduce, Reduce};
mod common;

use smelt::{
    realize_all, s, DType, Device, Fusion, Kernel, KernelKind, Precision, ReduceOp, Schedule,
    Tensor,
};
use smelt_codegen::Inst;

/// Bytes of one `f32`.
const F: usize = 4;

/// The device under test (CUDA when present; see tests/common).
fn dev() -> Device {
    common::test_device()
}

// ---------------------------------------------------------------------------
// PRNG and host reference arrays

use common::{unravel, Rng};

/// A row-major host array of `f64` (values of `f32` inputs are exact).
#[derive(Clone, Debug)]
struct Host {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Host {
    /// Uniform values in `[lo, hi)`, rounded to `f32`.
    fn rand(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Host {
        let mut rng = Rng::new(seed);
        let n = shape.iter().product();
        let data = (0..n).map(|_| rng.uniform(lo, hi) as f32 as f64).collect();
        Host {
            shape: shape.to_vec(),
            data,
        }
    }

    fn from_fn(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Host {
        let n = shape.iter().product();
        Host {
            shape: shape.to_vec(),
            data: (0..n).map(|i| f(&unravel(i, shape))).collect(),
        }
    }

    /// The `f32` tensor holding these values (a fresh buffer every call).
    fn tensor(&self) -> Tensor {
        let v: Vec<f32> = self.data.iter().map(|x| *x as f32).collect();
        Tensor::from_vec(v, self.shape.clone(), &dev())
    }

    fn numel(&self) -> usize {
        self.data.len()
    }

    fn at(&self, idx: &[usize]) -> f64 {
        let mut flat = 0;
        for (d, i) in idx.iter().enumerate() {
            assert!(*i < self.shape[d], "host index {idx:?} in {:?}", self.shape);
            flat = flat * self.shape[d] + i;
        }
        self.data[flat]
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Host {
        Host {
            shape: self.shape.clone(),
            data: self.data.iter().map(|x| f(*x)).collect(),
        }
    }

    /// Result axis `k` is axis `p[k]`.
    fn permute(&self, p: &[usize]) -> Host {
        let shape: Vec<usize> = p.iter().map(|a| self.shape[*a]).collect();
        Host::from_fn(&shape, |ix| {
            let mut src = vec![0; p.len()];
            for (k, a) in p.iter().enumerate() {
                src[*a] = ix[k];
            }
            self.at(&src)
        })
    }

    fn reshape(&self, shape: &[usize]) -> Host {
        assert_eq!(shape.iter().product::<usize>(), self.numel());
        Host {
            shape: shape.to_vec(),
            data: self.data.clone(),
        }
    }

    /// Applies `f` to every row along `axis`; the axis gets the length of
    /// `f`'s result.
    fn along(&self, axis: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Host {
        let n = self.shape[axis];
        let outer: usize = self.shape[..axis].iter().product();
        let inner: usize = self.shape[axis + 1..].iter().product();
        let mut out_shape = self.shape.clone();
        let mut data = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                let row: Vec<f64> = (0..n).map(|k| self.data[(o * n + k) * inner + i]).collect();
                let r = f(&row);
                if data.is_empty() {
                    out_shape[axis] = r.len();
                    data = vec![0.0; outer * r.len() * inner];
                }
                for (k, v) in r.iter().enumerate() {
                    data[(o * r.len() + k) * inner + i] = *v;
                }
            }
        }
        Host {
            shape: out_shape,
            data,
        }
    }

    /// `along` with a scalar result per row, the axis removed.
    fn reduce(&self, axis: usize, f: impl Fn(&[f64]) -> f64) -> Host {
        let mut shape = self.shape.clone();
        shape.remove(axis);
        self.along(axis, |r| vec![f(r)]).reshape(&shape)
    }
}

// Row references.

fn max_of(r: &[f64]) -> f64 {
    r.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn mean_of(r: &[f64]) -> f64 {
    r.iter().sum::<f64>() / r.len() as f64
}

fn softmax_row(r: &[f64]) -> Vec<f64> {
    let m = max_of(r);
    let e: Vec<f64> = r.iter().map(|x| (x - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

fn logsumexp_row(r: &[f64]) -> f64 {
    let m = max_of(r);
    r.iter().map(|x| (x - m).exp()).sum::<f64>().ln() + m
}

fn log_softmax_row(r: &[f64]) -> Vec<f64> {
    let l = logsumexp_row(r);
    r.iter().map(|x| x - l).collect()
}

fn layer_norm_row(r: &[f64]) -> Vec<f64> {
    let m = mean_of(r);
    let v = r.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / r.len() as f64;
    r.iter().map(|x| (x - m) / (v + EPS).sqrt()).collect()
}

fn rms_norm_row(r: &[f64]) -> Vec<f64> {
    let ms = r.iter().map(|x| x * x).sum::<f64>() / r.len() as f64;
    r.iter().map(|x| x / (ms + EPS).sqrt()).collect()
}

const EPS: f64 = 1e-5;

// ---------------------------------------------------------------------------
// Comparing values

/// NaN equals NaN, infinities equal with their sign, else
/// `|got - want| <= abs + rel * |want|`.
fn close(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.is_infinite() || want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= abs + rel * want.abs()
}

fn assert_values(what: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(*g, *w, rel, abs),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// Fused against unfused: the same kernels' arithmetic, in another
/// grouping. Bit-identical on the CPU; on a GPU the two groupings may split
/// a reduction across threads differently, and sums of centred values
/// cancel, hence the absolute term.
fn assert_same(what: &str, fused: &[f64], unfused: &[f64]) {
    assert_values(
        &format!("{what} (fused vs unfused)"),
        fused,
        unfused,
        1e-5,
        1e-5,
    );
}

/// `f32` results against an `f64` reference.
fn assert_reference(what: &str, got: &[f64], want: &Host) {
    assert_values(
        &format!("{what} (vs f64 reference)"),
        got,
        &want.data,
        1e-4,
        1e-5,
    );
}

// ---------------------------------------------------------------------------
// Schedules

fn schedule_of(ts: &[&Tensor], fusion: Fusion) -> Schedule {
    let nodes: Vec<_> = ts.iter().map(|t| t.node().clone()).collect();
    Schedule::new(&nodes, fusion)
}

type Summary = (KernelKind, usize, usize);

/// `(kind, bytes read, bytes written)` of every kernel.
fn summary(s: &Schedule) -> Vec<Summary> {
    s.items
        .iter()
        .map(|i| {
            (
                i.kernel.kind,
                i.kernel.bytes_read(),
                i.kernel.bytes_written(),
            )
        })
        .collect()
}

fn assert_schedule(what: &str, s: &Schedule, want: &[Summary]) {
    assert_eq!(summary(s), want, "{what}: fused schedule is\n{s}");
}

/// `Fusion::Off` runs one kernel per op: every kernel computes one op.
fn assert_one_op_per_kernel(what: &str, off: &Schedule) {
    for it in off.items.iter() {
        assert_eq!(it.ops.len(), 1, "{what}: unfused schedule is\n{off}");
    }
}

/// Realizes the tensors `build` returns together and reads them back.
fn realized(build: &dyn Fn() -> Vec<Tensor>, fusion: Fusion) -> Vec<Vec<f64>> {
    let ts = build();
    let refs: Vec<&Tensor> = ts.iter().collect();
    realize_all(&refs, fusion).unwrap();
    ts.iter().map(|t| t.to_vec::<f64>().unwrap()).collect()
}

/// The fused schedule computes the ops of the unfused one, some of them
/// more than once (recomputed by several kernels or at several places).
fn assert_same_ops(what: &str, on: &Schedule, off: &Schedule) {
    let count = |s: &Schedule| {
        let mut m = std::collections::BTreeMap::<String, usize>::new();
        for op in s.items.iter().flat_map(|i| i.ops.iter()) {
            *m.entry(op.clone()).or_default() += 1;
        }
        m
    };
    let (con, coff) = (count(on), count(off));
    assert!(
        con.keys().eq(coff.keys()) && coff.iter().all(|(k, n)| con[k] >= *n),
        "{what}: fused ops {con:?}, unfused ops {coff:?}\n{on}\n{off}"
    );
}

/// The whole check of one rule for tensors realized together: the fused
/// schedule is `want`; the unfused one runs one kernel per op, and the
/// same ops; fused values equal unfused ones. The graph is built anew for
/// each run (a realized tensor keeps its data). Returns the fused values.
fn check_all(what: &str, build: impl Fn() -> Vec<Tensor>, want: &[Summary]) -> Vec<Vec<f64>> {
    let ts = build();
    let refs: Vec<&Tensor> = ts.iter().collect();
    let on = schedule_of(&refs, Fusion::On);
    assert_schedule(what, &on, want);
    let off = schedule_of(&refs, Fusion::Off);
    assert_one_op_per_kernel(what, &off);
    assert_same_ops(what, &on, &off);
    let fused = realized(&build, Fusion::On);
    let unfused = realized(&build, Fusion::Off);
    for (k, (f, u)) in fused.iter().zip(&unfused).enumerate() {
        assert_same(&format!("{what} output {k}"), f, u);
    }
    fused
}

/// [`check_all`] for one tensor, with an optional host reference.
fn check(what: &str, build: impl Fn() -> Tensor, want: &[Summary], reference: Option<&Host>) {
    let got = check_all(what, || vec![build()], want);
    if let Some(r) = reference {
        assert_eq!(build().shape(), &r.shape[..], "{what}: shape");
        assert_reference(what, &got[0], r);
    }
}

fn loads(k: &Kernel) -> Vec<String> {
    k.insts
        .iter()
        .filter_map(|n| match &n.inst {
            Inst::Load { index, .. } => Some(format!("{index}")),
            _ => None,
        })
        .collect()
}

fn count_insts(s: &Schedule, f: impl Fn(&Inst) -> bool) -> usize {
    s.items
        .iter()
        .flat_map(|i| i.kernel.insts.iter())
        .filter(|n| f(&n.inst))
        .count()
}

// ---------------------------------------------------------------------------
// Rule: elementwise chains of any length and any number of inputs, across
// broadcasts and views, are one kernel.

const M: usize = 24;
const N: usize = 40;

type Step = (fn(&Tensor) -> Tensor, fn(f64) -> f64);

/// Bounded elementwise steps, cycled to build long chains.
fn steps() -> Vec<Step> {
    vec![
        (|t| t * 1.25, |x| x * 1.25),
        (|t| t + 0.5, |x| x + 0.5),
        (Tensor::sin, f64::sin),
        (|t| t - 0.25, |x| x - 0.25),
        (Tensor::tanh, f64::tanh),
        (|t| t.square() * 0.5, |x| x * x * 0.5),
        (Tensor::sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
        (|t| t.maximum(0.3), |x| x.max(0.3)),
        (Tensor::neg, |x| -x),
        (Tensor::cos, f64::cos),
    ]
}

fn chain(x: &Tensor, len: usize) -> Tensor {
    let st = steps();
    (0..len).fold(x.clone(), |t, i| (st[i % st.len()].0)(&t))
}

fn chain_ref(x: &Host, len: usize) -> Host {
    let st = steps();
    x.map(|v| (0..len).fold(v, |v, i| (st[i % st.len()].1)(v)))
}

#[test]
fn elementwise_chain_of_50_ops_is_one_kernel() {
    let x = Host::rand(&[M, N], 1, -2.0, 2.0);
    let want = chain_ref(&x, 50);
    check(
        "50-op chain",
        || chain(&x.tensor(), 50),
        &[(Elementwise, F * M * N, F * M * N)],
        Some(&want),
    );
}

#[test]
fn elementwise_chain_of_200_ops_is_one_kernel() {
    // Within the instruction budget (longer chains are split: see
    // tests/reliability_budgets.rs).
    let x = Host::rand(&[7, 9], 2, -2.0, 2.0);
    let y = chain(&x.tensor(), 200);
    assert_schedule(
        "200-op chain",
        &y.schedule(Fusion::On),
        &[(Elementwise, F * 63, F * 63)],
    );
    let got = y.to_vec::<f64>().unwrap();
    assert_reference("200-op chain", &got, &chain_ref(&x, 200));
}

#[test]
fn elementwise_with_16_inputs_is_one_kernel() {
    let xs: Vec<Host> = (0..16)
        .map(|i| Host::rand(&[M, N], 10 + i, -1.0, 1.0))
        .collect();
    let build = || {
        let ts: Vec<Tensor> = xs.iter().map(Host::tensor).collect();
        let mut acc = ts[0].clone();
        for (i, t) in ts.iter().enumerate().skip(1) {
            acc = match i % 4 {
                0 => acc + t,
                1 => acc * t,
                2 => acc.maximum(t),
                _ => (acc - t).tanh(),
            };
        }
        acc
    };
    let want = Host::from_fn(&[M, N], |ix| {
        let mut acc = xs[0].at(ix);
        for (i, x) in xs.iter().enumerate().skip(1) {
            let v = x.at(ix);
            acc = match i % 4 {
                0 => acc + v,
                1 => acc * v,
                2 => acc.max(v),
                _ => (acc - v).tanh(),
            };
        }
        acc
    });
    check(
        "16 inputs",
        build,
        &[(Elementwise, 16 * F * M * N, F * M * N)],
        Some(&want),
    );
}

#[test]
fn elementwise_across_broadcasts_is_one_kernel() {
    // 2-D: a row, a column and a rank-0 tensor broadcast against a matrix.
    let x = Host::rand(&[M, N], 20, -1.0, 1.0);
    let row = Host::rand(&[N], 21, -1.0, 1.0);
    let col = Host::rand(&[M, 1], 22, -1.0, 1.0);
    let sc = Host::rand(&[], 23, -1.0, 1.0);
    let want = Host::from_fn(&[M, N], |i| {
        ((x.at(i) + row.at(&i[1..]) * col.at(&[i[0], 0])) - sc.at(&[])).exp() * 0.5
    });
    check(
        "2-D broadcasts",
        || ((x.tensor() + row.tensor() * col.tensor()) - sc.tensor()).exp() * 0.5,
        &[(Elementwise, F * (M * N + N + M + 1), F * M * N)],
        Some(&want),
    );

    // 3-D: [A, 1, C] + [B, 1] + [A, B, C], and a broadcast of a broadcast.
    let (a, b, c) = (5, 6, 7);
    let p = Host::rand(&[a, 1, c], 24, -1.0, 1.0);
    let q = Host::rand(&[b, 1], 25, -1.0, 1.0);
    let r = Host::rand(&[a, b, c], 26, -1.0, 1.0);
    let want = Host::from_fn(&[a, b, c], |i| {
        (p.at(&[i[0], 0, i[2]]) + q.at(&[i[1], 0])).maximum_(r.at(i)) * q.at(&[i[1], 0])
    });
    check(
        "3-D broadcasts",
        || {
            let (p, q, r) = (p.tensor(), q.tensor(), r.tensor());
            (&p + &q).maximum(&r) * q.expand([b, c]).reshape([1, b, c]).expand([a, b, c])
        },
        &[(Elementwise, F * (a * c + b + a * b * c), F * a * b * c)],
        Some(&want),
    );
}

trait MaxF64 {
    fn maximum_(self, o: f64) -> f64;
}

impl MaxF64 for f64 {
    fn maximum_(self, o: f64) -> f64 {
        if self.is_nan() || o.is_nan() {
            f64::NAN
        } else {
            self.max(o)
        }
    }
}

/// `(v * 1.5 + 0.25).tanh() + v`: an elementwise tail after a view.
fn tail(v: Tensor) -> Tensor {
    (&v * 1.5 + 0.25).tanh() + &v
}

fn tail_ref(v: &Host) -> Host {
    v.map(|x| (x * 1.5 + 0.25).tanh() + x)
}

#[test]
fn elementwise_across_views_is_one_kernel() {
    let (mr, nr) = (8, 12);
    let x = Host::rand(&[mr, nr], 30, -1.0, 1.0);
    let x3 = Host::rand(&[4, 6, 5], 31, -1.0, 1.0);
    let sq = Host::rand(&[9, 9], 32, -1.0, 1.0);
    let row = Host::rand(&[1, nr], 33, -1.0, 1.0);
    type Case<'a> = (&'static str, Box<dyn Fn() -> Tensor + 'a>, usize, Host);

    let padded = |value: f64| {
        Host::from_fn(&[mr + 3, nr + 3], |i| {
            if (1..=mr).contains(&i[0]) && i[1] < nr {
                x.at(&[i[0] - 1, i[1]])
            } else {
                value
            }
        })
    };
    // Every view in one expression, step by step on the host.
    let col2 = Host::rand(&[16, 1], 35, -1.0, 1.0);
    let all_views = {
        let t = x.permute(&[1, 0]); // [12, 8]
        let t = Host::from_fn(&[14, 8], |i| {
            if (1..13).contains(&i[0]) {
                t.at(&[i[0] - 1, 7 - i[1]])
            } else {
                0.0
            }
        }); // flip(1), pad
        let t = t.reshape(&[8, 14]);
        Host::from_fn(&[8, 14], |i| t.at(i) + col2.at(&[2 * i[0] + 1, 0]))
    };
    let cases: Vec<Case> = vec![
        (
            "permute",
            Box::new(|| x3.tensor().permute([2, 0, 1])),
            F * 120,
            x3.permute(&[2, 0, 1]),
        ),
        (
            "x + x.t()",
            Box::new(|| {
                let t = sq.tensor();
                &t + t.t()
            }),
            F * 81,
            Host::from_fn(&[9, 9], |i| sq.at(i) + sq.at(&[i[1], i[0]])),
        ),
        (
            "slice with steps",
            Box::new(|| x.tensor().slice(s![1..;2, ..;-3])),
            F * 16,
            Host::from_fn(&[4, 4], |i| x.at(&[1 + 2 * i[0], 11 - 3 * i[1]])),
        ),
        (
            "flip",
            Box::new(|| x.tensor().flip([0, 1])),
            F * mr * nr,
            Host::from_fn(&[mr, nr], |i| x.at(&[mr - 1 - i[0], nr - 1 - i[1]])),
        ),
        (
            "pad with zeros",
            Box::new(|| x.tensor().pad(&[(1, 2), (0, 3)], 0.0)),
            F * mr * nr,
            padded(0.0),
        ),
        (
            "pad with 2.5",
            Box::new(|| x.tensor().pad(&[(1, 2), (0, 3)], 2.5)),
            F * mr * nr,
            padded(2.5),
        ),
        (
            "expand",
            Box::new(|| row.tensor().expand([mr, nr]) + x.tensor()),
            F * (nr + mr * nr),
            Host::from_fn(&[mr, nr], |i| row.at(&[0, i[1]]) + x.at(i)),
        ),
        (
            "reshape of a transpose",
            Box::new(|| x.tensor().t().reshape([4, 24])),
            F * mr * nr,
            Host::from_fn(&[4, 24], |i| {
                let k = i[0] * 24 + i[1];
                x.at(&[k % 8, k / 8])
            }),
        ),
        (
            "reshape of a strided slice",
            Box::new(|| x3.tensor().slice(s![.., 1..5, ..;2]).reshape([16, 3])),
            F * 48,
            Host::from_fn(&[16, 3], |i| x3.at(&[i[0] / 4, 1 + i[0] % 4, 2 * i[1]])),
        ),
        (
            "every view at once",
            Box::new(|| {
                let t = x.tensor().t().flip(1).pad(&[(1, 1), (0, 0)], 0.0);
                t.reshape([8, 14]) + col2.tensor().slice(s![1..;2])
            }),
            // All of x, half of col2.
            F * (96 + 8),
            all_views,
        ),
    ];
    for (name, build, read, want) in &cases {
        let want = tail_ref(want);
        check(
            name,
            || tail(build()),
            &[(Elementwise, *read, F * want.numel())],
            Some(&want),
        );
    }
}

// ---------------------------------------------------------------------------
// Rule: movement ops never split a kernel; a contiguous view gives a plain
// linear index.

#[test]
fn views_between_computed_values_never_split_a_kernel() {
    let x = Host::rand(&[8, 12], 40, -1.0, 1.0);
    // Views between elementwise ops.
    let t = x.map(|v| v * 2.0).permute(&[1, 0]).map(|v| v + 1.0);
    let t = Host::from_fn(&[14, 10], |i| {
        if (1..13).contains(&i[0]) && i[1] >= 2 {
            t.at(&[12 - i[0], i[1] - 2])
        } else {
            0.0
        }
    });
    let want = t.map(|v| v.exp().sqrt()).reshape(&[140]);
    check(
        "elementwise / views / elementwise",
        || {
            let t = ((x.tensor() * 2.0).t() + 1.0).flip(0);
            t.pad(&[(1, 1), (2, 0)], 0.0).exp().reshape([-1]).sqrt()
        },
        &[(Elementwise, F * 96, F * 140)],
        Some(&want),
    );

    // Views between elementwise producers and a reduction.
    let t = x.map(|v| v * 2.0).permute(&[1, 0]);
    let t = Host::from_fn(&[12, 8], |i| t.at(&[i[0], 7 - i[1]]) + 1.0);
    check(
        "elementwise / views / reduce",
        || ((x.tensor() * 2.0).t().flip(1) + 1.0).sum(1),
        &[(Reduce, F * 96, F * 12)],
        Some(&t.reduce(1, |r| r.iter().sum())),
    );

    // A reshape that strides cannot express, between ops and a reduction.
    let t = x.map(|v| v * 2.0).permute(&[1, 0]).reshape(&[4, 24]);
    check(
        "elementwise / transpose + reshape / max",
        || (x.tensor().t() * 2.0).reshape([4, 24]).max(1),
        &[(Reduce, F * 96, F * 4)],
        Some(&t.reduce(1, max_of)),
    );

    // A reduction of a view of a reduction's consumer: the row kernel.
    let t = x.map(|v| v * 2.0).permute(&[1, 0]);
    check(
        "elementwise / transpose / softmax",
        || (x.tensor() * 2.0).t().softmax(-1),
        &[(MultiReduce, F * 96, F * 96)],
        Some(&t.along(1, softmax_row)),
    );
}

#[test]
fn views_inside_padding_read_nothing() {
    // A slice that only selects padding reads no input (regression: the
    // mask of a size-1 or rank-0 view was dropped, and the load ran out
    // of bounds).
    let x = Host::rand(&[4, 4], 45, -1.0, 1.0);
    check(
        "pad then index into the padding",
        || x.tensor().pad(&[(0, 2), (0, 0)], 0.0).slice(s![5, 1]).exp(),
        &[(Elementwise, 0, F)],
        Some(&Host {
            shape: vec![],
            data: vec![1.0],
        }),
    );
    check(
        "pad then a 1x1 slice of the padding",
        || {
            (x.tensor() * 2.0)
                .pad(&[(0, 2), (0, 0)], 0.0)
                .slice(s![5..6, 1..2])
                .exp()
        },
        &[(Elementwise, 0, F)],
        Some(&Host {
            shape: vec![1, 1],
            data: vec![1.0],
        }),
    );
    check(
        "pad with 2.5 then index into the padding",
        || x.tensor().pad(&[(2, 0), (0, 0)], 2.5).slice(s![0, 3]) * 2.0,
        &[(Elementwise, 0, F)],
        Some(&Host {
            shape: vec![],
            data: vec![5.0],
        }),
    );
}

#[test]
fn contiguous_views_give_a_plain_linear_index() {
    let x3 = Host::rand(&[4, 6, 5], 50, -1.0, 1.0);
    let y3 = Host::rand(&[4, 6, 5], 51, -1.0, 1.0);
    let z = Host::rand(&[4, 30], 52, -1.0, 1.0);
    let cases: Vec<(&str, Tensor)> = vec![
        ("x * 2 + y", (x3.tensor() * 2.0 + y3.tensor()).exp()),
        (
            "reshape chain",
            x3.tensor().reshape([24, 5]).reshape([4, 30]) * z.tensor(),
        ),
        (
            "permute and back",
            x3.tensor().permute([2, 0, 1]).permute([1, 2, 0]) + y3.tensor(),
        ),
        (
            "double flip and full slice",
            x3.tensor().flip(1).flip(1) - x3.tensor().slice(s![.., .., ..]),
        ),
    ];
    for (name, y) in cases {
        let s = y.schedule(Fusion::On);
        assert_schedule(name, &s, &[(Elementwise, s.bytes_read(), F * 120)]);
        let k = &s.items[0].kernel;
        assert_eq!(k.ranges[..], [120], "{name}:\n{k}");
        for l in loads(k) {
            assert_eq!(l, "i0", "{name}:\n{k}");
        }
        assert_eq!(format!("{}", k.stores[0].index), "i0", "{name}:\n{k}");
    }

    // A row reduction over the two trailing axes: two linear variables.
    let s = x3.tensor().sum([1, 2]).schedule(Fusion::On);
    let k = &s.items[0].kernel;
    assert_eq!(k.ranges[..], [4, 30], "{k}");
    assert_eq!(loads(k), vec!["i0*30 + i1"], "{k}");

    // A transposed read is not linear (so the checks above mean something).
    let s = (z.tensor().t() + 1.0).schedule(Fusion::On);
    assert_eq!(s.items[0].kernel.ranges.len(), 2, "{}", s.items[0].kernel);
}

// ---------------------------------------------------------------------------
// Rule: a reduction absorbs its elementwise producers (fuse on read) and
// consumers (fuse on write).

#[test]
fn reduce_fuses_elementwise_producers() {
    let x = Host::rand(&[M, N], 60, -1.0, 1.0);
    let x3 = Host::rand(&[5, 12, 7], 61, -1.0, 1.0);
    let sum = |r: &[f64]| r.iter().sum::<f64>();
    let min = |r: &[f64]| r.iter().copied().fold(f64::INFINITY, f64::min);
    check(
        "(2x + 1).exp().sum(1)",
        || (x.tensor() * 2.0 + 1.0).exp().sum(1),
        &[(Reduce, F * M * N, F * M)],
        Some(&x.map(|v| (2.0 * v + 1.0).exp()).reduce(1, sum)),
    );
    check(
        "x.square().sum(0)",
        || x.tensor().square().sum(0),
        &[(Reduce, F * M * N, F * N)],
        Some(&x.map(|v| v * v).reduce(0, sum)),
    );
    check(
        "(|x3| - 1).max(1), middle axis",
        || (x3.tensor().abs() - 1.0).max(1),
        &[(Reduce, F * 420, F * 35)],
        Some(&x3.map(|v| v.abs() - 1.0).reduce(1, max_of)),
    );
    check(
        "x3.sin().min([0, 2])",
        || x3.tensor().sin().min([0, 2]),
        &[(Reduce, F * 420, F * 12)],
        Some(
            &x3.map(f64::sin)
                .permute(&[1, 0, 2])
                .reshape(&[12, 35])
                .reduce(1, min),
        ),
    );
    check(
        "(2 x3).mean(..)",
        || (x3.tensor() * 2.0).mean(..),
        &[(Reduce, F * 420, F)],
        Some(&Host {
            shape: vec![],
            data: vec![x3.data.iter().map(|v| 2.0 * v).sum::<f64>() / 420.0],
        }),
    );
    check(
        "(0.5x + 1).prod(1)",
        || (x.tensor() * 0.5 + 1.0).prod(1),
        &[(Reduce, F * M * N, F * M)],
        Some(&x.map(|v| 0.5 * v + 1.0).reduce(1, |r| r.iter().product())),
    );
    check(
        "x3.permute([2, 0, 1]).exp().sum(-1)",
        || x3.tensor().permute([2, 0, 1]).exp().sum(-1),
        &[(Reduce, F * 420, F * 35)],
        Some(&x3.permute(&[2, 0, 1]).map(f64::exp).reduce(2, sum)),
    );
}

#[test]
fn reduce_fuses_elementwise_consumers() {
    let x = Host::rand(&[M, N], 70, -1.0, 1.0);
    let x3 = Host::rand(&[5, 12, 7], 71, -1.0, 1.0);
    let b = Host::rand(&[M], 72, -1.0, 1.0);
    let sum = |r: &[f64]| r.iter().sum::<f64>();
    check(
        "x.sum(1) * 2 + 1",
        || x.tensor().sum(1) * 2.0 + 1.0,
        &[(Reduce, F * M * N, F * M)],
        Some(&x.reduce(1, sum).map(|v| v * 2.0 + 1.0)),
    );
    check(
        "x.exp().sum(1).log()",
        || x.tensor().exp().sum(1).log(),
        &[(Reduce, F * M * N, F * M)],
        Some(&x.map(f64::exp).reduce(1, sum).map(f64::ln)),
    );
    check(
        "(x.square().mean(1) + eps).rsqrt()",
        || (x.tensor().square().mean(1) + EPS).rsqrt(),
        &[(Reduce, F * M * N, F * M)],
        Some(
            &x.map(|v| v * v)
                .reduce(1, mean_of)
                .map(|v| 1.0 / (v + EPS).sqrt()),
        ),
    );
    check(
        "x.max_keepdim(0).exp()",
        || x.tensor().max_keepdim(0).exp(),
        &[(Reduce, F * M * N, F * N)],
        Some(&x.reduce(0, max_of).map(f64::exp).reshape(&[1, N])),
    );
    check(
        "x.sum(1) + b",
        || x.tensor().sum(1) + b.tensor(),
        &[(Reduce, F * (M * N + M), F * M)],
        Some(&Host::from_fn(&[M], |i| {
            (0..N).map(|j| x.at(&[i[0], j])).sum::<f64>() + b.at(i)
        })),
    );
    check(
        "x3.sum([0, 2]).exp(), outer axes",
        || x3.tensor().sum([0, 2]).exp(),
        &[(Reduce, F * 420, F * 12)],
        Some(
            &x3.permute(&[1, 0, 2])
                .reshape(&[12, 35])
                .reduce(1, sum)
                .map(f64::exp),
        ),
    );
}

#[test]
fn reduce_fuses_consumers_across_a_permute() {
    // The reduce kernel can store each row at its permuted place; issue 3:
    // movement ops never split a kernel.
    let x3 = Host::rand(&[5, 12, 7], 73, -1.0, 1.0);
    check(
        "x3.sum(2).t() + 1",
        || x3.tensor().sum(2).t() + 1.0,
        &[(Reduce, F * 420, F * 60)],
        Some(
            &x3.reduce(2, |r| r.iter().sum())
                .permute(&[1, 0])
                .map(|v| v + 1.0),
        ),
    );
}

// ---------------------------------------------------------------------------
// Rule: multi-reduce. Softmax, log_softmax, logsumexp, layer_norm,
// rms_norm and cross_entropy are each one kernel reading the input once and
// writing the output once, whichever axis is reduced.

/// A layout of the composites' input: the stored data, the view taken of
/// it, the axis of the view that is reduced.
struct Layout {
    name: &'static str,
    stored: Host,
    view: fn(&Tensor) -> Tensor,
    view_ref: fn(&Host) -> Host,
    axis: usize,
}

fn layouts() -> Vec<Layout> {
    let x = Host::rand(&[M, N], 80, -3.0, 3.0);
    let x3 = Host::rand(&[5, 12, 7], 81, -3.0, 3.0);
    vec![
        Layout {
            name: "last axis",
            stored: x.clone(),
            view: Tensor::clone,
            view_ref: Host::clone,
            axis: 1,
        },
        Layout {
            name: "first axis",
            stored: x.clone(),
            view: Tensor::clone,
            view_ref: Host::clone,
            axis: 0,
        },
        Layout {
            name: "middle axis of 3-D",
            stored: x3.clone(),
            view: Tensor::clone,
            view_ref: Host::clone,
            axis: 1,
        },
        Layout {
            name: "permuted 3-D, last axis",
            stored: x3.clone(),
            view: |t| t.permute([2, 0, 1]),
            view_ref: |h| h.permute(&[2, 0, 1]),
            axis: 2,
        },
        Layout {
            name: "transposed 2-D, last axis",
            stored: x,
            view: |t| t.t(),
            view_ref: |h| h.permute(&[1, 0]),
            axis: 1,
        },
    ]
}

type Composite = (
    &'static str,
    fn(&Tensor, isize) -> Tensor,
    fn(&Host, usize) -> Host,
    bool,
);

fn composites() -> Vec<Composite> {
    vec![
        (
            "softmax",
            |t, a| t.softmax(a),
            |h, a| h.along(a, softmax_row),
            false,
        ),
        (
            "log_softmax",
            |t, a| t.log_softmax(a),
            |h, a| h.along(a, log_softmax_row),
            false,
        ),
        (
            "logsumexp",
            |t, a| t.logsumexp(a, false),
            |h, a| h.reduce(a, logsumexp_row),
            true,
        ),
        (
            "layer_norm",
            |t, a| t.layer_norm(a, None, None, EPS),
            |h, a| h.along(a, layer_norm_row),
            false,
        ),
        (
            "rms_norm",
            |t, a| t.rms_norm(a, None, EPS),
            |h, a| h.along(a, rms_norm_row),
            false,
        ),
    ]
}

#[test]
fn row_composites_are_one_kernel_on_every_axis() {
    for l in layouts() {
        let viewed = (l.view_ref)(&l.stored);
        let numel = viewed.numel();
        let rows = numel / viewed.shape[l.axis];
        for (name, op, op_ref, per_row) in composites() {
            let what = format!("{name} over {}", l.name);
            let written = if per_row { F * rows } else { F * numel };
            let want = op_ref(&viewed, l.axis);
            check(
                &what,
                || op(&(l.view)(&l.stored.tensor()), l.axis as isize),
                &[(MultiReduce, F * numel, written)],
                Some(&want),
            );
        }
    }
}

#[test]
fn naive_softmax_from_primitives_is_one_kernel() {
    // The spelling from the design guide, with a broadcast producer.
    let x = Host::rand(&[M, N], 90, -3.0, 3.0);
    let b = Host::rand(&[N], 91, -1.0, 1.0);
    let want = Host::from_fn(&[M, N], |i| x.at(i) + b.at(&i[1..])).along(1, softmax_row);
    check(
        "softmax of x + b",
        || {
            let x = x.tensor() + b.tensor();
            let e = (&x - x.max_keepdim(1)).exp();
            &e / e.sum_keepdim(1)
        },
        &[(MultiReduce, F * (M * N + N), F * M * N)],
        Some(&want),
    );
}

#[test]
fn norms_with_weight_and_bias_are_one_kernel() {
    let x = Host::rand(&[M, N], 92, -3.0, 3.0);
    let w = Host::rand(&[N], 93, 0.5, 1.5);
    let b = Host::rand(&[N], 94, -1.0, 1.0);
    let ln = x.along(1, layer_norm_row);
    check(
        "layer_norm(w, b)",
        || {
            x.tensor()
                .layer_norm(1, Some(&w.tensor()), Some(&b.tensor()), EPS)
        },
        &[(MultiReduce, F * (M * N + 2 * N), F * M * N)],
        Some(&Host::from_fn(&[M, N], |i| {
            ln.at(i) * w.at(&i[1..]) + b.at(&i[1..])
        })),
    );
    let rms = x.along(1, rms_norm_row);
    check(
        "rms_norm(w)",
        || x.tensor().rms_norm(1, Some(&w.tensor()), EPS),
        &[(MultiReduce, F * (M * N + N), F * M * N)],
        Some(&Host::from_fn(&[M, N], |i| rms.at(i) * w.at(&i[1..]))),
    );
}

#[test]
fn cross_entropy_is_one_kernel_on_every_layout() {
    type View = fn(&Tensor) -> Tensor;
    type ViewRef = fn(&Host) -> Host;
    let cases: Vec<(&str, Host, View, ViewRef)> = vec![
        (
            "classes last",
            Host::rand(&[M, N], 100, -3.0, 3.0),
            Tensor::clone,
            Host::clone,
        ),
        (
            "classes first (transposed)",
            Host::rand(&[N, M], 101, -3.0, 3.0),
            |t| t.t(),
            |h| h.permute(&[1, 0]),
        ),
        (
            "classes on the middle axis of 3-D",
            Host::rand(&[5, 12, 7], 102, -3.0, 3.0),
            |t| t.permute([0, 2, 1]).reshape([35, 12]),
            |h| h.permute(&[0, 2, 1]).reshape(&[35, 12]),
        ),
        (
            "classes first of 3-D (permuted)",
            Host::rand(&[12, 5, 7], 103, -3.0, 3.0),
            |t| t.permute([1, 2, 0]).reshape([35, 12]),
            |h| h.permute(&[1, 2, 0]).reshape(&[35, 12]),
        ),
    ];
    for (name, stored, view, view_ref) in cases {
        let logits = view_ref(&stored);
        let (r, c) = (logits.shape[0], logits.shape[1]);
        // Targets in range, plus one below and one above (they pick 0).
        let targets: Vec<i32> = (0..r as i32)
            .map(|i| match i {
                3 => -1,
                5 => c as i32,
                _ => (i * 7) % c as i32,
            })
            .collect();
        let want = Host::from_fn(&[r], |i| {
            let row: Vec<f64> = (0..c).map(|j| logits.at(&[i[0], j])).collect();
            let t = targets[i[0]];
            let picked = if (0..c as i32).contains(&t) {
                row[t as usize]
            } else {
                0.0
            };
            logsumexp_row(&row) - picked
        });
        let what = format!("cross_entropy, {name}");
        // Logits and targets (i32); the class indices (an i32 arange) are
        // computed from the loop coordinates, never read.
        let read = F * r * c + 4 * r;
        check(
            &what,
            || {
                view(&stored.tensor()).cross_entropy(&Tensor::from_vec(
                    targets.clone(),
                    [r],
                    &dev(),
                ))
            },
            &[(MultiReduce, read, F * r)],
            Some(&want),
        );
    }
}

// ---------------------------------------------------------------------------
// Rule: matmul is its own kernel kind, with operand views read through
// strides and elementwise epilogues fused.

fn matmul_ref(a: &Host, b: &Host) -> Host {
    let (m, k) = (a.shape[0], a.shape[1]);
    let n = b.shape[1];
    Host::from_fn(&[m, n], |i| {
        (0..k).map(|p| a.at(&[i[0], p]) * b.at(&[p, i[1]])).sum()
    })
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

const MM: (usize, usize, usize) = (12, 10, 20);

#[test]
fn matmul_with_bias_and_gelu_is_one_kernel() {
    let (m, n, k) = MM;
    let a = Host::rand(&[m, k], 110, -1.0, 1.0);
    let b = Host::rand(&[n, k], 111, -1.0, 1.0);
    let bias = Host::rand(&[n], 112, -1.0, 1.0);
    let mm = matmul_ref(&a, &b.permute(&[1, 0]));
    let want = Host::from_fn(&[m, n], |i| gelu(mm.at(i) + bias.at(&i[1..])));
    check(
        "(a @ b.t() + bias).gelu()",
        || (a.tensor().matmul(&b.tensor().t()) + bias.tensor()).gelu(),
        &[(Matmul, F * (m * k + n * k + n), F * m * n)],
        Some(&want),
    );
}

#[test]
fn computed_matmul_operands_are_materialized_views_are_not() {
    // The matmul kernels read operands through views with one load; an
    // operand computed by elementwise ops gets its own kernel first.
    let (m, n, k) = MM;
    let a = Host::rand(&[m, k], 115, -1.0, 1.0);
    let b = Host::rand(&[k, n], 116, -1.0, 1.0);
    let want = Host::from_fn(&[m, n], |i| matmul_ref(&a, &b).at(i) * 0.5);
    check(
        "(a * 0.5) @ b",
        || (a.tensor() * 0.5).matmul(&b.tensor()),
        &[
            (Elementwise, F * m * k, F * m * k),
            (Matmul, F * (m * k + k * n), F * m * n),
        ],
        Some(&want),
    );
    // TF32 rounding is read by the matmul kernel itself: still one kernel.
    check(
        "a @ b with TF32",
        || a.tensor().matmul_with(&b.tensor(), Precision::Tf32),
        &[(Matmul, F * (m * k + k * n), F * m * n)],
        None,
    );
}

#[test]
fn matmul_reads_operand_views_through_strides() {
    let (m, n, k) = MM;
    let at = Host::rand(&[k, m], 120, -1.0, 1.0);
    let bt = Host::rand(&[n, k], 121, -1.0, 1.0);
    let want = matmul_ref(&at.permute(&[1, 0]), &bt.permute(&[1, 0]));
    check(
        "a.t() @ b.t()",
        || at.tensor().t().matmul(&bt.tensor().t()),
        &[(Matmul, F * (m * k + k * n), F * m * n)],
        Some(&want),
    );

    let big = Host::rand(&[2 * m, k + 3], 122, -1.0, 1.0);
    let b = Host::rand(&[k, n], 123, -1.0, 1.0);
    let a = Host::from_fn(&[m, k], |i| big.at(&[2 * i[0], 1 + i[1]]));
    check(
        "a[::2, 1:k+1] @ b",
        || big.tensor().slice(s![..;2, 1..k + 1]).matmul(&b.tensor()),
        &[(Matmul, F * (m * k + k * n), F * m * n)],
        Some(&matmul_ref(&a, &b)),
    );

    // Broadcast batch: one operand is shared by every batch.
    let bs = 3;
    let a3 = Host::rand(&[bs, m, k], 124, -1.0, 1.0);
    let per_batch =
        |h: &Host, i: usize| Host::from_fn(&h.shape[1..], |ix| h.at(&[i, ix[0], ix[1]]));
    let want = Host::from_fn(&[bs, m, n], |ix| {
        matmul_ref(&per_batch(&a3, ix[0]), &b).at(&ix[1..])
    });
    check(
        "[B, M, K] @ [K, N]",
        || a3.tensor().matmul(&b.tensor()),
        &[(Matmul, F * (bs * m * k + k * n), F * bs * m * n)],
        Some(&want),
    );
    let a2 = per_batch(&a3, 1);
    let b3 = Host::rand(&[bs, k, n], 125, -1.0, 1.0);
    let want = Host::from_fn(&[bs, m, n], |ix| {
        matmul_ref(&a2, &per_batch(&b3, ix[0])).at(&ix[1..])
    });
    check(
        "[M, K] @ [B, K, N]",
        || a2.tensor().matmul(&b3.tensor()),
        &[(Matmul, F * (m * k + bs * k * n), F * bs * m * n)],
        Some(&want),
    );
}

#[test]
fn matmul_fuses_elementwise_epilogues() {
    let (m, n, k) = MM;
    let a = Host::rand(&[m, k], 130, -1.0, 1.0);
    let b = Host::rand(&[k, n], 131, -1.0, 1.0);
    let bias = Host::rand(&[n], 132, -1.0, 1.0);
    let mm = matmul_ref(&a, &b);
    let with_bias = Host::from_fn(&[m, n], |i| mm.at(i) + bias.at(&i[1..]));
    check(
        "relu(a @ b + bias)",
        || (a.tensor().matmul(&b.tensor()) + bias.tensor()).relu(),
        &[(Matmul, F * (m * k + k * n + n), F * m * n)],
        Some(&with_bias.map(|v| v.max(0.0))),
    );
    check(
        "(a @ b) * 0.125 - 1",
        || a.tensor().matmul(&b.tensor()) * 0.125 - 1.0,
        &[(Matmul, F * (m * k + k * n), F * m * n)],
        Some(&mm.map(|v| v * 0.125 - 1.0)),
    );
    // A cast epilogue writes 2-byte halves.
    let build = || ((a.tensor().matmul(&b.tensor()) + bias.tensor()).gelu() * 0.5).cast(DType::F16);
    check(
        "f16(gelu(a @ b + bias) * 0.5)",
        build,
        &[(Matmul, F * (m * k + k * n + n), 2 * m * n)],
        None,
    );
    let got = build().to_vec::<f64>().unwrap();
    assert_values(
        "f16 epilogue vs reference",
        &got,
        &with_bias.map(|v| gelu(v) * 0.5).data,
        2e-3,
        1e-3,
    );
}

#[test]
fn row_composites_after_a_matmul_or_reduction_are_one_more_kernel() {
    let (m, n, k) = MM;
    let a = Host::rand(&[m, k], 140, -1.0, 1.0);
    let b = Host::rand(&[k, n], 141, -1.0, 1.0);
    let mm = matmul_ref(&a, &b);
    let mm_kernel = (Matmul, F * (m * k + k * n), F * m * n);
    check(
        "softmax(a @ b)",
        || a.tensor().matmul(&b.tensor()).softmax(-1),
        &[mm_kernel, (MultiReduce, F * m * n, F * m * n)],
        Some(&mm.along(1, softmax_row)),
    );
    check(
        "layer_norm(a @ b)",
        || {
            a.tensor()
                .matmul(&b.tensor())
                .layer_norm(1, None, None, EPS)
        },
        &[mm_kernel, (MultiReduce, F * m * n, F * m * n)],
        Some(&mm.along(1, layer_norm_row)),
    );
    check(
        "rms_norm(gelu(a @ b))",
        || a.tensor().matmul(&b.tensor()).gelu().rms_norm(1, None, EPS),
        &[mm_kernel, (MultiReduce, F * m * n, F * m * n)],
        Some(&mm.map(gelu).along(1, rms_norm_row)),
    );
    let x3 = Host::rand(&[5, 12, 7], 142, -1.0, 1.0);
    check(
        "softmax(x3.sum(2))",
        || x3.tensor().sum(2).softmax(1),
        &[(Reduce, F * 420, F * 60), (MultiReduce, F * 60, F * 60)],
        Some(&x3.reduce(2, |r| r.iter().sum()).along(1, softmax_row)),
    );
}

// ---------------------------------------------------------------------------
// Rule: tensors realized together share kernels and can be outputs of one
// kernel.

#[test]
fn realize_all_softmax_and_max_share_one_kernel() {
    let x = Host::rand(&[M, N], 150, -3.0, 3.0);
    let got = check_all(
        "softmax and max",
        || {
            let x = x.tensor();
            vec![x.softmax(-1), x.max(1)]
        },
        &[(MultiReduce, F * M * N, F * (M * N + M))],
    );
    let s = {
        let x = x.tensor();
        schedule_of(&[&x.softmax(-1), &x.max(1)], Fusion::On)
    };
    assert_eq!(s.items[0].kernel.outputs.len(), 2, "{s}");
    assert_reference("softmax", &got[0], &x.along(1, softmax_row));
    assert_reference("max", &got[1], &x.reduce(1, max_of));
    // Realized together, both hold data afterwards.
    let t = x.tensor();
    let (a, b) = (t.softmax(-1), t.max(1));
    realize_all(&[&a, &b], Fusion::On).unwrap();
    assert!(a.is_realized() && b.is_realized());
}

#[test]
fn realize_all_mean_and_var_share_one_kernel() {
    let x = Host::rand(&[M, N], 151, -3.0, 3.0);
    let got = check_all(
        "mean and var",
        || {
            let x = x.tensor();
            vec![x.mean(1), x.var(1, 1, false)]
        },
        &[(MultiReduce, F * M * N, F * 2 * M)],
    );
    assert_reference("mean", &got[0], &x.reduce(1, mean_of));
    let var = |r: &[f64]| {
        let m = mean_of(r);
        r.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (r.len() - 1) as f64
    };
    assert_reference("var", &got[1], &x.reduce(1, var));
}

#[test]
fn realize_all_elementwise_outputs_share_one_kernel() {
    let x = Host::rand(&[M, N], 152, -1.0, 1.0);
    let y = Host::rand(&[M, N], 153, -1.0, 1.0);
    let got = check_all(
        "two independent outputs",
        || vec![(x.tensor() + 1.0).exp(), (y.tensor() * 2.0).sin()],
        &[(Elementwise, 2 * F * M * N, 2 * F * M * N)],
    );
    assert_reference("exp", &got[0], &x.map(|v| (v + 1.0).exp()));
    assert_reference("sin", &got[1], &y.map(|v| (2.0 * v).sin()));

    // Two outputs of one input read it once.
    let got = check_all(
        "two outputs of one input",
        || {
            let x = x.tensor();
            vec![x.exp(), x.flip(0).sin()]
        },
        &[(Elementwise, F * M * N, 2 * F * M * N)],
    );
    assert_reference("exp", &got[0], &x.map(f64::exp));
    let flipped = Host::from_fn(&[M, N], |i| x.at(&[M - 1 - i[0], i[1]]));
    assert_reference("sin", &got[1], &flipped.map(f64::sin));
}

#[test]
fn realize_all_row_reduction_and_elementwise_share_one_kernel() {
    // The row kernel can store the element-level output in its final pass.
    let x = Host::rand(&[M, N], 154, -1.0, 1.0);
    check_all(
        "e.sum(1) and e * 2",
        || {
            let e = x.tensor().exp();
            vec![e.sum(1), &e * 2.0]
        },
        &[(MultiReduce, F * M * N, F * (M + M * N))],
    );
}

// ---------------------------------------------------------------------------
// Rule: recompute vs materialize. Cheap elementwise values are recomputed
// by every consumer; reductions are never recomputed.

#[test]
fn elementwise_value_with_two_consumers_is_recomputed() {
    // One kernel reads sq once and computes sin at two places.
    let sq = Host::rand(&[9, 9], 160, -1.0, 1.0);
    let build = || {
        let e = (sq.tensor() * 3.0).sin();
        &e + e.t()
    };
    let e = sq.map(|v| (3.0 * v).sin());
    check(
        "e + e.t()",
        build,
        &[(Elementwise, F * 81, F * 81)],
        Some(&Host::from_fn(&[9, 9], |i| e.at(i) + e.at(&[i[1], i[0]]))),
    );
    let s = build().schedule(Fusion::On);
    let sins = count_insts(&s, |i| matches!(i, Inst::Unary(smelt::UnaryOp::Sin, _)));
    assert_eq!(sins, 2, "{}", s.items[0].kernel);

    // Two reductions over different axes of one elementwise value: each
    // kernel recomputes it; no kernel writes it.
    let x = Host::rand(&[M, N], 161, -1.0, 1.0);
    let got = check_all(
        "e.sum(0) and e.sum(1)",
        || {
            let e = x.tensor().exp();
            vec![e.sum(0), e.sum(1)]
        },
        &[(Reduce, F * M * N, F * N), (Reduce, F * M * N, F * M)],
    );
    let e = x.map(f64::exp);
    assert_reference("e.sum(0)", &got[0], &e.reduce(0, |r| r.iter().sum()));
    assert_reference("e.sum(1)", &got[1], &e.reduce(1, |r| r.iter().sum()));
}

/// Reductions computed by all kernels of a schedule.
fn reductions(s: &Schedule, op: ReduceOp) -> usize {
    count_insts(s, |i| matches!(i, Inst::Reduce(o, _) if *o == op))
}

#[test]
fn reduction_used_by_two_kernels_is_materialized_once() {
    let x = Host::rand(&[M, N], 170, -1.0, 1.0);
    // s = x.sum(1) is needed by a column reduction (another domain): it is
    // materialized; the row reduction of x * s joins the kernel computing
    // s, and s is computed exactly once.
    let build = || {
        let x = x.tensor();
        let s = x.sum_keepdim(1);
        vec![(&x - &s).sum(0), (&x * &s).max(1)]
    };
    let got = check_all(
        "(x - s).sum(0) and (x * s).max(1)",
        build,
        &[
            (MultiReduce, F * M * N, F * (M + M)),
            (Reduce, F * (M * N + M), F * N),
        ],
    );
    let ts = build();
    let s = schedule_of(&[&ts[0], &ts[1]], Fusion::On);
    // Sum: s and the column sum; max: one.
    assert_eq!(reductions(&s, ReduceOp::Sum), 2, "{s}");
    assert_eq!(reductions(&s, ReduceOp::Max), 1, "{s}");
    let rs = x.reduce(1, |r| r.iter().sum());
    let centred = Host::from_fn(&[M, N], |i| x.at(i) - rs.at(&i[..1]));
    let scaled = Host::from_fn(&[M, N], |i| x.at(i) * rs.at(&i[..1]));
    assert_reference(
        "(x - s).sum(0)",
        &got[0],
        &centred.reduce(0, |r| r.iter().sum()),
    );
    assert_reference("(x * s).max(1)", &got[1], &scaled.reduce(1, max_of));

    // Two column reductions reading one row reduction: s once, both
    // column reductions in one kernel.
    let build = || {
        let x = x.tensor();
        let s = x.sum_keepdim(1);
        vec![(&x - &s).sum(0), (&x / &s).max(0)]
    };
    check_all(
        "(x - s).sum(0) and (x / s).max(0)",
        build,
        &[
            (Reduce, F * M * N, F * M),
            (MultiReduce, F * (M * N + M), F * 2 * N),
        ],
    );
    let ts = build();
    let s = schedule_of(&[&ts[0], &ts[1]], Fusion::On);
    assert_eq!(reductions(&s, ReduceOp::Sum), 2, "{s}");

    // One consumer on another domain: materialized, read by one kernel.
    check(
        "(x - x.sum_keepdim(1)).sum(0)",
        || {
            let x = x.tensor();
            (&x - x.sum_keepdim(1)).sum(0)
        },
        &[(Reduce, F * M * N, F * M), (Reduce, F * (M * N + M), F * N)],
        Some(&centred.reduce(0, |r| r.iter().sum())),
    );
}

#[test]
fn reductions_over_other_axes_of_equal_size_are_not_merged() {
    // A row max and a column sum of a square matrix have domains of equal
    // sizes ([n; n]) over different axes: the column kernel must read the
    // materialized max, not compute it at its own row (regression: a
    // merged kernel once read 0 for it).
    let n = 9;
    let x = Host::rand(&[n, n], 175, -3.0, 3.0);
    let m = x.reduce(1, max_of);
    let centred = Host::from_fn(&[n, n], |i| x.at(i) - m.at(&i[..1]));
    check(
        "(x - x.max_keepdim(1)).sum(0), square",
        || {
            let x = x.tensor();
            (&x - x.max_keepdim(1)).sum(0)
        },
        &[(Reduce, F * n * n, F * n), (Reduce, F * (n * n + n), F * n)],
        Some(&centred.reduce(0, |r| r.iter().sum())),
    );

    // 3-D, axes 1 and 2 of equal size: softmax over [0, 2], summed over
    // [0, 1].
    let x3 = Host::rand(&[4, 6, 6], 176, -3.0, 3.0);
    let sm = {
        let t = x3
            .permute(&[1, 0, 2])
            .reshape(&[6, 24])
            .along(1, softmax_row);
        t.reshape(&[6, 4, 6]).permute(&[1, 0, 2])
    };
    check(
        "softmax over [0, 2], then sum over [0, 1]",
        || {
            let x = x3.tensor();
            let e = (&x - x.max_keepdim([0, 2])).exp();
            (&e / e.sum_keepdim([0, 2])).sum([0, 1])
        },
        &[
            (MultiReduce, F * 144, F * 12),
            (Reduce, F * (144 + 12), F * 6),
        ],
        Some(
            &sm.permute(&[2, 0, 1])
                .reshape(&[6, 24])
                .reduce(1, |r| r.iter().sum()),
        ),
    );
}

#[test]
fn materialized_reduction_keeps_its_consumers_fused() {
    // s must be materialized for the column sum; its consumers over its
    // own row domain (exp(s), and the row kernel exp(x - s)) should be
    // stored by the kernel that computes s, not by extra kernels that read
    // s back.
    let x = Host::rand(&[M, N], 171, -1.0, 1.0);
    check_all(
        "s.exp() and (x - s).sum(0), s = x.max(1)",
        || {
            let x = x.tensor();
            let s = x.max(1);
            vec![s.exp(), (&x - s.unsqueeze(1)).sum(0)]
        },
        &[
            (Reduce, F * M * N, F * 2 * M),
            (Reduce, F * (M * N + M), F * N),
        ],
    );
    check_all(
        "(x - s).sum(0) and (x - s).exp(), s = x.sum_keepdim(1)",
        || {
            let x = x.tensor();
            let s = x.sum_keepdim(1);
            vec![(&x - &s).sum(0), (&x - &s).exp()]
        },
        &[
            (MultiReduce, F * M * N, F * (M + M * N)),
            (Reduce, F * (M * N + M), F * N),
        ],
    );
}

// ---------------------------------------------------------------------------
// Fusion::Off: one kernel per op, the naive baseline.

#[test]
fn unfused_runs_one_kernel_per_op() {
    let x = Host::rand(&[M, N], 180, -3.0, 3.0);
    let y = x.tensor().softmax(-1);
    let off = y.schedule(Fusion::Off);
    let row = F * M;
    let full = F * M * N;
    assert_eq!(
        summary(&off),
        vec![
            (Reduce, full, row),
            (Elementwise, full + row, full),
            (Elementwise, full, full),
            (Reduce, full, row),
            (Elementwise, full + row, full),
        ],
        "{off}"
    );
    let ops: Vec<Vec<String>> = off.items.iter().map(|i| i.ops.clone()).collect();
    assert_eq!(ops, [["max"], ["sub"], ["exp"], ["sum"], ["div"]], "{off}");
    y.realize_with(Fusion::Off).unwrap();
    assert_reference(
        "unfused softmax",
        &y.to_vec::<f64>().unwrap(),
        &x.along(1, softmax_row),
    );

    // A 50-step chain (55 ops: five steps are `square * 0.5`) is 55
    // kernels, each reading and writing everything.
    let off = chain(&x.tensor(), 50).schedule(Fusion::Off);
    assert_eq!(summary(&off), vec![(Elementwise, full, full); 55], "{off}");

    // layer_norm: mean (sum, div), sub, square, mean (sum, div), add,
    // rsqrt, mul.
    let off = x
        .tensor()
        .layer_norm(1, None, None, EPS)
        .schedule(Fusion::Off);
    assert_eq!(off.items.len(), 9, "{off}");
    assert_one_op_per_kernel("layer_norm", &off);

    // Matmul with an epilogue: the matmul kernel, then one per op.
    let (m, n, k) = MM;
    let a = Host::rand(&[m, k], 181, -1.0, 1.0);
    let b = Host::rand(&[k, n], 182, -1.0, 1.0);
    let bias = Host::rand(&[n], 183, -1.0, 1.0);
    let off = (a.tensor().matmul(&b.tensor()) + bias.tensor())
        .gelu()
        .schedule(Fusion::Off);
    let kinds: Vec<KernelKind> = off.items.iter().map(|i| i.kernel.kind).collect();
    assert_eq!(kinds, [Matmul, Elementwise, Elementwise], "{off}");
}

#[test]
fn padding_of_a_slice_reads_only_the_slice() {
    // The load is `in0[i0*10 + i1] if 0<=i1<4` over a [6, 5] domain: it
    // touches 6 x 4 elements, but bytes_read counts the 6 x 5 positions.
    let x = Host::rand(&[6, 10], 36, -1.0, 1.0);
    check(
        "x[:, :4] padded by one column",
        || {
            x.tensor()
                .slice(s![.., ..4])
                .pad(&[(0, 0), (0, 1)], 0.0)
                .exp()
        },
        &[(Elementwise, F * 24, F * 30)],
        Some(&Host::from_fn(&[6, 5], |i| {
            if i[1] < 4 {
                x.at(i).exp()
            } else {
                1.0
            }
        })),
    );
}
