//! Shape errors panic where the op is recorded, naming the op, the shapes
//! and the axis; run-time failures are `Result`s.

mod common;

use common::*;
use smelt::{s, DType, Device, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, &test_device())
}

fn data(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(vec![1.0f32; n], shape, &test_device())
}

// Shape mismatch -------------------------------------------------------------

#[test]
#[should_panic(
    expected = "add: shapes [2, 3] and [4] do not broadcast (axis -1 of the result: 3 vs 4)"
)]
fn add_shape_mismatch() {
    let _ = t(&[2, 3]) + t(&[4]);
}

#[test]
#[should_panic(
    expected = "mul: shapes [5, 2, 3] and [4, 1] do not broadcast (axis -2 of the result: 2 vs 4)"
)]
fn mul_shape_mismatch_names_axis() {
    let _ = data(&[5, 2, 3]) * data(&[4, 1]);
}

#[test]
#[should_panic(expected = "lt: shapes [3] and [2] do not broadcast")]
fn comparison_shape_mismatch() {
    let _ = t(&[3]).lt(t(&[2]));
}

#[test]
#[should_panic(expected = "where: shapes [2, 2] and [3] do not broadcast")]
fn where_shape_mismatch() {
    let _ = t(&[2, 2]).gt(0.0).where_(t(&[3]), 0.0);
}

#[test]
#[should_panic(expected = "matmul: inner dimensions differ: shapes [2, 3] and [4, 5] (3 vs 4)")]
fn matmul_inner_mismatch() {
    let _ = t(&[2, 3]).matmul(&t(&[4, 5]));
}

#[test]
#[should_panic(
    expected = "matmul: batch dimensions of shapes [2, 4, 5] and [3, 5, 6] do not broadcast"
)]
fn matmul_batch_mismatch() {
    let _ = t(&[2, 4, 5]).matmul(&t(&[3, 5, 6]));
}

#[test]
#[should_panic(expected = "matmul: operands must have at least 1 dimension")]
fn matmul_of_scalar() {
    let _ = t(&[]).matmul(&t(&[2]));
}

#[test]
#[should_panic(expected = "broadcast_to: shape [3] cannot broadcast to [4]")]
fn broadcast_to_mismatch() {
    let _ = t(&[3]).broadcast_to([4]);
}

#[test]
#[should_panic(expected = "broadcast_to: shape [2, 3] cannot broadcast to [3]")]
fn broadcast_to_fewer_axes() {
    let _ = t(&[2, 3]).expand([3]);
}

#[test]
#[should_panic(expected = "cross_entropy: logits of shape [4, 3] and targets of shape [5]")]
fn cross_entropy_mismatch() {
    let _ = t(&[4, 3]).cross_entropy(&Tensor::zeros([5], DType::I32, &test_device()));
}

#[test]
#[should_panic(expected = "from_slice: 3 elements do not fill shape [2, 2] (4 elements)")]
fn from_vec_wrong_length() {
    let _ = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [2, 2], &test_device());
}

#[test]
#[should_panic(expected = "to_scalar: tensor of shape [2] has 2 elements, expected 1")]
fn to_scalar_of_many() {
    let _ = data(&[2]).to_scalar::<f32>();
}

#[test]
#[should_panic(expected = "pad: 1 pairs for a tensor of shape [2, 2]")]
fn pad_wrong_rank() {
    let _ = t(&[2, 2]).pad(&[(1, 1)], 0.0);
}

// Bad axis --------------------------------------------------------------------

#[test]
#[should_panic(expected = "sum: axis 2 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn sum_bad_axis() {
    let _ = t(&[2, 3]).sum(2);
}

#[test]
#[should_panic(expected = "max: axis -3 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn max_bad_negative_axis() {
    let _ = t(&[2, 3]).max_keepdim(-3);
}

#[test]
#[should_panic(
    expected = "sum: axis 1 is out of range for a tensor of shape [] (rank 0 takes 0 or -1)"
)]
fn reduce_axis_of_scalar() {
    // Axis 0 and -1 of a scalar are accepted, as in PyTorch.
    let _ = t(&[]).sum(1);
}

#[test]
#[should_panic(expected = "sum: repeated axis in [1, -1] for shape [2, 3]")]
fn repeated_axis() {
    let _ = t(&[2, 3]).sum([1, -1]);
}

#[test]
#[should_panic(expected = "mean: axis 3 is out of range for a tensor of shape [2, 3, 4] (rank 3)")]
fn mean_bad_axis() {
    let _ = t(&[2, 3, 4]).mean([0, 3]);
}

#[test]
#[should_panic(expected = "argmax: axis 2 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn argmax_bad_axis() {
    let _ = t(&[2, 3]).argmax(2);
}

#[test]
#[should_panic(expected = "argmin: axis 0 of shape [0, 3] is empty")]
fn argmin_of_empty_axis() {
    let _ = t(&[0, 3]).argmin(0);
}

#[test]
#[should_panic(expected = "softmax: axis 2 is out of range for a tensor of shape [4, 5] (rank 2)")]
fn softmax_bad_axis() {
    let _ = t(&[4, 5]).softmax(2);
}

#[test]
#[should_panic(
    expected = "log_softmax: axis -3 is out of range for a tensor of shape [4, 5] (rank 2)"
)]
fn log_softmax_bad_axis() {
    let _ = t(&[4, 5]).log_softmax(-3);
}

#[test]
#[should_panic(
    expected = "logsumexp: axis 2 is out of range for a tensor of shape [4, 5] (rank 2)"
)]
fn logsumexp_bad_axis() {
    let _ = t(&[4, 5]).logsumexp(2, false);
}

#[test]
#[should_panic(
    expected = "layer_norm: axis 2 is out of range for a tensor of shape [4, 5] (rank 2)"
)]
fn layer_norm_bad_axis() {
    let _ = t(&[4, 5]).layer_norm(2, None, None, 1e-5);
}

#[test]
#[should_panic(
    expected = "rms_norm: axis -3 is out of range for a tensor of shape [4, 5] (rank 2)"
)]
fn rms_norm_bad_axis() {
    let _ = t(&[4, 5]).rms_norm(-3, None, 1e-5);
}

#[test]
#[should_panic(expected = "var: axis 2 is out of range for a tensor of shape [4, 5] (rank 2)")]
fn var_bad_axis() {
    let _ = t(&[4, 5]).var(2, 1, false);
}

#[test]
#[should_panic(expected = "permute: [0, 0] is not a permutation of the axes of shape [2, 3]")]
fn permute_repeated() {
    let _ = t(&[2, 3]).permute([0, 0]);
}

#[test]
#[should_panic(expected = "permute: axis 2 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn permute_out_of_range() {
    let _ = t(&[2, 3]).permute([0, 2]);
}

#[test]
#[should_panic(expected = "permute: [0] is not a permutation of the axes of shape [2, 3]")]
fn permute_too_short() {
    let _ = t(&[2, 3]).permute([0]);
}

#[test]
#[should_panic(
    expected = "transpose: axis 3 is out of range for a tensor of shape [2, 3] (rank 2)"
)]
fn transpose_bad_axis() {
    let _ = t(&[2, 3]).transpose(0, 3);
}

#[test]
#[should_panic(expected = "t: expects at most 2 dimensions, got shape [2, 3, 4]")]
fn t_of_3d() {
    let _ = t(&[2, 3, 4]).t();
}

#[test]
#[should_panic(expected = "squeeze: axis 0 has size 2 (shape [2, 1])")]
fn squeeze_non_unit() {
    let _ = t(&[2, 1]).squeeze(0);
}

#[test]
#[should_panic(
    expected = "unsqueeze: axis 3 is out of range for a tensor of shape [2, 3] (valid: -3..=2)"
)]
fn unsqueeze_bad_axis() {
    // The valid positions of a rank-2 tensor are -3..=2.
    let _ = t(&[2, 3]).unsqueeze(3);
}

#[test]
#[should_panic(expected = "flip: axis 2 is out of range for a tensor of shape [2, 3] (rank 2)")]
fn flip_bad_axis() {
    let _ = t(&[2, 3]).flip(2);
}

#[test]
#[should_panic(expected = "narrow: axis -3 is out of range")]
fn narrow_bad_axis() {
    let _ = t(&[2, 3]).narrow(-3, 0, 1);
}

// Bad slice -------------------------------------------------------------------

#[test]
#[should_panic(expected = "slice: index 3 is out of range for axis 0 of size 3 (shape [3, 4])")]
fn slice_index_out_of_range() {
    let _ = t(&[3, 4]).slice(s![3]);
}

#[test]
#[should_panic(expected = "slice: index -5 is out of range for axis 1 of size 4 (shape [3, 4])")]
fn slice_negative_index_out_of_range() {
    let _ = t(&[3, 4]).slice(s![.., -5]);
}

#[test]
#[should_panic(expected = "slice: step of axis 1 is zero (shape [3, 4])")]
fn slice_zero_step() {
    let _ = t(&[3, 4]).slice(s![.., ..;0]);
}

#[test]
#[should_panic(expected = "slice: 3 indices for a tensor of shape [3, 4]")]
fn slice_too_many_indices() {
    let _ = t(&[3, 4]).slice(s![0, 0, 0]);
}

#[test]
#[should_panic(expected = "slice: a step needs a range, got Index(1)")]
fn slice_step_on_index() {
    let _ = s![1;2];
}

#[test]
#[should_panic(expected = "narrow: range 2..5 exceeds axis 1 of size 4 (shape [3, 4])")]
fn narrow_out_of_range() {
    let _ = t(&[3, 4]).narrow(1, 2, 3);
}

// Bad reshape -----------------------------------------------------------------

#[test]
#[should_panic(expected = "reshape: shape [2, 3] (6 elements) cannot become [4, 2]")]
fn reshape_wrong_count() {
    let _ = t(&[2, 3]).reshape([4, 2]);
}

#[test]
#[should_panic(expected = "reshape: invalid shape [-1, -1] for a tensor of shape [2, 3]")]
fn reshape_two_inferred() {
    let _ = t(&[2, 3]).reshape([-1, -1]);
}

#[test]
#[should_panic(expected = "reshape: invalid shape [2, -2] for a tensor of shape [2, 3]")]
fn reshape_negative_dim() {
    let _ = t(&[2, 3]).reshape([2, -2]);
}

#[test]
#[should_panic(expected = "reshape: cannot infer -1 in [4, -1] for a tensor of shape [2, 3]")]
fn reshape_cannot_infer() {
    let _ = t(&[2, 3]).reshape([4, -1]);
}

#[test]
#[should_panic(expected = "reshape: cannot infer -1 in [0, -1] for a tensor of shape [0, 3]")]
fn reshape_cannot_infer_from_zero() {
    let _ = t(&[0, 3]).reshape([0, -1]);
}

#[test]
#[should_panic(expected = "reshape: shape [2, 3] (6 elements) cannot become [7]")]
fn reshape_of_a_view() {
    let _ = data(&[3, 2]).t().reshape([7]);
}

#[test]
#[should_panic(expected = "full: negative dimension in shape [2, -1]")]
fn negative_dimension() {
    let _ = Tensor::full([2, -1], 0.0, DType::F32, &test_device());
}

#[test]
#[should_panic(expected = "arange: step must be non-zero and finite, got 0")]
fn arange_zero_step() {
    let _ = Tensor::arange(0.0, 1.0, 0.0, DType::F32, &test_device());
}

// Run-time errors are Results -------------------------------------------------

#[test]
fn missing_device_is_an_error_not_a_panic() {
    if smelt::cuda::is_available() {
        return;
    }
    let x = data(&[2, 2]);
    match x.to_device(&Device::Cuda(0)) {
        Err(smelt::Error::NoDevice(msg)) => assert!(msg.contains("cuda:0"), "{msg}"),
        other => panic!(
            "expected NoDevice, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    }
    assert_eq!(x.to_device(&test_device()).unwrap().shape(), &[2, 2]);
    let e = smelt::Error::NoDevice("cuda:0 is not available".into());
    assert_eq!(e.to_string(), "no device: cuda:0 is not available");
}

#[test]
fn errors_leave_no_half_recorded_state() {
    // A panicking op does not poison tensors used before it.
    let x = data(&[2, 3]);
    let r = std::panic::catch_unwind(|| {
        let _ = data(&[2, 3]) + data(&[3, 2]);
    });
    assert!(r.is_err());
    assert_eq!((&x * 2.0).sum(..).to_scalar::<f32>().unwrap(), 12.0);
}
