//! Seeded random-graph fuzzer: every graph realized fused equals the same
//! graph realized unfused (one kernel per op).
//!
//! A graph mixes elementwise ops (unary ops of possibly negative or
//! infinite values, so NaN and inf appear; binary ops with broadcasting;
//! comparisons and `where`), reductions over random axes (kept or not,
//! often broadcast back against their input: the multi-reduce pattern),
//! views (permute, slice with steps, flip, pad, reshape, expand, narrow),
//! composites, casts (to halves, `I64`, `I32`, `I8`, `U8`, bool) and small
//! matmuls, and the NumPy-breadth ops (`cat`/`stack`, `split`/`chunk`
//! views, `gather`/`index_select`/`embedding` with in-range indices,
//! `masked_fill`, `where`, `clamp`, rounding, scans, `sort`/`topk`,
//! `tril`/`triu`, `any`/`all`), on small random shapes with size-1 and
//! empty axes, from inputs holding NaN and +-inf. The graph is built twice from
//! its seed (a realized tensor keeps its data, so one tensor cannot serve
//! both runs).
//!
//! A failure names its seed; rerun one graph with its log and schedules:
//! `SMELT_FUZZ_SEED=<seed> cargo test --test graph_fuzz one_graph -- --ignored --nocapture`.

mod common;

use common::Rng;
use smelt::{realize_all, s, DType, Device, Fusion, ReduceOp, Schedule, SliceArg, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// Largest tensor a small graph makes (keeps the interpreter fast).
const MAX_NUMEL: usize = 360;

/// Largest tensor a big graph makes: rows longer than the CPU backend's
/// tile (4096), so multi-reduce kernels stream rows in chunks.
const MAX_NUMEL_BIG: usize = 40_000;

/// Seed of the first graph of the CI run.
const BASE_SEED: u64 = 0x5EED_0000;

// ---------------------------------------------------------------------------
// PRNG

/// This fuzzer's salt for `Rng::salted`: seeds printed by failures keep
/// naming the same graphs.
const SALT: u64 = 0x9E6C_63D0_676A_9A99;

/// A random non-empty subset of `0..n`, sorted.
fn random_axes(rng: &mut Rng, n: usize) -> Vec<usize> {
    loop {
        let a: Vec<usize> = (0..n).filter(|_| rng.chance(0.4)).collect();
        if !a.is_empty() {
            return a;
        }
    }
}

// ---------------------------------------------------------------------------
// Graph generator

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// NumPy broadcasting, `None` if the shapes do not broadcast.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i < r - a.len() {
            1
        } else {
            a[i - (r - a.len())]
        };
        let y = if i < r - b.len() {
            1
        } else {
            b[i - (r - b.len())]
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

type Un = fn(&Tensor) -> Tensor;

const UNARY: [(&str, Un); 17] = [
    ("neg", Tensor::neg),
    ("abs", Tensor::abs),
    ("exp", Tensor::exp),
    ("exp2", Tensor::exp2),
    ("log", Tensor::log),
    ("log2", Tensor::log2),
    ("sqrt", Tensor::sqrt),
    ("rsqrt", Tensor::rsqrt),
    ("recip", Tensor::recip),
    ("sin", Tensor::sin),
    ("cos", Tensor::cos),
    ("tanh", Tensor::tanh),
    ("sigmoid", Tensor::sigmoid),
    ("relu", Tensor::relu),
    ("gelu", Tensor::gelu),
    ("silu", Tensor::silu),
    ("square", Tensor::square),
];

type Bin = fn(&Tensor, &Tensor) -> Tensor;

const BINARY: [(&str, Bin); 8] = [
    ("add", |a, b| a + b),
    ("sub", |a, b| a - b),
    ("mul", |a, b| a * b),
    ("div", |a, b| a / b),
    ("maximum", |a, b| a.maximum(b)),
    ("minimum", |a, b| a.minimum(b)),
    ("pow", |a, b| a.pow(b)),
    ("where(a > b, a, b)", |a, b| a.gt(b).where_(a, b)),
];

const REDUCE: [(&str, ReduceOp); 4] = [
    ("sum", ReduceOp::Sum),
    ("max", ReduceOp::Max),
    ("min", ReduceOp::Min),
    ("prod", ReduceOp::Prod),
];

/// Builds one random graph; the same seed builds the same graph.
struct Gen {
    rng: Rng,
    dev: Device,
    /// The mode this copy of the graph is realized with (intermediates
    /// realized mid-graph use it too).
    fusion: Fusion,
    /// Every size of this graph's shapes is drawn from these (a narrow
    /// set makes equal sizes on different axes likely).
    sizes: Vec<usize>,
    /// Largest tensor this graph makes.
    max_numel: usize,
    /// Every tensor made so far, with its name.
    pool: Vec<(String, Tensor)>,
    /// One line per op, for failure reports.
    log: Vec<String>,
    ops: usize,
}

impl Gen {
    fn new(seed: u64, fusion: Fusion) -> Gen {
        let mut rng = Rng::salted(seed, SALT);
        let (sizes, max_numel) = match rng.below(20) {
            0 | 1 => (vec![1, 33, 64, 130], MAX_NUMEL_BIG),
            2..=7 => (vec![1, 3, 3, 3], MAX_NUMEL),
            8..=12 => (vec![1, 2, 4, 4], MAX_NUMEL),
            _ => (vec![1, 1, 2, 3, 4, 5, 6, 7], MAX_NUMEL),
        };
        Gen {
            rng,
            dev: common::test_device(),
            fusion,
            sizes,
            max_numel,
            pool: Vec::new(),
            log: Vec::new(),
            ops: 0,
        }
    }

    /// A random small shape: rank 0 to 4, sizes 1 to 7 (many 1s).
    fn shape(&mut self) -> Vec<usize> {
        loop {
            let rank = self.rng.pick(&[0, 1, 1, 2, 2, 2, 3, 3, 3, 4]);
            let s: Vec<usize> = (0..rank)
                .map(|_| self.sizes[self.rng.below(self.sizes.len())])
                .collect();
            if numel(&s) <= self.max_numel / 2 {
                return s;
            }
        }
    }

    /// A new `f32` input; some inputs hold NaN, +inf, -inf and zeros.
    fn input(&mut self, shape: &[usize]) -> Tensor {
        let special = self.rng.pick(&[0.0, 0.0, 0.03, 0.1, 0.3]);
        let scale = self.rng.pick(&[1.0, 3.0, 10.0]);
        let data: Vec<f32> = (0..numel(shape))
            .map(|_| {
                if self.rng.chance(special) {
                    self.rng
                        .pick(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0])
                } else if self.rng.chance(0.1) {
                    self.rng.range(-3, 3) as f32
                } else {
                    ((self.rng.unit() * 2.0 - 1.0) * scale) as f32
                }
            })
            .collect();
        let t = Tensor::from_vec(data, shape.to_vec(), &self.dev);
        self.add(
            t,
            format!("input {shape:?} (special {special}, scale {scale})"),
        )
    }

    fn add(&mut self, t: Tensor, what: String) -> Tensor {
        let name = format!("t{}", self.pool.len());
        self.log.push(format!(
            "{name} = {what}  -> {:?} {:?}",
            t.shape(),
            t.dtype()
        ));
        self.pool.push((name, t.clone()));
        t
    }

    /// The last tensor most of the time (deep graphs), else any.
    fn operand(&mut self) -> (String, Tensor) {
        let i = if self.rng.chance(0.6) {
            self.pool.len() - 1
        } else {
            self.rng.below(self.pool.len())
        };
        self.pool[i].clone()
    }

    /// A partner for a binary op with `a`: a constant, another tensor of
    /// the pool, a view of `a`, or a new input, all broadcasting with `a`.
    fn partner(&mut self, a: &Tensor) -> (String, Tensor) {
        let sa = a.shape().to_vec();
        match self.rng.below(4) {
            0 => {
                let c = self
                    .rng
                    .pick(&[0.0, 0.5, -1.5, 2.0, 3.0, f64::INFINITY, f64::NAN]);
                (format!("{c}"), a.full_like(c))
            }
            1 => {
                let ok: Vec<usize> = (0..self.pool.len())
                    .filter(|i| {
                        broadcast(&sa, self.pool[*i].1.shape())
                            .is_some_and(|s| numel(&s) <= self.max_numel)
                    })
                    .collect();
                if ok.is_empty() {
                    return (String::from("1"), a.ones_like());
                }
                let i = self.rng.pick(&ok);
                self.pool[i].clone()
            }
            2 if !sa.is_empty() => {
                let axes = random_axes(&mut self.rng, sa.len());
                (format!("flip({axes:?}) of itself"), a.flip(axes))
            }
            _ => {
                // Some axes set to 1, leading axes dropped or added.
                let mut sb: Vec<usize> = sa
                    .iter()
                    .map(|d| if self.rng.chance(0.35) { 1 } else { *d })
                    .collect();
                let drop = self.rng.below(sb.len() + 1);
                if self.rng.chance(0.3) {
                    sb.drain(..drop);
                }
                if self.rng.chance(0.2) && sb.len() < 4 {
                    sb.insert(0, self.rng.pick(&[1, 2, 3]));
                }
                for d in sb.iter_mut() {
                    if *d == 1 && self.rng.chance(0.2) {
                        *d = self.rng.pick(&[2, 3]);
                    }
                }
                match broadcast(&sa, &sb) {
                    Some(s) if numel(&s) <= self.max_numel => {
                        let t = self.input(&sb);
                        let name = self.pool.last().unwrap().0.clone();
                        (name, t)
                    }
                    _ => (String::from("2"), a.full_like(2.0)),
                }
            }
        }
    }

    /// One random op on the pool.
    fn step(&mut self) {
        if self.rng.chance(0.05) {
            // Realize something mid-graph: later ops read it as data (or
            // as a view of data).
            let (an, a) = self.operand();
            let (bn, b) = self.operand();
            realize_all(&[&a, &b], self.fusion).expect("mid-graph realize");
            self.log.push(format!("realize {an} and {bn}"));
        }
        let (an, a) = self.operand();
        let sa = a.shape().to_vec();
        let rank = sa.len();
        self.ops += 1;
        if self.rng.chance(0.25) {
            return self.breadth(&an, &a);
        }
        match self.rng.below(100) {
            0..=17 => {
                let (name, f) = self.rng.pick(&UNARY);
                self.add(f(&a), format!("{name}({an})"));
            }
            18..=37 => {
                let (bn, b) = self.partner(&a);
                let (name, f) = self.rng.pick(&BINARY);
                let swap = self.rng.chance(0.3);
                let (x, y, xn, yn) = if swap {
                    (&b, &a, &bn, &an)
                } else {
                    (&a, &b, &an, &bn)
                };
                self.add(f(x, y), format!("{name}({xn}, {yn})"));
            }
            38..=41 => {
                let c = a.isnan().logical_or(a.lt(0.0));
                let (bn, b) = self.partner(&a);
                self.add(
                    c.where_(&b, &a),
                    format!("where(isnan({an}) | {an} < 0, {bn}, {an})"),
                );
            }
            42..=59 if rank > 0 => self.reduction(&an, &a),
            60..=79 if rank > 0 => self.view(&an, &a),
            80..=87 if rank > 0 => self.composite(&an, &a),
            88..=91 => {
                let dt = self.rng.pick(&[
                    DType::F16,
                    DType::BF16,
                    DType::I32,
                    DType::Bool,
                    DType::I64,
                    DType::I8,
                    DType::U8,
                ]);
                let back = self.rng.chance(0.5);
                let t = a.cast(dt);
                let t = if back { t.cast(DType::F32) } else { t };
                self.add(t, format!("cast({an}, {dt:?}) back to f32: {back}"));
            }
            92..=95 if rank > 0 => self.matmul(&an, &a),
            _ => {
                // Two ops of one input with different views: recompute.
                let e = a.exp().minimum(1e3);
                let t = if rank > 0 {
                    let axes = random_axes(&mut self.rng, rank);
                    &e - e.flip(axes.clone())
                } else {
                    &e * &e
                };
                self.add(t, format!("e - e.flip(..), e = min(exp({an}), 1e3)"));
            }
        }
    }

    /// One of the NumPy-breadth ops (issue 12) on `a`; where it does not
    /// apply (rank, empty axis) a rounding op instead.
    fn breadth(&mut self, an: &str, a: &Tensor) {
        let sa = a.shape().to_vec();
        let rank = sa.len();
        // An axis of `a` (rank > 0), and its length.
        let d = self.rng.below(rank.max(1));
        let n = sa.get(d).copied().unwrap_or(0);
        // Ops that could make an empty tensor (a `cat` piece, `topk`'s k,
        // an index) stay non-empty, so that the other ops' assumptions
        // (max/min over non-empty axes, reshapes by prime factors) hold;
        // empty pieces are joined into non-empty results by `cat`.
        let (t, what) = match self.rng.below(14) {
            0 if rank > 0 => return self.cat(an, a, d),
            1 => return self.stack(an, a),
            2 if rank > 0 && n > 0 => {
                let pieces = if self.rng.chance(0.5) {
                    let size = 1 + self.rng.below(n);
                    (
                        a.split(size, d as isize),
                        format!("split({an}, {size}, {d})"),
                    )
                } else {
                    let c = 1 + self.rng.below(4);
                    (a.chunk(c, d as isize), format!("chunk({an}, {c}, {d})"))
                };
                let i = self.rng.below(pieces.0.len());
                (pieces.0[i].clone(), format!("{} piece {i}", pieces.1))
            }
            3 if rank > 0 && n > 0 => {
                // An index no longer than `a` off the axis (empty where
                // `a` is), any length along it.
                let ishape: Vec<usize> = sa
                    .iter()
                    .enumerate()
                    .map(|(e, &m)| match (e == d, m) {
                        (true, _) => self.rng.pick(&[1, 2, 3, n]),
                        (false, 0) => 0,
                        (false, m) => 1 + self.rng.below(m),
                    })
                    .collect();
                if numel(&ishape) > self.max_numel {
                    (a.round(), format!("round({an})"))
                } else {
                    let (ixn, ix) = self.index(&ishape, n);
                    (
                        a.gather(d as isize, &ix),
                        format!("gather({an}, {d}, {ixn})"),
                    )
                }
            }
            4 if rank > 0 && n > 0 => {
                let len = self.rng.pick(&[1, 2, 5]);
                let (ixn, ix) = self.index(&[len], n);
                let t = a.index_select(d as isize, &ix);
                if numel(t.shape()) > self.max_numel {
                    (a.floor(), format!("floor({an})"))
                } else {
                    (t, format!("index_select({an}, {d}, {ixn})"))
                }
            }
            5 if rank == 2 && sa[0] > 0 => {
                let ishape = self.rng.pick(&[vec![3], vec![2, 2], vec![]]);
                let (ixn, ix) = self.index(&ishape, sa[0]);
                (a.embedding(&ix), format!("embedding({an}, {ixn})"))
            }
            6 => {
                let mask = if rank > 0 && self.rng.chance(0.5) {
                    let axes = random_axes(&mut self.rng, rank);
                    a.lt(a.flip(axes))
                } else {
                    a.isnan().logical_or(a.gt(0.5))
                };
                let v = self
                    .rng
                    .pick(&[0.0, -1.5, 3.0, f64::NEG_INFINITY, f64::NAN]);
                (a.masked_fill(&mask, v), format!("masked_fill({an}, {v})"))
            }
            7 => {
                let lo = self.rng.pick(&[-2.0, -0.5, 0.0, 1.0]);
                let hi = self.rng.pick(&[-1.0, 0.5, 2.0, f64::INFINITY]);
                (a.clamp(lo, hi), format!("clamp({an}, {lo}, {hi})"))
            }
            8 => {
                let c = a.lt(0.0).logical_or(a.isnan());
                let (bn, b) = self.partner(a);
                let b = b.cast(
                    self.rng
                        .pick(&[DType::I64, DType::I8, DType::U8, DType::F32]),
                );
                (
                    c.where_(&b, a),
                    format!("where({an} < 0, {bn} (cast), {an})"),
                )
            }
            9 if rank > 0 => {
                let ax = d as isize;
                match self.rng.below(6) {
                    0 => (a.cumsum(ax), format!("cumsum({an}, {d})")),
                    1 => (a.cumprod(ax), format!("cumprod({an}, {d})")),
                    2 => (a.cummax(ax).0, format!("cummax({an}, {d}) values")),
                    3 => (a.cummin(ax).1, format!("cummin({an}, {d}) indices")),
                    4 => (a.cummax(ax).1, format!("cummax({an}, {d}) indices")),
                    _ => (a.logcumsumexp(ax), format!("logcumsumexp({an}, {d})")),
                }
            }
            10 if rank > 0 => {
                let (ax, desc) = (d as isize, self.rng.chance(0.5));
                let (v, i, what) = if self.rng.chance(0.5) {
                    let (v, i) = a.sort(ax, desc);
                    (v, i, format!("sort({an}, {d}, descending {desc})"))
                } else {
                    let k = 1 + self.rng.below(n);
                    let (v, i) = a.topk(k, ax, desc);
                    (v, i, format!("topk({an}, {k}, {d}, largest {desc})"))
                };
                if self.rng.chance(0.5) {
                    (v, format!("{what} values"))
                } else {
                    (i, format!("{what} indices"))
                }
            }
            11 if rank >= 2 => {
                let k = self.rng.range(-2, 2);
                if self.rng.chance(0.5) {
                    (a.tril(k), format!("tril({an}, {k})"))
                } else {
                    (a.triu(k), format!("triu({an}, {k})"))
                }
            }
            12 if rank > 0 => {
                let axes = random_axes(&mut self.rng, rank);
                match self.rng.below(3) {
                    0 => (a.any(axes.clone()), format!("any({an}, {axes:?})")),
                    1 => (a.all(axes.clone()), format!("all({an}, {axes:?})")),
                    _ => (
                        a.count_nonzero(axes.clone()),
                        format!("count_nonzero({an}, {axes:?})"),
                    ),
                }
            }
            _ => match self.rng.below(5) {
                0 => (a.floor(), format!("floor({an})")),
                1 => (a.ceil(), format!("ceil({an})")),
                2 => (a.round(), format!("round({an})")),
                3 => (a.trunc(), format!("trunc({an})")),
                _ => (a.sign(), format!("sign({an})")),
            },
        };
        self.add(t, what);
    }

    /// An index tensor of `shape` with entries in `0..n` (`I64` or
    /// `I32`), stored as given or read through a flip, with its name.
    fn index(&mut self, shape: &[usize], n: usize) -> (String, Tensor) {
        let dt = self.rng.pick(&[DType::I64, DType::I32]);
        let data: Vec<i64> = (0..numel(shape))
            .map(|_| self.rng.below(n) as i64)
            .collect();
        let t = Tensor::from_vec(data, shape.to_vec(), &self.dev).cast(dt);
        let flip = !shape.is_empty() && self.rng.chance(0.3);
        let t = if flip { t.flip(0) } else { t };
        let name = format!(
            "index {shape:?} {dt} below {n}{}",
            if flip { " flipped" } else { "" }
        );
        (name, t)
    }

    /// `cat` along axis `d` of `a` with one to three more pieces: `a`
    /// itself, a view of it (an empty one among them), new inputs, or `a`
    /// in another dtype (the result promotes).
    fn cat(&mut self, an: &str, a: &Tensor, d: usize) {
        let sa = a.shape().to_vec();
        let mut parts = vec![a.clone()];
        let mut names = vec![an.to_string()];
        for _ in 0..1 + self.rng.below(3) {
            let (name, t) = match self.rng.below(5) {
                0 => (an.to_string(), a.clone()),
                1 => (format!("flip({an})"), a.flip(d)),
                2 => (format!("{an} as i32"), a.cast(DType::I32)),
                // Empty along the axis (a view, kept out of the pool).
                3 => (
                    format!("narrow({an}, {d}, 0, 0)"),
                    a.narrow(d as isize, 0, 0),
                ),
                _ => {
                    let mut s = sa.clone();
                    s[d] = self.rng.pick(&[1, 2, 3]);
                    let t = self.input(&s);
                    (self.pool.last().unwrap().0.clone(), t)
                }
            };
            let total: usize = parts.iter().map(|p| p.shape()[d]).sum::<usize>() + t.shape()[d];
            let mut out = sa.clone();
            out[d] = total;
            if numel(&out) > self.max_numel {
                break;
            }
            parts.push(t);
            names.push(name);
        }
        let refs: Vec<&Tensor> = parts.iter().collect();
        let t = Tensor::cat(&refs, d as isize);
        self.add(t, format!("cat([{}], {d})", names.join(", ")));
    }

    /// `stack` of `a` with one or two tensors of its shape, along any
    /// axis of the result.
    fn stack(&mut self, an: &str, a: &Tensor) {
        let sa = a.shape().to_vec();
        let mut parts = vec![a.clone()];
        let k = 1 + self.rng.below(2);
        if numel(&sa) * (k + 1) > self.max_numel {
            self.add(a.ceil(), format!("ceil({an})"));
            return;
        }
        for _ in 0..k {
            let t = if self.rng.chance(0.5) || sa.is_empty() {
                self.input(&sa)
            } else {
                let axes = random_axes(&mut self.rng, sa.len());
                a.flip(axes)
            };
            parts.push(t);
        }
        let ax = self.rng.below(sa.len() + 1);
        let refs: Vec<&Tensor> = parts.iter().collect();
        self.add(
            Tensor::stack(&refs, ax as isize),
            format!("stack({an} and {k} more, {ax})"),
        );
    }

    fn reduction(&mut self, an: &str, a: &Tensor) {
        let rank = a.ndim();
        let axes = random_axes(&mut self.rng, rank);
        let keep = self.rng.chance(0.5);
        let mean = self.rng.chance(0.2);
        let (name, op) = if mean {
            ("mean", ReduceOp::Sum)
        } else {
            self.rng.pick(&REDUCE)
        };
        let r = if mean {
            if keep {
                a.mean_keepdim(axes.clone())
            } else {
                a.mean(axes.clone())
            }
        } else {
            a.reduce(op, axes.clone(), keep)
        };
        let what = format!("{name}({an}, {axes:?}, keepdim {keep})");
        if !self.rng.chance(0.6) {
            self.add(r, what);
            return;
        }
        // Broadcast back against the input, maybe reduce again over the
        // same axes (softmax-like chains).
        let kept: Vec<usize> = (0..rank)
            .map(|d| if axes.contains(&d) { 1 } else { a.shape()[d] })
            .collect();
        let rk = r.reshape(kept);
        let (bname, f) = self.rng.pick(&BINARY);
        let y = f(a, &rk);
        let y = if self.rng.chance(0.5) { y.exp() } else { y };
        if self.rng.chance(0.5) {
            let (name2, op2) = self.rng.pick(&REDUCE);
            let r2 = y.reduce(op2, axes.clone(), true);
            let z = if self.rng.chance(0.5) { &y / &r2 } else { r2 };
            self.add(
                z,
                format!("{bname}({an}, {what}) (exp?) then {name2} over {axes:?} (div?)"),
            );
        } else {
            self.add(y, format!("{bname}({an}, {what}) (exp?)"));
        }
    }

    fn view(&mut self, an: &str, a: &Tensor) {
        let sa = a.shape().to_vec();
        let rank = sa.len();
        match self.rng.below(8) {
            0 => {
                let p = self.rng.permutation(rank);
                self.add(a.permute(p.clone()), format!("permute({an}, {p:?})"));
            }
            1 => {
                let mut args = Vec::new();
                for n in &sa {
                    let n = *n as isize;
                    let arg = match self.rng.below(5) {
                        0 => SliceArg::Index(self.rng.range(-n, n - 1)),
                        1 => s![..][0],
                        _ => {
                            let step = self.rng.pick(&[1, 1, 2, 3, -1, -2]);
                            let start = self.rng.range(-n - 1, n + 1);
                            let end = self.rng.range(-n - 1, n + 1);
                            let count = slice_len(start, end, step, n);
                            if count == 0 {
                                s![..;step][0]
                            } else {
                                SliceArg::Range {
                                    start: Some(start),
                                    end: Some(end),
                                    step,
                                }
                            }
                        }
                    };
                    args.push(arg);
                }
                self.add(a.slice(args.clone()), format!("slice({an}, {args:?})"));
            }
            2 => {
                let axes = random_axes(&mut self.rng, rank);
                self.add(a.flip(axes.clone()), format!("flip({an}, {axes:?})"));
            }
            3 => {
                let pads: Vec<(usize, usize)> = (0..rank)
                    .map(|_| (self.rng.below(3), self.rng.below(3)))
                    .collect();
                let padded: usize = sa.iter().zip(&pads).map(|(n, (b, e))| n + b + e).product();
                if padded > self.max_numel {
                    self.add(a.flip(0), format!("flip({an}, 0)"));
                    return;
                }
                let value = self.rng.pick(&[0.0, 0.0, 1.5, -2.0, f64::INFINITY]);
                self.add(a.pad(&pads, value), format!("pad({an}, {pads:?}, {value})"));
            }
            4 | 5 => {
                let new = self.reshape_target(&sa);
                self.add(a.reshape(new.clone()), format!("reshape({an}, {new:?})"));
            }
            6 => {
                // Expand a new leading axis or the size-1 axes.
                let k = self.rng.pick(&[2, 3]);
                let mut to: Vec<usize> = sa.iter().map(|d| if *d == 1 { k } else { *d }).collect();
                if to == sa || self.rng.chance(0.4) {
                    to.insert(0, k);
                }
                if numel(&to) > self.max_numel {
                    self.add(a.t_any(), format!("transpose last two of {an}"));
                    return;
                }
                self.add(a.expand(to.clone()), format!("expand({an}, {to:?})"));
            }
            _ => {
                let d = self.rng.below(rank);
                let n = sa[d];
                let start = self.rng.below(n);
                let len = 1 + self.rng.below(n - start);
                self.add(
                    a.narrow(d as isize, start, len),
                    format!("narrow({an}, {d}, {start}, {len})"),
                );
            }
        }
    }

    /// A shape with the same element count: the prime factors regrouped,
    /// size-1 axes sprinkled in.
    fn reshape_target(&mut self, s: &[usize]) -> Vec<usize> {
        let mut n = numel(s);
        let mut factors = Vec::new();
        let mut p = 2;
        while n > 1 {
            while n.is_multiple_of(p) {
                factors.push(p);
                n /= p;
            }
            p += 1;
        }
        let perm = self.rng.permutation(factors.len());
        let mut out: Vec<usize> = Vec::new();
        for i in perm {
            if out.is_empty() || self.rng.chance(0.5) {
                out.push(factors[i]);
            } else {
                *out.last_mut().unwrap() *= factors[i];
            }
        }
        while out.len() < 4 && self.rng.chance(0.3) {
            let at = self.rng.below(out.len() + 1);
            out.insert(at, 1);
        }
        out
    }

    fn composite(&mut self, an: &str, a: &Tensor) {
        let rank = a.ndim();
        let ax = self.rng.below(rank);
        let axes = random_axes(&mut self.rng, rank);
        let (t, what) = match self.rng.below(8) {
            0 => (a.softmax(ax as isize), "softmax"),
            1 => (a.log_softmax(ax as isize), "log_softmax"),
            2 => (a.logsumexp(axes.clone(), self.rng.chance(0.5)), "logsumexp"),
            3 => (a.layer_norm(axes.clone(), None, None, 1e-5), "layer_norm"),
            4 => (a.rms_norm(axes.clone(), None, 1e-5), "rms_norm"),
            5 => (a.var(axes.clone(), 1, self.rng.chance(0.5)), "var"),
            6 => (a.argmax(ax as isize).cast(DType::F32), "argmax"),
            _ => {
                let m = a.max_keepdim(axes.clone());
                let e = (a - &m).exp();
                (&e / e.sum_keepdim(axes.clone()), "softmax by hand")
            }
        };
        self.add(t, format!("{what}({an}, axis {ax} / axes {axes:?})"));
    }

    fn matmul(&mut self, an: &str, a: &Tensor) {
        let sa = a.shape().to_vec();
        let k = sa[sa.len() - 1];
        let n = self.rng.pick(&[1, 2, 3, 5]);
        let out: usize = numel(&sa) / k * n;
        if out > self.max_numel || k > 32 {
            self.add(a.sum(-1), format!("sum({an}, -1)"));
            return;
        }
        let b_shape = if self.rng.chance(0.5) {
            vec![n, k]
        } else {
            vec![k, n]
        };
        let b = self.input(&b_shape);
        let bn = self.pool.last().unwrap().0.clone();
        let b = if b_shape[0] == n { b.t() } else { b };
        let mut y = a.matmul(&b);
        if self.rng.chance(0.5) {
            let bias = self.input(&[n]);
            y = (y + bias).relu();
        }
        self.add(y, format!("matmul({an}, {bn}) (+ bias, relu?)"));
    }
}

/// Length of Python's `range(n)[start:end:step]`.
fn slice_len(start: isize, end: isize, step: isize, n: isize) -> usize {
    let norm = |v: isize| if v < 0 { v + n } else { v };
    let (s, e) = if step > 0 {
        (norm(start).clamp(0, n), norm(end).clamp(0, n))
    } else {
        (norm(start).clamp(-1, n - 1), norm(end).clamp(-1, n - 1))
    };
    let c = if step > 0 {
        (e - s + step - 1) / step
    } else {
        (s - e - step - 1) / -step
    };
    c.max(0) as usize
}

trait TransposeAny {
    fn t_any(&self) -> Tensor;
}

impl TransposeAny for Tensor {
    /// Swaps the last two axes (a no-op below rank 2).
    fn t_any(&self) -> Tensor {
        if self.ndim() < 2 {
            self.clone()
        } else {
            self.transpose(-1, -2)
        }
    }
}

/// A built graph: the tensors to realize together and the op log.
struct Graph {
    outputs: Vec<Tensor>,
    log: Vec<String>,
    ops: usize,
}

/// Builds the graph of `seed`: 1 to 3 inputs, then 8 to 24 ops; the
/// intermediates it realizes on the way use `fusion`.
fn build(seed: u64, fusion: Fusion) -> Graph {
    let mut g = Gen::new(seed, fusion);
    let n_inputs = 1 + g.rng.below(3);
    for i in 0..n_inputs {
        let s = if i == 0 && g.max_numel == MAX_NUMEL_BIG {
            // Big graphs start from a tensor whose rows exceed a tile.
            let shapes: [&[usize]; 4] = [&[64, 130], &[130, 64], &[2, 33, 130], &[8320]];
            g.rng.pick(&shapes).to_vec()
        } else {
            g.shape()
        };
        g.input(&s);
    }
    let n_ops = 8 + g.rng.below(17);
    while g.ops < n_ops {
        g.step();
    }
    let mut outputs = vec![g.pool.last().unwrap().1.clone()];
    while outputs.len() < 3 && g.rng.chance(0.3) {
        let i = g.rng.below(g.pool.len());
        outputs.push(g.pool[i].1.clone());
    }
    Graph {
        outputs,
        log: g.log,
        ops: g.ops,
    }
}

// ---------------------------------------------------------------------------
// Running and comparing

/// NaN equals NaN, infinities equal with their sign, finite values within
/// `1e-4` relative (fused reductions may group differently).
fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-6
}

fn realize(seed: u64, fusion: Fusion) -> Result<Vec<Vec<f64>>, String> {
    let g = build(seed, fusion);
    let refs: Vec<&Tensor> = g.outputs.iter().collect();
    realize_all(&refs, fusion).map_err(|e| format!("realize_all ({fusion:?}): {e}"))?;
    g.outputs
        .iter()
        .map(|t| {
            t.to_vec::<f64>()
                .map_err(|e| format!("to_vec ({fusion:?}): {e}"))
        })
        .collect()
}

/// What one graph did.
#[derive(Default)]
struct Stats {
    ops: usize,
    kernels_on: usize,
    kernels_off: usize,
    /// Fused kernels whose rows are longer than the CPU tile (4096).
    long_rows: usize,
    inexact: usize,
    elements: usize,
    nan: usize,
    inf: usize,
}

fn schedules(g: &Graph) -> (Schedule, Schedule) {
    let refs: Vec<&Tensor> = g.outputs.iter().collect();
    let nodes: Vec<_> = refs.iter().map(|t| t.node().clone()).collect();
    (
        Schedule::new(&nodes, Fusion::On),
        Schedule::new(&nodes, Fusion::Off),
    )
}

/// Builds, schedules and realizes the graph of `seed` fused and unfused;
/// `Err` describes the first difference (or panic).
fn run_graph(seed: u64) -> Result<Stats, String> {
    let res = catch_unwind(AssertUnwindSafe(|| -> Result<Stats, String> {
        let g = build(seed, Fusion::On);
        let (on, off) = schedules(&g);
        let mut st = Stats {
            ops: g.ops,
            kernels_on: on.items.len(),
            kernels_off: off.items.len(),
            long_rows: on
                .items
                .iter()
                .filter(|i| i.kernel.row_len() > 4096)
                .count(),
            ..Stats::default()
        };
        let fused = realize(seed, Fusion::On)?;
        let unfused = realize(seed, Fusion::Off)?;
        for (k, (f, u)) in fused.iter().zip(&unfused).enumerate() {
            if f.len() != u.len() {
                return Err(format!("output {k}: {} vs {} elements", f.len(), u.len()));
            }
            for (i, (a, b)) in f.iter().zip(u).enumerate() {
                if !close(*a, *b) {
                    return Err(format!("output {k} element {i}: fused {a}, unfused {b}"));
                }
                st.inexact +=
                    usize::from(a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()));
                st.elements += 1;
                st.nan += usize::from(a.is_nan());
                st.inf += usize::from(a.is_infinite());
            }
        }
        Ok(st)
    }));
    match res {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// The log and both schedules of `seed`, for a failure report.
fn describe(seed: u64) -> String {
    match catch_unwind(|| {
        let g = build(seed, Fusion::On);
        let (on, off) = schedules(&g);
        format!(
            "graph {seed} ({} ops, outputs {:?}):\n  {}\nfused: {on}unfused: {off}",
            g.ops,
            g.outputs
                .iter()
                .map(|t| t.shape().to_vec())
                .collect::<Vec<_>>(),
            g.log.join("\n  ")
        )
    }) {
        Ok(s) => s,
        Err(_) => format!("graph {seed}: building or scheduling panics"),
    }
}

/// Runs `count` graphs from `first`; panics with the failing seeds.
fn fuzz(first: u64, count: u64) {
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut total = Stats::default();
    for seed in first..first + count {
        match run_graph(seed) {
            Ok(s) => {
                total.ops += s.ops;
                total.kernels_on += s.kernels_on;
                total.kernels_off += s.kernels_off;
                total.long_rows += s.long_rows;
                total.inexact += s.inexact;
                total.elements += s.elements;
                total.nan += s.nan;
                total.inf += s.inf;
            }
            Err(e) => failures.push((seed, e)),
        }
    }
    eprintln!(
        "graph_fuzz: {count} graphs, {} ops, {} fused / {} unfused kernels \
         ({} with rows over 4096), \
         {} output elements ({} NaN, {} inf), {} inexact, {} failed, {:.1} s",
        total.ops,
        total.kernels_on,
        total.kernels_off,
        total.long_rows,
        total.elements,
        total.nan,
        total.inf,
        total.inexact,
        failures.len(),
        t0.elapsed().as_secs_f64()
    );
    for (seed, e) in failures.iter().take(10) {
        eprintln!("graph_fuzz: seed {seed}: {e}");
    }
    if let Some((seed, e)) = failures.first() {
        let seeds: Vec<u64> = failures.iter().map(|f| f.0).take(20).collect();
        panic!(
            "{} of {count} graphs differ fused vs unfused (seeds {seeds:?}...)\n\
             first: seed {seed}: {e}\n{}\n\
             rerun: SMELT_FUZZ_SEED={seed} cargo test --test graph_fuzz one_graph -- --ignored --nocapture",
            failures.len(),
            describe(*seed)
        );
    }
}

#[test]
fn fused_equals_unfused_on_1000_random_graphs() {
    fuzz(BASE_SEED, 1000);
}

/// The first 300 of those graphs through the CPU interpreter
/// (`SMELT_CPU=interp`, in a child process), so both CPU engines pass the
/// fuzzer; the test above runs the executor, the CPU's default.
#[test]
fn fused_equals_unfused_on_300_graphs_through_the_interpreter() {
    if common::on_the_interpreter("fused_equals_unfused_on_300_graphs_through_the_interpreter") {
        fuzz(BASE_SEED, 300);
    }
}

#[test]
#[ignore = "long: 10,000 graphs"]
fn fused_equals_unfused_on_10000_random_graphs() {
    let n = std::env::var("SMELT_FUZZ_GRAPHS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    fuzz(BASE_SEED + 1_000_000, n);
}

/// One graph, with its log and schedules: `SMELT_FUZZ_SEED=<seed>`.
#[test]
#[ignore = "reproduces one seed"]
fn one_graph() {
    let seed = std::env::var("SMELT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BASE_SEED);
    println!("{}", describe(seed));
    match run_graph(seed) {
        Ok(s) => println!(
            "ok: {} fused / {} unfused kernels, {} inexact",
            s.kernels_on, s.kernels_off, s.inexact
        ),
        Err(e) => panic!("seed {seed}: {e}"),
    }
}

/// The generator itself: deterministic, at least 8 ops, every kind of op.
#[test]
fn generator_is_deterministic_and_varied() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in BASE_SEED..BASE_SEED + 200 {
        let (a, b) = (build(seed, Fusion::On), build(seed, Fusion::Off));
        assert_eq!(a.log, b.log, "seed {seed}");
        assert!(a.ops >= 8, "seed {seed}: {} ops", a.ops);
        for l in &a.log {
            let op = l.split(" = ").nth(1).unwrap_or(l);
            let name: String = op
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            seen.insert(name);
        }
    }
    for want in [
        "input",
        "realize",
        "exp",
        "log",
        "sqrt",
        "add",
        "div",
        "sum",
        "max",
        "min",
        "mean",
        "permute",
        "slice",
        "flip",
        "pad",
        "reshape",
        "expand",
        "narrow",
        "softmax",
        "matmul",
        "cast",
        "cat",
        "stack",
        "split",
        "chunk",
        "gather",
        "index_select",
        "embedding",
        "masked_fill",
        "clamp",
        "where",
        "floor",
        "round",
        "cumsum",
        "cummax",
        "sort",
        "topk",
        "tril",
        "triu",
        "any",
        "all",
    ] {
        assert!(seen.contains(want), "no {want} in 200 graphs: {seen:?}");
    }
}
