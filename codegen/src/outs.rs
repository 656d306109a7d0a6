//! Output buffers shared by the threads of one CPU kernel run (the
//! executor's row blocks, the interpreter's parallel rows), and the test
//! that makes sharing them sound: every output element has one writer.

use crate::expr::{Atom, Expr};
use crate::ir::{Kernel, StoreKind};
use std::marker::PhantomData;

/// The output buffers, shared by the threads that write disjoint elements
/// of them.
pub(crate) struct Outs<'a> {
    bufs: Vec<(*mut u8, usize)>,
    _life: PhantomData<&'a mut [u8]>,
}

// SAFETY: the buffers are only written through `Outs::elems`, whose callers
// write disjoint elements (see there).
unsafe impl Sync for Outs<'_> {}
unsafe impl Send for Outs<'_> {}

impl<'a> Outs<'a> {
    /// Shares `outputs` for the duration of a run.
    pub(crate) fn new(outputs: &'a mut [&mut [u8]]) -> Outs<'a> {
        Outs {
            bufs: outputs
                .iter_mut()
                .map(|b| (b.as_mut_ptr(), b.len()))
                .collect(),
            _life: PhantomData,
        }
    }

    /// The start of output `o` (for code that writes it as this type's
    /// users do: disjoint elements per thread).
    #[cfg(feature = "llvm-jit")]
    pub(crate) fn ptr(&self, o: usize) -> *mut u8 {
        self.bufs[o].0
    }

    /// Bytes of elements `first..first + count` (of `size` bytes) of
    /// output `o`.
    ///
    /// # Safety
    /// No other thread accesses these elements while the slice lives: the
    /// parallel runs only take kernels for which [`one_writer`] holds, and
    /// threads take disjoint points.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn elems(
        &self,
        o: usize,
        first: usize,
        count: usize,
        size: usize,
    ) -> &mut [u8] {
        let (ptr, len) = self.bufs[o];
        let (start, end) = (first * size, (first + count) * size);
        assert!(end <= len, "store past its output (checked before)");
        // SAFETY: in bounds (above); exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(ptr.add(start), end - start) }
    }
}

/// Whether every output element of `k` is written at most once: each
/// store (a plain write) is injective over its space (`space(store)`:
/// the variable ranges it runs over) and no two stores of one output
/// reach overlapping index ranges. Threads that take disjoint points of
/// such a kernel never write one element twice.
pub(crate) fn one_writer<'r>(k: &Kernel, space: impl Fn(usize) -> &'r [i64]) -> bool {
    let mut spans: Vec<(usize, i64, i64)> = Vec::new();
    for (s, st) in k.stores.iter().enumerate() {
        if st.kind != StoreKind::Write {
            return false;
        }
        let ranges = space(s);
        if ranges.contains(&0) {
            // Runs at no point.
            continue;
        }
        if !injective(&st.index, ranges) {
            return false;
        }
        let (lo, hi) = st.index.bounds(ranges);
        if spans
            .iter()
            .any(|(o, a, b)| *o == st.output && lo <= *b && *a <= hi)
        {
            return false;
        }
        spans.push((st.output, lo, hi));
    }
    true
}

/// Whether no store of `k` writes output `o`: a GPU's scratch buffer (a
/// split-K matmul's partial sums, a split-KV attention's partial
/// softmaxes, a long sort's arrays) or a scan's status words, which only
/// the GPU's kernels use and which no host executor reads. Such a buffer
/// may start with any contents on the host; the GPU zeroes what needs it
/// before each launch. Zeroing a matmul's 8 MiB scratch at every run of
/// a 1024^3 product took a third of its time on two cores.
pub fn never_written(k: &Kernel, o: usize) -> bool {
    o < k.outputs.len() && !k.stores.iter().any(|st| st.output == o)
}

/// Whether every run of `k` that succeeds writes every element of output
/// `o`, so its buffer may start with any contents
/// ([`crate::host_alloc::output`]). Proved from the stores alone: each
/// store to `o` is a plain write, runs at every point of its space (all
/// the variables for an element-level store, the kept ones for a
/// row-level store), is injective there and stays inside `o`; no two
/// reach overlapping ranges; and their points add up to `o`'s length.
/// Injective writes of that many distinct elements inside the buffer
/// then cover it. Kernels whose stores skip points (a sort storing `k`
/// of each row) and outputs no store writes (a scan's status, a GPU
/// scratch buffer) are never proved full.
pub fn writes_in_full(k: &Kernel, o: usize) -> bool {
    let Some(len) = k.outputs.get(o).and_then(|a| i64::try_from(a.len).ok()) else {
        return false;
    };
    if len == 0 {
        return true;
    }
    if k.stored_len() != k.row_len() {
        return false;
    }
    let element = k.element_level();
    let mut spans: Vec<(i64, i64)> = Vec::new();
    let mut written = 0i64;
    for st in k.stores.iter().filter(|st| st.output == o) {
        if st.kind != StoreKind::Write {
            return false;
        }
        let ranges = match k.store_is_element_level(st, &element) {
            true => &k.ranges[..],
            false => &k.ranges[..k.n_kept],
        };
        let Some(points) = ranges.iter().try_fold(1i64, |n, r| n.checked_mul(*r)) else {
            return false;
        };
        if points == 0 {
            continue;
        }
        if !injective(&st.index, ranges) {
            return false;
        }
        let (lo, hi) = st.index.bounds(ranges);
        if lo < 0 || hi >= len || spans.iter().any(|(a, b)| lo <= *b && *a <= hi) {
            return false;
        }
        spans.push((lo, hi));
        // At most `len`: the spans are disjoint and inside `0..len`.
        written += points;
    }
    written == len
}

/// Whether `e` takes a different value at every point of the space
/// `ranges`: a sum of variables whose coefficients, ordered by size, each
/// exceed everything the smaller terms can reach (a mixed radix).
fn injective(e: &Expr, ranges: &[i64]) -> bool {
    let (terms, _) = e.parts();
    let mut coefs = Vec::with_capacity(terms.len());
    for (a, c) in terms {
        match a {
            Atom::Var(v) if *v < ranges.len() => coefs.push((c.abs(), ranges[*v])),
            _ => return false,
        }
    }
    let used = |v: usize| terms.iter().any(|(a, _)| *a == Atom::Var(v));
    if (0..ranges.len()).any(|v| ranges[v] > 1 && !used(v)) {
        return false;
    }
    coefs.sort_unstable();
    let mut reach = 0i64;
    for (c, r) in coefs {
        if r > 1 && c <= reach {
            return false;
        }
        reach = reach.saturating_add(c.saturating_mul((r - 1).max(0)));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Cond;
    use crate::ir::{Arg, Inst, KernelKind, Node, Store};
    use crate::ops::ReduceOp;
    use crate::DType;

    /// A kernel over `ranges` (`n_kept` kept) that loads `x[v0]`, sums it
    /// over the reduced variables and writes `stores` (index, and whether
    /// the value is the load, element-level, or the row's sum) into one
    /// output of `len` elements.
    fn kernel(ranges: &[i64], n_kept: usize, len: usize, stores: &[(Expr, bool)]) -> Kernel {
        let f = DType::F32;
        let insts = vec![
            Node {
                inst: Inst::Load {
                    input: 0,
                    index: Expr::var(0),
                    valid: Cond::always(),
                },
                dtype: f,
            },
            Node {
                inst: Inst::Reduce(ReduceOp::Sum, 0),
                dtype: f,
            },
        ];
        Kernel {
            name: "k".into(),
            kind: KernelKind::Elementwise,
            ranges: ranges.into(),
            n_kept,
            inputs: vec![Arg { dtype: f, len: 64 }],
            outputs: vec![Arg { dtype: f, len }],
            scalars: vec![],
            insts,
            stores: stores
                .iter()
                .map(|(e, elem)| Store::write(0, e.clone(), usize::from(!elem)))
                .collect(),
        }
    }

    #[test]
    fn outputs_written_in_full() {
        let (v0, v1) = (Expr::var(0), Expr::var(1));
        let row_major = v0.scale(5).add(&v1);
        let full = |ranges: &[i64], len, stores: &[(Expr, bool)]| {
            writes_in_full(&kernel(ranges, ranges.len(), len, stores), 0)
        };
        assert!(full(&[4, 5], 20, &[(row_major.clone(), true)]));
        // Transposed and reversed: still every element once.
        assert!(full(&[4, 5], 20, &[(v0.add(&v1.scale(4)), true)]));
        assert!(full(
            &[4, 5],
            20,
            &[(v1.scale(-1).add_const(4).add(&v0.scale(5)), true)]
        ));
        // A store that reaches only part of its output.
        assert!(!full(&[4, 5], 21, &[(row_major.clone(), true)]));
        assert!(!full(&[4, 5], 40, &[(row_major.scale(2), true)]));
        assert!(!full(&[4, 5], 40, &[(row_major.add_const(20), true)]));
        // Two halves (a `cat`) cover it; overlapping ones do not.
        let half = |at| (v0.scale(5).add(&v1).add_const(at), true);
        assert!(full(&[2, 5], 20, &[half(0), half(10)]));
        assert!(!full(&[2, 5], 20, &[half(0), half(5)]));
        assert!(!full(&[2, 5], 20, &[half(0), half(0)]));
        // Not injective, or no store at all.
        assert!(!full(&[4, 5], 20, &[(v0.scale(3).add(&v1), true)]));
        assert!(!full(&[4, 5], 20, &[]));
        // An empty output needs nothing; an empty domain writes nothing.
        assert!(full(&[0, 5], 0, &[(row_major.clone(), true)]));
        assert!(!full(&[0, 5], 20, &[(row_major.clone(), true)]));
        // A row-level store (a reduction's result) runs once per row.
        let rows = |len| writes_in_full(&kernel(&[4, 5], 1, len, &[(v0.clone(), false)]), 0);
        assert!(rows(4));
        assert!(!rows(5));
        // Adds at data-dependent positions write what the data says.
        let mut k = kernel(&[4, 5], 2, 20, &[(row_major, true)]);
        assert!(writes_in_full(&k, 0));
        k.stores[0].kind = StoreKind::AddAt {
            at: 0,
            stride: 1,
            len: 1,
        };
        assert!(!writes_in_full(&k, 0));
        assert!(!writes_in_full(&k, 1));
    }

    #[test]
    fn injectivity_of_store_indices() {
        let r = [4i64, 5];
        let row_major = Expr::var(0).scale(5).add(&Expr::var(1));
        assert!(injective(&row_major, &r));
        let transposed = Expr::var(0).add(&Expr::var(1).scale(4));
        assert!(injective(&transposed, &r));
        let reversed = Expr::var(1)
            .scale(-1)
            .add_const(4)
            .add(&Expr::var(0).scale(5));
        assert!(injective(&reversed, &r));
        // Overlapping rows and a missing variable write elements twice.
        let overlap = Expr::var(0).scale(3).add(&Expr::var(1));
        assert!(!injective(&overlap, &r));
        assert!(!injective(&Expr::var(1), &r));
        // A variable of size 1 need not appear.
        assert!(injective(&Expr::var(1), &[1, 5]));
    }
}
