//! A batch of strided matrix products through the `gemm` crate (blocked,
//! packed, SIMD micro-kernels chosen at run time for the host's CPU,
//! multithreaded on rayon's pool).
//!
//! Measured on the 2-core build machine, 1024^3 f32: about 21 ms, against
//! about 90 ms for the 4x8 micro-kernel this replaced, so no GEMM of our
//! own is kept. The crate accumulates with FMAs in its own blocking order:
//! results agree with the interpreter's pairwise sums to rounding, not
//! bit for bit.

use super::layout::Layout;
use crate::dense::Acc;
use gemm::Parallelism;
use rayon::prelude::*;

/// An element type the GEMM multiplies: `f32` or `f64` (the `gemm` crate
/// dispatches on the type).
pub(super) trait Elem: Acc + Send + Sync + 'static {
    /// One.
    const ONE: Self;
    /// `v` rounded to this type (exact for the widened operands).
    fn from_f64(v: f64) -> Self;
}

impl Elem for f32 {
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Elem for f64 {
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// A pointer into a result buffer shared by threads that write disjoint
/// elements of it (the result layout is injective, checked below).
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);

// SAFETY: the threads write disjoint elements, and the borrow of the
// buffer outlives them (rayon joins before `product` returns).
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The element `offset` places in. A method, so closures capture the
    /// whole `Shared` (which is `Sync`), not its raw pointer field.
    ///
    /// # Safety
    /// `offset` must lie inside the buffer.
    unsafe fn at(&self, offset: usize) -> *mut T {
        self.0.add(offset)
    }
}

/// One operand or result: its buffer and where the matrices lie in it.
pub(super) struct Strided<'a, T> {
    pub data: &'a [T],
    pub layout: &'a Layout,
}

/// `dst[b] = scale · x[b] · y[b]ᵀ` for every batch position `b` (batch sizes
/// `batch`): `x` holds `m x k` matrices, `y` holds `n x k` (its rows are
/// the product's columns) and `dst` `m x n`. Elements of `dst` outside the
/// layout keep their values.
///
/// # Panics
/// If a layout reaches outside its buffer, the shapes disagree, or `dst`
/// would hold two elements at one place: the callers build layouts that
/// fit (a bug otherwise), and the checks make the unsafe calls sound.
pub(super) fn product<T: Elem>(
    x: Strided<T>,
    y: Strided<T>,
    batch: &[usize],
    dst: &mut [T],
    dl: &Layout,
    scale: T,
) {
    let (xl, yl) = (x.layout, y.layout);
    let (m, n, k) = (xl.rows, yl.rows, xl.cols);
    assert!(
        dl.rows == m && dl.cols == n && yl.cols == k,
        "matmul_cpu: operand shapes disagree"
    );
    assert!(
        xl.fits(batch, x.data.len()) && yl.fits(batch, y.data.len()),
        "matmul_cpu: an operand layout leaves its buffer"
    );
    assert!(
        dl.fits(batch, dst.len()) && dl.injective(batch),
        "matmul_cpu: a result layout leaves its buffer or overlaps itself"
    );
    let (xo, yo, dofs) = (
        xl.batch_offsets(batch),
        yl.batch_offsets(batch),
        dl.batch_offsets(batch),
    );
    let out = Shared(dst.as_mut_ptr());
    let one = |b: usize, par: Parallelism| {
        // SAFETY: every element each call reads or writes lies inside its
        // buffer (`fits`), and distinct batch positions write distinct
        // elements of `dst` (`injective`).
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                out.at(dofs[b]),
                dl.cs,
                dl.rs,
                false,
                x.data.as_ptr().add(xo[b]),
                xl.cs,
                xl.rs,
                y.data.as_ptr().add(yo[b]),
                yl.rs,
                yl.cs,
                T::ZERO,
                scale,
                false,
                false,
                false,
                par,
            );
        }
    };
    let threads = rayon::current_num_threads();
    let work = m.saturating_mul(n).saturating_mul(k);
    let batches = dofs.len();
    if threads > 1 && batches >= threads && work < gemm::get_threading_threshold() {
        // Many small products (attention heads, batched small matrices): one
        // per thread at a time, since each is too small to split.
        (0..batches)
            .into_par_iter()
            .for_each(|b| one(b, Parallelism::None));
    } else if threads > 1 && batches > 1 {
        // Fewer products than threads, or large ones: all at once, each
        // split over its share of the threads. One after another, each
        // split over every thread, paid a fan-out and a packing of its
        // operands per thread per product: 8 heads of 512x512x64 took
        // 2.5 ms on 16 cores where torch took 1.1.
        let share = threads.div_ceil(batches);
        (0..batches)
            .into_par_iter()
            .for_each(|b| one(b, Parallelism::Rayon(share)));
    } else {
        // One product: the crate splits it itself, and runs a small one
        // on one thread (its threading threshold).
        for b in 0..batches {
            one(b, Parallelism::Rayon(threads));
        }
    }
}
