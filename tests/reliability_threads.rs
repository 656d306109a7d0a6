//! Concurrency (issue 10, item 2): threads realizing, reading and printing
//! overlapping lazy graphs at the same moment all get the values a host
//! loop computes, and nothing panics.
//!
//! Every round builds a fresh graph over tiny inputs; 8 threads wait on a
//! barrier and then realize different, overlapping parts of it (a shared
//! trunk, a sum over it, two tensors at once) or read it (`to_vec`,
//! `Display`) while the others realize it. The values are small integers,
//! exact in f32, so results compare exactly.

mod common;

use smelt::{realize_all, Fusion, Tensor};
use std::sync::{Barrier, Mutex};

const THREADS: usize = 8;
const ROUNDS: usize = 1000;

/// One round's graph: `a = 2x + 1` (through `r % 8` more exact steps),
/// `b = a * a`, `c = b - sum(b)`, all unrealized. Each round has its own
/// length and depth, so no round reuses another's cached schedule: every
/// realize plans, which is where threads raced.
struct Round {
    x: Vec<f64>,
    a: Tensor,
    b: Tensor,
    c: Tensor,
}

impl Round {
    fn new(r: usize, dev: &smelt::Device) -> Round {
        let len = 2 + r / 8;
        let x: Vec<f64> = (0..len).map(|i| ((r * 7 + i * 3) % 100) as f64).collect();
        let xt = Tensor::from_vec(x.iter().map(|v| *v as f32).collect(), [len], dev);
        let mut a = &xt * 2.0 + 1.0;
        for _ in 0..r % 8 {
            a = (&a + 3.0) - 3.0;
        }
        let b = &a * &a;
        let c = &b - b.sum_keepdim(0);
        Round { x, a, b, c }
    }

    fn want_a(&self) -> Vec<f64> {
        self.x.iter().map(|x| 2.0 * x + 1.0).collect()
    }

    fn want_b(&self) -> Vec<f64> {
        self.want_a().iter().map(|a| a * a).collect()
    }

    fn want_c(&self) -> Vec<f64> {
        let b = self.want_b();
        let s: f64 = b.iter().sum();
        b.iter().map(|b| b - s).collect()
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("read")
}

/// What thread `t` does with round `g`, checked against the host.
fn work(t: usize, g: &Round, dev: &smelt::Device) {
    match t % THREADS {
        0 | 1 => {
            g.b.realize().expect("realize b");
            assert_eq!(values(&g.b), g.want_b());
        }
        2 => {
            g.c.realize().expect("realize c");
            assert_eq!(values(&g.c), g.want_c());
        }
        3 => {
            realize_all(&[&g.a, &g.c], Fusion::On).expect("realize a, c");
            assert_eq!(values(&g.a), g.want_a());
            assert_eq!(values(&g.c), g.want_c());
        }
        4 => {
            // A read racing the realizes of the same tensor.
            assert_eq!(values(&g.b), g.want_b());
        }
        5 => {
            let want = g.want_c();
            let want =
                Tensor::from_vec(want.iter().map(|v| *v as f32).collect(), [want.len()], dev);
            assert_eq!(format!("{}", g.c), format!("{want}"));
        }
        6 => {
            // A new graph over the shared, possibly half-realized trunk.
            let d = (&g.b + &g.a).sum(0);
            let want: f64 = g.want_a().iter().zip(g.want_b()).map(|(a, b)| a + b).sum();
            assert_eq!(values(&d), vec![want]);
        }
        _ => {
            g.c.realize_with(Fusion::Off).expect("realize c unfused");
            assert_eq!(values(&g.c), g.want_c());
        }
    }
}

/// Runs `f`, turning a panic into a message: a panicking thread must
/// still reach the next barrier, or the others would wait forever.
fn catch(f: impl FnOnce()) -> Option<String> {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()?;
    Some(
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "non-string panic".into()),
    )
}

/// Runs `body(thread, round)` on `threads` threads for `rounds` rounds,
/// all threads starting each round together; fails with the panics seen.
fn race(threads: usize, rounds: usize, body: impl Fn(usize, usize) + Sync) {
    let barrier = Barrier::new(threads);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, failures, body) = (&barrier, &failures, &body);
            s.spawn(move || {
                for r in 0..rounds {
                    barrier.wait();
                    if let Some(msg) = catch(|| body(t, r)) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("thread {t} round {r}: {msg}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} failure(s), first: {}",
        failures.len(),
        failures[0]
    );
}

#[test]
fn concurrent_realizes_of_overlapping_graphs_agree_with_the_host() {
    let dev = common::test_device();
    let rounds: Vec<Round> = (0..ROUNDS).map(|r| Round::new(r, &dev)).collect();
    // Roles rotate with the round so every pairing of them races.
    race(THREADS, ROUNDS, |t, r| work(t + r, &rounds[r], &dev));
    for g in &rounds {
        assert_eq!(values(&g.c), g.want_c());
    }
}

#[test]
fn a_realize_racing_reads_of_the_same_tensor_keeps_one_result() {
    let dev = common::test_device();
    // Other structures than the test above (they share the schedule cache).
    let rounds: Vec<Round> = (ROUNDS..2 * ROUNDS).map(|r| Round::new(r, &dev)).collect();
    race(THREADS, ROUNDS, |t, r| {
        let g = &rounds[r];
        match t % 3 {
            0 => {
                g.c.realize().expect("realize");
            }
            1 => assert_eq!(values(&g.c), g.want_c()),
            _ => {
                let shown = format!("{}", g.c);
                assert!(!shown.contains("not computed"), "{shown}");
            }
        }
    });
    for g in &rounds {
        assert!(g.c.is_realized());
        assert_eq!(values(&g.c), g.want_c());
    }
}

/// Every upload is ordered before the kernels that read it, and every
/// read after the kernels that wrote it, while other threads queue work:
/// the driver's synchronous copies ran on the legacy default stream, which
/// does not order against smelt's non-blocking stream, so a kernel queued
/// right after a large upload could read the block's old bytes (found as
/// wrong unfused attention results under GPU load).
#[test]
fn uploads_land_before_the_kernels_that_read_them() {
    let dev = common::test_device();
    // Large enough that a copy takes longer than queueing a kernel.
    let len = if matches!(dev, smelt::Device::Cpu) {
        1 << 12
    } else {
        1 << 22
    };
    race(THREADS, 12, |t, r| {
        // Small integers: every sum below is exact in f32.
        let fill = ((t * 13 + r * 5) % 64) as f32;
        let x = Tensor::from_vec(vec![fill; len], [len], &dev);
        let y = (&x * 2.0 + 1.0).max(0);
        assert_eq!(values(&y), vec![2.0 * fill as f64 + 1.0]);
        assert_eq!(values(&(&x - fill).abs().sum(0)), vec![0.0]);
    });
}
