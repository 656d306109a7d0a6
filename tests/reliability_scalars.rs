//! Scalars are kernel parameters (issue 10, item 8): a loop that changes a
//! learning rate, a temperature or a step counter plans its schedule once
//! and, on a GPU, compiles one module, while every value gives the right
//! result. Each test runs on the CPU and, when one is present, on the GPU
//! (`SMELT_REQUIRE_CUDA=1` makes a missing GPU a failure), with shapes of
//! its own per device: the schedule cache is shared by devices and tests.

mod common;

use common::test_device;
use half::f16;
use smelt::stats::{compile_stats, kernels_run, CompileStats};
use smelt::{DType, Device, Tensor};
use std::time::Instant;

/// Distinct values per test.
const STEPS: usize = 100;

/// The CPU, then the GPU under test if there is one.
fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if test_device() != Device::Cpu {
        d.push(test_device());
    }
    d
}

/// A shape of `rows x cols`, made distinct per device (the `n`th device
/// gets `n` more rows), so no device reuses another's plan.
fn shape(rows: usize, cols: usize, device_index: usize) -> [usize; 2] {
    [rows + device_index, cols]
}

/// Realizes `step(i)` for every step and checks each result with
/// `check(i, result)`; asserts that the first step planned one schedule
/// (and, on a GPU, loaded one module per kernel it ran, PTX emitted or
/// read from the disk cache) and that the other steps planned and compiled
/// nothing, each reusing the first step's schedule.
fn assert_compiled_once(
    dev: Device,
    what: &str,
    mut step: impl FnMut(usize) -> Tensor,
    mut check: impl FnMut(usize, &Tensor),
) {
    let s0 = compile_stats();
    let k0 = kernels_run();
    let y = step(0);
    y.realize().unwrap();
    let first = compile_stats().since(&s0);
    let kernels = kernels_run() - k0;
    check(0, &y);
    assert_eq!(first.schedules_planned, 1, "{what} on {dev:?}: {first:?}");
    let modules = if dev == Device::Cpu { 0 } else { kernels };
    assert_eq!(
        first.modules_loaded, modules,
        "{what} on {dev:?}: one module per kernel ({kernels} kernels): {first:?}"
    );
    assert_eq!(
        first.ptx_emitted + first.ptx_disk_hits,
        modules,
        "{what} on {dev:?}: {first:?}"
    );

    let s1 = compile_stats();
    let t0 = Instant::now();
    for i in 1..STEPS {
        let y = step(i);
        y.realize().unwrap();
        check(i, &y);
    }
    let per_step = t0.elapsed() / (STEPS as u32 - 1);
    let rest = compile_stats().since(&s1);
    let reused = CompileStats {
        schedule_cache_hits: STEPS as u64 - 1,
        ..CompileStats::default()
    };
    assert_eq!(
        rest, reused,
        "{what} on {dev:?}: later values must reuse the schedule and modules"
    );
    println!("{what} on {dev:?}: {kernels} kernel(s), {per_step:?} per step (realize + check)");
}

/// `(scale, shift)` of step `i`: all distinct, none 0 or 1.
fn affine(i: usize) -> (f64, f64) {
    (0.37 + 0.011 * i as f64, -2.5 + 0.053 * i as f64)
}

#[test]
fn a_changing_f32_scalar_plans_and_compiles_once() {
    for (d, dev) in devices().into_iter().enumerate() {
        let sh = shape(31, 33, d);
        let n = sh[0] * sh[1];
        let data: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 12.0).collect();
        let x = Tensor::from_vec(data.clone(), sh, &dev);
        assert_compiled_once(
            dev,
            "x * s + t (f32)",
            |i| {
                let (s, t) = affine(i);
                &(&x * s) + t
            },
            |i, y| {
                let (s, t) = affine(i);
                let (s, t) = (s as f32, t as f32);
                let got = y.to_vec::<f32>().unwrap();
                // Both backends round every op to f32 (no fused multiply-add).
                for (j, (g, x)) in got.iter().zip(&data).enumerate() {
                    assert_eq!(*g, x * s + t, "step {i} at {j} on {dev:?}");
                }
            },
        );
    }
}

#[test]
fn a_changing_f16_scalar_is_rounded_alike_on_every_device() {
    for (d, dev) in devices().into_iter().enumerate() {
        let sh = shape(17, 40, d);
        let n = sh[0] * sh[1];
        let data: Vec<f16> = (0..n)
            .map(|i| f16::from_f32((i % 61) as f32 / 8.0 - 4.0))
            .collect();
        let x = Tensor::from_vec(data.clone(), sh, &dev);
        assert_compiled_once(
            dev,
            "x * s + t (f16)",
            |i| {
                let (s, t) = affine(i);
                // The scalars take the tensor's dtype: rounded to f16.
                &(&x * s) + t
            },
            |i, y| {
                assert_eq!(y.dtype(), DType::F16);
                let (s, t) = affine(i);
                let (s, t) = (f16::from_f64(s), f16::from_f64(t));
                let got = y.to_vec::<f16>().unwrap();
                for (j, (g, x)) in got.iter().zip(&data).enumerate() {
                    // Each op rounds to f16; products and sums of these
                    // values are exact in f32, so one rounding each.
                    let prod = f16::from_f32(x.to_f32() * s.to_f32());
                    let want = f16::from_f32(prod.to_f32() + t.to_f32());
                    assert_eq!(g.to_bits(), want.to_bits(), "step {i} at {j} on {dev:?}");
                }
            },
        );
    }
}

#[test]
fn a_changing_i32_scalar_wraps_alike_on_every_device() {
    for (d, dev) in devices().into_iter().enumerate() {
        let sh = shape(9, 50, d);
        let n = sh[0] * sh[1];
        let data: Vec<i32> = (0..n as i32).map(|i| i * 7919 - 20_000).collect();
        let x = Tensor::from_vec(data.clone(), sh, &dev);
        // Large enough that products wrap.
        let step = |i: usize| (1_000_003 * (i as i32 + 2), 17 - 3 * i as i32);
        assert_compiled_once(
            dev,
            "x * s + t (i32)",
            |i| {
                let (s, t) = step(i);
                &(&x * s) + t
            },
            |i, y| {
                assert_eq!(y.dtype(), DType::I32);
                let (s, t) = step(i);
                let got = y.to_vec::<i32>().unwrap();
                for (j, (g, x)) in got.iter().zip(&data).enumerate() {
                    assert_eq!(*g, x.wrapping_mul(s).wrapping_add(t), "step {i} at {j}");
                }
            },
        );
    }
}

#[test]
fn a_changing_softmax_temperature_plans_and_compiles_once() {
    for (d, dev) in devices().into_iter().enumerate() {
        let sh = shape(12, 300, d);
        let (rows, cols) = (sh[0], sh[1]);
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37) % 101) as f32 / 10.0 - 5.0)
            .collect();
        let x = Tensor::from_vec(data.clone(), sh, &dev);
        let temperature = |i: usize| 0.25 + 0.05 * i as f64;
        assert_compiled_once(
            dev,
            "softmax(x / T)",
            |i| (&x / temperature(i)).softmax(-1),
            |i, y| {
                let t = temperature(i) as f32 as f64;
                let got = y.to_vec::<f32>().unwrap();
                for r in 0..rows {
                    let row: Vec<f64> = data[r * cols..][..cols]
                        .iter()
                        .map(|v| (*v / t as f32) as f64)
                        .collect();
                    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
                    for c in 0..cols {
                        let want = (row[c] - m).exp() / sum;
                        let g = got[r * cols + c] as f64;
                        assert!(
                            (g - want).abs() <= 1e-6 + 1e-5 * want,
                            "T {t} at {r},{c} on {dev:?}: {g} vs {want}"
                        );
                    }
                }
            },
        );
    }
}

/// The trap of sharing kernel slots by value: two constants equal in the
/// graph that was planned (so hash-consing by value would give them one
/// parameter) and different in a later graph of the same structure, which
/// reuses that plan. Each constant has its own slot, so both graphs are
/// right; and the other way round (different first, equal later).
#[test]
fn equal_constants_that_later_differ_keep_their_own_values() {
    for (d, dev) in devices().into_iter().enumerate() {
        for (case, pairs) in [
            (0, [(2.0, 2.0), (2.0, 3.0), (-1.0, 5.0)]),
            (1, [(4.0, -0.5), (1.5, 1.5), (0.25, 0.25)]),
        ] {
            let n = 23 + 2 * d + case;
            let data: Vec<f32> = (0..n).map(|i| i as f32 - 7.0).collect();
            let x = Tensor::from_vec(data.clone(), [n], &dev);
            for (k, (a, b)) in pairs.into_iter().enumerate() {
                let before = compile_stats();
                // `x * a + x * b`: with one slot for equal values, the two
                // products would be one instruction too.
                let y = &(&x * a) + &(&x * b);
                let got = y.to_vec::<f32>().unwrap();
                let planned = compile_stats().since(&before).schedules_planned;
                assert_eq!(planned, u64::from(k == 0), "only the first graph plans");
                for (j, (g, x)) in got.iter().zip(&data).enumerate() {
                    let want = x * a as f32 + x * b as f32;
                    assert_eq!(*g, want, "a {a} b {b} at {j} on {dev:?}");
                }
            }
        }
    }
}

/// Non-finite constants (a mask's `-inf` fill, NaN) are compiled into the
/// kernel, not bound at launch: a graph with one never reuses the plan of
/// the same graph with a finite value or another non-finite one, and each
/// gives its own value; two `-inf` graphs share one plan.
#[test]
fn non_finite_constants_are_part_of_the_plan() {
    for (n, dev) in devices().into_iter().enumerate() {
        let [rows, cols] = shape(5, 3, n);
        let x = Tensor::from_vec(
            (0..rows * cols).map(|v| v as f32).collect::<Vec<_>>(),
            [rows, cols],
            &dev,
        );
        let fill = |value: f64| {
            let i = Tensor::arange(0.0, rows as f64, 1.0, DType::I32, &dev).reshape([rows, 1]);
            let j = Tensor::arange(0.0, cols as f64, 1.0, DType::I32, &dev).reshape([1, cols]);
            j.le(&i).where_(&x, value)
        };
        // Schedules each value plans: -7.0 reuses 5.0's, the last -inf
        // the first's; the others plan their own.
        let values = [
            f64::NEG_INFINITY,
            5.0,
            f64::INFINITY,
            f64::NAN,
            -7.0,
            f64::NEG_INFINITY,
        ];
        for (value, plans) in values.into_iter().zip([1, 1, 1, 1, 0, 0]) {
            let s0 = compile_stats();
            let y = fill(value).to_vec::<f32>().unwrap();
            let planned = compile_stats().since(&s0).schedules_planned;
            assert_eq!(planned, plans, "{dev:?} fill {value}");
            for (p, got) in y.iter().enumerate() {
                let (r, c) = (p / cols, p % cols);
                let want = if c <= r { p as f64 } else { value };
                assert!(
                    got.to_bits() == (want as f32).to_bits() || (want.is_nan() && got.is_nan()),
                    "{dev:?} fill {value}: element {p} is {got}"
                );
            }
        }
    }
}
