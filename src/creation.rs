//! Creating tensors: from host data, constants, ranges and random numbers.

use crate::shape::{dims, IntoShape};
use crate::{rng, runtime, DType, Device, Element, Tensor};
use smelt_fusion::{Node, Op, ShapeTracker};

impl Tensor {
    /// A tensor holding `data` with `shape` on `device`.
    ///
    /// # Panics
    /// If `data.len()` differs from the shape's element count, or the
    /// device is not available (use [`Device::best`] to pick one that is).
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [2, 3], &Device::Cpu);
    /// assert_eq!(t.shape(), &[2, 3]);
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl IntoShape, device: &Device) -> Tensor {
        Tensor::from_slice(&data, shape, device)
    }

    /// Like [`Tensor::from_vec`], copying from a slice.
    pub fn from_slice<T: Element>(data: &[T], shape: impl IntoShape, device: &Device) -> Tensor {
        let shape = dims("from_slice", shape);
        let n: usize = shape.iter().product();
        assert!(
            data.len() == n,
            "from_slice: {} elements do not fill shape {shape:?} ({n} elements)",
            data.len()
        );
        Tensor::from_f64_iter(data.iter().map(|x| x.to_f64()), shape, T::DTYPE, device)
    }

    /// Builds a buffer from values rounded to `dtype`.
    pub(crate) fn from_f64_iter(
        values: impl Iterator<Item = f64>,
        shape: Vec<usize>,
        dtype: DType,
        device: &Device,
    ) -> Tensor {
        let n: usize = shape.iter().product();
        // Creation is eager and infallible: a failed host allocation panics
        // here with the size (never the allocator's abort).
        let mut bytes = smelt_codegen::host_alloc::zeroed_bytes(n, dtype.size())
            .unwrap_or_else(|e| panic!("from_slice: shape {shape:?} of {dtype}: {e}"));
        for (i, v) in values.take(n).enumerate() {
            dtype.write(&mut bytes, i, v);
        }
        let buf = runtime::upload(bytes, *device)
            .unwrap_or_else(|e| panic!("from_slice: cannot place data on {device}: {e}"));
        Tensor::from_node(Node::buffer(buf, shape, dtype), *device)
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(value: T, device: &Device) -> Tensor {
        Tensor::full([0usize; 0], value.to_f64(), T::DTYPE, device)
    }

    /// A tensor of `shape` filled with `value` (a broadcast constant: no
    /// memory until a kernel writes it out).
    pub fn full(shape: impl IntoShape, value: f64, dtype: DType, device: &Device) -> Tensor {
        let shape = dims("full", shape);
        let c = Node::new(Op::Const(dtype.round(value)), vec![], dtype);
        if shape.is_empty() {
            return Tensor::from_node(c, *device);
        }
        let ones = vec![1; shape.len()];
        let st = ShapeTracker::contiguous(&[]).reshape(&ones).expand(&shape);
        Tensor::from_node(Node::new(Op::View(c, st.into()), shape, dtype), *device)
    }

    /// Zeros of `shape`.
    pub fn zeros(shape: impl IntoShape, dtype: DType, device: &Device) -> Tensor {
        Tensor::full(shape, 0.0, dtype, device)
    }

    /// Ones of `shape`.
    pub fn ones(shape: impl IntoShape, dtype: DType, device: &Device) -> Tensor {
        Tensor::full(shape, 1.0, dtype, device)
    }

    /// Zeros with this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros(self.shape(), self.dtype(), &self.device())
    }

    /// Ones with this tensor's shape, dtype and device.
    pub fn ones_like(&self) -> Tensor {
        Tensor::ones(self.shape(), self.dtype(), &self.device())
    }

    /// `value` with this tensor's shape, dtype and device.
    pub fn full_like(&self, value: f64) -> Tensor {
        Tensor::full(self.shape(), value, self.dtype(), &self.device())
    }

    /// `start, start + step, ...` up to but excluding `end` (NumPy's
    /// `arange`).
    ///
    /// # Panics
    /// If `step` is zero or not finite.
    ///
    /// ```
    /// use smelt::{Device, DType, Tensor};
    /// let t = Tensor::arange(0.0, 5.0, 2.0, DType::I32, &Device::Cpu);
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![0, 2, 4]);
    /// ```
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType, device: &Device) -> Tensor {
        assert!(
            step != 0.0 && step.is_finite(),
            "arange: step must be non-zero and finite, got {step}"
        );
        let count = ((end - start) / step).ceil().max(0.0);
        // A count no buffer can hold is a user error, not a failed
        // allocation (`as usize` would saturate into a capacity overflow).
        assert!(
            count <= (isize::MAX as usize / dtype.size()) as f64,
            "arange: [{start}, {end}) with step {step} has {count} elements, more than a buffer can hold"
        );
        let n = count as usize;
        Tensor::from_f64_iter(
            (0..n).map(|i| start + i as f64 * step),
            vec![n],
            dtype,
            device,
        )
    }

    /// `n` evenly spaced values from `start` to `end` inclusive.
    pub fn linspace(start: f64, end: f64, n: usize, dtype: DType, device: &Device) -> Tensor {
        let step = if n > 1 {
            (end - start) / (n - 1) as f64
        } else {
            0.0
        };
        let vals = (0..n).map(move |i| {
            if i + 1 == n && n > 1 {
                end
            } else {
                start + i as f64 * step
            }
        });
        Tensor::from_f64_iter(vals, vec![n], dtype, device)
    }

    /// The `n x n` identity matrix.
    pub fn eye(n: usize, dtype: DType, device: &Device) -> Tensor {
        let vals = (0..n * n).map(move |i| (i / n == i % n) as u8 as f64);
        Tensor::from_f64_iter(vals, vec![n, n], dtype, device)
    }

    /// Uniform random values in `[0, 1)`; the same `seed` gives the same
    /// values on every device.
    pub fn rand(shape: impl IntoShape, dtype: DType, seed: u64, device: &Device) -> Tensor {
        Tensor::random("rand", shape, dtype, device, move |i| rng::uniform(seed, i))
    }

    /// Standard normal random values; the same `seed` gives the same values
    /// on every device.
    ///
    /// ```
    /// use smelt::{Device, DType, Tensor};
    /// let a = Tensor::randn([3], DType::F32, 42, &Device::Cpu);
    /// let b = Tensor::randn([3], DType::F32, 42, &Device::Cpu);
    /// assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    /// ```
    pub fn randn(shape: impl IntoShape, dtype: DType, seed: u64, device: &Device) -> Tensor {
        Tensor::random("randn", shape, dtype, device, move |i| rng::normal(seed, i))
    }

    /// A buffer whose element `i` (row-major) is `value(i)`.
    fn random(
        op: &str,
        shape: impl IntoShape,
        dtype: DType,
        device: &Device,
        value: impl Fn(u64) -> f64,
    ) -> Tensor {
        Tensor::from_f64_iter((0..).map(value), dims(op, shape), dtype, device)
    }
}
