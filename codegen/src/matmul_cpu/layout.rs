//! Strided matrix layouts read off affine indices: how a buffer holds a
//! batch of matrices, so the GEMM reads operands and writes results
//! through their strides instead of copies.

use crate::expr::{Atom, Expr};

/// A batch of matrices in a buffer: element `(b, i, j)` (batch position
/// `b` over the batch variables, row `i`, column `j`) lies at `offset +
/// sum(batch[t] * b[t]) + i * rs + j * cs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub offset: usize,
    /// Stride of each batch variable.
    pub batch: Vec<isize>,
    pub rows: usize,
    pub rs: isize,
    pub cols: usize,
    pub cs: isize,
}

impl Layout {
    /// The row-major layout of `[batch.., rows, cols]` (batch sizes
    /// `batch`): a packed operand's or a result temporary's.
    pub fn packed(batch: &[usize], rows: usize, cols: usize) -> Layout {
        let mut strides = vec![0isize; batch.len()];
        let mut s = rows * cols;
        for (st, size) in strides.iter_mut().zip(batch).rev() {
            *st = s as isize;
            s *= size;
        }
        Layout {
            offset: 0,
            batch: strides,
            rows,
            rs: cols as isize,
            cols,
            cs: 1,
        }
    }

    /// The layout of `index` (over a kernel's variables of sizes
    /// `ranges`) with batch variables `batch`, row variables `rows` and
    /// column variables `cols` (each group outer first), if the index is
    /// affine in them, never negative, below `len`, and each group steps by
    /// one stride (so it is one matrix dimension). `None` otherwise.
    pub fn of_index(
        index: &Expr,
        ranges: &[i64],
        len: usize,
        (batch, rows, cols): (&[usize], &[usize], &[usize]),
    ) -> Option<Layout> {
        let (terms, konst) = index.parts();
        let mut coef = vec![0i64; ranges.len()];
        for (atom, c) in terms {
            match atom {
                Atom::Var(v) => coef[*v] = *c,
                Atom::Div(..) | Atom::Mod(..) => return None,
            }
        }
        let grouped = |v: usize| batch.contains(&v) || rows.contains(&v) || cols.contains(&v);
        if (0..coef.len()).any(|v| coef[v] != 0 && !grouped(v)) {
            return None;
        }
        let (rows, rs) = collapse(&coef, rows, ranges)?;
        let (cols, cs) = collapse(&coef, cols, ranges)?;
        let layout = Layout {
            offset: usize::try_from(konst).ok()?,
            batch: batch
                .iter()
                .map(|v| isize::try_from(coef[*v]).ok())
                .collect::<Option<_>>()?,
            rows,
            rs,
            cols,
            cs,
        };
        let sizes: Vec<usize> = batch.iter().map(|v| ranges[*v] as usize).collect();
        layout.fits(&sizes, len).then_some(layout)
    }

    /// Whether every element (batch sizes `batch`) lies in `0..len`.
    pub fn fits(&self, batch: &[usize], len: usize) -> bool {
        let dims = batch
            .iter()
            .zip(&self.batch)
            .chain([(&self.rows, &self.rs), (&self.cols, &self.cs)]);
        // i128: a product of a size and a stride cannot overflow it.
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (n, s) in dims {
            let reach = (*n as i128 - 1).max(0) * *s as i128;
            lo += reach.min(0);
            hi += reach.max(0);
        }
        lo >= 0 && hi < len as i128
    }

    /// Whether distinct elements lie at distinct places (a result that
    /// threads write in parallel must be), given the batch sizes.
    pub fn injective(&self, batch: &[usize]) -> bool {
        let mut dims: Vec<(usize, usize)> = batch
            .iter()
            .zip(&self.batch)
            .map(|(n, s)| (*n, s.unsigned_abs()))
            .chain([
                (self.rows, self.rs.unsigned_abs()),
                (self.cols, self.cs.unsigned_abs()),
            ])
            .filter(|(n, _)| *n > 1)
            .collect();
        dims.sort_by_key(|d| d.1);
        // Sorted by stride, each stride must pass the farthest place the
        // smaller dimensions reach: then no two points collide.
        let mut reach = 0usize;
        dims.iter().all(|(n, s)| {
            let ok = *s > reach;
            reach += s * (n - 1);
            ok
        })
    }

    /// Element offsets of every batch position, in row-major order of the
    /// batch variables (sizes `batch`).
    pub fn batch_offsets(&self, batch: &[usize]) -> Vec<usize> {
        let mut offs = vec![self.offset as isize];
        for (n, s) in batch.iter().zip(&self.batch) {
            offs = offs
                .iter()
                .flat_map(|o| (0..*n as isize).map(move |i| o + i * s))
                .collect();
        }
        // Every offset is a place of the layout, which `of_index` checked
        // (or `packed` built) inside the buffer.
        offs.into_iter().map(|o| o as usize).collect()
    }
}

/// `(size, stride)` of variable group `vars` (outer first) as one
/// dimension: row-major stepping through the group must move the index by
/// one stride. Size-1 variables do not move it; an empty group is `(1, 0)`.
fn collapse(coef: &[i64], vars: &[usize], ranges: &[i64]) -> Option<(usize, isize)> {
    let mut moving = vars.iter().filter(|v| ranges[**v] > 1).rev();
    let Some(inner) = moving.next() else {
        return Some((1, 0));
    };
    let stride = coef[*inner];
    let (mut size, mut next) = (ranges[*inner], stride.checked_mul(ranges[*inner])?);
    for v in moving {
        if coef[*v] != next {
            return None;
        }
        size = size.checked_mul(ranges[*v])?;
        next = next.checked_mul(ranges[*v])?;
    }
    Some((usize::try_from(size).ok()?, isize::try_from(stride).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strides_and_rejects_what_one_stride_cannot_hold() {
        // [2, 3, 4] read as batch i0, rows i2 (stride 1), cols i1 (stride 4)
        // with offset 5 and batch stride 12: a transposed view.
        let ranges = [2, 3, 4];
        let e = Expr::var(0)
            .scale(12)
            .add(&Expr::var(1).scale(4))
            .add(&Expr::var(2))
            .add_const(5);
        let l = Layout::of_index(&e, &ranges, 29, (&[0], &[2], &[1])).unwrap();
        assert_eq!((l.offset, l.batch.clone()), (5, vec![12]));
        assert_eq!((l.rows, l.rs, l.cols, l.cs), (4, 1, 3, 4));
        assert!(l.injective(&[2]));
        // One element past the buffer.
        assert!(Layout::of_index(&e, &ranges, 28, (&[0], &[2], &[1])).is_none());
        // i1 and i2 as one row group: 4 * i1 + i2 steps by 1 in row-major
        // order, i2 and i1 (inner i1 with stride 4 needs i2's stride 16).
        let l = Layout::of_index(&e, &ranges, 29, (&[0], &[1, 2], &[])).unwrap();
        assert_eq!((l.rows, l.rs, l.cols, l.cs), (12, 1, 1, 0));
        assert!(Layout::of_index(&e, &ranges, 29, (&[0], &[2, 1], &[])).is_none());
        // A variable outside the groups.
        assert!(Layout::of_index(&e, &ranges, 29, (&[], &[2], &[1])).is_none());
        // A broadcast row (stride 0) is not injective.
        let b = Layout {
            rs: 0,
            ..Layout::packed(&[], 3, 4)
        };
        assert!(!b.injective(&[]) && Layout::packed(&[2, 5], 3, 4).injective(&[2, 5]));
        assert_eq!(
            Layout::packed(&[2, 3], 1, 2).batch_offsets(&[2, 3]),
            [0, 2, 4, 6, 8, 10]
        );
    }
}
