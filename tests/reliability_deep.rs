//! Deep graphs (issue 10, item 3): a chain of a million ops records,
//! realizes and drops on a thread with a 2 MiB stack (the default size of a
//! spawned thread), so no walk over the graph recurses per node.

mod common;

use smelt::{Device, Fusion, Tensor};
use smelt_codegen::ptx::{self, Target};

/// `y = y * 0.9999 + 0.5` steps: two ops each, a million ops in all. The
/// recurrence contracts towards 5000, so rounding errors do not grow.
const STEPS: usize = 500_000;

const SMALL_STACK: usize = 2 << 20;

/// Runs `f` on a new thread with a 2 MiB stack.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the thread panicked");
}

fn chain(x: &Tensor, steps: usize) -> Tensor {
    let mut y = x.clone();
    for _ in 0..steps {
        y = &y * 0.9999 + 0.5;
    }
    y
}

#[test]
fn a_million_op_chain_realizes_and_drops_on_a_small_stack() {
    let dev = common::test_device();
    on_small_stack(move || {
        let x0 = [-3.0, 0.0, 1.5, 7000.0];
        let x = Tensor::from_vec(x0.iter().map(|v| *v as f32).collect(), [4], &dev);
        let y = chain(&x, STEPS);
        let got = y.to_vec::<f64>().expect("realize");
        for (i, (g, x)) in got.iter().zip(x0).enumerate() {
            let mut want = x;
            for _ in 0..STEPS {
                want = want * 0.9999 + 0.5;
            }
            assert!(
                (g - want).abs() <= 1e-3 * want.abs(),
                "element {i}: got {g}, host {want}"
            );
        }
        drop(y);
    });
}

#[test]
fn a_million_node_unrealized_chain_drops_on_a_small_stack() {
    let dev = common::test_device();
    on_small_stack(move || {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev);
        let y = chain(&x, STEPS);
        assert!(!y.is_realized());
        drop(y);
    });
}

#[test]
fn the_ptx_of_a_million_op_chain_emits_on_a_small_stack() {
    // Host-side only: the emitter must walk the kernel without recursing,
    // whatever device the suite runs on.
    on_small_stack(|| {
        let x = Tensor::from_vec(vec![1.0f32; 4], [4], &Device::Cpu);
        let s = chain(&x, STEPS).schedule(Fusion::On);
        for it in s.items.iter() {
            for t in Target::CHECKED {
                let p = ptx::emit(&it.kernel, &t).expect("emit");
                assert!(p.ptx.contains(".entry"));
            }
        }
    });
}
