//! The LLVM JIT (`smelt_codegen::llvm`, feature `llvm`) against the
//! executor, bit for bit (it computes the executor's values: same ops,
//! same roundings, same fold order), and against the interpreter, the
//! oracle, within the executor's tolerances (`exp` within 2 ulp, sums in
//! another order). Inputs hold NaN, infinities, signed zeros and extremes;
//! kernels cover every dtype, op and cast, views (flips, transposes,
//! broadcasts, padding, div/mod), reductions and multi-reductions at sizes
//! 0, 1 and primes across the tile and parallel thresholds, and the
//! declines, each named.
#![cfg(feature = "llvm-jit")]

#[path = "engines/mod.rs"]
mod engines;
#[path = "ptx_cases/mod.rs"]
mod ptx_cases;

use engines::{inputs, small};
use ptx_cases::{contiguous, lin, Kb};
use smelt_codegen::{
    exec, llvm, BinaryOp, Cond, DType, Expr, Inst, Kernel, KernelKind, ReduceOp, UnaryOp, Val,
};

/// Runs `k` through the JIT, asserting it agrees with the executor bit
/// for bit and with the interpreter within rounding. Returns whether the
/// JIT covered it.
fn check(k: &Kernel, seed: u64) -> bool {
    if !engines::bit_equal(k, seed, llvm::run, exec::run) {
        return false;
    }
    assert!(engines::compare(k, seed, llvm::run));
    true
}

/// `check`, for a kernel the JIT must cover; a kernel with FP8 values
/// must instead be declined with its reason (no shim converts FP8 yet;
/// the executor runs it, `codegen/tests/exec.rs` checks that).
fn covered(k: &Kernel, seed: u64) {
    if has_fp8(k) {
        assert_eq!(llvm::decline(k).as_deref(), Some(FP8), "{k}");
        return;
    }
    assert!(check(k, seed), "declined: {:?}\n{k}", llvm::decline(k));
}

const FP8: &str = "FP8 values run on the executor";

fn has_fp8(k: &Kernel) -> bool {
    k.insts.iter().any(|n| n.dtype.is_fp8())
        || k.inputs.iter().chain(&k.outputs).any(|a| a.dtype.is_fp8())
}

#[test]
fn every_representative_kernel_matches_or_is_declined_by_name() {
    let (mut n_covered, mut declined) = (0, Vec::new());
    for (i, k) in ptx_cases::all().iter().filter(|k| small(k)).enumerate() {
        if check(k, i as u64) {
            n_covered += 1;
        } else {
            declined.push((k.name.clone(), llvm::decline(k)));
        }
    }
    // Scans are the executor's (or, along a strided axis, the
    // interpreter's) and FP8 kernels the executor's; nothing else is
    // declined.
    for (name, why) in &declined {
        assert!(
            name.contains("scan") || name.contains("cum") || why.as_deref() == Some(FP8),
            "{name} declined: {why:?}"
        );
        assert!(why.is_some());
    }
    assert!(n_covered > 450, "covered {n_covered}");
}

/// Sizes for the op-by-op test: each size is a new kernel to compile.
const OP_SIZES: [i64; 4] = [0, 1, 7, 70001];

#[test]
fn every_dtype_op_and_cast() {
    for (s, n) in OP_SIZES.into_iter().enumerate() {
        let seed = 1000 * s as u64;
        for dt in DType::ALL {
            for op in UnaryOp::ALL {
                if engines::unary_applies(op, dt) {
                    covered(&ptx_cases::unary(op, dt, n), seed);
                }
            }
            for op in BinaryOp::ALL {
                let ok = op.operand_dtype(dt, dt) == dt && (!op.is_bitwise() || !dt.is_float());
                if ok {
                    covered(&ptx_cases::binary(op, dt, n), seed + 1);
                }
            }
            for to in DType::ALL {
                covered(&ptx_cases::cast(dt, to, n), seed + 2);
            }
        }
    }
}

#[test]
fn views_reductions_and_multi_reductions_at_edge_sizes() {
    for (s, n) in [0i64, 1, 7, 4099, 16411, 70001].into_iter().enumerate() {
        let seed = 7000 + s as u64;
        for rows in [0, 1, 3, 4099] {
            let n = n.min(300_000 / rows.max(1));
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
                for dt in [DType::F32, DType::F64, DType::I64, DType::I32, DType::BF16] {
                    let k = ptx_cases::reduce_last(op, dt, rows, n);
                    // A half accumulator rounded at every step makes the
                    // fold order visible far beyond a few ulp: against
                    // the executor only (same order).
                    if dt == DType::BF16 && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                        assert!(engines::bit_equal(&k, seed, llvm::run, exec::run));
                    } else {
                        covered(&k, seed);
                    }
                }
            }
            covered(&ptx_cases::softmax(rows, n, DType::F32), seed);
            covered(&ptx_cases::softmax(rows, n, DType::F16), seed);
            covered(&ptx_cases::layernorm(rows, n, DType::BF16), seed);
            covered(&ptx_cases::layernorm(rows, n, DType::F32), seed);
            covered(&ptx_cases::logsumexp_mixed(rows, n), seed);
        }
        covered(&ptx_cases::reduce_first(n, 5), seed);
        covered(&ptx_cases::sum_all(n * 7), seed);
        covered(&ptx_cases::pad(n), seed);
        covered(&ptx_cases::div_mod(n), seed);
        covered(&ptx_cases::flip_transpose(n.min(300), 37), seed);
        covered(&ptx_cases::broadcast_add(n.min(300), 65, DType::F16), seed);
        covered(&ptx_cases::softmax_axis0(n.min(3000), 13), seed);
        covered(&ptx_cases::scalars(DType::F32, n), seed);
        covered(&ptx_cases::scalars(DType::I8, n), seed);
    }
}

/// Row lengths of the kept-values tests: one, odd lengths, and one past
/// a power of two; all within one of the executor's tiles (16384 points),
/// the case in which later passes read what earlier ones kept.
const ROW_LENS: [i64; 5] = [1, 7, 127, 1000, 4097];

/// `x` read through a transposed, flipped view of a `[len, rows]` buffer
/// of `dt` (`x[r, j] = buf[(len - 1 - j) * rows + r]`), zero in the last
/// column when `padded`.
fn view_load(kb: &mut Kb, rows: i64, len: i64, dt: DType, padded: bool) -> Val {
    let r = [rows, len];
    let idx = lin(&[(0, 1), (1, -rows)], (len - 1) * rows);
    let valid = if padded {
        Cond::always().and_range(Expr::var(1), 0, len - 1, &r)
    } else {
        Cond::always()
    };
    kb.load_if(dt, (len * rows) as usize, idx, valid)
}

/// Layer norm of `exp(x / 8)`, plus `x`, with `x` a padded view
/// ([`view_load`]) of `dt`, computed in `F64` for `F64` and `F32`
/// otherwise: the view, the exponential and the half conversions are
/// what a later pass reads from buffers.
fn view_norm(rows: i64, len: i64, dt: DType) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_view_norm", KernelKind::MultiReduce, &r, 1);
    let x = view_load(&mut kb, rows, len, dt, true);
    let cd = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let xf = if dt == cd { x } else { kb.cast(x, cd) };
    let eighth = kb.c(0.125, cd);
    let xs = kb.bin(BinaryOp::Mul, xf, eighth);
    let e = kb.un(UnaryOp::Exp, xs);
    let s = kb.reduce(ReduceOp::Sum, e);
    let n = kb.c(len as f64, cd);
    let mean = kb.bin(BinaryOp::Div, s, n);
    let c = kb.bin(BinaryOp::Sub, e, mean);
    let sq = kb.un(UnaryOp::Square, c);
    let ss = kb.reduce(ReduceOp::Sum, sq);
    let var = kb.bin(BinaryOp::Div, ss, n);
    let eps = kb.c(1e-5, cd);
    let ve = kb.bin(BinaryOp::Add, var, eps);
    let rs = kb.un(UnaryOp::Rsqrt, ve);
    let y = kb.bin(BinaryOp::Mul, c, rs);
    let y = kb.bin(BinaryOp::Add, y, xf);
    kb.store((rows * len) as usize, contiguous(&r), y, Some(dt));
    kb.done()
}

/// `x + 1` and softmax of `x` over the rows of `[rows, len]` `F32`, two
/// outputs: `exp(x - max)` is kept in the first store's output, which
/// the stores' pass overwrites with `x + 1` before the softmax's store
/// reads it, unless the pass reads its kept values first.
fn shift_and_softmax(rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_shift_softmax", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(DType::F32, (rows * len) as usize, contiguous(&r));
    let m = kb.reduce(ReduceOp::Max, x);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let s = kb.reduce(ReduceOp::Sum, e);
    let one = kb.c(1.0, DType::F32);
    let shifted = kb.bin(BinaryOp::Add, x, one);
    kb.store((rows * len) as usize, contiguous(&r), shifted, None);
    let y = kb.bin(BinaryOp::Div, e, s);
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// `exp(-100 q) * sum(q)` with `q = exp(x)` over the rows of `[rows,
/// len]` `F32`: the stores' pass reads the kept `q` (lodged in the
/// output) and computes an `exp` whose inputs leave the polynomial's
/// range, so it redoes runs, which must compute `q` again and not read
/// the output its first loop wrote.
fn exp_of_kept(rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_exp_of_kept", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(DType::F32, (rows * len) as usize, contiguous(&r));
    let q = kb.un(UnaryOp::Exp, x);
    let s = kb.reduce(ReduceOp::Sum, q);
    let c = kb.c(-100.0, DType::F32);
    let qc = kb.bin(BinaryOp::Mul, q, c);
    let e = kb.un(UnaryOp::Exp, qc);
    let y = kb.bin(BinaryOp::Mul, e, s);
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// `q * sum(q) + x` with `q = x % 7` (a Rust function per point) and `x`
/// an `I32` view ([`view_load`]): integer values kept between passes.
fn int_view(rows: i64, len: i64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_int_view", KernelKind::MultiReduce, &r, 1);
    let x = view_load(&mut kb, rows, len, DType::I32, false);
    let seven = kb.c(7.0, DType::I32);
    let q = kb.bin(BinaryOp::Remainder, x, seven);
    let s = kb.reduce(ReduceOp::Sum, q);
    let y = kb.bin(BinaryOp::Mul, q, s);
    let y = kb.bin(BinaryOp::Add, y, x);
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// Multi-pass kernels (softmax, layer norm, logsumexp, views, halves,
/// integers) at odd row lengths, on one row, a few, and enough for the
/// driver's threads, with NaN and infinities among the inputs: the JIT,
/// reading kept values in later passes, is the executor bit for bit.
#[test]
fn multi_pass_kernels_with_kept_values_match_the_executor() {
    for (s, len) in ROW_LENS.into_iter().enumerate() {
        for rows in [1, 3, (1 << 15) / len + 5] {
            let seed = 9000 + 100 * s as u64 + rows as u64;
            let kernels = [
                ptx_cases::softmax(rows, len, DType::F32),
                ptx_cases::softmax(rows, len, DType::BF16),
                ptx_cases::softmax_temperature(rows, len),
                ptx_cases::layernorm(rows, len, DType::F32),
                ptx_cases::layernorm(rows, len, DType::F16),
                ptx_cases::logsumexp_mixed(rows, len),
                ptx_cases::softmax_axis0(len, rows),
                shift_and_softmax(rows, len),
                exp_of_kept(rows, len),
                view_norm(rows, len, DType::F32),
                view_norm(rows, len, DType::BF16),
                view_norm(rows, len, DType::F64),
                int_view(rows, len),
            ];
            for k in &kernels {
                covered(k, seed);
            }
        }
    }
}

/// `x * xs / (sum_j (j + 1) * ys)` over the rows of `[rows, len]` of `dt`
/// (`F32` or `F64`), and `x * xs / sum(x)`: divisions by row values, which
/// the JIT computes through the divisor's reciprocal where `x` and the
/// divisor lie in its domain and redoes the run with divisions where they
/// do not (the kernel's first store holds `x * xs`, which its second
/// divides in place when the JIT keeps it there).
fn row_division(rows: i64, len: i64, dt: DType, xs: f64, ys: f64) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_row_division", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let j = kb.push(Inst::Index(lin(&[(1, 1)], 1)), dt);
    let c = kb.c(ys, dt);
    let jc = kb.bin(BinaryOp::Mul, j, c);
    let y = kb.reduce(ReduceOp::Sum, jc);
    let c = kb.c(xs, dt);
    let xc = kb.bin(BinaryOp::Mul, x, c);
    let q = kb.bin(BinaryOp::Div, xc, y);
    kb.store((rows * len) as usize, contiguous(&r), q, None);
    let s = kb.reduce(ReduceOp::Sum, x);
    let q = kb.bin(BinaryOp::Div, xc, s);
    kb.store((rows * len) as usize, contiguous(&r), q, None);
    kb.done()
}

/// Divisions by row values are the executor's divisions bit for bit,
/// with the numerator and the divisor inside the reciprocal's domain,
/// at its ends and past them (tiny and huge divisors, numerators whose
/// quotients are subnormal or overflow), signed zeros, NaN and
/// infinities among the inputs (a row sum of them leaves the domain).
#[test]
fn row_divisions() {
    // The domain's ends (divisor, numerator), and exponents where the
    // reciprocal and the quotients leave the normal numbers.
    let cases = [
        (DType::F32, (24, 100), (127, -130, -140)),
        (DType::F64, (500, 400), (1023, -1030, -1060)),
    ];
    for (dt, (ye, xe), (big, small, sub)) in cases {
        let p2 = |e: i32| 2f64.powi(e);
        for (n, len) in [1, 7, 33, 1000].into_iter().enumerate() {
            // The divisor `ys len (len + 1) / 2` below, at and above the
            // domain's ends.
            let tri = (len * (len + 1) / 2) as f64;
            let ys = [
                1.0,
                p2(-ye) / tri,
                p2(-ye - 1) / tri,
                p2(ye) / tri,
                p2(ye + 3) / tri,
                p2(big) / tri,
                p2(small),
            ];
            // Inputs are up to 10 in magnitude: numerators inside, around
            // the least and the largest magnitude, past them, subnormal.
            let xs = [
                1.0,
                p2(-xe + 3),
                p2(-xe - 20),
                p2(xe - 4),
                p2(xe + 20),
                p2(sub),
            ];
            // Each divisor with plain numerators, each numerator scale
            // with a plain divisor (every kernel is a JIT compile).
            let pairs = ys
                .iter()
                .map(|&y| (1.0, y))
                .chain(xs[1..].iter().map(|&x| (x, 1.0)));
            for (a, (x, y)) in pairs.enumerate() {
                let k = row_division(32, len, dt, x, y);
                covered(&k, 7000 + 100 * n as u64 + a as u64);
            }
        }
    }
}

/// The first instruction of `k` that `is` picks.
fn find(k: &Kernel, is: impl Fn(&Inst) -> bool) -> Val {
    k.insts.iter().position(|n| is(&n.inst)).expect("present")
}

#[test]
fn later_passes_read_the_costly_values_earlier_passes_kept() {
    let exp = |i: &Inst| matches!(i, Inst::Unary(UnaryOp::Exp, _));
    let load = |i: &Inst| matches!(i, Inst::Load { .. });
    let sub = |i: &Inst| matches!(i, Inst::Binary(BinaryOp::Sub, ..));
    // Softmax: the stores read `exp(x - max)`, which the sum's pass kept.
    let k = ptx_cases::softmax(3, 1000, DType::F32);
    assert!(llvm::kept(&k).contains(&find(&k, exp)));
    // ... in the output's elements, which the stores then overwrite;
    // in a tile buffer where the output is another dtype or strided.
    assert_eq!(llvm::lodged(&k), vec![find(&k, exp)]);
    let k = ptx_cases::softmax(3, 1000, DType::F64);
    assert_eq!(llvm::lodged(&k), vec![find(&k, exp)]);
    let k = ptx_cases::softmax(3, 1000, DType::BF16);
    assert!(llvm::kept(&k).contains(&find(&k, exp)));
    assert!(llvm::lodged(&k).is_empty());
    let k = shift_and_softmax(3, 1000);
    assert_eq!(llvm::lodged(&k), vec![find(&k, exp)]);
    let k = exp_of_kept(3, 1000);
    assert_eq!(llvm::lodged(&k), vec![find(&k, exp)]);
    // Layer norm: `x - mean` is one subtraction of a contiguous load,
    // computed again rather than stored and loaded.
    let k = ptx_cases::layernorm(3, 1000, DType::F32);
    assert!(!llvm::kept(&k).contains(&find(&k, sub)));
    // Softmax over axis 0: the transposed load the executor folded for
    // the max, read from its element state.
    let k = ptx_cases::softmax_axis0(1000, 3);
    assert!(llvm::kept(&k).contains(&find(&k, load)));
    assert!(llvm::lodged(&k).is_empty());
    // Views and exponentials, integers through a Rust function.
    let k = view_norm(3, 1000, DType::BF16);
    assert!(llvm::kept(&k).contains(&find(&k, load)));
    assert!(llvm::kept(&k).contains(&find(&k, exp)));
    let k = int_view(3, 1000);
    let rem = find(&k, |i| matches!(i, Inst::Binary(BinaryOp::Remainder, ..)));
    assert_eq!(llvm::kept(&k), vec![find(&k, load), rem]);
    // Rows longer than a tile: each pass runs over every chunk of a row
    // before the next, so nothing is kept (and the kernel still matches).
    let k = ptx_cases::softmax(2, 16411, DType::F32);
    assert!(llvm::kept(&k).is_empty());
    covered(&k, 5);
}

/// Row lengths of the fold tests: around the lanes (8), a block (256),
/// four blocks (the JIT folds four side by side), a tile (16384) and
/// several tiles of one row.
const FOLD_LENS: [i64; 15] = [
    0, 1, 7, 8, 9, 255, 256, 257, 1000, 1024, 1031, 4097, 16384, 16411, 70001,
];

/// `op` over the rows of `[rows, len]` of `dt`: of the load itself
/// (`neg` false; the JIT folds a max or min from the input in place), or
/// of its negation (folded from the buffer the JIT's pass writes).
fn fold_kernel(op: ReduceOp, dt: DType, rows: i64, len: i64, neg: bool) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("fold", KernelKind::Reduce, &r, 1);
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let x = if neg { kb.un(UnaryOp::Neg, x) } else { x };
    let s = kb.reduce(op, x);
    kb.store(rows as usize, Expr::var(0), s, None);
    kb.done()
}

/// Finite inputs whose folds show their order: sums of values in
/// `[-10, 10)` round by it, products stay near 1, and a third of the
/// values are `-0` or `+0`, the rest negative in even rows and positive in
/// odd ones, so a row's max or min is often a zero whose sign is the
/// first of the tied zeros in fold order. With `nan`, every other row
/// holds a NaN somewhere.
fn fold_inputs(k: &Kernel, op: ReduceOp, len: i64, seed: u64, nan: bool) -> Vec<u8> {
    let arg = k.inputs[0];
    let mut rng = smelt_codegen::rng::SplitMix64::new(seed);
    let mut b = vec![0u8; arg.len * arg.dtype.size()];
    for j in 0..arg.len {
        let row = j / len.max(1) as usize;
        let v = match op {
            ReduceOp::Sum => (rng.next_f64() - 0.5) * 20.0,
            ReduceOp::Prod => 0.9 + 0.2 * rng.next_f64(),
            _ if rng.below(3) == 0 => [0.0, -0.0][rng.below(2) as usize],
            _ => (1.0 + rng.next_f64()) * if row.is_multiple_of(2) { -1.0 } else { 1.0 },
        };
        arg.dtype.write(&mut b, j, v);
    }
    if nan && len > 0 {
        for row in (1..arg.len / len as usize).step_by(2) {
            let at = row * len as usize + (row * 997) % len as usize;
            arg.dtype.write(&mut b, at, f64::NAN);
        }
    }
    b
}

/// The JIT's folds (from the input in place, or from its pass's buffer)
/// against the executor's, bit for bit, on inputs where the order of a
/// fold shows in its result: sums and products that round, maxima and
/// minima that are tied zeros of either sign, NaN in some rows; at
/// lengths around the lanes, blocks, tiles and chunk groups, on one row,
/// a few, and enough for the driver's threads.
#[test]
fn folds_in_the_jit_are_the_executors_bit_for_bit() {
    for (s, len) in FOLD_LENS.into_iter().enumerate() {
        for rows in [1, 3, (1 << 16) / len.max(1) + 3] {
            let rows = rows.min(300_000 / len.max(1)).max(1);
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                for dt in [DType::F32, DType::F64] {
                    for neg in [false, true] {
                        let k = fold_kernel(op, dt, rows, len, neg);
                        let nans: &[bool] = match op {
                            ReduceOp::Max | ReduceOp::Min => &[false, true],
                            _ => &[false],
                        };
                        for &nan in nans {
                            let seed = 100 * s as u64 + rows as u64;
                            let x = fold_inputs(&k, op, len, seed, nan);
                            let run = |engine: engines::Engine| {
                                let mut out = vec![0u8; rows as usize * dt.size()];
                                engine(&k, &[&x], &[], &mut [&mut out])
                                    .expect("covered")
                                    .expect("runs");
                                out
                            };
                            let (jit, exec) = (run(llvm::run), run(exec::run));
                            for r in 0..rows as usize {
                                let (a, b) = (dt.read(&jit, r), dt.read(&exec, r));
                                let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                                assert!(same, "{op:?} {dt} neg {neg} nan {nan} {rows}x{len} row {r}: {a:e} vs {b:e}");
                            }
                        }
                    }
                }
            }
            // Softmax's max (in place) and sum of `exp` (from the kept
            // buffer) on finite inputs.
            let k = ptx_cases::softmax(rows, len, DType::F32);
            let x = fold_inputs(&k, ReduceOp::Sum, len, s as u64, false);
            let run = |engine: engines::Engine| {
                let mut out = vec![0u8; (rows * len) as usize * 4];
                engine(&k, &[&x], &[], &mut [&mut out])
                    .expect("covered")
                    .expect("runs");
                out
            };
            assert!(run(llvm::run) == run(exec::run), "softmax {rows}x{len}");
        }
    }
}

#[test]
fn new_scalar_values_reuse_the_compiled_kernel() {
    let k = ptx_cases::softmax_temperature(5, 33);
    for seed in 0..4 {
        covered(&k, seed);
    }
}

#[test]
fn out_of_bounds_loads_are_the_executors_errors() {
    let r = [5i64, 9];
    let mut kb = Kb::new("elementwise_oob", KernelKind::Elementwise, &r, 2);
    // One element short of the index's reach.
    let x = kb.load(DType::F32, 44, contiguous(&r));
    kb.store(45, contiguous(&r), x, None);
    let k = kb.done();
    assert_eq!(llvm::decline(&k), None);
    let (bufs, scalars) = inputs(&k, 1);
    let ins: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let mut out = vec![0u8; 45 * 4];
    let e = llvm::run(&k, &ins, &scalars, &mut [&mut out]).expect("covered");
    assert!(e.unwrap_err().0.contains("outside in0"));
}

#[test]
fn declines_are_named() {
    // A scan: the executor runs it (its state carried from chunk to
    // chunk), along a strided axis too (in column tiles).
    for strided in [false, true] {
        let k = ptx_cases::scan(smelt_codegen::ScanOp::Sum, DType::F32, 3, 10, strided);
        assert!(llvm::decline(&k).expect("declined").contains("scans"));
    }
    // A store that writes each element from 6 points: only the
    // interpreter's order defines it, so the executor's plan declines it.
    let r = [4i64, 6];
    let mut kb = Kb::new("elementwise_overwrite", KernelKind::Elementwise, &r, 2);
    let x = kb.load(DType::F32, 24, contiguous(&r));
    kb.store(4, Expr::var(0), x, None);
    assert!(llvm::decline(&kb.done())
        .expect("declined")
        .contains("plan"));
    // A store whose index may leave its output.
    let r = [4i64, 6];
    let mut kb = Kb::new("elementwise_short_out", KernelKind::Elementwise, &r, 2);
    let x = kb.load(DType::F32, 24, contiguous(&r));
    kb.store(23, contiguous(&r), x, None);
    let k = kb.done();
    assert!(llvm::decline(&k).expect("declined").contains("store"));
    assert!(llvm::run(&k, &[&[0u8; 96]], &[], &mut [&mut [0u8; 92]]).is_none());
    // An op the JIT does not emit, computed by a pass and needed by a
    // later one: declined before the passes are planned.
    let r = [3i64, 7];
    let mut kb = Kb::new("multireduce_int_exp", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(DType::I32, 21, contiguous(&r));
    let w = kb.push(Inst::Unary(UnaryOp::Exp, x), DType::I32);
    let v = kb.bin(BinaryOp::Add, w, x);
    let s = kb.reduce(ReduceOp::Sum, v);
    let y = kb.bin(BinaryOp::Mul, w, s);
    kb.store(21, contiguous(&r), y, None);
    let k = kb.done();
    assert!(llvm::decline(&k).expect("declined").contains("integer"));
    assert!(llvm::kept(&k).is_empty());
}
