//! Seeded fuzzer of view chains: random shapes (size-1 and size-0 axes
//! included), 6 to 10 random movement ops each (reshape of non-contiguous
//! views, permute, transpose, slice with steps of either sign, integer
//! indices and new axes, flip, expand, squeeze/unsqueeze, narrow, flatten,
//! pad), every element checked against the host reference under both
//! fusion modes.
//!
//! A failure prints the seed and the chain; replay one with
//! `FUZZ_SEED=n cargo test --test view_fuzz <the test that failed>`.

mod common;

use common::*;
use smelt::{DType, SliceArg, Tensor};

/// Keeps chains small and fast.
const MAX_NUMEL: usize = 2048;
const MAX_RANK: usize = 7;

#[derive(Clone, Debug)]
enum Mv {
    Reshape(Vec<isize>),
    Permute(Vec<usize>),
    Transpose(isize, isize),
    Slice(Vec<SliceArg>),
    Flip(Vec<usize>),
    Expand(Vec<usize>),
    Squeeze(Vec<usize>),
    Unsqueeze(isize),
    Narrow(isize, usize, usize),
    Flatten,
    FlattenDims(isize, isize),
    Pad(Vec<(usize, usize)>, f64),
}

fn apply(t: &Tensor, m: &Mv) -> Tensor {
    match m {
        Mv::Reshape(s) => t.reshape(s.clone()),
        Mv::Permute(p) => t.permute(p.clone()),
        Mv::Transpose(a, b) => t.transpose(*a, *b),
        Mv::Slice(a) => t.slice(a.clone()),
        Mv::Flip(a) => t.flip(a.clone()),
        Mv::Expand(s) => t.expand(s.clone()),
        Mv::Squeeze(a) => t.squeeze(a.clone()),
        Mv::Unsqueeze(a) => t.unsqueeze(*a),
        Mv::Narrow(a, s, l) => t.narrow(*a, *s, *l),
        Mv::Flatten => t.flatten(),
        Mv::FlattenDims(a, b) => t.flatten_dims(*a, *b),
        Mv::Pad(p, v) => t.pad(p, *v),
    }
}

fn apply_host(h: &NdArray, m: &Mv) -> NdArray {
    let r = h.ndim();
    match m {
        Mv::Reshape(s) => {
            let known: usize = s.iter().filter(|d| **d >= 0).map(|d| *d as usize).product();
            let shape: Vec<usize> = s
                .iter()
                .map(|d| {
                    if *d < 0 {
                        h.numel() / known
                    } else {
                        *d as usize
                    }
                })
                .collect();
            h.reshape(&shape)
        }
        Mv::Permute(p) => h.permute(p),
        Mv::Transpose(a, b) => {
            let mut p: Vec<usize> = (0..r).collect();
            p.swap(ax(*a, r), ax(*b, r));
            h.permute(&p)
        }
        Mv::Slice(a) => h.slice(a),
        Mv::Flip(a) => h.flip(a),
        Mv::Expand(s) => h.broadcast_to(s),
        Mv::Squeeze(a) => {
            let shape: Vec<usize> = (0..r)
                .filter(|d| !a.contains(d))
                .map(|d| h.shape[d])
                .collect();
            h.reshape(&shape)
        }
        Mv::Unsqueeze(a) => {
            let mut shape = h.shape.clone();
            shape.insert(ax(*a, r + 1), 1);
            h.reshape(&shape)
        }
        Mv::Narrow(a, s, l) => h.narrow(ax(*a, r), *s, *l),
        Mv::Flatten => h.reshape(&[h.numel()]),
        Mv::FlattenDims(a, b) => {
            let (a, b) = (ax(*a, r), ax(*b, r));
            let mut shape = h.shape[..a].to_vec();
            shape.push(h.shape[a..=b].iter().product());
            shape.extend_from_slice(&h.shape[b + 1..]);
            h.reshape(&shape)
        }
        Mv::Pad(p, v) => h.pad(p, *v),
    }
}

/// A signed version of axis `a` of a rank-`r` tensor, picked at random.
fn signed_axis(rng: &mut Rng, a: usize, r: usize) -> isize {
    if rng.chance(0.5) {
        a as isize
    } else {
        a as isize - r as isize
    }
}

/// A random shape with `n` elements.
fn random_shape_with(rng: &mut Rng, n: usize) -> Vec<usize> {
    if n == 0 {
        let r = rng.range(1, 4) as usize;
        let mut s: Vec<usize> = (0..r).map(|_| rng.range(0, 4) as usize).collect();
        s[rng.below(r)] = 0;
        return s;
    }
    let r = if n == 1 {
        rng.below(4)
    } else {
        rng.range(1, 5) as usize
    };
    let mut rest = n;
    let mut s = Vec::new();
    for _ in 1..r {
        let divs: Vec<usize> = (1..=rest).filter(|d| rest / d * d == rest).collect();
        let d = rng.pick(&divs);
        s.push(d);
        rest /= d;
    }
    if r > 0 {
        s.push(rest);
    }
    // Sprinkle size-1 axes.
    if rng.chance(0.3) && s.len() < MAX_RANK {
        let at = rng.below(s.len() + 1);
        s.insert(at, 1);
    }
    s
}

fn random_slice_arg(rng: &mut Rng, n: usize) -> SliceArg {
    let n = n as isize;
    if n > 0 && rng.chance(0.12) {
        return SliceArg::Index(rng.range(-n, n - 1));
    }
    if rng.chance(0.2) {
        return SliceArg::Range {
            start: None,
            end: None,
            step: 1,
        };
    }
    let bound = |rng: &mut Rng| {
        if rng.chance(0.25) {
            None
        } else {
            Some(rng.range(-n - 2, n + 2))
        }
    };
    let step = rng.pick(&[1, 1, 2, 3, -1, -1, -2, -3]);
    SliceArg::Range {
        start: bound(rng),
        end: bound(rng),
        step,
    }
}

/// A random movement op valid for `h`.
fn random_move(rng: &mut Rng, h: &NdArray) -> Mv {
    let s = &h.shape;
    let r = s.len();
    let n = h.numel();
    loop {
        match rng.below(12) {
            0 | 1 => {
                let new = random_shape_with(rng, n);
                let mut d: Vec<isize> = new.iter().map(|x| *x as isize).collect();
                if n > 0 && !d.is_empty() && rng.chance(0.3) {
                    let i = rng.below(d.len());
                    d[i] = -1;
                }
                return Mv::Reshape(d);
            }
            2 if r > 0 => return Mv::Permute(rng.permutation(r)),
            3 if r > 0 => {
                let (a, b) = (rng.below(r), rng.below(r));
                return Mv::Transpose(signed_axis(rng, a, r), signed_axis(rng, b, r));
            }
            4 | 5 => {
                let k = rng.below(r + 1);
                let mut args: Vec<SliceArg> = (0..k).map(|d| random_slice_arg(rng, s[d])).collect();
                let dropped = args
                    .iter()
                    .filter(|a| matches!(a, SliceArg::Index(_)))
                    .count();
                if r - dropped < MAX_RANK && rng.chance(0.15) {
                    let at = rng.below(args.len() + 1);
                    args.insert(at, SliceArg::NewAxis);
                }
                return Mv::Slice(args);
            }
            6 if r > 0 => {
                let axes: Vec<usize> = (0..r).filter(|_| rng.chance(0.5)).collect();
                return Mv::Flip(axes);
            }
            7 => {
                let mut new: Vec<usize> = s
                    .iter()
                    .map(|d| {
                        if *d == 1 && rng.chance(0.6) {
                            rng.range(0, 4) as usize
                        } else {
                            *d
                        }
                    })
                    .collect();
                if r < MAX_RANK && rng.chance(0.4) {
                    new.insert(0, rng.range(1, 3) as usize);
                }
                if new.iter().product::<usize>() <= MAX_NUMEL {
                    return Mv::Expand(new);
                }
            }
            8 if r > 0 => {
                let ones: Vec<usize> = (0..r).filter(|d| s[*d] == 1).collect();
                if !ones.is_empty() {
                    let pick: Vec<usize> = ones.into_iter().filter(|_| rng.chance(0.7)).collect();
                    return Mv::Squeeze(pick);
                }
                if r < MAX_RANK {
                    let a = rng.below(r + 1);
                    return Mv::Unsqueeze(signed_axis(rng, a, r + 1));
                }
            }
            9 if r < MAX_RANK => {
                let a = rng.below(r + 1);
                return Mv::Unsqueeze(signed_axis(rng, a, r + 1));
            }
            10 if r > 0 => {
                let a = rng.below(r);
                let start = rng.below(s[a] + 1);
                let len = rng.below(s[a] - start + 1);
                return Mv::Narrow(signed_axis(rng, a, r), start, len);
            }
            11 => {
                if rng.chance(0.3) {
                    if r > 0 {
                        let a = rng.below(r);
                        let b = a + rng.below(r - a);
                        return Mv::FlattenDims(signed_axis(rng, a, r), signed_axis(rng, b, r));
                    }
                    return Mv::Flatten;
                }
                let pads: Vec<(usize, usize)> =
                    (0..r).map(|_| (rng.below(3), rng.below(3))).collect();
                let grown: usize = s.iter().zip(&pads).map(|(d, (a, b))| d + a + b).product();
                if grown <= MAX_NUMEL {
                    let v = if rng.chance(0.7) {
                        0.0
                    } else {
                        rng.range(-9, 9) as f64
                    };
                    return Mv::Pad(pads, v);
                }
            }
            _ => {}
        }
    }
}

/// One chain: a random base, `len` random moves, checked under both modes.
/// Without `empty`, no view along the chain has a zero-size axis.
fn run_chain(seed: u64, empty: bool) {
    let mut rng = Rng::new(seed);
    let base_shape = {
        let n = if empty && rng.chance(0.05) {
            0
        } else {
            rng.pick(&[1, 2, 6, 12, 24, 30, 36, 60, 64, 105, 120])
        };
        random_shape_with(&mut rng, n)
    };
    let dt = rng.pick(&[DType::F32, DType::F32, DType::I32, DType::F16]);
    let n: usize = base_shape.iter().product();
    // Distinct, exactly representable values (zero only from padding).
    let vals: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 + 1.0).collect();
    let (base, mut h) = make(&vals, &base_shape, dt);
    let len = rng.range(6, 10) as usize;
    let mut moves = Vec::with_capacity(len);
    while moves.len() < len {
        let m = random_move(&mut rng, &h);
        let next = apply_host(&h, &m);
        if empty || next.numel() > 0 {
            h = next;
            moves.push(m);
        }
    }
    let what = format!("seed {seed}: base {base_shape:?} {dt}, moves {moves:?}");
    check(
        &what,
        || moves.iter().fold(base.clone(), |t, m| apply(&t, m)),
        &h,
        EXACT,
    );
    // The view consumed by a compute op (views folded into its loads).
    let want = h.map(|v| v * 2.0 + 1.0);
    check(
        &format!("{what} then 2x + 1"),
        || moves.iter().fold(base.clone(), |t, m| apply(&t, m)) * 2 + 1,
        &want,
        EXACT,
    );
}

/// Runs chains `seeds`, collecting every failure and reporting them all at
/// the end.
fn fuzz(seeds: std::ops::Range<u64>, empty: bool) {
    if let Ok(s) = std::env::var("FUZZ_SEED") {
        run_chain(s.parse().expect("FUZZ_SEED is a number"), empty);
        return;
    }
    let failed: Vec<String> = seeds
        .filter_map(|seed| {
            std::panic::catch_unwind(|| run_chain(seed, empty))
                .err()
                .map(|e| {
                    e.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| format!("seed {seed}: ?"))
                })
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} chain(s) failed (replay one with FUZZ_SEED=<seed>):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

// 600 chains in CI (each distinct kernel is also assembled by ptxas there);
// the long test runs 40,000.
#[test]
fn view_chains() {
    fuzz(0..400, false);
}

#[test]
fn view_chains_with_zero_size_axes() {
    fuzz(10_000..10_200, true);
}

/// A quarter of those chains through the CPU interpreter (`SMELT_CPU=
/// interp`, in a child process); the tests above run the executor.
#[test]
fn view_chains_through_the_interpreter() {
    if common::on_the_interpreter("view_chains_through_the_interpreter") {
        fuzz(0..100, false);
        fuzz(10_000..10_050, true);
    }
}

#[test]
#[ignore = "long: 40,000 chains"]
fn view_chains_long() {
    fuzz(1_000_000..1_020_000, false);
    fuzz(2_000_000..2_020_000, true);
}
