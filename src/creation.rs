//! Creating tensors: from host data, constants and ranges (random
//! tensors: `random.rs`).

use crate::runtime::host::{self, Source};
use crate::shape::{dims, IntoShape};
use crate::{DType, Device, Element, Tensor};
use smelt_codegen::host_alloc::zeroed_bytes;
use smelt_codegen::Shape;
use smelt_fusion::{Node, Op, ShapeTracker};

/// The dtype of integer results that PyTorch makes `int64`
/// (`count_nonzero`): `I64`.
pub(crate) const LONG: DType = DType::I64;

impl Tensor {
    /// A tensor holding `data` with `shape` on `device`.
    ///
    /// The data is placed on the device when the tensor is first realized
    /// (or read): a missing device or a full memory is an `Err` there.
    ///
    /// # Panics
    /// If `data.len()` differs from the shape's element count.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [2, 3], &Device::Cpu);
    /// assert_eq!(t.shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl IntoShape, device: &Device) -> Tensor {
        Tensor::from_slice(&data, shape, device)
    }

    /// Like [`Tensor::from_vec`], copying from a slice.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: impl IntoShape, device: &Device) -> Tensor {
        let shape = dims("from_slice", shape);
        let n: usize = shape.iter().product();
        assert!(
            data.len() == n,
            "from_slice: {} elements do not fill shape {shape:?} ({n} elements)",
            data.len()
        );
        let dtype = T::DTYPE;
        // A host copy that cannot be allocated is reported by the realize.
        let source = match zeroed_bytes(n, dtype.size()) {
            Ok(mut bytes) => {
                for (i, x) in data.iter().enumerate() {
                    x.write(&mut bytes, i);
                }
                Source::Bytes(bytes)
            }
            Err(e) => Source::Failed(e.into()),
        };
        Tensor::from_source(source, shape, dtype, device)
    }

    /// A tensor whose element `i` (row-major) is `value(i)` rounded to
    /// `dtype`, computed when the tensor is placed on its device.
    #[track_caller]
    fn generated(
        value: impl Fn(usize) -> f64 + Send + Sync + 'static,
        shape: impl Into<Shape>,
        dtype: DType,
        device: &Device,
    ) -> Tensor {
        Tensor::from_source(Source::Gen(Box::new(value)), shape, dtype, device)
    }

    pub(crate) fn from_source(
        source: Source,
        shape: impl Into<Shape>,
        dtype: DType,
        device: &Device,
    ) -> Tensor {
        let shape = shape.into();
        let n = shape.iter().product();
        let buf = host::pending(source, dtype, n);
        Tensor::from_node(Node::buffer(buf, shape, dtype), *device)
    }

    /// A rank-0 tensor: a graph constant (an `f64`), or a one-element
    /// buffer for a value an `f64` cannot hold (an `i64` beyond 2^53).
    #[track_caller]
    pub fn scalar<T: Element>(value: T, device: &Device) -> Tensor {
        let v = value.to_f64();
        let (mut exact, mut through_f64) = ([0u8; 8], [0u8; 8]);
        value.write(&mut exact, 0);
        T::from_f64(v).write(&mut through_f64, 0);
        if exact == through_f64 {
            Tensor::full([0usize; 0], v, T::DTYPE, device)
        } else {
            Tensor::from_vec(vec![value], [0usize; 0], device)
        }
    }

    /// A tensor of `shape` filled with `value` (a broadcast constant: no
    /// memory until a kernel writes it out).
    #[track_caller]
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
    #[track_caller]
    pub fn zeros(shape: impl IntoShape, dtype: DType, device: &Device) -> Tensor {
        Tensor::full(shape, 0.0, dtype, device)
    }

    /// Ones of `shape`.
    #[track_caller]
    pub fn ones(shape: impl IntoShape, dtype: DType, device: &Device) -> Tensor {
        Tensor::full(shape, 1.0, dtype, device)
    }

    /// Zeros with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros(self.shape(), self.dtype(), &self.device())
    }

    /// Ones with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn ones_like(&self) -> Tensor {
        Tensor::ones(self.shape(), self.dtype(), &self.device())
    }

    /// `value` with this tensor's shape, dtype and device.
    #[track_caller]
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
    #[track_caller]
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
        match exact_iota(start, step, n, dtype) {
            Some((start, step)) => {
                let iota = Tensor::from_node(
                    Node::new(Op::Iota { start, step }, vec![n], DType::I32),
                    *device,
                );
                if dtype == DType::I32 {
                    iota
                } else {
                    iota.cast(dtype)
                }
            }
            None => Tensor::generated(move |i| start + i as f64 * step, vec![n], dtype, device),
        }
    }

    /// `n` evenly spaced values from `start` to `end` inclusive.
    #[track_caller]
    pub fn linspace(start: f64, end: f64, n: usize, dtype: DType, device: &Device) -> Tensor {
        let step = if n > 1 {
            (end - start) / (n - 1) as f64
        } else {
            0.0
        };
        let value = move |i| {
            if i + 1 == n && n > 1 {
                end
            } else {
                start + i as f64 * step
            }
        };
        Tensor::generated(value, vec![n], dtype, device)
    }

    /// The `n x n` identity matrix.
    ///
    /// # Panics
    /// If `n * n` elements cannot exist (more than `isize::MAX`).
    #[track_caller]
    pub fn eye(n: usize, dtype: DType, device: &Device) -> Tensor {
        crate::shape::numel("eye", &[n, n]);
        Tensor::generated(
            move |i| (i / n == i % n) as u8 as f64,
            vec![n, n],
            dtype,
            device,
        )
    }

    /// `I32`: every element's row-major linear index, computed where it
    /// is used (a kernel reads it from its loop coordinates, no memory).
    /// What random counters are built from.
    pub(crate) fn iota(shape: Shape, device: &Device) -> Tensor {
        Tensor::from_node(
            Node::new(Op::Iota { start: 0, step: 1 }, shape, DType::I32),
            *device,
        )
    }
}

/// `arange`'s `(start, step)` as an `I32` iota's, if each of its `n`
/// values is an integer that fits an `I32` and converts to `dtype`
/// exactly: then the lazy iota (cast to `dtype`) holds exactly the values
/// the generated buffer would, and costs no memory. Otherwise `None`
/// (fractional steps, huge values, `Bool`): the values are generated.
fn exact_iota(start: f64, step: f64, n: usize, dtype: DType) -> Option<(i64, i64)> {
    let integral = |x: f64| x.is_finite() && x.fract() == 0.0 && x.abs() <= i32::MAX as f64;
    // `-0.0 + 0 * step` is `-0.0` for a negative step, which no integer is.
    let negative_zero = start == 0.0 && start.is_sign_negative();
    if n == 0 || negative_zero || !integral(start) || !integral(step) {
        return None;
    }
    let last = start + (n - 1) as f64 * step;
    let (lo, hi) = (start.min(last), start.max(last));
    // Every integer in this range converts exactly.
    let exact = match dtype {
        DType::Bool => (0.0, -1.0),
        DType::F64 | DType::I64 => (i32::MIN as f64, i32::MAX as f64),
        dt if dt.is_float() => {
            let limit = dt.exact_int_limit() as f64;
            (-limit, limit)
        }
        dt => (dt.int_min() as f64, dt.int_max() as f64),
    };
    let fits = lo >= exact.0.max(i32::MIN as f64) && hi <= exact.1.min(i32::MAX as f64);
    fits.then_some((start as i64, step as i64))
}
