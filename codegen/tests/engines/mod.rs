//! What the CPU engines' tests share: random inputs with special values,
//! the tolerance of float results, and the comparison of an engine with
//! the interpreter, its oracle.
#![allow(dead_code)] // not every test crate that shares this module uses all of it

use smelt_codegen::interp::{self, InterpError};
use smelt_codegen::rng::SplitMix64;
use smelt_codegen::{DType, Kernel, UnaryOp};

/// A value for an input of `dt`: mostly ordinary, sometimes special.
pub fn value(rng: &mut SplitMix64, dt: DType) -> f64 {
    // Not huge or tiny magnitudes: where a product overflows or
    // underflows depends on the order of its factors, which the engines
    // choose differently (as the GPU does).
    const SPECIAL: [f64; 7] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        88.5,
        -104.0,
    ];
    if dt.is_float() {
        if rng.below(16) == 0 {
            SPECIAL[rng.below(SPECIAL.len() as u64) as usize]
        } else {
            (rng.next_f64() - 0.5) * 20.0
        }
    } else if rng.below(8) == 0 {
        // Anything the dtype holds, extremes included.
        dt.int_min() as f64 + rng.next_f64() * (dt.int_max() as f64 - dt.int_min() as f64)
    } else {
        rng.below(12) as f64 - 3.0
    }
}

/// Random contents of the inputs and scalars of `k`.
pub fn inputs(k: &Kernel, seed: u64) -> (Vec<Vec<u8>>, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let bufs = k
        .inputs
        .iter()
        .map(|a| {
            let mut b = vec![0u8; a.len * a.dtype.size()];
            for j in 0..a.len {
                let v = value(&mut rng, a.dtype);
                if a.dtype.is_float() {
                    a.dtype.write(&mut b, j, v);
                } else {
                    a.dtype.write_int(&mut b, j, a.dtype.saturate(v));
                }
            }
            b
        })
        .collect();
    let scalars = k.scalars.iter().map(|dt| value(&mut rng, *dt)).collect();
    (bufs, scalars)
}

/// Whether two floats of `dt` agree within rounding. The absolute part
/// covers sums that cancel to near zero: reordered, their error scales
/// with the partial sums (values here are up to 10 in magnitude), not
/// with the result.
pub fn close(dt: DType, a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    let (rel, abs) = match dt {
        DType::F64 => (1e-12, 1e-9),
        DType::F32 => (1e-5, 1e-3),
        _ => (1e-2, 1e-2),
    };
    a.is_finite() && b.is_finite() && (a - b).abs() <= rel * a.abs().max(b.abs()) + abs
}

/// Runs `run` (an engine, or [`interp::run`]) on `k` with the inputs of
/// `seed` ([`inputs`]) and zeroed outputs; its result and the outputs.
pub fn run_on_inputs<R>(
    k: &Kernel,
    seed: u64,
    run: impl FnOnce(&Kernel, &[&[u8]], &[f64], &mut [&mut [u8]]) -> R,
) -> (R, Vec<Vec<u8>>) {
    let (bufs, scalars) = inputs(k, seed);
    let ins: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let mut outs: Vec<Vec<u8>> = k
        .outputs
        .iter()
        .map(|a| vec![0u8; a.len * a.dtype.size()])
        .collect();
    let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(|b| b.as_mut_slice()).collect();
    let r = run(k, &ins, &scalars, &mut refs);
    (r, outs)
}

/// Whether the op-by-op tests run unary `op` on `dt`: floats take every
/// op but `BitNot`, integers the ops that keep them and `Not`.
pub fn unary_applies(op: UnaryOp, dt: DType) -> bool {
    if dt.is_float() {
        op != UnaryOp::BitNot
    } else {
        op.keeps_integers() || op == UnaryOp::Not
    }
}

/// An engine with [`interp::run`]'s arguments that may decline a kernel
/// (`exec::run`, `llvm::run`).
pub type Engine =
    fn(&Kernel, &[&[u8]], &[f64], &mut [&mut [u8]]) -> Option<Result<(), InterpError>>;

/// Runs `k` through `engine` and the interpreter on the same inputs and
/// asserts that they agree. Returns whether `engine` covered it.
pub fn compare(k: &Kernel, seed: u64, engine: Engine) -> bool {
    let (reference, want) = run_on_inputs(k, seed, interp::run);
    let (Some(result), got) = run_on_inputs(k, seed, engine) else {
        return false;
    };
    match (reference, result) {
        (Ok(()), Ok(())) => {}
        (Err(_), Err(_)) => return true,
        (r, e) => panic!("{}: interpreter {r:?}, engine {e:?}\n{k}", k.name),
    }
    for (o, a) in k.outputs.iter().enumerate() {
        let dt = a.dtype;
        for j in 0..a.len {
            if dt.is_float() {
                let (w, g) = (dt.read(&want[o], j), dt.read(&got[o], j));
                assert!(
                    close(dt, w, g),
                    "{}: out{o}[{j}] = {g}, interpreter {w}\n{k}",
                    k.name
                );
            } else {
                let (w, g) = (dt.read_int(&want[o], j), dt.read_int(&got[o], j));
                assert_eq!(g, w, "{}: out{o}[{j}]\n{k}", k.name);
            }
        }
    }
    true
}

/// Inputs of at most this many bytes (the representative kernels include
/// multi-GiB ones, for index arithmetic only).
pub const MAX_BYTES: usize = 64 << 20;

pub fn small(k: &Kernel) -> bool {
    k.inputs
        .iter()
        .chain(&k.outputs)
        .all(|a| a.len * a.dtype.size() <= MAX_BYTES)
}

/// Sizes around the edges: empty, one, primes around the interpreter's
/// tile (4096 points) and the executor's (16384), above the parallel
/// threshold (2^15 points) and over several tiles.
pub const SIZES: [i64; 8] = [0, 1, 7, 4099, 16381, 16411, 32771, 70001];

/// Runs `k` through engines `a` and `b` on the same inputs and asserts
/// the same outputs bit for bit (a NaN matching any NaN) or errors in
/// both. Returns whether `a` covered the kernel; `b` must cover what `a`
/// does.
pub fn bit_equal(k: &Kernel, seed: u64, a: Engine, b: Engine) -> bool {
    let (Some(ra), x) = run_on_inputs(k, seed, a) else {
        return false;
    };
    let (rb, y) = run_on_inputs(k, seed, b);
    let rb = rb.expect("the second engine covers it");
    match (ra, rb) {
        (Ok(()), Ok(())) => {}
        (Err(_), Err(_)) => return true,
        (ra, rb) => panic!("{}: {ra:?} but {rb:?}\n{k}", k.name),
    }
    for (o, arg) in k.outputs.iter().enumerate() {
        let dt = arg.dtype;
        for j in 0..arg.len {
            let (u, v) = (dt.read(&x[o], j), dt.read(&y[o], j));
            let s = dt.size();
            let same = x[o][s * j..s * j + s] == y[o][s * j..s * j + s]
                || (dt.is_float() && u.is_nan() && v.is_nan());
            assert!(same, "{}: out{o}[{j}] = {u} but {v}\n{k}", k.name);
        }
    }
    true
}
