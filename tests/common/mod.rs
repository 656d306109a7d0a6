//! Shared test helpers: the device under test, a host reference array
//! (`NdArray`, shape + `Vec<f64>`, indexed by coordinates), inputs in every
//! memory layout, a seeded PRNG, and `check`, which realizes a graph under
//! both `Fusion::Off` and `Fusion::On` and compares each against the
//! reference.
#![allow(dead_code)]

use smelt::{DType, Device, Fusion, SliceArg, Tensor};
use smelt_codegen::rng::SplitMix64;

/// For a test that should pass on both CPU engines: true where the test
/// runs its body through the interpreter, that is in a process whose
/// `SMELT_CPU` is `interp`. Elsewhere (the executor, the default) it runs
/// test `name` of this binary again in a child process with
/// `SMELT_CPU=interp`, asserts that it passed, and returns false. On a
/// GPU the CPU engines are not under test: false, nothing run.
pub fn on_the_interpreter(name: &str) -> bool {
    if std::env::var("SMELT_CPU").is_ok_and(|v| v == "interp") {
        return true;
    }
    if !matches!(test_device(), Device::Cpu) {
        println!("skipped: {name} tests the CPU interpreter");
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let status = std::process::Command::new(exe)
        .env("SMELT_CPU", "interp")
        .args([name, "--exact", "--nocapture"])
        .status()
        .expect("running the test binary again");
    assert!(status.success(), "{name} failed under SMELT_CPU=interp");
    false
}

/// The device every test runs on: the first CUDA GPU when there is one
/// (`SMELT_TEST_DEVICE=cpu` forces the CPU), else the CPU, saying so once.
/// With `SMELT_REQUIRE_CUDA=1`, no GPU is a failure, not a skip.
pub fn test_device() -> Device {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let forced_cpu = std::env::var("SMELT_TEST_DEVICE").is_ok_and(|v| v == "cpu");
    let require = std::env::var("SMELT_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    if !forced_cpu && smelt::cuda::is_available() {
        return Device::Cuda(0);
    }
    assert!(
        !require,
        "SMELT_REQUIRE_CUDA=1 but no CUDA device is available"
    );
    ONCE.call_once(|| {
        eprintln!("skipped: CUDA runs of the tests (no CUDA device); testing the CPU backend")
    });
    Device::Cpu
}

/// Both schedules every check runs under (the differential requirement).
pub const MODES: [Fusion; 2] = [Fusion::Off, Fusion::On];

// ---------------------------------------------------------------------------
// PRNG

/// The tests' seeded PRNG: `smelt_codegen::rng::SplitMix64` with the
/// draws tests and fuzzers use.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// The stream for `seed` (salted, so seeds 0, 1, 2 are not the
    /// generator's raw states).
    pub fn new(seed: u64) -> Rng {
        Rng::salted(seed, 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The stream whose state starts at `seed ^ salt`: a test that keeps
    /// its own salt keeps the streams its printed replay seeds name.
    pub fn salted(seed: u64, salt: u64) -> Rng {
        Rng(SplitMix64::new(seed ^ salt))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: isize, hi: isize) -> isize {
        lo + self.below((hi - lo + 1) as usize) as isize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0.next_f64()
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// One of `xs` (not empty), uniformly.
    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }

    /// A random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
}

// ---------------------------------------------------------------------------
// Host reference array

/// Row-major strides of `shape`.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Coordinates of flat index `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// NumPy broadcasting of two shapes, computed independently of smelt.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r {
                a[i + a.len() - r]
            } else {
                1
            };
            let db = if i + b.len() >= r {
                b[i + b.len() - r]
            } else {
                1
            };
            assert!(da == db || da == 1 || db == 1, "test bug: {a:?} vs {b:?}");
            if da == 1 {
                db
            } else {
                da
            }
        })
        .collect()
}

/// Python's `range(n)[start:stop:step]`, written out the slow way.
pub fn py_slice(start: Option<isize>, stop: Option<isize>, step: isize, n: usize) -> Vec<usize> {
    assert!(step != 0);
    let n = n as isize;
    let mut out = Vec::new();
    if step > 0 {
        let fix = |v: isize| {
            let v = if v < 0 { v + n } else { v };
            v.clamp(0, n)
        };
        let mut i = start.map_or(0, fix);
        let e = stop.map_or(n, fix);
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let fix = |v: isize| {
            let v = if v < 0 { v + n } else { v };
            v.clamp(-1, n - 1)
        };
        let mut i = start.map_or(n - 1, fix);
        let e = stop.map_or(-1, fix);
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

/// A host n-d array of `f64`, the reference every result is checked
/// against. Every method is a plain loop over coordinates.
#[derive(Clone, Debug, PartialEq)]
pub struct NdArray {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl NdArray {
    pub fn new(shape: &[usize], data: Vec<f64>) -> NdArray {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "test bug");
        NdArray {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn scalar(v: f64) -> NdArray {
        NdArray::new(&[], vec![v])
    }

    pub fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> NdArray {
        let n = shape.iter().product();
        let data = (0..n).map(|i| f(&unravel(i, shape))).collect();
        NdArray::new(shape, data)
    }

    pub fn full(shape: &[usize], v: f64) -> NdArray {
        NdArray::from_fn(shape, |_| v)
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn at(&self, c: &[usize]) -> f64 {
        assert_eq!(c.len(), self.shape.len(), "test bug: rank");
        let mut i = 0;
        for (d, x) in c.iter().enumerate() {
            assert!(*x < self.shape[d], "test bug: index");
            i = i * self.shape[d] + x;
        }
        self.data[i]
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> NdArray {
        NdArray::new(&self.shape, self.data.iter().map(|x| f(*x)).collect())
    }

    /// Rounds every element to `dt` (what storing in `dt` does).
    pub fn round(&self, dt: DType) -> NdArray {
        self.map(|x| dt.round(x))
    }

    /// Broadcasting elementwise combination.
    pub fn zip(&self, o: &NdArray, f: impl Fn(f64, f64) -> f64) -> NdArray {
        let shape = broadcast_shape(&self.shape, &o.shape);
        let (a, b) = (self.broadcast_to(&shape), o.broadcast_to(&shape));
        NdArray::new(
            &shape,
            a.data.iter().zip(&b.data).map(|(x, y)| f(*x, *y)).collect(),
        )
    }

    /// Value of `self` at coordinates of a broadcast result of rank >= own.
    pub fn at_broadcast(&self, c: &[usize]) -> f64 {
        let off = c.len() - self.ndim();
        let own: Vec<usize> = (0..self.ndim())
            .map(|d| if self.shape[d] == 1 { 0 } else { c[off + d] })
            .collect();
        self.at(&own)
    }

    pub fn broadcast_to(&self, shape: &[usize]) -> NdArray {
        assert!(shape.len() >= self.ndim(), "test bug: broadcast");
        NdArray::from_fn(shape, |c| self.at_broadcast(c))
    }

    pub fn reshape(&self, shape: &[usize]) -> NdArray {
        NdArray::new(shape, self.data.clone())
    }

    /// Result axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> NdArray {
        let shape: Vec<usize> = perm.iter().map(|p| self.shape[*p]).collect();
        NdArray::from_fn(&shape, |c| {
            let mut src = vec![0; c.len()];
            for (i, p) in perm.iter().enumerate() {
                src[*p] = c[i];
            }
            self.at(&src)
        })
    }

    /// Keeps positions `idx` (in that order) of `axis`.
    pub fn take(&self, axis: usize, idx: &[usize]) -> NdArray {
        let mut shape = self.shape.clone();
        shape[axis] = idx.len();
        NdArray::from_fn(&shape, |c| {
            let mut src = c.to_vec();
            src[axis] = idx[c[axis]];
            self.at(&src)
        })
    }

    /// Removes `axis` by taking position `i` of it.
    pub fn index(&self, axis: usize, i: usize) -> NdArray {
        let t = self.take(axis, &[i]);
        let mut shape = t.shape.clone();
        shape.remove(axis);
        t.reshape(&shape)
    }

    /// NumPy indexing, the reference for `Tensor::slice`.
    pub fn slice(&self, args: impl AsRef<[SliceArg]>) -> NdArray {
        let mut out = self.clone();
        let mut d = 0; // axis of `out` the next argument applies to
        for a in args.as_ref() {
            match *a {
                SliceArg::NewAxis => {
                    let mut s = out.shape.clone();
                    s.insert(d, 1);
                    out = out.reshape(&s);
                    d += 1;
                }
                SliceArg::Index(i) => {
                    let n = out.shape[d] as isize;
                    let j = if i < 0 { i + n } else { i };
                    out = out.index(d, j as usize);
                }
                SliceArg::Range { start, end, step } => {
                    let idx = py_slice(start, end, step, out.shape[d]);
                    out = out.take(d, &idx);
                    d += 1;
                }
            }
        }
        out
    }

    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> NdArray {
        let idx: Vec<usize> = (start..start + len).collect();
        self.take(axis, &idx)
    }

    pub fn flip(&self, axes: &[usize]) -> NdArray {
        NdArray::from_fn(&self.shape, |c| {
            let mut src = c.to_vec();
            for a in axes {
                src[*a] = self.shape[*a] - 1 - c[*a];
            }
            self.at(&src)
        })
    }

    pub fn pad(&self, pads: &[(usize, usize)], value: f64) -> NdArray {
        let shape: Vec<usize> = self
            .shape
            .iter()
            .zip(pads)
            .map(|(n, (b, a))| n + b + a)
            .collect();
        NdArray::from_fn(&shape, |c| {
            let mut src = Vec::with_capacity(c.len());
            for (d, x) in c.iter().enumerate() {
                let (b, _) = pads[d];
                if *x < b || *x >= b + self.shape[d] {
                    return value;
                }
                src.push(x - b);
            }
            self.at(&src)
        })
    }

    /// Folds `axes` with `f` from `init`; `keepdim` keeps them with size 1.
    pub fn reduce(
        &self,
        axes: &[usize],
        keepdim: bool,
        init: f64,
        f: impl Fn(f64, f64) -> f64,
    ) -> NdArray {
        let kept: Vec<usize> = (0..self.ndim())
            .map(|d| if axes.contains(&d) { 1 } else { self.shape[d] })
            .collect();
        let mut out = NdArray::full(&kept, init);
        for i in 0..self.numel() {
            let c = unravel(i, &self.shape);
            let oc: Vec<usize> = c
                .iter()
                .enumerate()
                .map(|(d, x)| if axes.contains(&d) { 0 } else { *x })
                .collect();
            let o = strides_of(&kept)
                .iter()
                .zip(&oc)
                .map(|(s, x)| s * x)
                .sum::<usize>();
            out.data[o] = f(out.data[o], self.data[i]);
        }
        if keepdim {
            out
        } else {
            let shape: Vec<usize> = (0..self.ndim())
                .filter(|d| !axes.contains(d))
                .map(|d| self.shape[d])
                .collect();
            out.reshape(&shape)
        }
    }

    pub fn sum(&self, axes: &[usize], keepdim: bool) -> NdArray {
        self.reduce(axes, keepdim, 0.0, |a, x| a + x)
    }

    pub fn prod(&self, axes: &[usize], keepdim: bool) -> NdArray {
        self.reduce(axes, keepdim, 1.0, |a, x| a * x)
    }

    /// Maximum; NaN wins.
    pub fn max(&self, axes: &[usize], keepdim: bool) -> NdArray {
        self.reduce(axes, keepdim, f64::NEG_INFINITY, nan_max)
    }

    /// Minimum; NaN wins.
    pub fn min(&self, axes: &[usize], keepdim: bool) -> NdArray {
        self.reduce(axes, keepdim, f64::INFINITY, nan_min)
    }

    pub fn mean(&self, axes: &[usize], keepdim: bool) -> NdArray {
        let n: usize = axes.iter().map(|a| self.shape[*a]).product();
        self.sum(axes, keepdim).map(|s| s / n as f64)
    }

    /// First index of the extreme along `axis` (NaN counts as extreme);
    /// `better(a, b)` says `a` beats the current best `b`.
    pub fn arg(&self, axis: usize, keepdim: bool, better: impl Fn(f64, f64) -> bool) -> NdArray {
        let mut kept = self.shape.clone();
        kept[axis] = 1;
        let r = NdArray::from_fn(&kept, |c| {
            let mut best = 0;
            let mut c2 = c.to_vec();
            for i in 0..self.shape[axis] {
                c2[axis] = i;
                let v = self.at(&c2);
                c2[axis] = best;
                let b = self.at(&c2);
                if b.is_nan() {
                    break;
                }
                if v.is_nan() || better(v, b) {
                    best = i;
                }
            }
            best as f64
        });
        if keepdim {
            r
        } else {
            let mut s = self.shape.clone();
            s.remove(axis);
            r.reshape(&s)
        }
    }

    /// Batched matmul with broadcast batch dims (both at least 2-D).
    pub fn matmul(&self, o: &NdArray) -> NdArray {
        let (ra, rb) = (self.ndim(), o.ndim());
        let (m, k) = (self.shape[ra - 2], self.shape[ra - 1]);
        let (k2, n) = (o.shape[rb - 2], o.shape[rb - 1]);
        assert_eq!(k, k2, "test bug: matmul");
        let batch = broadcast_shape(&self.shape[..ra - 2], &o.shape[..rb - 2]);
        let mut shape = batch.clone();
        shape.extend([m, n]);
        let a = self.broadcast_to(&[batch.clone(), vec![m, k]].concat());
        let b = o.broadcast_to(&[batch.clone(), vec![k, n]].concat());
        NdArray::from_fn(&shape, |c| {
            let r = c.len();
            let mut acc = 0.0;
            for kk in 0..k {
                let mut ca = c.to_vec();
                ca[r - 1] = kk;
                let mut cb = c.to_vec();
                cb[r - 2] = kk;
                acc += a.at(&ca) * b.at(&cb);
            }
            acc
        })
    }
}

pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

pub fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Normalises a possibly negative axis.
pub fn ax(a: isize, rank: usize) -> usize {
    if a < 0 {
        (a + rank as isize) as usize
    } else {
        a as usize
    }
}

// ---------------------------------------------------------------------------
// Building tensors

/// A realized tensor of `dtype` holding `values` (rounded to `dtype`) and
/// the exact host copy of what it holds.
pub fn make(values: &[f64], shape: &[usize], dtype: DType) -> (Tensor, NdArray) {
    let dev = test_device();
    // `as` converts by the cast rule, as `DType::round` does.
    let t = match dtype {
        DType::F64 => Tensor::from_vec(values.to_vec(), shape, &dev),
        DType::F32 => Tensor::from_vec(
            values.iter().map(|v| *v as f32).collect::<Vec<_>>(),
            shape,
            &dev,
        ),
        DType::I64 => Tensor::from_vec(values.iter().map(|v| *v as i64).collect(), shape, &dev),
        DType::I32 => Tensor::from_vec(values.iter().map(|v| *v as i32).collect(), shape, &dev),
        DType::I16 => Tensor::from_vec(values.iter().map(|v| *v as i16).collect(), shape, &dev),
        DType::I8 => Tensor::from_vec(values.iter().map(|v| *v as i8).collect(), shape, &dev),
        DType::U8 => Tensor::from_vec(values.iter().map(|v| *v as u8).collect(), shape, &dev),
        DType::Bool => Tensor::from_vec(
            values.iter().map(|v| *v != 0.0).collect::<Vec<_>>(),
            shape,
            &dev,
        ),
        // Halves and FP8: a cast of exactly representable f32s, realized
        // once so the tensor is plain data.
        DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => {
            let t = Tensor::from_vec(
                values
                    .iter()
                    .map(|v| dtype.round(*v) as f32)
                    .collect::<Vec<_>>(),
                shape,
                &dev,
            )
            .cast(dtype);
            t.realize_with(Fusion::Off).unwrap();
            t
        }
    };
    assert_eq!(t.dtype(), dtype);
    let host = NdArray::new(shape, values.iter().map(|v| dtype.round(*v)).collect());
    (t, host)
}

/// The value of FP8 code `c` of `dt` by the format's definition (sign,
/// exponent with its bias, mantissa; E4M3's all-ones code and E5M2's
/// all-ones exponent the specials), independent of smelt's conversions.
pub fn fp8_value(dt: DType, c: u8) -> f64 {
    let (mant, bias, exp_bits) = if dt == DType::F8E4M3 {
        (3, 7, 4)
    } else {
        (2, 15, 5)
    };
    let sign = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((c & 0x7f) >> mant);
    let m = f64::from(c & ((1 << mant) - 1));
    let top = (1 << exp_bits) - 1;
    if dt == DType::F8E5M2 && e == top {
        return if m == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if dt == DType::F8E4M3 && c & 0x7f == 0x7f {
        return f64::NAN;
    }
    let frac = m / f64::from(1 << mant);
    if e == 0 {
        sign * frac * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(e - bias)
    }
}

/// `v` cast to the FP8 type `dt` by PyTorch's rule, from the definition:
/// the nearest finite code (ties to the even code); E4M3 gives NaN above
/// 464 (the tie between 448 and 480, which would be its NaN code), for
/// infinities and NaN; E5M2 gives infinity from 61440 (the tie between
/// 57344 and 2^16) on.
pub fn fp8_ref(v: f64, dt: DType) -> f64 {
    let a = v.abs();
    if v.is_nan() || (dt == DType::F8E4M3 && a > 464.0) {
        return f64::NAN;
    }
    if dt == DType::F8E5M2 && a >= 61440.0 {
        return v.signum() * f64::INFINITY;
    }
    let mut best = (0u8, 0.0f64);
    for c in 0..0x80u8 {
        let x = fp8_value(dt, c);
        if !x.is_finite() {
            continue;
        }
        let (d, db) = ((x - a).abs(), (best.1 - a).abs());
        if d < db || (d == db && c & 1 == 0) {
            best = (c, x);
        }
    }
    if v < 0.0 {
        -best.1
    } else {
        best.1
    }
}

/// `make` from an `NdArray`.
pub fn tensor_of(a: &NdArray, dtype: DType) -> Tensor {
    make(&a.data, &a.shape, dtype).0
}

/// Random values in `[lo, hi)` (whole numbers for integer types, coin
/// flips for Bool).
pub fn random_values(n: usize, dtype: DType, lo: f64, hi: f64, rng: &mut Rng) -> Vec<f64> {
    (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.chance(0.5) as u8 as f64,
            _ if dtype.is_int() => rng.uniform(lo, hi).floor(),
            _ => rng.uniform(lo, hi),
        })
        .collect()
}

/// The memory layouts every op is checked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Contiguous,
    /// The transpose of a contiguous buffer (all axes reversed).
    Permuted,
    /// Every axis sliced with a step: `1::2` on even axes, `::-2` on odd.
    Strided,
    /// Even axes broadcast from size 1 (stride 0).
    Broadcast,
    /// Every axis flipped (negative strides).
    Flipped,
    /// Zero padding on every non-empty axis (a masked view).
    Padded,
}

pub const LAYOUTS: [Layout; 6] = [
    Layout::Contiguous,
    Layout::Permuted,
    Layout::Strided,
    Layout::Broadcast,
    Layout::Flipped,
    Layout::Padded,
];

/// An input of a given logical shape stored in a given layout: a realized
/// base buffer plus the movement ops that turn it into the input. Each call
/// of [`Input::tensor`] records the movement ops afresh, so every graph
/// built from it is new.
#[derive(Clone)]
pub struct Input {
    pub layout: Layout,
    pub shape: Vec<usize>,
    pub base: Tensor,
    pub base_host: NdArray,
}

impl Input {
    /// An input of `shape` and `dtype` whose stored values are uniform in
    /// `[lo, hi)`.
    pub fn new(
        layout: Layout,
        shape: &[usize],
        dtype: DType,
        lo: f64,
        hi: f64,
        seed: u64,
    ) -> Input {
        let mut rng = Rng::new(seed);
        let base_shape = Input::base_shape(layout, shape);
        let n = base_shape.iter().product();
        let vals = random_values(n, dtype, lo, hi, &mut rng);
        Input::build(layout, shape, &base_shape, dtype, &vals)
    }

    /// The shape of the buffer `layout` views as `shape`.
    fn base_shape(layout: Layout, shape: &[usize]) -> Vec<usize> {
        let r = shape.len();
        match layout {
            Layout::Contiguous | Layout::Flipped => shape.to_vec(),
            Layout::Permuted => shape.iter().rev().copied().collect(),
            Layout::Strided => (0..r)
                .map(|d| {
                    if d % 2 == 0 {
                        2 * shape[d] + 1
                    } else {
                        2 * shape[d]
                    }
                })
                .collect(),
            Layout::Broadcast => (0..r)
                .map(|d| if d % 2 == 0 { 1 } else { shape[d] })
                .collect(),
            Layout::Padded => shape.iter().map(|n| n.saturating_sub(1)).collect(),
        }
    }

    /// An input whose stored values cycle through `vals`.
    pub fn with_values(layout: Layout, shape: &[usize], dtype: DType, vals: &[f64]) -> Input {
        let base_shape = Input::base_shape(layout, shape);
        let n: usize = base_shape.iter().product();
        let vals: Vec<f64> = (0..n).map(|i| vals[i % vals.len()]).collect();
        Input::build(layout, shape, &base_shape, dtype, &vals)
    }

    fn build(
        layout: Layout,
        shape: &[usize],
        base_shape: &[usize],
        dtype: DType,
        vals: &[f64],
    ) -> Input {
        let (base, base_host) = make(vals, base_shape, dtype);
        let inp = Input {
            layout,
            shape: shape.to_vec(),
            base,
            base_host,
        };
        assert_eq!(inp.tensor().shape(), shape, "test bug: layout shape");
        inp
    }

    fn pads(&self) -> Vec<(usize, usize)> {
        self.shape
            .iter()
            .enumerate()
            .map(|(d, n)| match (*n, d % 2) {
                (0, _) => (0, 0),
                (_, 0) => (1, 0),
                _ => (0, 1),
            })
            .collect()
    }

    fn steps(&self) -> Vec<SliceArg> {
        (0..self.shape.len())
            .map(|d| {
                if d % 2 == 0 {
                    SliceArg::Range {
                        start: Some(1),
                        end: None,
                        step: 2,
                    }
                } else {
                    SliceArg::Range {
                        start: None,
                        end: None,
                        step: -2,
                    }
                }
            })
            .collect()
    }

    /// The input as a (fresh) view of the base.
    pub fn tensor(&self) -> Tensor {
        let r = self.shape.len();
        let b = &self.base;
        match self.layout {
            Layout::Contiguous => b.clone(),
            Layout::Permuted => b.permute((0..r).rev().collect::<Vec<usize>>()),
            Layout::Strided => b.slice(self.steps()),
            Layout::Broadcast => b.expand(&self.shape),
            Layout::Flipped => b.flip(..),
            Layout::Padded => b.pad(&self.pads(), 0.0),
        }
    }

    /// The input's values on the host.
    pub fn host(&self) -> NdArray {
        let r = self.shape.len();
        let b = &self.base_host;
        match self.layout {
            Layout::Contiguous => b.clone(),
            Layout::Permuted => b.permute(&(0..r).rev().collect::<Vec<usize>>()),
            Layout::Strided => b.slice(self.steps()),
            Layout::Broadcast => b.broadcast_to(&self.shape),
            Layout::Flipped => b.flip(&(0..r).collect::<Vec<usize>>()),
            Layout::Padded => b.pad(&self.pads(), 0.0),
        }
    }
}

// ---------------------------------------------------------------------------
// Checking

/// Tolerance: `|got - want| <= abs` or relative error `<= rel`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub rel: f64,
    pub abs: f64,
}

pub const EXACT: Tol = Tol { rel: 0.0, abs: 0.0 };

impl Tol {
    pub fn new(rel: f64, abs: f64) -> Tol {
        Tol { rel, abs }
    }

    /// Scales both bounds.
    pub fn times(self, k: f64) -> Tol {
        Tol {
            rel: self.rel * k,
            abs: self.abs * k,
        }
    }
}

/// The tolerance of a few rounding steps in `dt`.
pub fn tol(dt: DType) -> Tol {
    match dt {
        DType::F64 => Tol::new(1e-12, 1e-14),
        DType::F32 => Tol::new(2e-5, 1e-6),
        DType::F16 => Tol::new(4e-3, 1e-3),
        DType::BF16 => Tol::new(3e-2, 1e-2),
        // One step of the format (2^-3 or 2^-2 relative).
        DType::F8E4M3 => Tol::new(0.13, 2e-3),
        DType::F8E5M2 => Tol::new(0.26, 2e-5),
        _ => EXACT,
    }
}

/// True when `got` matches `want` within `t`; NaN matches NaN, infinities
/// must match exactly.
pub fn close(got: f64, want: f64, t: Tol) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    approx::relative_eq!(got, want, epsilon = t.abs, max_relative = t.rel)
}

/// Panics with the first mismatch between `got` and `want`.
pub fn assert_close(what: &str, got: &[f64], want: &NdArray, t: Tol) {
    assert_eq!(got.len(), want.numel(), "{what}: element count");
    for (i, (g, w)) in got.iter().zip(&want.data).enumerate() {
        assert!(
            close(*g, *w, t),
            "{what}: element {:?} of shape {:?}: got {g}, want {w} (tol {t:?})",
            unravel(i, &want.shape),
            want.shape
        );
    }
}

/// Realizes a fresh `build()` under each fusion mode and compares it with
/// `want` (shape and values).
pub fn check(what: &str, build: impl Fn() -> Tensor, want: &NdArray, t: Tol) {
    for mode in MODES {
        let label = format!("{what} [{mode:?}]");
        let (shape, got) = run_labelled(&label, || {
            let y = build();
            let shape = y.shape().to_vec();
            y.realize_with(mode)?;
            // Read back through a copy made under the same mode, so a view
            // is read by a kernel of this mode too (`to_vec` alone would use
            // the mode from the environment).
            let c = y.contiguous();
            c.realize_with(mode)?;
            Ok((shape, c.to_vec::<f64>()?))
        });
        assert_eq!(shape, want.shape, "{label}: shape");
        assert_close(&label, &got, want, t);
    }
}

/// Runs `f`, turning an error or a panic inside smelt into a panic that
/// names the failing case.
pub fn run_labelled<T>(label: &str, f: impl FnOnce() -> smelt::Result<T>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{label}: {e}"),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            panic!("{label}: smelt panicked: {msg}")
        }
    }
}

/// [`check`] that also asserts the result dtype.
pub fn check_dt(what: &str, build: impl Fn() -> Tensor, dt: DType, want: &NdArray, t: Tol) {
    let got = run_labelled(what, || Ok(build().dtype()));
    assert_eq!(got, dt, "{what}: dtype");
    check(what, build, want, t);
}

/// The values of `y` computed under `mode`.
pub fn values(y: &Tensor, mode: Fusion) -> Vec<f64> {
    y.realize_with(mode).unwrap();
    let c = y.contiguous();
    c.realize_with(mode).unwrap();
    c.to_vec::<f64>().unwrap()
}
