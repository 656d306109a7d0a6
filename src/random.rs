//! Random tensors, generated on the device inside the kernels that use
//! them: every element is a Philox4x32-10 draw (`smelt_codegen::philox`)
//! keyed by the seed and counted by the element's row-major index, so the
//! same seed gives the same numbers on every device, and `randn(..) * 2 +
//! 1` is one kernel that writes only its result.
//!
//! Which word of an element's Philox blocks each function reads, so that
//! tensors drawn with one seed by different functions are not copies of
//! each other: `rand`, `uniform`, `bernoulli` and `dropout` word 0 (so
//! `bernoulli(p, s)` is `rand(s) < p`), `randint` word 1, `randn` and
//! `normal` words 2 and 3. `F64` floats and `randint` take 64 bits per
//! value (the word of blocks 0 and 1, see [`Draw`]); the rest 32.

use crate::shape::dims;
use crate::{DType, Device, IntoShape, Tensor};
use smelt_codegen::philox::{key_of_seed, Draw};
use smelt_codegen::Shape;
use smelt_fusion::{Node, Op};

/// Largest element count a random tensor may have: the counter is 32 bits
/// wide, and a larger tensor would repeat its numbers.
const MAX_ELEMENTS: u64 = 1 << 32;

/// The draw `draw` for every element of `shape`, with `bound` the extra
/// operand of [`Draw::Below`] (read as unsigned).
#[track_caller]
fn philox(
    op: &str,
    draw: Draw,
    shape: Shape,
    seed: u64,
    bound: Option<u64>,
    device: &Device,
) -> Tensor {
    assert!(
        shape.iter().product::<usize>() as u64 <= MAX_ELEMENTS,
        "{op}: shape {shape:?} has more than 2^32 elements, the random counter's range"
    );
    let word = |w: u32| Tensor::full(shape.clone(), w as i32 as f64, DType::I32, device);
    let [lo, hi] = key_of_seed(seed);
    let mut srcs = vec![word(lo), word(hi), Tensor::iota(shape.clone(), device)];
    if let Some(n) = bound {
        // Exact: an i64 beyond 2^53 is no f64 constant.
        srcs.push(Tensor::scalar(n as i64, device).broadcast_to(&shape));
    }
    let (srcs, dtype) = (
        srcs.into_iter().map(|t| t.node).collect(),
        match draw {
            Draw::Uniform(_) => DType::F32,
            Draw::Uniform53(_) => DType::F64,
            Draw::Below(_) => DType::I64,
        },
    );
    Tensor::from_node(Node::new(Op::Random(draw, srcs), shape, dtype), *device)
}

/// Panics unless `dtype` is a float type (random values of other types
/// are `randint`'s).
#[track_caller]
fn float_dtype(op: &str, dtype: DType) {
    assert!(
        dtype.is_float(),
        "{op}: dtype {dtype} is not a float type (randint draws integers)"
    );
}

/// Panics unless `dtype` is a float type random values can be drawn in:
/// not FP8, whose rounding would turn most of `[0.97, 1)` into 1 and
/// leave few distinct values (PyTorch has no FP8 generators either).
#[track_caller]
fn drawn_dtype(op: &str, dtype: DType) {
    float_dtype(op, dtype);
    assert!(
        !dtype.is_fp8(),
        "{op}: no random values in {dtype}: draw float32 values and cast them"
    );
}

/// Uniforms in `[0, 1)` from word `word`, in `dtype`'s compute type: 53
/// random bits for `F64`, 24 (exact in `f32`) otherwise.
#[track_caller]
fn unit(op: &str, word: u8, dtype: DType, shape: Shape, seed: u64, device: &Device) -> Tensor {
    let draw = if dtype == DType::F64 {
        Draw::Uniform53(word)
    } else {
        Draw::Uniform(word)
    };
    philox(op, draw, shape, seed, None, device)
}

impl Tensor {
    /// Uniform random values in `[0, 1)`: multiples of `2^-24` (`F64`: of
    /// `2^-53`, within `2^-24` of the `F32` values of the same seed); the
    /// same `seed` gives the same values on every device.
    ///
    /// ```
    /// use smelt::{Device, DType, Tensor};
    /// let u = Tensor::rand([1000], DType::F32, 7, &Device::Cpu).to_vec::<f32>().unwrap();
    /// assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not a float type, is an FP8 type (draw `F32` and cast),
    /// or the shape has more than `2^32` elements.
    #[track_caller]
    pub fn rand(shape: impl IntoShape, dtype: DType, seed: u64, device: &Device) -> Tensor {
        drawn_dtype("rand", dtype);
        let shape = dims("rand", shape);
        unit("rand", 0, dtype, shape, seed, device).cast(dtype)
    }

    /// Uniform random values in `[low, high)`: `low + (high - low) * u`
    /// computed in `f32` (`f64` for `F64`) for `u` of [`Tensor::rand`] (so,
    /// as in PyTorch,
    /// rounding may give `high` itself when the range is wide next to
    /// `low`).
    ///
    /// # Panics
    /// As [`Tensor::rand`], and if `low > high` or either is not finite.
    #[track_caller]
    pub fn uniform(
        low: f64,
        high: f64,
        shape: impl IntoShape,
        dtype: DType,
        seed: u64,
        device: &Device,
    ) -> Tensor {
        assert!(
            low.is_finite() && high.is_finite() && low <= high,
            "uniform: expected finite low <= high, got [{low}, {high})"
        );
        drawn_dtype("uniform", dtype);
        let shape = dims("uniform", shape);
        let u = unit("uniform", 0, dtype, shape, seed, device);
        (u * (high - low) + low).cast(dtype)
    }

    /// Standard normal random values (Box-Muller in `f32` from two uniforms
    /// of the element's Philox block; in `f64` from two 53-bit ones for
    /// `F64`); the same `seed` gives the same values on every device up to
    /// the last few ulp: `log`, `sqrt` and `cos` are exactly rounded on
    /// the CPU and within 2 ulp on the GPU. Values lie within about 5.8 of
    /// 0 (8.6 for `F64`: the smallest uniform is `2^-24`, `2^-53`).
    ///
    /// ```
    /// use smelt::{Device, DType, Tensor};
    /// let a = Tensor::randn([3], DType::F32, 42, &Device::Cpu);
    /// let b = Tensor::randn([3], DType::F32, 42, &Device::Cpu);
    /// assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::rand`].
    #[track_caller]
    pub fn randn(shape: impl IntoShape, dtype: DType, seed: u64, device: &Device) -> Tensor {
        drawn_dtype("randn", dtype);
        let shape = dims("randn", shape);
        standard_normal("randn", dtype, shape, seed, device).cast(dtype)
    }

    /// Normal random values with mean `mean` and standard deviation `std`:
    /// `mean + std * z` in `f32` (`f64` for `F64`) for `z` of
    /// [`Tensor::randn`].
    ///
    /// # Panics
    /// As [`Tensor::rand`], and if `std` is negative or either is not
    /// finite.
    #[track_caller]
    pub fn normal(
        mean: f64,
        std: f64,
        shape: impl IntoShape,
        dtype: DType,
        seed: u64,
        device: &Device,
    ) -> Tensor {
        assert!(
            mean.is_finite() && std.is_finite() && std >= 0.0,
            "normal: expected finite mean and std >= 0, got mean {mean}, std {std}"
        );
        drawn_dtype("normal", dtype);
        let shape = dims("normal", shape);
        (standard_normal("normal", dtype, shape, seed, device) * std + mean).cast(dtype)
    }

    /// Uniform random integers in `[low, high)` (PyTorch `randint`), of
    /// dtype `I64` as in PyTorch: each value is the high 64 bits of a
    /// 64-bit Philox draw times the range (two words per element), so every
    /// range up to `i64::MAX - i64::MIN` is covered, with a bias of at most
    /// `range / 2^64` per value.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let d = Tensor::randint(1, 7, [100], 3, &Device::Cpu).to_vec::<i64>().unwrap();
    /// assert!(d.iter().all(|x| (1..7).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `low >= high` or the shape has more than `2^32` elements.
    #[track_caller]
    pub fn randint(
        low: i64,
        high: i64,
        shape: impl IntoShape,
        seed: u64,
        device: &Device,
    ) -> Tensor {
        assert!(
            low < high,
            "randint: expected low < high, got [{low}, {high})"
        );
        let shape = dims("randint", shape);
        // The range, 1 to 2^64 - 1, as the draw's unsigned bound; the sum
        // wraps back into [low, high).
        let n = high.wrapping_sub(low) as u64;
        philox("randint", Draw::Below(1), shape, seed, Some(n), device) + low
    }

    /// Ones with probability `p` (this tensor's values), else zeros, in
    /// this tensor's dtype (PyTorch `torch.bernoulli(p)`): `rand(seed) <
    /// p` elementwise, so `p <= 0` (and NaN) gives 0 and `p >= 1` gives 1.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let p = Tensor::from_vec(vec![0.0f32, 1.0, 0.0, 1.0], [4], &Device::Cpu);
    /// assert_eq!(p.bernoulli(5).to_vec::<f32>().unwrap(), vec![0.0, 1.0, 0.0, 1.0]);
    /// ```
    ///
    /// # Panics
    /// If the dtype is not a float type or the tensor has more than `2^32`
    /// elements.
    #[doc(alias = "binomial")]
    #[track_caller]
    pub fn bernoulli(&self, seed: u64) -> Tensor {
        float_dtype("bernoulli", self.dtype());
        let (dt, shape) = (self.dtype(), self.shape().into());
        let u = unit("bernoulli", 0, dt, shape, seed, &self.device());
        u.lt(self.cast(self.dtype().compute_float()))
            .cast(self.dtype())
    }

    /// Dropout as in training (PyTorch `F.dropout(x, p)`): each element is
    /// zeroed with probability `p` (where `rand(seed) < p`) and the others
    /// are scaled by `1 / (1 - p)`; computed in `f32` for half types (in
    /// `f64` for `F64`). As in
    /// PyTorch the input is multiplied by the mask, so a dropped NaN or
    /// infinity gives NaN; `p = 0` returns the values unchanged, `p = 1`
    /// zeros (times the input).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32; 1000], [1000], &Device::Cpu);
    /// let y = x.dropout(0.5, 1).to_vec::<f32>().unwrap();
    /// assert!(y.iter().all(|v| *v == 0.0 || *v == 2.0));
    /// ```
    ///
    /// # Panics
    /// If `p` is not in `[0, 1]`, the dtype is not a float type, or the
    /// tensor has more than `2^32` elements.
    #[track_caller]
    pub fn dropout(&self, p: f64, seed: u64) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&p),
            "dropout: probability p = {p} is not in [0, 1]"
        );
        float_dtype("dropout", self.dtype());
        let (dt, shape) = (self.dtype(), self.shape().into());
        let u = unit("dropout", 0, dt, shape, seed, &self.device());
        // 1 / (1 - p) is infinite for p = 1, where no element is kept.
        let cd = self.dtype().compute_float();
        let scale = Tensor::full([0usize; 0], 1.0 / (1.0 - p), cd, &self.device());
        let scale = u.ge(p).where_(&scale, 0.0);
        (self.cast(cd) * scale).cast(self.dtype())
    }
}

/// Standard normals from words 2 and 3 in `dtype`'s compute type (`F64`
/// or `F32`; Box-Muller: `1 - u` lies in `(0, 1]`, so the logarithm is
/// finite).
#[track_caller]
fn standard_normal(op: &str, dtype: DType, shape: Shape, seed: u64, device: &Device) -> Tensor {
    let u1 = unit(op, 2, dtype, shape.clone(), seed, device);
    let u2 = unit(op, 3, dtype, shape, seed, device);
    let radius = ((1.0f64 - u1).log() * -2.0).sqrt();
    radius * (u2 * std::f64::consts::TAU).cos()
}
