//! The executor (`smelt_codegen::exec`) against the interpreter, its
//! oracle, kernel by kernel on the same inputs: integers and bools bit for
//! bit, floats within rounding (`exp` within 2 ulp, sums in another order),
//! errors where the interpreter errs. Inputs mix ordinary values with NaN,
//! infinities, zeros of both signs and extremes; kernels cover every dtype,
//! op and cast, views (flips, transposes, broadcasts, padding, div/mod),
//! sizes 0, 1 and primes across the tile and parallel thresholds, and the
//! instructions with their own rules (gathers, Philox draws, indices).

#[path = "engines/mod.rs"]
mod engines;
#[path = "ptx_cases/mod.rs"]
mod ptx_cases;

use engines::{inputs, small, SIZES};
use ptx_cases::{contiguous, lin, Kb};
use smelt_codegen::philox::Draw;
use smelt_codegen::{
    exec, interp, BinaryOp, Cond, DType, Expr, Gather, Inst, Kernel, KernelKind, ReduceOp, UnaryOp,
};

/// Runs `k` through the executor and the interpreter on the same inputs
/// and asserts that they agree. Returns whether the executor covered it.
fn compare(k: &Kernel, seed: u64) -> bool {
    engines::compare(k, seed, exec::run)
}

#[test]
fn matches_the_interpreter_on_every_representative_kernel() {
    let (mut covered, mut declined) = (0, Vec::new());
    for (i, k) in ptx_cases::all().iter().filter(|k| small(k)).enumerate() {
        if compare(k, i as u64) {
            covered += 1;
        } else {
            declined.push(k.name.clone());
        }
    }
    // Every representative kernel is the executor's.
    assert!(declined.is_empty(), "declined: {declined:?}");
    assert!(covered > 450, "covered {covered}");
}

#[test]
fn every_dtype_op_and_cast_at_edge_sizes() {
    for (s, n) in SIZES.into_iter().enumerate() {
        let seed = 1000 * s as u64;
        for dt in DType::ALL {
            for op in UnaryOp::ALL {
                if engines::unary_applies(op, dt) {
                    assert!(compare(&ptx_cases::unary(op, dt, n), seed));
                }
            }
            for op in [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Max,
                BinaryOp::Min,
                BinaryOp::Lt,
                BinaryOp::Eq,
                BinaryOp::And,
                BinaryOp::FloorDiv,
                BinaryOp::Remainder,
                BinaryOp::Pow,
            ] {
                if op.operand_dtype(dt, dt) == dt {
                    assert!(compare(&ptx_cases::binary(op, dt, n), seed + 1));
                }
            }
            for to in DType::ALL {
                assert!(compare(&ptx_cases::cast(dt, to, n), seed + 2));
            }
        }
    }
}

#[test]
fn views_reductions_and_multi_reductions_at_edge_sizes() {
    for (s, n) in SIZES.into_iter().enumerate() {
        let seed = 7000 + s as u64;
        for rows in [0, 1, 3, 4099] {
            // At most about 300K points a kernel: the interpreter is slow.
            let n = n.min(300_000 / rows.max(1));
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
                for dt in [DType::F32, DType::F64, DType::I64, DType::BF16] {
                    // Half sums and products accumulate in f32 (the front
                    // end casts); rounding a half accumulator at every step
                    // makes the order visible far beyond a few ulp.
                    let half_acc =
                        dt == DType::BF16 && matches!(op, ReduceOp::Sum | ReduceOp::Prod);
                    if half_acc {
                        continue;
                    }
                    let k = ptx_cases::reduce_last(op, dt, rows, n);
                    assert!(compare(&k, seed));
                }
            }
            let k = ptx_cases::softmax(rows, n, DType::F32);
            assert!(compare(&k, seed), "declined {k}");
            assert!(compare(&ptx_cases::layernorm(rows, n, DType::BF16), seed));
            assert!(compare(&ptx_cases::logsumexp_mixed(rows, n), seed));
        }
        assert!(compare(&ptx_cases::reduce_first(n, 5), seed));
        assert!(compare(&ptx_cases::sum_all(n * 7), seed));
        assert!(compare(&ptx_cases::pad(n), seed));
        assert!(compare(&ptx_cases::div_mod(n), seed));
        assert!(compare(&ptx_cases::flip_transpose(n.min(300), 37), seed));
        assert!(compare(
            &ptx_cases::broadcast_add(n.min(300), 65, DType::F16),
            seed
        ));
        assert!(compare(&ptx_cases::softmax_axis0(n.min(3000), 13), seed));
    }
}

/// `out[i] = src[i, idx[i]]` (a take along the last axis of a `[n, w]`
/// source) with an index read from its own input, plus the position
/// itself as an `I32` index value and a validity bit.
fn gather(n: i64, w: i64, dt: DType) -> Kernel {
    let mut kb = Kb::new("gather_take", KernelKind::Elementwise, &[n], 1);
    let at = kb.load(DType::I64, n as usize, Expr::var(0));
    kb.k.inputs.push(smelt_codegen::Arg {
        dtype: dt,
        len: (n * w) as usize,
    });
    let input = kb.k.inputs.len() - 1;
    let g = kb.push(
        Inst::Gather(Gather {
            input,
            index: Expr::var(0).scale(w),
            valid: Cond::always(),
            at,
            stride: 1,
            len: w,
        }),
        dt,
    );
    kb.store(n as usize, Expr::var(0), g, None);
    let i = kb.push(Inst::Index(Expr::var(0).scale(3).add_const(-5)), DType::I32);
    kb.store(n as usize, Expr::var(0), i, None);
    let ranges = [n];
    let valid = Cond::always().and_range(Expr::var(0), 2, 9, &ranges);
    let v = kb.push(Inst::Valid(valid), DType::Bool);
    kb.store(n as usize, Expr::var(0), v, None);
    kb.done()
}

#[test]
fn gathers_indices_and_their_errors() {
    for n in [1, 7, 4099, 70001] {
        for dt in [DType::F32, DType::F16, DType::I8, DType::F64] {
            // Index values are mostly in -3..9 (some out of range: an error
            // in both engines), or all in range.
            assert!(compare(&gather(n, 12, dt), n as u64));
            assert!(compare(&gather(n.min(300), 12_000, dt), n as u64));
        }
    }
}

/// `out[at[i], j] += src[i, j]` (an `index_add` along axis 0 of a `[m,
/// w]` output) over an `[n, w]` source, `src` read through a transpose
/// when `flip`. The positions are read (mostly in -3..9, some extremes:
/// out of range is an error in both engines) or, when `wrap`, `7 i mod
/// m`, all in range with rows repeated, so their sums' order shows.
fn scatter_add(n: i64, w: i64, m: i64, dt: DType, (flip, wrap): (bool, bool)) -> Kernel {
    let mut kb = Kb::new("scatter_add", KernelKind::Scatter, &[n, w], 2);
    let src = if flip {
        lin(&[(0, 1), (1, n)], 0)
    } else {
        lin(&[(0, w), (1, 1)], 0)
    };
    let x = kb.load(dt, (n * w) as usize, src);
    let at = if wrap {
        let ranges = [n, w];
        kb.push(
            Inst::Index(Expr::var(0).scale(7).rem(m, &ranges)),
            DType::I64,
        )
    } else {
        kb.load(DType::I64, n as usize, Expr::var(0))
    };
    kb.k.outputs.push(smelt_codegen::Arg {
        dtype: dt,
        len: (m * w) as usize,
    });
    kb.k.stores.push(smelt_codegen::Store {
        output: 0,
        index: Expr::var(1),
        value: x,
        kind: smelt_codegen::StoreKind::AddAt {
            at,
            stride: w,
            len: m,
        },
    });
    kb.done()
}

#[test]
fn scatter_adds_match_the_interpreter() {
    for (n, w) in [(0, 3), (1, 1), (7, 5), (4099, 4), (70001, 1), (300, 223)] {
        for (dt, m) in [
            (DType::F32, 9),
            (DType::F16, 9),
            (DType::I32, 9),
            (DType::F64, 70_001),
        ] {
            for view in [(false, false), (true, true), (false, true)] {
                let k = scatter_add(n, w, m, dt, view);
                assert!(compare(&k, n as u64), "the executor runs scatters");
            }
        }
    }
}

/// The output of scatter kernel `k` run by `engine` on finite values of
/// magnitudes from 1e-4 to 50 (the fuzzers' NaN and infinities would make
/// every sum of many values NaN, whatever the order).
fn finite_sums(k: &Kernel, engine: engines::Engine) -> Vec<u8> {
    let mut rng = smelt_codegen::rng::SplitMix64::new(11);
    let x = k.inputs[0];
    let mut src = vec![0u8; x.len * x.dtype.size()];
    for j in 0..x.len {
        let v = (rng.next_f64() - 0.5) * 10f64.powi(rng.below(6) as i32 - 3);
        match x.dtype.is_float() {
            true => x.dtype.write(&mut src, j, v),
            false => x.dtype.write_int(&mut src, j, x.dtype.saturate(v * 1e9)),
        }
    }
    let out = k.outputs[0];
    let mut sums = vec![0u8; out.len * out.dtype.size()];
    engine(k, &[&src], &[], &mut [&mut sums])
        .expect("covered")
        .unwrap();
    sums
}

/// A scatter's values and positions are computed in parallel, a wave of
/// row blocks at a time, and its adds applied in domain order: the sums
/// are the interpreter's bit for bit on any number of threads (1 to 8,
/// one wave or several, positions equal along rows of 2 and 8 points or
/// different at every point, repeats in every element), and
/// the error is the first in domain order (positions past the axis from
/// point 250000 on: the first bad one is 250); longer outputs with
/// contiguous spans, point-by-point positions and spans stored backwards.
/// How a scatter's positions and elements run along a row.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// One position a row, elements up the row.
    Spans,
    /// A position per point.
    Points,
    /// One position a row, elements down the row.
    Backwards,
}

#[test]
fn scatter_adds_are_the_interpreters_on_any_thread_count() {
    let interp: engines::Engine = |k, i, s, o| Some(smelt_codegen::interp::run(k, i, s, o));
    let late_error = {
        let mut k = scatter_add(300_007, 1, 300, DType::F32, (false, true));
        let smelt_codegen::StoreKind::AddAt { at, len, .. } = &mut k.stores[0].kind else {
            unreachable!()
        };
        k.insts[*at].inst = Inst::Index(Expr::var(0).div(1000, &[300_007, 1]));
        *len = 250;
        k
    };
    for threads in [1, 2, 3, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            for (n, w, dt) in [
                (1_600_007, 1, DType::F32),
                (140_961, 8, DType::F16),
                (80_021, 1, DType::I32),
                (70_001, 2, DType::F64),
            ] {
                let k = scatter_add(n, w, 9, dt, (false, true));
                let (got, want) = (finite_sums(&k, exec::run), finite_sums(&k, interp));
                assert!(got == want, "{} {dt}: {threads} threads", k.name);
                assert!(want.iter().any(|b| *b != 0), "nothing added");
            }
            // Longer outputs: contiguous spans (`f32`'s vector loop, and
            // the per-element adds of `F16` and `I32`), positions that
            // differ along a row (point by point) and spans stored
            // backwards.
            for (n, w, m, dt, form) in [
                (300_007, 8, 2_003, DType::F32, Form::Spans),
                (300_007, 8, 2_003, DType::F16, Form::Spans),
                (200_003, 4, 5_003, DType::I32, Form::Spans),
                (200_003, 4, 5_003, DType::F32, Form::Points),
                (100_003, 16, 1_001, DType::F64, Form::Backwards),
            ] {
                let mut k = scatter_add(n, w, m, dt, (false, true));
                let ranges = [n, w];
                let store = &mut k.stores[0];
                let smelt_codegen::StoreKind::AddAt { at, .. } = store.kind else {
                    unreachable!()
                };
                match form {
                    Form::Spans => {}
                    Form::Points => {
                        let e = Expr::var(0).scale(7).add(&Expr::var(1).scale(3));
                        k.insts[at].inst = Inst::Index(e.rem(m, &ranges));
                    }
                    Form::Backwards => store.index = lin(&[(1, -1)], w - 1),
                }
                let (got, want) = (finite_sums(&k, exec::run), finite_sums(&k, interp));
                assert!(got == want, "{dt} {form:?}: {threads} threads");
            }
            let (bufs, scalars) = inputs(&late_error, 3);
            let ins: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
            let mut out = vec![0u8; 300 * 4];
            let e = exec::run(&late_error, &ins, &scalars, &mut [&mut out]).expect("covered");
            let want = smelt_codegen::interp::run(&late_error, &ins, &scalars, &mut [&mut out]);
            let want = want.unwrap_err().0;
            assert!(want.contains("index 250 is out of range"), "{want}");
            assert_eq!(e.unwrap_err().0, want, "{threads} threads");
        });
    }
}

/// Philox draws of every kind at counters `3 * i + 1`, with the key and
/// the bound as scalars.
fn random(n: i64) -> Kernel {
    let mut kb = Kb::new("random_draws", KernelKind::Elementwise, &[n], 1);
    let k0 = kb.scalar(DType::I32);
    let k1 = kb.scalar(DType::I32);
    let c = kb.push(Inst::Index(lin(&[(0, 3)], 1)), DType::I32);
    let u = kb.push(Inst::Random(Draw::Uniform(1), vec![k0, k1, c]), DType::F32);
    kb.store(n as usize, Expr::var(0), u, None);
    let h = kb.push(Inst::Random(Draw::Uniform(2), vec![k0, k1, c]), DType::BF16);
    kb.store(n as usize, Expr::var(0), h, None);
    let d = kb.push(
        Inst::Random(Draw::Uniform53(0), vec![k0, k1, c]),
        DType::F64,
    );
    kb.store(n as usize, Expr::var(0), d, None);
    let bound = kb.c(1000.0, DType::I64);
    let r = kb.push(
        Inst::Random(Draw::Below(3), vec![k0, k1, c, bound]),
        DType::I64,
    );
    kb.store(n as usize, Expr::var(0), r, None);
    kb.done()
}

#[test]
fn philox_draws_are_bit_identical() {
    for n in [1, 4099, 70001] {
        assert!(compare(&random(n), 5));
    }
}

#[test]
fn out_of_bounds_loads_are_errors_in_both() {
    let r = [5i64, 9];
    let mut kb = Kb::new("elementwise_oob", KernelKind::Elementwise, &r, 2);
    // One element short of the index's reach.
    let x = kb.load(DType::F32, 44, contiguous(&r));
    kb.store(45, contiguous(&r), x, None);
    let k = kb.done();
    let (bufs, scalars) = inputs(&k, 1);
    let ins: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let mut out = vec![0u8; 45 * 4];
    let e = exec::run(&k, &ins, &scalars, &mut [&mut out]).expect("covered");
    assert!(e.unwrap_err().0.contains("outside in0"));
}

#[test]
fn stores_that_may_write_an_element_twice_go_to_the_interpreter() {
    let r = [4i64, 6];
    let mut kb = Kb::new("elementwise_overlap", KernelKind::Elementwise, &r, 2);
    let x = kb.load(DType::F32, 24, contiguous(&r));
    // Rows overlap: element i0 * 3 + i1 is written by two points.
    kb.store(24, lin(&[(0, 3), (1, 1)], 0), x, None);
    assert!(!exec::covers(&kb.done()));
}

/// The interpreter's parallel rows (`interp::run_parallel`, what the CPU
/// backend runs for the kernels the executor declines, such as sorts)
/// give the bits the one-thread interpreter gives: scans along rows and
/// down columns, long
/// rows in chunks, enough rows to spread over threads; a kernel whose
/// stores may write one element twice stays sequential, so the last
/// write still wins as in domain order.
#[test]
fn parallel_interpreter_rows_match_one_thread() {
    use smelt_codegen::ScanOp;
    let run = |k: &Kernel, parallel: bool| {
        let f = if parallel {
            interp::run_parallel
        } else {
            interp::run
        };
        let (r, outs) = engines::run_on_inputs(k, 7, f);
        r.expect("runs");
        outs
    };
    for (op, dt, rows, len, axis0) in [
        (ScanOp::Sum, DType::F32, 257, 509, false),
        (ScanOp::Prod, DType::I32, 1031, 67, false),
        (ScanOp::LogSumExp, DType::BF16, 61, 9001, false),
        (ScanOp::ArgMin, DType::F64, 4099, 13, true),
        (ScanOp::Max, DType::F16, 1, 70001, false),
    ] {
        let k = ptx_cases::scan(op, dt, rows, len, axis0);
        assert_eq!(run(&k, true), run(&k, false), "{}", k.name);
    }
    let r = [4096i64, 16];
    let mut kb = Kb::new("elementwise_overlap", KernelKind::Elementwise, &r, 2);
    let x = kb.load(DType::F32, 4096 * 16, contiguous(&r));
    kb.store(4096 * 16, lin(&[(0, 3), (1, 1)], 0), x, None);
    let k = kb.done();
    assert_eq!(run(&k, true), run(&k, false), "{}", k.name);
}

/// Softmax as the front end builds it for `dt`: loaded, cast to `F32`
/// (halves), `exp(x - max) / sum`, cast back and stored. For `F32` the
/// division is stored straight into the output and `x - max` is computed
/// inside the `exp`; for halves only the latter (the store converts).
fn softmax_front_end(rows: i64, len: i64, dt: DType) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("multireduce_softmax_cast", KernelKind::MultiReduce, &r, 1);
    let x = kb.load(dt, (rows * len) as usize, contiguous(&r));
    let x = if dt == DType::F32 {
        x
    } else {
        kb.cast(x, DType::F32)
    };
    let m = kb.reduce(ReduceOp::Max, x);
    let d = kb.bin(BinaryOp::Sub, x, m);
    let e = kb.un(UnaryOp::Exp, d);
    let s = kb.reduce(ReduceOp::Sum, e);
    let y = kb.bin(BinaryOp::Div, e, s);
    let y = if dt == DType::F32 { y } else { kb.cast(y, dt) };
    kb.store((rows * len) as usize, contiguous(&r), y, None);
    kb.done()
}

/// Where [`exp_of_difference`] stores its `[rows, len]` result.
#[derive(Clone, Copy, Debug)]
enum Out {
    /// Row-major: one run per tile, written in place.
    Contiguous,
    /// Rows `len + 3` apart: runs of one row, stored through a vector.
    PaddedRows,
    /// Transposed: a step other than 1, stored element by element.
    Transposed,
}

/// `exp(a[i, j] - b[i])` (or, with `flip`, `exp(b[i] + a[i, j])` with
/// `a` read through a transposed view), stored as `out` says: the
/// difference is computed inside the `exp`, the `exp` straight into a
/// contiguous output.
fn exp_of_difference(rows: i64, len: i64, flip: bool, out: Out) -> Kernel {
    let r = [rows, len];
    let mut kb = Kb::new("elementwise_exp_sub", KernelKind::Elementwise, &r, 2);
    let at = if flip {
        lin(&[(0, 1), (1, rows)], 0)
    } else {
        contiguous(&r)
    };
    let a = kb.load(DType::F32, (rows * len) as usize, at);
    let b = kb.load(DType::F32, rows as usize, Expr::var(0));
    let d = if flip {
        kb.bin(BinaryOp::Add, b, a)
    } else {
        kb.bin(BinaryOp::Sub, a, b)
    };
    let e = kb.un(UnaryOp::Exp, d);
    let (n, index) = match out {
        Out::Contiguous => (rows * len, contiguous(&r)),
        Out::PaddedRows => (rows * (len + 3), lin(&[(0, len + 3), (1, 1)], 0)),
        Out::Transposed => (rows * len, lin(&[(0, 1), (1, rows)], 0)),
    };
    kb.store(n as usize, index, e, None);
    kb.done()
}

#[test]
fn direct_stores_and_fused_exps_at_edge_sizes() {
    // Rows of 1, primes below and above the fused `exp`'s block (2048
    // points) and above the tile (16384: chunks of one row); the inputs
    // hold NaN and infinities (whole rows of them for rows of 1).
    for (s, len) in [1, 7, 2039, 2053, 16411].into_iter().enumerate() {
        for rows in [1, 5, 37] {
            let rows = if len > 2053 { rows.min(5) } else { rows };
            let seed = 9000 + 10 * s as u64 + rows as u64;
            for dt in [DType::F32, DType::F16, DType::BF16] {
                let k = softmax_front_end(rows, len, dt);
                assert!(compare(&k, seed), "declined {k}");
            }
            for flip in [false, true] {
                for out in [Out::Contiguous, Out::PaddedRows, Out::Transposed] {
                    let k = exp_of_difference(rows, len, flip, out);
                    assert!(compare(&k, seed), "declined {out:?} {k}");
                }
            }
        }
    }
}

/// The executor's results do not depend on the number of threads: a
/// reduction over rows of many chunks folds the chunks in the same groups
/// whether whole rows or a row's groups go to threads (which one depends
/// on the rows per thread), and on one thread as on four.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let run = |k: &Kernel, threads: usize| {
        // Finite values (a NaN would make every sum NaN, and equal).
        let mut rng = smelt_codegen::rng::SplitMix64::new(5);
        let x: Vec<u8> = (0..k.inputs[0].len)
            .flat_map(|_| (rng.next_f64() as f32 * 2.0 - 1.0).to_le_bytes())
            .collect();
        let mut out = vec![0u8; k.outputs[0].len * 4];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        pool.install(|| exec::run(k, &[&x], &[], &mut [&mut out]))
            .expect("covered")
            .expect("runs");
        out
    };
    // 18 chunks of 16384 a row (more than a group of 16), 5 rows: whole
    // rows per thread on one thread, a row's groups on two and four.
    for rows in [1, 5] {
        for k in [
            ptx_cases::reduce_last(ReduceOp::Sum, DType::F32, rows, 17 * 16384 + 5),
            ptx_cases::softmax(rows, 17 * 16384 + 5, DType::F32),
        ] {
            let one = run(&k, 1);
            for threads in [2, 4] {
                assert!(run(&k, threads) == one, "{} on {threads} threads", k.name);
            }
        }
    }
}

/// A scan of `op` over `[rows, len]` of `dt` through a view, scanned in
/// the API's dtype (`F32` for halves, `I64` for integer and bool sums and
/// products and for positions, the input's own integer type for max and
/// min values) and stored contiguously in the result's dtype.
fn scan_through(op: smelt_codegen::ScanOp, dt: DType, rows: i64, len: i64, view: View) -> Kernel {
    let r = [rows, len];
    let name = format!("scan_{}_{dt}_{view:?}_{rows}x{len}", op.name());
    let mut kb = Kb::new(&name, KernelKind::Scan, &r, 1);
    let n = (rows * len) as usize;
    let (index, loaded) = match view {
        View::Rows => (contiguous(&r), n),
        View::Columns => (lin(&[(0, 1), (1, rows)], 0), n),
        View::Flipped => (lin(&[(0, -len), (1, -1)], rows * len - 1), n),
        View::Broadcast => (lin(&[(1, 1)], 0), len as usize),
    };
    // Down the columns the result goes down the columns too (`cumsum(0)`
    // of a matrix), through strided stores.
    let stored_at = match view {
        View::Columns => index.clone(),
        _ => contiguous(&r),
    };
    let x = kb.load(dt, loaded, index);
    let scanned = match dt {
        DType::F64 => DType::F64,
        _ if dt.is_float() => DType::F32,
        DType::Bool => DType::I64,
        _ if matches!(op, smelt_codegen::ScanOp::Sum | smelt_codegen::ScanOp::Prod) => DType::I64,
        _ => dt,
    };
    let x = if scanned == dt {
        x
    } else {
        kb.cast(x, scanned)
    };
    let out = if op.is_index() { DType::I64 } else { scanned };
    let s = kb.push(Inst::Scan(op, x), out);
    let stored = if dt.is_float() && !op.is_index() {
        dt
    } else {
        out
    };
    let s = if stored == out { s } else { kb.cast(s, stored) };
    kb.store(n, stored_at, s, None);
    kb.done()
}

/// How [`scan_through`] reads its input.
#[derive(Clone, Copy, Debug)]
enum View {
    /// Contiguous rows.
    Rows,
    /// Down the columns of a `[len, rows]` buffer (a strided scanned axis).
    Columns,
    /// Both axes reversed (negative steps).
    Flipped,
    /// One row of `len` read by every row.
    Broadcast,
}

/// Every dtype family the scan and sort comparisons cover.
const EVERY_DTYPE: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

/// The executor's scans give the interpreter's bits (its oracle: the same
/// `f64` states, rounded once; integers wrapped in their dtype) for every
/// op, dtype, view, edge size (rows shorter and longer than a tile, one
/// row of several tiles, enough rows to spread over threads; along a
/// strided axis, column tiles of 3 and of 64 rows, the last block short,
/// over several chunks), on inputs with NaN, infinities and signed zeros,
/// on one thread and on two.
#[test]
fn scans_match_the_interpreter_bit_for_bit() {
    use smelt_codegen::ScanOp;
    let interp: engines::Engine = |k, i, s, o| Some(interp::run(k, i, s, o));
    let dtypes = EVERY_DTYPE;
    let ops = [
        ScanOp::Sum,
        ScanOp::Prod,
        ScanOp::Max,
        ScanOp::Min,
        ScanOp::LogSumExp,
        ScanOp::ArgMax,
        ScanOp::ArgMin,
    ];
    let shapes = [
        (0, 5),
        (3, 0),
        (1, 1),
        (5, 2),
        (7, 13),
        (3, 16411),
        (1, 70001),
        (2053, 17),
        (100, 700),
    ];
    let views = [View::Rows, View::Columns, View::Flipped, View::Broadcast];
    let mut seed = 0;
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        for op in ops {
            for dt in dtypes {
                // `logcumsumexp` is of floats; max and min of bools are
                // PyTorch's only through the integer cast.
                if (op == ScanOp::LogSumExp && !dt.is_float())
                    || (dt == DType::Bool && op != ScanOp::Sum)
                {
                    continue;
                }
                for (rows, len) in shapes {
                    for view in views {
                        let k = scan_through(op, dt, rows, len, view);
                        seed += 1;
                        let covered =
                            pool.install(|| engines::bit_equal(&k, seed, exec::run, interp));
                        assert!(covered, "{}", k.name);
                    }
                }
            }
        }
    }
}

/// How [`sort_through`] reads its input.
#[derive(Clone, Copy, Debug)]
enum SortView {
    /// Contiguous rows.
    Rows,
    /// Down the columns of a `[len, rows]` buffer (a permuted view).
    Columns,
    /// Both axes reversed (negative steps).
    Flipped,
    /// Each element of a row read twice (`x[r, j / 2]`): ties.
    Pairs,
    /// One row of `len` read by every row.
    Broadcast,
}

/// A sort kernel as the front end builds it: `[rows, len]` of `dt`
/// through `view`, sorted as `F32` (floats up to 32 bits), `I32` (other
/// integers and bools) or itself (`F64`, `I64`), storing the first `k`
/// of each row's values (cast back to `dt`) and of their positions.
fn sort_through(
    dt: DType,
    rows: i64,
    len: i64,
    k: i64,
    descending: bool,
    view: SortView,
) -> Kernel {
    use smelt_codegen::{SortOp, SortPart};
    let r = [rows, len];
    let name = format!("sort_{dt}_{view:?}_{rows}x{len}_k{k}_desc{descending}");
    let mut kb = Kb::new(&name, KernelKind::Sort, &r, 1);
    let n = (rows * len) as usize;
    let (index, loaded) = match view {
        SortView::Rows => (contiguous(&r), n),
        SortView::Columns => (lin(&[(0, 1), (1, rows)], 0), n),
        SortView::Flipped => (lin(&[(0, -len), (1, -1)], rows * len - 1), n),
        SortView::Pairs => (Expr::var(1).div(2, &r).add(&lin(&[(0, len)], 0)), n),
        SortView::Broadcast => (lin(&[(1, 1)], 0), len as usize),
    };
    let x = kb.load(dt, loaded, index);
    let key = match dt {
        DType::F64 | DType::I64 => dt,
        _ if dt.is_float() => DType::F32,
        _ => DType::I32,
    };
    let x = if key == dt { x } else { kb.cast(x, key) };
    let op = |part| SortOp {
        descending,
        part,
        k: k as usize,
        dtype: dt,
    };
    let values = kb.push(Inst::Sort(op(SortPart::Values), x), key);
    let indices = kb.push(Inst::Sort(op(SortPart::Indices), x), DType::I64);
    let values = if key == dt {
        values
    } else {
        kb.cast(values, dt)
    };
    let out = lin(&[(0, k), (1, 1)], 0);
    kb.store((rows * k) as usize, out.clone(), values, None);
    kb.store((rows * k) as usize, out, indices, None);
    kb.done()
}

/// The executor's sorts give the interpreter's bits (its oracle: one
/// stable order by `(key, position)`, NaN above `+inf`, `-0.0 == 0.0`):
/// `sort`/`argsort` and `topk` prefixes, both directions, every sorted
/// dtype family, views (permuted, negative steps, ties, broadcast), sizes
/// 0, 1 and primes, on inputs with NaN, infinities and signed zeros; long
/// rows (parallel sorts) and many rows on one thread and on four.
#[test]
fn sorts_match_the_interpreter_bit_for_bit() {
    let interp: engines::Engine = |k, i, s, o| Some(interp::run(k, i, s, o));
    let dtypes = EVERY_DTYPE;
    let views = [
        SortView::Rows,
        SortView::Columns,
        SortView::Flipped,
        SortView::Pairs,
        SortView::Broadcast,
    ];
    let mut seed = 0;
    let mut check = |k: &Kernel, threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        seed += 1;
        let covered = pool.install(|| engines::bit_equal(k, seed, exec::run, interp));
        assert!(covered, "{}", k.name);
    };
    for dt in dtypes {
        for view in views {
            for (rows, len) in [(0, 5), (3, 0), (1, 1), (5, 2), (7, 13), (2, 131), (3, 1031)] {
                for descending in [false, true] {
                    for k in [len, len.min(3), 0] {
                        check(&sort_through(dt, rows, len, k, descending, view), 1);
                    }
                }
            }
        }
    }
    // Past the parallel threshold: many short rows, one long row (its
    // keys, pairs and gathers in parallel chunks, the MSD pass then LSD
    // passes per bucket, or a parallel comparison sort of wide keys), a
    // topk of it; ties (`Pairs`), bytes every key shares (`U8`: one
    // bucket pass only) and the highest byte shared (`I16`).
    for dt in [DType::F32, DType::I64, DType::BF16, DType::U8, DType::I16] {
        for (rows, len, k) in [(2053, 17, 17), (1, 70001, 70001), (1, 70001, 5)] {
            for (threads, view) in [
                (1, SortView::Flipped),
                (4, SortView::Rows),
                (3, SortView::Pairs),
            ] {
                check(&sort_through(dt, rows, len, k, threads == 4, view), threads);
            }
        }
    }
}
