//! A batch of strided matrix products through the `gemm` crate (blocked,
//! packed, SIMD micro-kernels chosen at run time for the host's CPU),
//! each result cut into blocks that rayon's threads take ([`Grid`]).
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
    // Element `r`, `c` of a matrix at `origin` (an element of the layout,
    // hence inside its buffer: `fits`).
    let at = |origin: usize, l: &Layout, r: usize, c: usize| {
        (origin as isize + r as isize * l.rs + c as isize * l.cs) as usize
    };
    let grid = Grid::new(m, n, k, dofs.len(), rayon::current_num_threads());
    let block = |t: usize| {
        let (b, rows, cols) = grid.block(t);
        // SAFETY: every element each call reads or writes lies inside its
        // buffer (`fits`: the blocks' corners are elements of the layouts),
        // and distinct blocks and batch positions write distinct elements
        // of `dst` (`injective`).
        unsafe {
            gemm::gemm(
                rows.len(),
                cols.len(),
                k,
                out.at(at(dofs[b], dl, rows.start, cols.start)),
                dl.cs,
                dl.rs,
                false,
                x.data.as_ptr().add(at(xo[b], xl, rows.start, 0)),
                xl.cs,
                xl.rs,
                y.data.as_ptr().add(at(yo[b], yl, cols.start, 0)),
                yl.rs,
                yl.cs,
                T::ZERO,
                scale,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
    };
    if grid.tasks() > 1 {
        (0..grid.tasks()).into_par_iter().for_each(block);
    } else {
        (0..grid.tasks()).for_each(block);
    }
}

/// How a batch of products is cut into tasks for the threads: each
/// product's `m x n` result into a grid of `rows x cols` blocks, each a
/// single-threaded `gemm` call that packs its own panels of both operands.
///
/// Why not the crate's own threading: on the 16-core host of the lent
/// GPU (KVM, 2026-11-29; BENCHMARKS.md, "CPU"), 1024^3 took 2.4-2.6 ms
/// split by the crate and 1.45-1.52 ms as 128 blocks over 16 threads
/// (NumPy 1.98), 2048^3 13-21 against 9.9-11.6 ms: the crate's threads
/// meet at a barrier per packed panel, where blocks taken from a queue
/// leave no thread waiting on a slow one. A block per thread (16) gained
/// half as much: about [`TASKS_PER_THREAD`] blocks a thread balance the
/// load, at the cost of packing each panel once per block that reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Grid {
    batches: usize,
    rows: usize,
    cols: usize,
    /// Rows and columns of a block (the last ones hold the rest).
    bm: usize,
    bn: usize,
    m: usize,
    n: usize,
}

/// Blocks a thread gets to take, about (see [`Grid`]).
const TASKS_PER_THREAD: usize = 8;

/// Blocks are cut no smaller than this along either side, and rounded up
/// to a multiple of it: 16 `f32` lanes of an AVX-512 register.
const MIN_SIDE: usize = 16;

impl Grid {
    /// The grid for `batches` products of `m x n x k` on `threads`
    /// threads: one block a product where the crate would not thread it
    /// (below its threading threshold) or there is one thread, else about
    /// `TASKS_PER_THREAD x threads` blocks over all products (a power of
    /// two a product, under twice that), each at least the threshold's
    /// work, cut by halving the longer side.
    fn new(m: usize, n: usize, k: usize, batches: usize, threads: usize) -> Grid {
        let work = m.saturating_mul(n).saturating_mul(k);
        let threshold = gemm::get_threading_threshold().max(1);
        let mut wanted = if threads > 1 && work >= threshold {
            (TASKS_PER_THREAD * threads)
                .div_ceil(batches.max(1))
                .min(work / threshold)
        } else {
            1
        };
        let (mut rows, mut cols) = (1, 1);
        while wanted > 1 {
            let (bm, bn) = (m.div_ceil(rows), n.div_ceil(cols));
            if bm >= bn && bm >= 2 * MIN_SIDE {
                rows *= 2;
            } else if bn >= 2 * MIN_SIDE {
                cols *= 2;
            } else {
                break;
            }
            wanted = wanted.div_ceil(2);
        }
        let side = |len: usize, parts: usize| {
            if parts == 1 {
                len.max(1)
            } else {
                len.div_ceil(parts).next_multiple_of(MIN_SIDE)
            }
        };
        let (bm, bn) = (side(m, rows), side(n, cols));
        // Rounding up may leave trailing blocks empty: drop them.
        Grid {
            batches,
            rows: m.div_ceil(bm).max(1),
            cols: n.div_ceil(bn).max(1),
            bm,
            bn,
            m,
            n,
        }
    }

    /// Blocks over all products.
    fn tasks(&self) -> usize {
        self.batches * self.rows * self.cols
    }

    /// Task `t`'s batch position and its block's rows and columns.
    fn block(&self, t: usize) -> (usize, std::ops::Range<usize>, std::ops::Range<usize>) {
        let (b, rc) = (t / (self.rows * self.cols), t % (self.rows * self.cols));
        let (r, c) = (rc / self.cols, rc % self.cols);
        let (r0, c0) = (r * self.bm, c * self.bn);
        (
            b,
            r0..(r0 + self.bm).min(self.m),
            c0..(c0 + self.bn).min(self.n),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every output element lies in exactly one block, at every shape
    /// and thread count, and blocks are cut only where the work is worth
    /// threading.
    #[test]
    fn blocks_tile_every_result_once() {
        let threshold = gemm::get_threading_threshold();
        for (m, n, k) in [
            (0, 0, 0),
            (1, 1, 1),
            (7, 1000, 3),
            (1024, 1024, 1024),
            (2048, 33, 4096),
            (33, 2048, 4096),
            (1000, 1000, 1),
            (4097, 127, 512),
        ] {
            for batches in [1, 3, 16, 40] {
                for threads in [1, 2, 16, 64] {
                    let g = Grid::new(m, n, k, batches, threads);
                    let mut seen = vec![0u8; batches * m * n];
                    for t in 0..g.tasks() {
                        let (b, rows, cols) = g.block(t);
                        assert!(b < batches);
                        for r in rows.clone() {
                            for c in cols.clone() {
                                seen[(b * m + r) * n + c] += 1;
                            }
                        }
                    }
                    let what = format!("{m}x{n}x{k}, {batches} batches, {threads} threads: {g:?}");
                    assert!(seen.iter().all(|&s| s == 1), "{what}");
                    let work = m * n * k;
                    if threads == 1 || work < threshold {
                        assert_eq!(g.tasks(), batches, "{what}");
                    } else {
                        // Halving cuts a power of two of blocks, under
                        // twice the wanted count.
                        let wanted = (TASKS_PER_THREAD * threads).div_ceil(batches);
                        assert!(g.rows * g.cols < 2 * wanted, "{what}");
                    }
                }
            }
        }
        // The shape the grid was measured at: 128 blocks of 128x64 or
        // 64x128 over 16 threads.
        let g = Grid::new(1024, 1024, 1024, 1, 16);
        assert_eq!(g.tasks(), 128);
        assert_eq!(g.bm * g.bn, 8192);
    }
}
