//! Hostile inputs (issue 10): sizes that overflow panic at the op with the
//! bad value, operands on different devices panic where they are combined,
//! and shape panics point at the caller's line, not inside smelt.

mod common;

use common::*;
use smelt::{s, DType, Device, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, &test_device())
}

/// A device other than the test device. Recording is lazy, so a tensor on a
/// device that is absent can still be built (only realizing it fails).
fn other_device() -> Device {
    match test_device() {
        Device::Cpu => Device::Cuda(0),
        Device::Cuda(_) => Device::Cpu,
    }
}

fn other(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, &other_device())
}

// Item 5: checked size arithmetic -------------------------------------------

#[test]
#[should_panic(expected = "full: shape [4294967296, 4294967296] has more than isize::MAX elements")]
fn huge_shape_panics_at_creation() {
    let _ = Tensor::zeros([1usize << 32, 1 << 32], DType::F32, &test_device());
}

#[test]
#[should_panic(
    expected = "reshape: shape [4294967296, 4294967296] has more than isize::MAX elements"
)]
fn huge_shape_panics_at_reshape() {
    let _ = t(&[0]).reshape([1usize << 32, 1 << 32]);
}

#[test]
#[should_panic(expected = "broadcast_to: shape [4294967296, 4294967296] has more than isize::MAX")]
fn huge_shape_panics_at_broadcast() {
    let _ = t(&[1, 1]).broadcast_to([1usize << 32, 1 << 32]);
}

#[test]
#[should_panic(
    expected = "narrow: start 18446744073709551615 + length 2 overflows (axis 0, shape [4])"
)]
fn narrow_with_wrapping_start_panics() {
    let _ = t(&[4]).narrow(0, usize::MAX, 2);
}

#[test]
#[should_panic(
    expected = "pad: pads [(18446744073709551615, 0)] overflow for a tensor of shape [3]"
)]
fn pad_with_wrapping_size_panics() {
    let _ = t(&[3]).pad(&[(usize::MAX, 0)], 0.0);
}

#[test]
#[should_panic(expected = "pad: shape [4611686018427387905, 4] has more than isize::MAX elements")]
fn pad_with_huge_total_panics() {
    let _ = t(&[1, 4]).pad(&[(1 << 62, 0), (0, 0)], 0.0);
}

#[test]
fn slice_with_extreme_steps_takes_one_element() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [4], &test_device());
    let fwd = x.slice(s![..;isize::MAX]);
    assert_eq!(fwd.to_vec::<f32>().unwrap(), vec![1.0]);
    let back = x.slice(s![..;isize::MIN]);
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![4.0]);
    let mid = x.slice(s![1..;isize::MAX - 1]);
    assert_eq!(mid.to_vec::<f32>().unwrap(), vec![2.0]);
}

#[test]
#[should_panic(expected = "eye: shape [4294967296, 4294967296] has more than isize::MAX elements")]
fn huge_eye_panics() {
    let _ = Tensor::eye(1 << 32, DType::F32, &test_device());
}

#[test]
#[should_panic(expected = "randn: shape [4294967296, 4294967296] has more than isize::MAX")]
fn huge_randn_panics() {
    let _ = Tensor::randn([1usize << 32, 1 << 32], DType::F32, 0, &test_device());
}

// Item 7: operands on different devices -------------------------------------

#[test]
#[should_panic(expected = "matmul: tensors on")]
fn matmul_on_two_devices_panics() {
    let _ = t(&[2, 2]).matmul(&other(&[2, 2]));
}

#[test]
#[should_panic(expected = "where: tensors on")]
fn where_on_two_devices_panics() {
    let c = Tensor::zeros([2], DType::Bool, &test_device());
    let _ = c.where_(t(&[2]), other(&[2]));
}

#[test]
#[should_panic(expected = "where: tensors on")]
fn where_condition_on_other_device_panics() {
    let c = Tensor::zeros([2], DType::Bool, &other_device());
    let _ = c.where_(t(&[2]), 0.0);
}

#[test]
#[should_panic(expected = "cross_entropy: tensors on")]
fn cross_entropy_on_two_devices_panics() {
    let target = Tensor::zeros([4], DType::I32, &other_device());
    let _ = t(&[4, 3]).cross_entropy(&target);
}

#[test]
#[should_panic(expected = "layer_norm: tensors on")]
fn layer_norm_weight_on_other_device_panics() {
    let _ = t(&[4, 3]).layer_norm(-1, Some(&other(&[3])), None, 1e-5);
}

#[test]
#[should_panic(expected = "rms_norm: tensors on")]
fn rms_norm_weight_on_other_device_panics() {
    let _ = t(&[4, 3]).rms_norm(-1, Some(&other(&[3])), 1e-5);
}

// Item 14: panics point at the caller ---------------------------------------

/// The file a panic of `f` reports.
fn panic_file(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(l) = info.location() {
            *sink.lock().unwrap() = l.file().to_string();
        }
    }));
    let r = std::panic::catch_unwind(f);
    std::panic::set_hook(prev);
    assert!(r.is_err(), "the op did not panic");
    let file = seen.lock().unwrap().clone();
    file
}

/// An op call expected to panic.
type Case = Box<dyn FnOnce() + std::panic::UnwindSafe>;

/// One test, so the global panic hook is not swapped by parallel tests.
#[test]
fn shape_panics_point_at_the_callers_line() {
    let here = file!();
    let cases: Vec<(&str, Case)> = vec![
        ("reshape", Box::new(|| drop(t(&[2, 3]).reshape([4, 2])))),
        ("reshape -1", Box::new(|| drop(t(&[2, 3]).reshape([4, -1])))),
        (
            "broadcast_to",
            Box::new(|| drop(t(&[2, 3]).broadcast_to([3]))),
        ),
        ("add", Box::new(|| drop(t(&[2, 3]) + t(&[4])))),
        ("maximum", Box::new(|| drop(t(&[2, 3]).maximum(t(&[4]))))),
        ("matmul", Box::new(|| drop(t(&[2, 3]).matmul(&t(&[4, 2]))))),
        (
            "matmul device",
            Box::new(|| drop(t(&[2, 2]).matmul(&other(&[2, 2])))),
        ),
        ("slice", Box::new(|| drop(t(&[2, 3]).slice(s![5])))),
        ("narrow", Box::new(|| drop(t(&[2, 3]).narrow(1, 2, 2)))),
        ("sum axis", Box::new(|| drop(t(&[2, 3]).sum(2)))),
        (
            "sum repeated axes",
            Box::new(|| drop(t(&[2, 3]).sum([0, 0]))),
        ),
        ("softmax", Box::new(|| drop(t(&[2, 3]).softmax(3)))),
        (
            "layer_norm axis",
            Box::new(|| drop(t(&[2, 3]).layer_norm(5, None, None, 1e-5))),
        ),
        (
            "layer_norm weight",
            Box::new(|| drop(t(&[2, 3]).layer_norm(-1, Some(&t(&[4])), None, 1e-5))),
        ),
        ("where", Box::new(|| drop(t(&[2]).where_(t(&[3]), 0.0)))),
        (
            "zeros",
            Box::new(|| drop(Tensor::full([2, -1], 0.0, DType::F32, &test_device()))),
        ),
        (
            "pad",
            Box::new(|| drop(t(&[2]).pad(&[(1, 1), (1, 1)], 0.0))),
        ),
        ("permute", Box::new(|| drop(t(&[2, 3]).permute([0, 0])))),
        ("unsqueeze", Box::new(|| drop(t(&[2, 3]).unsqueeze(5)))),
    ];
    let mut wrong = Vec::new();
    for (name, f) in cases {
        let file = panic_file(f);
        if !file.ends_with("reliability_inputs.rs") {
            wrong.push(format!("{name}: {file}"));
        }
    }
    assert!(wrong.is_empty(), "panics not at {here}: {wrong:#?}");
}
