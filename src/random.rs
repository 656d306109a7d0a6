//! Random tensors, generated on the device inside the kernels that use
//! them: every element is a Philox4x32-10 draw (`smelt_codegen::philox`)
//! keyed by the seed and counted by the element's row-major index, so the
//! same seed gives the same numbers on every device, and `randn(..) * 2 +
//! 1` is one kernel that writes only its result.
//!
//! Which word of an element's Philox block each function reads, so that
//! tensors drawn with one seed by different functions are not copies of
//! each other: `rand`, `uniform`, `bernoulli` and `dropout` word 0 (so
//! `bernoulli(p, s)` is `rand(s) < p`), `randint` word 1, `randn` and
//! `normal` words 2 and 3.

use crate::shape::dims;
use crate::{DType, Device, IntoShape, Tensor};
use smelt_codegen::philox::{key_of_seed, Draw};
use smelt_codegen::Shape;
use smelt_fusion::{Node, Op};

/// The dtype of `randint`'s values: `I32`, not PyTorch's `int64`. A draw
/// is one 32-bit Philox word scaled to the range (Lemire's multiply-shift,
/// bias at most `range / 2^32`): a 64-bit range would need two words per
/// element and a 64-bit multiply-shift, which smelt does not do yet, and
/// an `I64` result of a 32-bit draw would promise ranges it cannot give.
pub(crate) const RANDINT_DTYPE: DType = DType::I32;

/// Largest element count a random tensor may have: the counter is 32 bits
/// wide, and a larger tensor would repeat its numbers.
const MAX_ELEMENTS: u64 = 1 << 32;

/// The draw `draw` for every element of `shape`, with `bound` the extra
/// operand of [`Draw::Below`].
#[track_caller]
fn philox(
    op: &str,
    draw: Draw,
    shape: Shape,
    seed: u64,
    bound: Option<i32>,
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
        srcs.push(Tensor::full(shape.clone(), n as f64, DType::I32, device));
    }
    let (srcs, dtype) = (
        srcs.into_iter().map(|t| t.node).collect(),
        match draw {
            Draw::Uniform(_) => DType::F32,
            Draw::Below(_) => DType::I32,
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

impl Tensor {
    /// Uniform random values in `[0, 1)` (multiples of `2^-24`, `F64` too);
    /// the same `seed` gives the same values on every device.
    ///
    /// ```
    /// use smelt::{Device, DType, Tensor};
    /// let u = Tensor::rand([1000], DType::F32, 7, &Device::Cpu).to_vec::<f32>().unwrap();
    /// assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not a float type or the shape has more than `2^32`
    /// elements.
    #[track_caller]
    pub fn rand(shape: impl IntoShape, dtype: DType, seed: u64, device: &Device) -> Tensor {
        float_dtype("rand", dtype);
        let shape = dims("rand", shape);
        philox("rand", Draw::Uniform(0), shape, seed, None, device).cast(dtype)
    }

    /// Uniform random values in `[low, high)`: `low + (high - low) * u`
    /// computed in `f32` for `u` of [`Tensor::rand`] (so, as in PyTorch,
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
        float_dtype("uniform", dtype);
        let shape = dims("uniform", shape);
        let u = philox("uniform", Draw::Uniform(0), shape, seed, None, device);
        (u * (high - low) + low).cast(dtype)
    }

    /// Standard normal random values (Box-Muller in `f32` from two uniforms
    /// of the element's Philox block); the same `seed` gives the same
    /// values on every device up to the last few ulp: `log`, `sqrt` and
    /// `cos` are exactly rounded on the CPU and within 2 ulp on the GPU.
    /// Values lie within about 5.8 of 0 (the smallest uniform is `2^-24`).
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
        float_dtype("randn", dtype);
        let shape = dims("randn", shape);
        standard_normal("randn", shape, seed, device).cast(dtype)
    }

    /// Normal random values with mean `mean` and standard deviation `std`:
    /// `mean + std * z` in `f32` for `z` of [`Tensor::randn`].
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
        float_dtype("normal", dtype);
        let shape = dims("normal", shape);
        (standard_normal("normal", shape, seed, device) * std + mean).cast(dtype)
    }

    /// Uniform random integers in `[low, high)` (PyTorch `randint`), of
    /// dtype `I32` (PyTorch's default is `int64`: the draw is one 32-bit
    /// word, see `RANDINT_DTYPE` in `random.rs`; cast the result for
    /// `I64`).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let d = Tensor::randint(1, 7, [100], 3, &Device::Cpu).to_vec::<i32>().unwrap();
    /// assert!(d.iter().all(|x| (1..7).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `low >= high`, a bound does not fit the dtype, or the shape has
    /// more than `2^32` elements.
    #[track_caller]
    pub fn randint(
        low: i64,
        high: i64,
        shape: impl IntoShape,
        seed: u64,
        device: &Device,
    ) -> Tensor {
        let (min, max) = (i64::from(i32::MIN), i64::from(i32::MAX) + 1);
        assert!(
            low < high && low >= min && high <= max,
            "randint: expected {min} <= low < high <= {max} for dtype {RANDINT_DTYPE}, got [{low}, {high})"
        );
        let shape = dims("randint", shape);
        // The range, up to 2^32, as the draw's unsigned bound (2^32 is 0).
        let n = (high - low) as u64 as u32 as i32;
        philox("randint", Draw::Below(1), shape, seed, Some(n), device) + low as i32
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
        let u = philox(
            "bernoulli",
            Draw::Uniform(0),
            self.shape().into(),
            seed,
            None,
            &self.device(),
        );
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
        let u = philox(
            "dropout",
            Draw::Uniform(0),
            self.shape().into(),
            seed,
            None,
            &self.device(),
        );
        // 1 / (1 - p) is infinite for p = 1, where no element is kept.
        let cd = self.dtype().compute_float();
        let scale = Tensor::full([0usize; 0], 1.0 / (1.0 - p), cd, &self.device());
        let scale = u.ge(p).where_(&scale, 0.0);
        (self.cast(cd) * scale).cast(self.dtype())
    }
}

/// `F32` standard normals from words 2 and 3 (Box-Muller: `1 - u` lies in
/// `(0, 1]`, so the logarithm is finite).
#[track_caller]
fn standard_normal(op: &str, shape: Shape, seed: u64, device: &Device) -> Tensor {
    let u1 = philox(op, Draw::Uniform(2), shape.clone(), seed, None, device);
    let u2 = philox(op, Draw::Uniform(3), shape, seed, None, device);
    let radius = ((1.0f64 - u1).log() * -2.0).sqrt();
    radius * (u2 * std::f64::consts::TAU).cos()
}
