//! `einsum` and `tensordot`, lowered to views, `matmul` and reductions, so
//! they schedule and fuse exactly like the hand-written equivalent
//! (`"bhqd,bhkd->bhqk"` is a batched `q @ k^T` over a transposed view).
//!
//! An einsum runs left to right, one operand pair at a time. Per operand,
//! a repeated label takes a diagonal and a label no one else needs is
//! summed away. A pair then splits its labels into batch (in both, still
//! needed), contracted (in both, not needed), and free (in one): without
//! contracted labels it is a broadcast multiply, else a batched matmul of
//! `[batch, free_a, contracted] @ [batch, contracted, free_b]`.

use crate::Tensor;

/// An axis label: a letter of the spec, or an unnamed axis (one an
/// ellipsis stands for, numbered from the right so broadcasting lines
/// them up; or one of `tensordot`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Label {
    Axis(usize),
    Letter(char),
}

/// An operand with one label per axis.
struct Term {
    t: Tensor,
    labels: Vec<Label>,
}

/// Labels of one side of a spec (`"b...ij"`) for a tensor of rank `rank`.
#[track_caller]
fn parse_side(spec: &str, side: &str, rank: Option<usize>) -> Vec<Label> {
    let (head, tail, dots) = match side.split_once("...") {
        Some((h, t)) => (h, t, true),
        None => (side, "", false),
    };
    let letters = |s: &str| -> Vec<Label> {
        s.chars()
            .map(|c| {
                assert!(
                    c.is_ascii_alphabetic(),
                    "einsum: {c:?} in {spec:?} is not a letter"
                );
                Label::Letter(c)
            })
            .collect()
    };
    // A stray '.' (a second ellipsis, "..") fails the letter check.
    let (head, tail) = (letters(head), letters(tail));
    let explicit = head.len() + tail.len();
    let n_dots = match (dots, rank) {
        (false, Some(r)) => {
            assert!(
                r == explicit,
                "einsum: {side:?} names {explicit} axes of a tensor of rank {r} (spec {spec:?})"
            );
            0
        }
        (false, None) => 0,
        (true, Some(r)) => {
            assert!(
                r >= explicit,
                "einsum: {side:?} names {explicit} axes of a tensor of rank {r} (spec {spec:?})"
            );
            r - explicit
        }
        // The output's ellipsis: filled in by the caller.
        (true, None) => usize::MAX,
    };
    let mut out = head;
    if n_dots != usize::MAX {
        out.extend((0..n_dots).rev().map(Label::Axis));
    } else {
        out.push(Label::Axis(usize::MAX));
    }
    out.extend(tail);
    out
}

/// Evaluates an Einstein summation over `operands` (PyTorch
/// `torch.einsum`): letters label axes, `...` stands for broadcast
/// leading axes, and without `->` the output is the ellipsis then the
/// letters used once, alphabetically. Sizes of one label must agree (or be
/// 1, which broadcasts).
///
/// ```
/// use smelt::{einsum, DType, Device, Tensor};
/// let q = Tensor::randn([2, 4, 8, 16], DType::F32, 0, &Device::Cpu);
/// let k = Tensor::randn([2, 4, 8, 16], DType::F32, 1, &Device::Cpu);
/// let s = einsum("bhqd,bhkd->bhqk", &[&q, &k]);
/// assert_eq!(s.shape(), &[2, 4, 8, 8]);
/// let trace = einsum("ii", &[&Tensor::eye(3, DType::F32, &Device::Cpu)]);
/// assert_eq!(trace.to_scalar::<f32>().unwrap(), 3.0);
/// ```
///
/// # Panics
/// On a malformed spec, a spec that does not match the operands' ranks,
/// label sizes that disagree, or no operands.
#[track_caller]
pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
    let spec_ws: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match spec_ws.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (spec_ws.as_str(), None),
    };
    let sides: Vec<&str> = lhs.split(',').collect();
    assert!(
        !operands.is_empty() && sides.len() == operands.len(),
        "einsum: {spec:?} names {} operands, {} given",
        sides.len(),
        operands.len()
    );
    let mut terms: Vec<Term> = sides
        .iter()
        .zip(operands)
        .map(|(side, t)| Term {
            t: (*t).clone(),
            labels: parse_side(spec, side, Some(t.ndim())),
        })
        .collect();
    let dots = terms
        .iter()
        .flat_map(|t| t.labels.iter())
        .filter(|l| matches!(l, Label::Axis(_)))
        .map(|l| match l {
            Label::Axis(i) => i + 1,
            Label::Letter(_) => 0,
        })
        .max()
        .unwrap_or(0);
    let output: Vec<Label> = match rhs {
        Some(r) => {
            let mut out = Vec::new();
            for l in parse_side(spec, r, None) {
                match l {
                    Label::Axis(_) => out.extend((0..dots).rev().map(Label::Axis)),
                    Label::Letter(_) => {
                        assert!(
                            !out.contains(&l),
                            "einsum: output label {l:?} repeats in {spec:?}"
                        );
                        assert!(
                            terms.iter().any(|t| t.labels.contains(&l)),
                            "einsum: output label {l:?} is in no input of {spec:?}"
                        );
                        out.push(l)
                    }
                }
            }
            out
        }
        None => {
            let mut letters: Vec<Label> = terms
                .iter()
                .flat_map(|t| t.labels.iter().copied())
                .filter(|l| matches!(l, Label::Letter(_)))
                .collect();
            letters.sort();
            let once: Vec<Label> = letters
                .iter()
                .copied()
                .filter(|l| letters.iter().filter(|m| *m == l).count() == 1)
                .collect();
            (0..dots).rev().map(Label::Axis).chain(once).collect()
        }
    };
    // Left to right; each step keeps what the output and later terms need.
    let mut acc = terms.remove(0);
    let needed = |rest: &[Term]| -> Vec<Label> {
        let mut n = output.clone();
        n.extend(rest.iter().flat_map(|t| t.labels.iter().copied()));
        n
    };
    acc = reduce_alone(acc, &needed(&terms), spec);
    while !terms.is_empty() {
        let next = terms.remove(0);
        let keep = needed(&terms);
        let mut keep_b = keep.clone();
        keep_b.extend(acc.labels.iter().copied());
        let next = reduce_alone(next, &keep_b, spec);
        acc = contract(acc, next, &keep, spec);
    }
    // Labels still present are exactly the output's: order them.
    let perm: Vec<usize> = output
        .iter()
        .map(|l| acc.labels.iter().position(|m| m == l).expect("kept"))
        .collect();
    acc.t.permute(perm)
}

/// Takes the diagonal of every repeated label of `term` and sums away
/// labels not in `needed`.
#[track_caller]
fn reduce_alone(mut term: Term, needed: &[Label], spec: &str) -> Term {
    while let Some((i, j)) = repeated(&term.labels) {
        let (n, m) = (term.t.shape()[i], term.t.shape()[j]);
        assert!(
            n == m,
            "einsum: label {:?} has sizes {n} and {m} in one operand of {spec:?}",
            term.labels[i]
        );
        // The diagonal goes last; the two axes go.
        term.t = term.t.diagonal(0, i as isize, j as isize);
        let l = term.labels[i];
        term.labels = term
            .labels
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i && *k != j)
            .map(|(_, l)| *l)
            .chain([l])
            .collect();
    }
    let gone: Vec<usize> = (0..term.labels.len())
        .filter(|d| !needed.contains(&term.labels[*d]))
        .collect();
    if !gone.is_empty() {
        term.t = term.t.sum(gone.clone());
        term.labels = (0..term.labels.len())
            .filter(|d| !gone.contains(d))
            .map(|d| term.labels[d])
            .collect();
    }
    term
}

/// The first pair of axes with one label.
fn repeated(labels: &[Label]) -> Option<(usize, usize)> {
    (0..labels.len()).find_map(|i| {
        (i + 1..labels.len())
            .find(|j| labels[*j] == labels[i])
            .map(|j| (i, j))
    })
}

/// The size of `l` in both terms where present, broadcasting 1s.
#[track_caller]
fn label_size(a: &Term, b: &Term, l: Label, spec: &str) -> usize {
    let size = |t: &Term| {
        t.labels
            .iter()
            .position(|m| *m == l)
            .map(|d| t.t.shape()[d])
    };
    match (size(a), size(b)) {
        (Some(x), Some(y)) => {
            assert!(
                x == y || x == 1 || y == 1,
                "einsum: label {l:?} has sizes {x} and {y} in {spec:?}"
            );
            if x == 1 {
                y
            } else {
                x
            }
        }
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => unreachable!("label of neither term"),
    }
}

/// `a` laid out as `order` (labels it lacks become size-1 axes), with its
/// shared labels broadcast to `sizes`.
fn arrange(t: &Term, order: &[Label], sizes: &[usize]) -> Tensor {
    let present: Vec<usize> = order
        .iter()
        .filter_map(|l| t.labels.iter().position(|m| m == l))
        .collect();
    let own: Vec<usize> = order
        .iter()
        .map(|l| {
            t.labels
                .iter()
                .position(|m| m == l)
                .map_or(1, |d| t.t.shape()[d])
        })
        .collect();
    t.t.permute(present).reshape(own).broadcast_to(sizes)
}

/// Multiplies two terms, summing the labels they share that `keep` lacks.
#[track_caller]
fn contract(a: Term, b: Term, keep: &[Label], spec: &str) -> Term {
    let mut batch = Vec::new();
    let mut summed = Vec::new();
    for l in &a.labels {
        if b.labels.contains(l) {
            if keep.contains(l) {
                batch.push(*l)
            } else {
                summed.push(*l)
            }
        }
    }
    let free_a: Vec<Label> = a
        .labels
        .iter()
        .copied()
        .filter(|l| !b.labels.contains(l))
        .collect();
    let free_b: Vec<Label> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    let size = |l: &Label| label_size(&a, &b, *l, spec);
    let sizes = |ls: &[Label]| ls.iter().map(size).collect::<Vec<usize>>();
    let product = |ls: &[Label]| sizes(ls).iter().product::<usize>();
    if summed.is_empty() {
        // Nothing to contract: a broadcast multiply.
        let order: Vec<Label> = [&batch[..], &free_a, &free_b].concat();
        let s = sizes(&order);
        let t = arrange(&a, &order, &s) * arrange(&b, &order, &s);
        return Term { t, labels: order };
    }
    let order_a: Vec<Label> = [&batch[..], &free_a, &summed].concat();
    let order_b: Vec<Label> = [&batch[..], &summed, &free_b].concat();
    let (m, k, n) = (product(&free_a), product(&summed), product(&free_b));
    let lead: Vec<usize> = sizes(&batch);
    let with = |tail: [usize; 2]| lead.iter().copied().chain(tail).collect::<Vec<usize>>();
    let x = arrange(&a, &order_a, &sizes(&order_a)).reshape(with([m, k]));
    let y = arrange(&b, &order_b, &sizes(&order_b)).reshape(with([k, n]));
    let labels: Vec<Label> = [&batch[..], &free_a, &free_b].concat();
    let t = x.matmul(&y).reshape(sizes(&labels));
    Term { t, labels }
}

impl Tensor {
    /// Sums the products of `self` and `other` over the axis pairs
    /// `(dims_self[i], dims_other[i])` (PyTorch `torch.tensordot` with
    /// explicit dims; NumPy's `axes=`). The result's axes are `self`'s
    /// remaining axes, then `other`'s. A batched matmul over views.
    ///
    /// ```
    /// use smelt::{Device, Tensor};
    /// let a = Tensor::from_vec((0..6).map(|v| v as f32).collect(), [2, 3], &Device::Cpu);
    /// let b = Tensor::from_vec((0..12).map(|v| v as f32).collect(), [3, 4], &Device::Cpu);
    /// let c = a.tensordot(&b, &[1], &[0]);
    /// assert_eq!(c.shape(), &[2, 4]);
    /// assert_eq!(c.to_vec::<f32>().unwrap(), a.matmul(&b).to_vec::<f32>().unwrap());
    /// ```
    ///
    /// # Panics
    /// If the axis lists differ in length, repeat an axis, are out of range,
    /// or pair axes of different sizes.
    #[track_caller]
    pub fn tensordot(&self, other: &Tensor, dims_self: &[isize], dims_other: &[isize]) -> Tensor {
        assert!(
            dims_self.len() == dims_other.len(),
            "tensordot: {} axes of shape {:?} paired with {} of shape {:?}",
            dims_self.len(),
            self.shape(),
            dims_other.len(),
            other.shape()
        );
        let a_axes = crate::shape::axes("tensordot", dims_self.to_vec(), self.shape());
        let b_axes = crate::shape::axes("tensordot", dims_other.to_vec(), other.shape());
        assert!(
            a_axes.len() == dims_self.len() && b_axes.len() == dims_other.len(),
            "tensordot: an axis repeats in {dims_self:?} or {dims_other:?}"
        );
        // Label the operands' axes and let einsum's pairwise step do it.
        let norm = |a: isize, r: usize| crate::shape::axis("tensordot", a, &vec![0; r]);
        let ra = self.ndim();
        let la: Vec<Label> = (0..ra).map(Label::Axis).collect();
        let mut lb: Vec<Label> = (0..other.ndim()).map(|d| Label::Axis(ra + d)).collect();
        for (x, y) in dims_self.iter().zip(dims_other) {
            let (i, j) = (norm(*x, ra), norm(*y, other.ndim()));
            assert!(
                self.shape()[i] == other.shape()[j],
                "tensordot: axis {x} of shape {:?} and axis {y} of shape {:?} differ",
                self.shape(),
                other.shape()
            );
            lb[j] = la[i];
        }
        let keep: Vec<Label> = la
            .iter()
            .copied()
            .filter(|l| !lb.contains(l))
            .chain(lb.iter().copied().filter(|l| !la.contains(l)))
            .collect();
        let a = Term {
            t: self.clone(),
            labels: la,
        };
        let b = Term {
            t: other.clone(),
            labels: lb,
        };
        let r = contract(a, b, &keep, "tensordot");
        let perm: Vec<usize> = keep
            .iter()
            .map(|l| r.labels.iter().position(|m| m == l).expect("kept"))
            .collect();
        r.t.permute(perm)
    }
}
