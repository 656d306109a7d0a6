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
    #[cfg(feature = "llvm")]
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
