//! Views: how a tensor's coordinates map onto a buffer, without copying.
//!
//! A [`View`] is (shape, strides in elements, offset, optional valid
//! ranges per axis for padding). A [`ShapeTracker`] stacks views when a
//! reshape cannot be expressed by strides alone: each view maps its
//! coordinates to a linear index into the (contiguous) shape of the view
//! below it; the bottom view indexes the buffer.

use smallvec::{smallvec, SmallVec};
use smelt_codegen::dims::{Dims, Ranges, Shape, Strides};
use smelt_codegen::expr::Atom;
use smelt_codegen::{dims, Cond, Expr};

/// A valid coordinate range `lo..hi` per axis.
pub type Mask = Dims<(usize, usize)>;

/// One strided, optionally masked view.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// Size of each axis.
    pub shape: Shape,
    /// Elements between neighbours along each axis (0 for broadcast axes,
    /// negative for flipped ones).
    pub strides: Strides,
    /// Index of the element at coordinates 0.
    pub offset: isize,
    /// Per axis, the valid coordinate range `lo..hi`; outside it reads 0.
    /// A view with no valid element has every range empty; for rank 0
    /// that is `Some(dims![])`. Boxed: few views are padded, and inline
    /// ranges would more than double the size of every view and tracker
    /// the planner moves.
    pub mask: Option<Box<Mask>>,
}

/// Row-major strides of a contiguous array of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut strides: Strides = dims![0; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = if shape[d] == 1 { 0 } else { acc };
        acc *= shape[d] as isize;
    }
    strides
}

impl View {
    /// The contiguous row-major view of `shape`.
    pub fn contiguous(shape: &[usize]) -> View {
        View {
            shape: shape.into(),
            strides: contiguous_strides(shape),
            offset: 0,
            mask: None,
        }
    }

    /// True if the view is the identity on linear indices: contiguous
    /// strides (ignoring size-1 axes), offset 0, no mask.
    pub fn is_plain(&self) -> bool {
        if self.offset != 0 || self.mask.is_some() {
            return false;
        }
        // Walk from the innermost axis, checking against the contiguous
        // stride without building it (this runs on every composition).
        let mut acc = 1isize;
        for (n, s) in self.shape.iter().zip(&self.strides).rev() {
            if *n != 1 && *s != acc {
                return false;
            }
            acc *= *n as isize;
        }
        true
    }

    /// Strides of size-1 axes set to 0, so equal views compare equal.
    fn canonical(mut self) -> View {
        for (s, n) in self.strides.iter_mut().zip(&self.shape) {
            if *n == 1 {
                *s = 0;
            }
        }
        self
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The buffer index and validity at coordinates `coords` (one
    /// expression per axis), simplified with the kernel's variable sizes.
    pub fn expr(&self, coords: &[Expr], ranges: &[i64]) -> (Expr, Cond) {
        let mut idx = Expr::constant(self.offset as i64);
        let mut valid = Cond::always();
        if self.mask.as_ref().is_some_and(|m| m.is_empty()) {
            valid = valid.and_range(Expr::constant(0), 0, 0, ranges);
        }
        for (d, c) in coords.iter().enumerate() {
            idx = idx.add(&c.scale(self.strides[d] as i64));
            if let Some(m) = &self.mask {
                let (lo, hi) = m[d];
                valid = valid.and_range(c.clone(), lo as i64, hi as i64, ranges);
            }
        }
        (idx, valid)
    }

    fn permute(self, axes: &[usize]) -> View {
        View {
            shape: axes.iter().map(|a| self.shape[*a]).collect(),
            strides: axes.iter().map(|a| self.strides[*a]).collect(),
            offset: self.offset,
            mask: self
                .mask
                .as_ref()
                .map(|m| Box::new(axes.iter().map(|a| m[*a]).collect())),
        }
    }

    fn expand(self, shape: &[usize]) -> View {
        let mut v = self;
        for d in 0..shape.len() {
            if v.shape[d] != shape[d] {
                v.strides[d] = 0;
                if let Some(m) = v.mask.as_mut() {
                    m[d] = if m[d].0 < m[d].1 {
                        (0, shape[d])
                    } else {
                        (0, 0)
                    };
                }
            }
        }
        v.shape = shape.into();
        v
    }

    fn shrink(self, ranges: &[(usize, usize)]) -> View {
        let mut v = self;
        for (d, &(lo, hi)) in ranges.iter().enumerate() {
            v.offset += lo as isize * v.strides[d];
            v.shape[d] = hi - lo;
            if let Some(m) = v.mask.as_mut() {
                let (mlo, mhi) = m[d];
                let nlo = mlo.clamp(lo, hi) - lo;
                let nhi = mhi.clamp(lo, hi) - lo;
                m[d] = (nlo, nhi.max(nlo));
            }
        }
        v.normalize_mask()
    }

    fn flip(self, axes: &[usize]) -> View {
        let mut v = self;
        for &d in axes {
            let n = v.shape[d];
            if n > 0 {
                v.offset += (n as isize - 1) * v.strides[d];
            }
            v.strides[d] = -v.strides[d];
            if let Some(m) = v.mask.as_mut() {
                m[d] = (n - m[d].1, n - m[d].0);
            }
        }
        v
    }

    fn step(self, axis: usize, step: usize) -> View {
        let mut v = self;
        v.shape[axis] = v.shape[axis].div_ceil(step);
        v.strides[axis] *= step as isize;
        if let Some(m) = v.mask.as_mut() {
            let (lo, hi) = m[axis];
            let nlo = lo.div_ceil(step);
            m[axis] = (nlo, hi.div_ceil(step).max(nlo));
        }
        v.normalize_mask()
    }

    fn pad(self, pads: &[(usize, usize)]) -> View {
        if pads.is_empty() {
            return self; // rank 0: nothing to pad
        }
        let mut v = self;
        let mut mask = v
            .mask
            .take()
            .unwrap_or_else(|| Box::new(v.shape.iter().map(|n| (0, *n)).collect()));
        for (d, &(before, after)) in pads.iter().enumerate() {
            v.offset -= before as isize * v.strides[d];
            v.shape[d] += before + after;
            mask[d] = (mask[d].0 + before, mask[d].1 + before);
        }
        v.mask = Some(mask);
        v.normalize_mask()
    }

    /// Drops a mask that covers everything; collapses an empty one.
    fn normalize_mask(mut self) -> View {
        if let Some(m) = &self.mask {
            if m.is_empty() {
                // Rank 0 with no valid element: kept as is.
            } else if m
                .iter()
                .zip(&self.shape)
                .all(|((lo, hi), n)| *lo == 0 && hi == n)
            {
                self.mask = None;
            } else if m.iter().any(|(lo, hi)| lo >= hi) {
                self.mask = Some(Box::new(dims![(0, 0); self.shape.len()]));
            }
        }
        self
    }

    /// Reshape by strides alone, if possible (no mask, groups of merged
    /// axes contiguous among themselves).
    fn reshape_strided(&self, shape: &[usize]) -> Option<View> {
        debug_assert_eq!(self.numel(), shape.iter().product::<usize>());
        if self.numel() == 0 {
            return Some(View::contiguous(shape));
        }
        if self.mask.is_some() {
            return None;
        }
        let old: Dims<(usize, isize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(n, _)| **n != 1)
            .map(|(n, s)| (*n, *s))
            .collect();
        let mut strides: Strides = dims![0; shape.len()];
        let (mut i, mut j) = (0, 0);
        while j < shape.len() {
            if shape[j] == 1 {
                j += 1;
                continue;
            }
            // Take old axes i.. and new axes j.. until their products agree.
            let (i0, j0) = (i, j);
            let (mut po, mut pn) = (old[i].0, shape[j]);
            i += 1;
            j += 1;
            while po != pn {
                if po < pn {
                    po *= old[i].0;
                    i += 1;
                } else {
                    pn *= shape[j];
                    j += 1;
                }
            }
            for k in i0..i - 1 {
                if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                    return None;
                }
            }
            let mut acc = old[i - 1].1;
            for k in (j0..j).rev() {
                strides[k] = if shape[k] == 1 { 0 } else { acc };
                acc *= shape[k] as isize;
            }
        }
        Some(View {
            shape: shape.into(),
            strides,
            offset: self.offset,
            mask: None,
        })
    }
}

/// The views of a tracker, the buffer's first. Almost every tracker
/// simplifies to one view, which is kept inline: the planner makes and
/// interns trackers by the thousand.
pub type Views = SmallVec<[View; 1]>;

/// A stack of views; `views[0]` indexes the buffer, the last one gives the
/// tensor's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeTracker {
    /// The views, the buffer's first.
    pub views: Views,
}

impl ShapeTracker {
    /// The contiguous tracker of `shape`.
    pub fn contiguous(shape: &[usize]) -> ShapeTracker {
        ShapeTracker {
            views: smallvec![View::contiguous(shape)],
        }
    }

    /// The tensor shape.
    pub fn shape(&self) -> &[usize] {
        &self.top().shape
    }

    fn top(&self) -> &View {
        self.views.last().expect("a shape tracker has a view")
    }

    /// A copy with `f` applied to the top view. The copy is the one clone
    /// a movement op needs (the tracker is shared by its node); `f` then
    /// changes the top view in place.
    fn map_top(&self, f: impl FnOnce(View) -> View) -> ShapeTracker {
        let mut views = self.views.clone();
        let top = views.pop().expect("a shape tracker has a view");
        views.push(f(top).canonical());
        ShapeTracker { views }.simplify()
    }

    /// True if this is the identity on linear indices.
    pub fn is_plain(&self) -> bool {
        self.views.len() == 1 && self.top().is_plain()
    }

    /// True if both map every coordinate to the same index and validity
    /// (compared structurally after simplification).
    pub fn equivalent(&self, other: &ShapeTracker) -> bool {
        // Strides of size-1 axes do not matter; compare without cloning.
        self.views.len() == other.views.len()
            && self.views.iter().zip(&other.views).all(|(a, b)| {
                a.shape == b.shape
                    && a.offset == b.offset
                    && a.mask == b.mask
                    && a.shape
                        .iter()
                        .zip(a.strides.iter().zip(&b.strides))
                        .all(|(n, (x, y))| *n == 1 || x == y)
            })
    }

    /// True if any view masks coordinates.
    pub fn has_mask(&self) -> bool {
        self.views.iter().any(|v| v.mask.is_some())
    }

    /// Reorders the axes: axis `i` of the result is `axes[i]`.
    pub fn permute(&self, axes: &[usize]) -> ShapeTracker {
        self.map_top(|v| v.permute(axes))
    }

    /// Broadcasts size-1 axes to `shape`.
    pub fn expand(&self, shape: &[usize]) -> ShapeTracker {
        self.map_top(|v| v.expand(shape))
    }

    /// Keeps `lo..hi` of each axis.
    pub fn shrink(&self, ranges: &[(usize, usize)]) -> ShapeTracker {
        self.map_top(|v| v.shrink(ranges))
    }

    /// Reverses the order along `axes`.
    pub fn flip(&self, axes: &[usize]) -> ShapeTracker {
        self.map_top(|v| v.flip(axes))
    }

    /// Keeps every `step`-th coordinate of `axis`.
    pub fn step(&self, axis: usize, step: usize) -> ShapeTracker {
        self.map_top(|v| v.step(axis, step))
    }

    /// Pads each axis with `(before, after)` positions that read 0.
    pub fn pad(&self, pads: &[(usize, usize)]) -> ShapeTracker {
        self.map_top(|v| v.pad(pads))
    }

    /// Reshape: by strides when possible, else a new view on top.
    pub fn reshape(&self, shape: &[usize]) -> ShapeTracker {
        match self.top().reshape_strided(shape) {
            Some(v) => self.map_top(|_| v),
            None => {
                let mut views = self.views.clone();
                views.push(View::contiguous(shape));
                ShapeTracker { views }.simplify()
            }
        }
    }

    /// `self` read through `above`: `above` maps coordinates to linear
    /// indices into `self`'s shape.
    pub fn compose(&self, above: &ShapeTracker) -> ShapeTracker {
        let mut views = self.views.clone();
        views.extend(above.views.iter().cloned());
        ShapeTracker { views }.simplify()
    }

    /// Removes views that are identities and merges a plain view into the
    /// one below it when strides allow.
    fn simplify(mut self) -> ShapeTracker {
        loop {
            let n = self.views.len();
            if n < 2 {
                return self;
            }
            let changed = if let Some(k) = (0..n - 1).find(|k| self.views[*k].is_plain()) {
                // A plain view below another is the identity on linear
                // indices.
                self.views.remove(k);
                true
            } else {
                // A plain view of the same size is a reshape of the one below.
                let merged = if self.views[n - 1].is_plain()
                    && self.views[n - 1].numel() == self.views[n - 2].numel()
                {
                    self.views[n - 2].reshape_strided(&self.views[n - 1].shape)
                } else {
                    None
                };
                let (lower, upper) = (&self.views[n - 2], &self.views[n - 1]);
                match merged
                    .or_else(|| merge_dims(lower, upper))
                    .or_else(|| merge_affine(lower, upper))
                {
                    Some(v) => {
                        self.views.truncate(n - 2);
                        self.views.push(v.canonical());
                        true
                    }
                    None => false,
                }
            };
            if !changed {
                return self;
            }
        }
    }

    /// Buffer index and validity at coordinates `coords`.
    pub fn expr(&self, coords: &[Expr], ranges: &[i64]) -> (Expr, Cond) {
        let top = self.top();
        let (mut idx, mut valid) = top.expr(coords, ranges);
        for v in self.views.iter().rev().skip(1) {
            let cs = unravel(&idx, &v.shape, ranges);
            let (i, c) = v.expr(&cs, ranges);
            idx = i;
            valid = valid.and(&c, ranges);
        }
        (idx, valid)
    }

    /// Buffer index at concrete coordinates, or `None` where masked.
    pub fn index_at(&self, coords: &[usize]) -> Option<isize> {
        let ranges: Ranges = self.shape().iter().map(|n| *n as i64).collect();
        let vars: Dims<Expr> = (0..coords.len()).map(Expr::var).collect();
        let (idx, valid) = self.expr(&vars, &ranges);
        let at: Ranges = coords.iter().map(|c| *c as i64).collect();
        valid.eval(&at).then(|| idx.eval(&at) as isize)
    }
}

/// `lower` read through `upper` as one view when `upper` only permutes,
/// broadcasts and renames `lower`'s axes (each of its strides is 0 or the
/// contiguous stride of one axis of `lower` of the same size): the cheap
/// common case of composing a view node with a kernel's domain.
fn merge_dims(lower: &View, upper: &View) -> Option<View> {
    if upper.offset != 0 || upper.mask.is_some() {
        return None;
    }
    let cs = contiguous_strides(&lower.shape);
    let mut used: Dims<bool> = dims![false; lower.shape.len()];
    let mut strides = Strides::with_capacity(upper.shape.len());
    let mut mask = lower
        .mask
        .as_ref()
        .map(|_| Mask::with_capacity(upper.shape.len()));
    for (n, s) in upper.shape.iter().zip(&upper.strides) {
        if *s == 0 || *n == 1 {
            strides.push(0);
            if let Some(m) = mask.as_mut() {
                m.push((0, *n));
            }
            continue;
        }
        let j =
            (0..lower.shape.len()).find(|j| !used[*j] && cs[*j] == *s && lower.shape[*j] == *n)?;
        used[j] = true;
        strides.push(lower.strides[j]);
        if let (Some(m), Some(lm)) = (mask.as_mut(), lower.mask.as_ref()) {
            m.push(lm[j]);
        }
    }
    // Axes of `lower` the upper view never moves along sit at coordinate 0,
    // which their mask must admit.
    let never = lower.mask.as_ref().is_some_and(|lm| lm.is_empty())
        || lower.mask.as_ref().is_some_and(|lm| {
            used.iter()
                .zip(lm.iter())
                .any(|(u, (lo, hi))| !(*u || (*lo == 0 && *hi > 0)))
        });
    if never {
        mask = Some(dims![(0, 0); upper.shape.len()]);
    } else if mask.as_ref().is_some_and(|m| m.is_empty()) {
        mask = None; // rank 0 and valid: an empty mask would mean "never"
    }
    Some(
        View {
            shape: upper.shape.clone(),
            strides,
            offset: lower.offset,
            mask: mask.map(Box::new),
        }
        .normalize_mask(),
    )
}

/// `lower` read through `upper` as one view, when the composed index is
/// affine in `upper`'s coordinates and every validity check is a range of
/// one coordinate.
fn merge_affine(lower: &View, upper: &View) -> Option<View> {
    let ranges: Ranges = upper.shape.iter().map(|n| *n as i64).collect();
    let vars: Dims<Expr> = (0..ranges.len()).map(Expr::var).collect();
    let pair = ShapeTracker {
        views: smallvec![lower.clone(), upper.clone()],
    };
    let (idx, valid) = pair.expr(&vars, &ranges);
    let (terms, konst) = idx.parts();
    let mut strides: Strides = dims![0; ranges.len()];
    for (atom, coef) in terms {
        match atom {
            Atom::Var(i) => strides[*i] = *coef as isize,
            _ => return None,
        }
    }
    let mut mask: Mask = upper.shape.iter().map(|n| (0, *n)).collect();
    if valid.is_never() {
        mask.iter_mut().for_each(|m| *m = (0, 0));
    }
    for (e, lo, hi) in valid.checks() {
        let (t, k) = e.parts();
        let [(Atom::Var(i), 1)] = t else {
            return None;
        };
        let (lo, hi) = ((lo - k).max(0) as usize, (hi - k).max(0) as usize);
        let (mlo, mhi) = mask[*i];
        mask[*i] = (mlo.max(lo), mhi.min(hi).max(mlo.max(lo)));
    }
    // An empty rank-0 mask means "never valid", so only keep one when some
    // check remains.
    let mask = (valid.is_never() || !valid.is_always()).then_some(mask);
    Some(
        View {
            shape: upper.shape.clone(),
            strides,
            offset: konst as isize,
            mask: mask.map(Box::new),
        }
        .normalize_mask(),
    )
}

/// Coordinates in a contiguous array of `shape` of linear index `idx`.
pub fn unravel(idx: &Expr, shape: &[usize], ranges: &[i64]) -> Dims<Expr> {
    let mut out: Dims<Expr> = dims![Expr::constant(0); shape.len()];
    let mut acc = 1i64;
    for d in (0..shape.len()).rev() {
        let n = shape[d] as i64;
        out[d] = if n == 1 {
            Expr::constant(0)
        } else {
            idx.div(acc, ranges).rem(n.max(1), ranges)
        };
        acc *= n.max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_of_transpose_stacks_and_indexes_right() {
        let st = ShapeTracker::contiguous(&[4, 6]).permute(&[1, 0]);
        let r = st.reshape(&[24]);
        assert_eq!(r.views.len(), 2);
        for l in 0..24 {
            let (i, j) = (l / 4, l % 4);
            assert_eq!(r.index_at(&[l]), Some((j * 6 + i) as isize));
        }
    }

    #[test]
    fn reshape_of_contiguous_stays_one_view() {
        let st = ShapeTracker::contiguous(&[4, 6])
            .reshape(&[2, 3, 4])
            .reshape(&[24]);
        assert!(st.is_plain());
        let sl = ShapeTracker::contiguous(&[4, 6])
            .shrink(&[(1, 3), (0, 6)])
            .reshape(&[12]);
        assert_eq!(sl.views.len(), 1);
        assert_eq!(sl.index_at(&[0]), Some(6));
    }

    #[test]
    fn pad_masks_and_flip_reverses() {
        let st = ShapeTracker::contiguous(&[3]).pad(&[(2, 1)]);
        let got: Vec<_> = (0..6).map(|i| st.index_at(&[i])).collect();
        assert_eq!(got, vec![None, None, Some(0), Some(1), Some(2), None]);
        let fl = st.flip(&[0]);
        let got: Vec<_> = (0..6).map(|i| fl.index_at(&[i])).collect();
        assert_eq!(got, vec![None, Some(2), Some(1), Some(0), None, None]);
    }

    #[test]
    fn step_and_expand() {
        let st = ShapeTracker::contiguous(&[7]).step(0, 3);
        assert_eq!(st.shape(), &[3]);
        assert_eq!(st.index_at(&[2]), Some(6));
        let ex = ShapeTracker::contiguous(&[1, 3]).expand(&[4, 3]);
        assert_eq!(ex.index_at(&[3, 2]), Some(2));
    }
}
