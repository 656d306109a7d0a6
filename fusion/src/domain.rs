//! Kernel domains: the loops a kernel iterates over and how reductions,
//! matmuls and their results are read and indexed in them.

use crate::graph::NodeRef;
use crate::view::{contiguous_strides, ShapeTracker, View};
use smallvec::smallvec;
use smelt_codegen::{Axes, Dims, Expr, Ranges, Shape, SortOp, Strides};

/// The loop domain of a kernel: its loop sizes and what iterates over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Size of every loop variable: kept ones first.
    pub ranges: Ranges,
    /// How many leading variables are kept.
    pub n_kept: usize,
    /// What the domain iterates over.
    pub source: Source,
}

/// What a domain iterates over; equal domains iterate the same way, so
/// their kernels can merge and compute each other's reductions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Every element of a tensor of this shape.
    Elementwise(Shape),
    /// A reduction of a tensor of this shape over these axes.
    Reduce(Shape, Axes),
    /// A matmul of operands of these shapes.
    Matmul(Shape, Shape),
    /// A scan of a tensor of this shape along this axis.
    Scan(Shape, usize),
    /// A sort of a tensor of this shape along this axis, in one direction,
    /// storing `k` positions per row, of the source node with this id:
    /// only kernels sorting the same values merge (one sort per kernel).
    Sort(SortDomain),
    /// Adds of the values of this shape into another tensor (a scatter).
    Scatter(Vec<usize>),
    /// A fused attention ([`crate::attention`]): variables `[batch.., i,
    /// e | j, d]`.
    Attention(Box<AttentionDomain>),
}

/// What identifies an attention kernel's domain ([`Source::Attention`]):
/// the two matmuls it fuses (by node id) and the shapes it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionDomain {
    /// The output matmul `softmax(l) @ v`, `[batch.., lq, dv]`.
    pub output: u64,
    /// The score matmul `q @ kt`, `[batch.., lq, lk]`.
    pub score: u64,
    /// Shapes of `q` (`[batch.., lq, d]`), `kt` (`[batch.., d, lk]`) and
    /// `v` (`[batch.., lk, dv]`).
    pub q: Shape,
    /// See `q`.
    pub kt: Shape,
    /// See `q`.
    pub v: Shape,
}

/// Which variable of an attention domain an operand's last two axes walk
/// (`None`: an axis of size 1 or not walked).
#[derive(Clone, Copy)]
pub enum AttnVar {
    /// The query row.
    I,
    /// The output column.
    E,
    /// The key position.
    J,
    /// The head dim of `q` and `k`.
    D,
}

/// What identifies a sort kernel's domain ([`Source::Sort`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortDomain {
    /// The shape of the sorted tensor.
    pub shape: Shape,
    /// The sorted axis.
    pub axis: usize,
    /// Largest first.
    pub descending: bool,
    /// Positions stored per row.
    pub k: usize,
    /// Bits of the sort keys (`SortOp::key_bits`; a function of the sorted
    /// node's dtype, so it never tells two domains apart).
    pub key_bits: u32,
    /// The id of the sorted node.
    pub src: u64,
}

impl Domain {
    /// Loop variables as expressions.
    pub fn vars(&self) -> Dims<Expr> {
        (0..self.ranges.len()).map(Expr::var).collect()
    }

    fn shape(&self) -> Shape {
        self.ranges.iter().map(|r| *r as usize).collect()
    }

    /// The domain of an elementwise kernel over `shape`.
    pub fn elementwise(shape: &[usize]) -> Domain {
        Domain {
            ranges: shape.iter().map(|n| *n as i64).collect(),
            n_kept: shape.len(),
            source: Source::Elementwise(shape.into()),
        }
    }

    /// The domain of a scatter of values of `shape`: one point per value,
    /// all variables kept.
    pub fn scatter(shape: &[usize]) -> Domain {
        Domain {
            source: Source::Scatter(shape.to_vec()),
            ..Domain::elementwise(shape)
        }
    }

    /// The domain of a reduction of a tensor of `shape` over `axes`: kept
    /// axes first, then the reduced ones.
    pub fn reduce(shape: &[usize], axes: &[usize]) -> Domain {
        let (kept, red) = split_axes(shape.len(), axes);
        let ranges = kept.iter().chain(&red).map(|a| shape[*a] as i64).collect();
        Domain {
            ranges,
            n_kept: kept.len(),
            source: Source::Reduce(shape.into(), red),
        }
    }

    /// The domain of a scan of a tensor of `shape` along `axis`: the other
    /// axes kept (the rows), then the scanned one, so a row is one run of
    /// the reduced variable whatever the view's strides.
    pub fn scan(shape: &[usize], axis: usize) -> Domain {
        Domain {
            source: Source::Scan(shape.into(), axis),
            ..Domain::reduce(shape, &[axis])
        }
    }

    /// How the scan's source and its result (both of `shape`) are indexed
    /// in this domain.
    pub fn scan_tracker(&self, shape: &[usize], axis: usize) -> ShapeTracker {
        self.reduce_source(shape, &[axis])
    }

    /// The domain of a sort: like a scan's, the other axes kept and the
    /// sorted one reduced.
    pub fn sort(sort: SortDomain) -> Domain {
        let d = Domain::reduce(&sort.shape, &[sort.axis]);
        Domain {
            source: Source::Sort(sort),
            ..d
        }
    }

    /// The domain of a sort `op` of `src` along `axis` (an
    /// [`crate::graph::Op::Sort`]).
    pub fn of_sort(op: SortOp, src: &NodeRef, axis: usize) -> Domain {
        Domain::sort(SortDomain {
            shape: src.shape().into(),
            axis,
            descending: op.descending,
            k: op.k,
            key_bits: op.key_bits(),
            src: src.id(),
        })
    }

    /// How a sort's result (the source's shape with `k` along `axis`) is
    /// indexed in this domain: position `j < k` of a row is element `j`
    /// along the axis (the stores write no other).
    pub fn sort_result(&self, shape: &[usize], axis: usize, k: usize) -> ShapeTracker {
        let mut out: Shape = shape.into();
        out[axis] = k;
        let (kept, red) = split_axes(shape.len(), &[axis]);
        let cs = contiguous_strides(&out);
        self.tracker(kept.iter().chain(&red).map(|a| cs[*a]).collect())
    }

    /// How the reduction's source (of `shape`) is read in this domain.
    pub fn reduce_source(&self, shape: &[usize], axes: &[usize]) -> ShapeTracker {
        let (kept, red) = split_axes(shape.len(), axes);
        let cs = contiguous_strides(shape);
        self.tracker(kept.iter().chain(&red).map(|a| cs[*a]).collect())
    }

    /// How the reduction's keepdim result (source `shape` reduced over
    /// `axes`) is indexed in this domain: kept variables only.
    pub fn reduce_result(&self, shape: &[usize], axes: &[usize]) -> ShapeTracker {
        let (kept, red) = split_axes(shape.len(), axes);
        let out: Shape = (0..shape.len())
            .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
            .collect();
        let cs = contiguous_strides(&out);
        self.tracker(
            kept.iter()
                .map(|a| cs[*a])
                .chain(red.iter().map(|_| 0))
                .collect(),
        )
    }

    /// How a matmul's (or an attention's) result of `shape` is indexed in
    /// its domain: by the kept variables, which are the result's axes.
    pub fn matmul_result(&self, shape: &[usize]) -> ShapeTracker {
        let mut strides = contiguous_strides(shape);
        strides.resize(self.ranges.len(), 0);
        self.tracker(strides)
    }

    /// The domain of an attention: `[batch.., lq, dv]` kept, `[lk, d]`
    /// reduced.
    pub fn attention(a: AttentionDomain) -> Domain {
        let r = a.q.len();
        let mut ranges: Ranges = a.q[..r - 2].iter().map(|n| *n as i64).collect();
        ranges.extend([a.q[r - 2], a.v[r - 1], a.v[r - 2], a.q[r - 1]].map(|n| n as i64));
        Domain {
            n_kept: r,
            ranges,
            source: Source::Attention(Box::new(a)),
        }
    }

    /// How an operand of an attention of `shape` (`[batch.., x, y]`) is
    /// read in this attention domain, its axes `x` and `y` walking the
    /// variables `walk`.
    pub fn attention_operand(&self, shape: &[usize], walk: [AttnVar; 2]) -> ShapeTracker {
        let r = shape.len();
        let cs = contiguous_strides(shape);
        let mut strides: Strides = cs[..r - 2].into();
        strides.extend([0; 4]);
        for (axis, var) in [r - 2, r - 1].into_iter().zip(walk) {
            strides[r - 2 + var as usize] = cs[axis];
        }
        self.tracker(strides)
    }

    /// The tracker of a single view over the domain with `strides`.
    pub fn tracker(&self, strides: Strides) -> ShapeTracker {
        ShapeTracker {
            views: smallvec![View {
                shape: self.shape(),
                strides,
                offset: 0,
                mask: None,
            }],
        }
    }
}

/// `(kept axes, reduced axes)` of a rank-`rank` tensor.
pub fn split_axes(rank: usize, axes: &[usize]) -> (Axes, Axes) {
    let kept = (0..rank).filter(|a| !axes.contains(a)).collect();
    let mut red: Axes = axes.into();
    red.sort_unstable();
    (kept, red)
}

/// Strides over the matmul domain `[batch.., m, n, k]` for both operands
/// (contiguous `a: [batch.., m, k]`, `b: [batch.., k, n]`).
pub(crate) fn matmul_operands(a: &[usize], b: &[usize]) -> (Strides, Strides) {
    let r = a.len();
    let (ca, cb) = (contiguous_strides(a), contiguous_strides(b));
    let mut ta: Strides = ca[..r - 2].into();
    ta.extend([ca[r - 2], 0, ca[r - 1]]);
    let mut tb: Strides = cb[..r - 2].into();
    tb.extend([0, cb[r - 1], cb[r - 2]]);
    (ta, tb)
}

/// The domain of a matmul with operands of shapes `a` and `b`.
pub fn matmul_domain(a: &[usize], b: &[usize]) -> Domain {
    let r = a.len();
    let mut ranges: Ranges = a[..r - 2].iter().map(|n| *n as i64).collect();
    ranges.extend([a[r - 2] as i64, b[r - 1] as i64, a[r - 1] as i64]);
    Domain {
        n_kept: r,
        ranges,
        source: Source::Matmul(a.into(), b.into()),
    }
}
