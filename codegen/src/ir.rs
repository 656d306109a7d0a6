//! The kernel IR: what one kernel computes, independent of the backend.
//!
//! A kernel iterates over a domain of loop variables. The first `n_kept`
//! variables are *kept* (one output row per combination); the rest are
//! *reduced*. Instructions form a DAG in SSA order (operands always precede
//! their users). An instruction is *row-level* when it does not depend on a
//! reduced variable (a `Reduce` result is row-level) and *element-level*
//! otherwise. Backends evaluate each `Reduce` in order as one pass over the
//! reduced variables, then run the element-level stores in a final pass; a
//! kernel with several reductions over the same row (softmax, layer norm) is
//! thus one kernel whose row stays on chip between the passes.
//!
//! A *scan* kernel ([`KernelKind::Scan`]) has exactly one reduced variable,
//! the scanned axis, and no `Reduce`: each [`Inst::Scan`] is element-level
//! and holds, at every point, the inclusive scan of its operand along the
//! row up to that point. A scan that the GPU runs as a single-pass
//! look-back scan (few long rows, or a long strided axis in column tiles)
//! has one more output that no store writes: its status buffer
//! ([`Kernel::zeroed_output`]), whose start is zeroed before every launch.
//!
//! A *sort* kernel ([`KernelKind::Sort`]) also has exactly one reduced
//! variable, the sorted axis, and no `Reduce`: each [`Inst::Sort`] holds at
//! position `j` the `j`-th element (or its position) of the row sorted by
//! its operand. Its stores write positions `0..k` of each row only
//! ([`Kernel::stored_len`]), so `topk` stores `k` of `n`. A sort that the
//! GPU does over many CTAs ([`crate::sort::Method::Select`],
//! [`crate::sort::Method::Radix`]) has one more output that no store
//! writes: the scratch buffer of [`crate::sort::scratch_len`] elements
//! that the GPU's radix passes share.
//!
//! A *scatter* kernel ([`KernelKind::Scatter`]) has no reduced variable and
//! read-modify-writes its output: its stores are [`StoreKind::AddAt`], an
//! atomic add at a position that is data. The output buffer is one an
//! earlier kernel of the schedule wrote (a copy of the tensor scattered
//! into), which the runtimes pass in place instead of a new buffer.
//!
//! An *attention* kernel ([`KernelKind::Attention`]) computes
//! `softmax_j(l(q . k)) @ v` without materializing the scores. Its
//! variables are `[batch.., i, e | j, d]` ([`AttentionVars`]): the kept
//! ones are the output's (a query row `i` and an output column `e`), the
//! reduced ones the key position `j` and the head dim `d`. It holds
//! exactly one [`Inst::Dot`] (the score, a sum over `d`) and one
//! [`Inst::Attend`] (the softmax-weighted sum over `j`); every other
//! instruction belongs to one of the parts that [`Kernel::attention`]
//! names, each depending on its own variables only. One that the GPU may
//! split along `j` (split-KV) has one more output that no store writes:
//! the scratch buffer of [`crate::ptx::attention_scratch`] for the
//! splits' partial softmaxes. Likewise a *matmul* kernel the GPU may
//! split along `k` (split-K) has the f32 scratch buffer of
//! [`crate::ptx::matmul_scratch`] for the splits' partial sums.

use crate::dims::Ranges;
use crate::expr::{Cond, Expr};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::philox::Draw;
use crate::scan::ScanOp;
use crate::sort::SortOp;
use crate::DType;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Index of an instruction in [`Kernel::insts`].
pub type Val = usize;

/// What the scheduler produced; backends may pick specialised code per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// No reduction: one output element per domain point.
    Elementwise,
    /// One reduction, outputs per row.
    Reduce,
    /// Several reductions over the same row, or a reduction whose row is
    /// written back elementwise (softmax, layer norm, ...).
    MultiReduce,
    /// A matrix product: `sum_k a[.., i, k] * b[.., k, j]` with fused
    /// operand views and epilogue.
    Matmul,
    /// Inclusive scans along the one reduced variable (`cumsum`,
    /// `cummax`, ...), with their producers fused into the loads.
    Scan,
    /// Sorts along the one reduced variable (`sort`, `argsort`, `topk`),
    /// with their producers fused into the loads.
    Sort,
    /// Atomic adds ([`StoreKind::AddAt`]) into an output that an earlier
    /// kernel wrote (`scatter_add`, `index_add`), over the domain of the
    /// values added, their producers fused into the loads.
    Scatter,
    /// Attention: one [`Inst::Dot`] whose value feeds the logits of one
    /// [`Inst::Attend`] (see the module docs and [`Kernel::attention`]).
    Attention,
}

impl KernelKind {
    /// Short name used in kernel names and schedules.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Elementwise => "elementwise",
            KernelKind::Reduce => "reduce",
            KernelKind::MultiReduce => "multireduce",
            KernelKind::Matmul => "matmul",
            KernelKind::Scan => "scan",
            KernelKind::Sort => "sort",
            KernelKind::Scatter => "scatter",
            KernelKind::Attention => "attention",
        }
    }
}

/// One SSA instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// Element `index` of input buffer `input`; `0` where `valid` fails
    /// (padding).
    Load {
        /// The input buffer's position in [`Kernel::inputs`].
        input: usize,
        /// Element index into that buffer, over the loop variables.
        index: Expr,
        /// Where the load happens; elsewhere the value is 0.
        valid: Cond,
    },
    /// A constant of the instruction's dtype, part of the kernel's code
    /// (the zero of a mask, a placeholder the lowerer itself needs).
    Const(f64),
    /// The value of the kernel's scalar parameter `slot` (dtype
    /// `Kernel::scalars[slot]`, the instruction's dtype): a value the graph
    /// holds (`x * 0.5`, a learning rate), bound at each launch, so a new
    /// value reuses the compiled kernel.
    Scalar(usize),
    /// `Bool`: whether the point lies inside a padded view's valid region.
    Valid(Cond),
    /// Conversion of the operand to the instruction's dtype.
    Cast(Val),
    /// An elementwise op of one operand.
    Unary(UnaryOp, Val),
    /// An elementwise op of two operands of the same dtype.
    Binary(BinaryOp, Val, Val),
    /// `cond ? a : b`.
    Where(Val, Val, Val),
    /// Reduction of the operand over every reduced variable.
    Reduce(ReduceOp, Val),
    /// Inclusive scan of the operand (`F32` or `I32`) along the one reduced
    /// variable, up to the current point; for index ops the position (of
    /// the instruction's integer dtype) instead of the value.
    Scan(ScanOp, Val),
    /// An indirect load (gather): element `index + at * stride` of input
    /// `input`, where `at` is an integer value computed by the kernel (an
    /// index tensor's element) that must lie in `0..len`; 0 where `valid`
    /// fails. An `at` outside `0..len` is a run-time error: the CPU returns
    /// it, the GPU reads element `index` instead and raises the kernel's
    /// error flag (see [`Kernel::has_indirect`]).
    Gather(Gather),
    /// `I32`: the value of an index expression at the point (a coordinate
    /// or a linear index: what `tril`'s mask and a random tensor's counter
    /// are computed from, so neither is ever held in memory).
    Index(Expr),
    /// A Philox4x32-10 draw (see [`crate::philox`]); the operands are the
    /// key's two words, the counter and, for [`Draw::Below`], the bound.
    Random(Draw, Vec<Val>),
    /// At position `j` of the one reduced variable, the `j`-th element of
    /// the row sorted stably by the operand (`F32` or `I32`), or its
    /// position before sorting (of the instruction's integer dtype).
    Sort(SortOp, Val),
    /// Attention kernels only: `sum_d a * b` over the head-dim variable
    /// `d`, in the instruction's dtype (`F32` or `F64`, the operands'), `d`
    /// ascending. `a` reads `[batch.., i, d]`, `b` `[batch.., j, d]`.
    Dot(Val, Val),
    /// Attention kernels only: `sum_j softmax_j(l) * v`, that is
    /// `sum_j exp(l_j - m) v_j / sum_j exp(l_j - m)` with `m = max_j l_j`,
    /// in the instruction's dtype (`F32` or `F64`, the operands'). `l` (the
    /// logit) reads `[batch.., i, j]` and the `Dot`; `v` reads
    /// `[batch.., j, e]`. As in the unfused graph, a row whose logits are
    /// all `-inf` gives NaN, and a NaN logit makes its row NaN.
    Attend(Val, Val),
}

/// The operands of an [`Inst::Gather`] (an indirect load).
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Gather {
    /// The input buffer's position in [`Kernel::inputs`].
    pub input: usize,
    /// The index of the gathered axis' element 0, over the loop
    /// variables.
    pub index: Expr,
    /// Where the load happens; elsewhere the value is 0 and `at` is not
    /// checked.
    pub valid: Cond,
    /// The position along the gathered axis (an integer value).
    pub at: Val,
    /// Elements between neighbours along the gathered axis.
    pub stride: i64,
    /// Size of the gathered axis: `at` must lie in `0..len`.
    pub len: i64,
}

impl Inst {
    /// Operands of the instruction.
    pub fn operands(&self) -> Vec<Val> {
        match self {
            Inst::Load { .. }
            | Inst::Const(_)
            | Inst::Scalar(_)
            | Inst::Valid(_)
            | Inst::Index(_) => vec![],
            Inst::Cast(a)
            | Inst::Unary(_, a)
            | Inst::Reduce(_, a)
            | Inst::Scan(_, a)
            | Inst::Sort(_, a)
            | Inst::Gather(Gather { at: a, .. }) => vec![*a],
            Inst::Binary(_, a, b) | Inst::Dot(a, b) | Inst::Attend(a, b) => vec![*a, *b],
            Inst::Where(c, a, b) => vec![*c, *a, *b],
            Inst::Random(_, ops) => ops.clone(),
        }
    }

    /// The index expression and the condition the instruction reads
    /// besides its operands (loop variables enter an instruction only
    /// through these).
    pub fn exprs(&self) -> (Option<&Expr>, Option<&Cond>) {
        match self {
            Inst::Load { index, valid, .. } | Inst::Gather(Gather { index, valid, .. }) => {
                (Some(index), Some(valid))
            }
            Inst::Valid(c) => (None, Some(c)),
            Inst::Index(e) => (Some(e), None),
            _ => (None, None),
        }
    }
}

/// An instruction with its result dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What it computes.
    pub inst: Inst,
    /// The dtype of its result.
    pub dtype: DType,
}

/// A buffer parameter of the kernel: element type and element count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arg {
    /// Element type.
    pub dtype: DType,
    /// Number of elements.
    pub len: usize,
}

/// Writes `value` (cast to the output's dtype) to `outputs[output]` at
/// `index`, as `kind` says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Store {
    /// The output buffer's position in [`Kernel::outputs`].
    pub output: usize,
    /// Element index into that buffer (for [`StoreKind::AddAt`], of the
    /// indexed axis' element 0).
    pub index: Expr,
    /// The value stored.
    pub value: Val,
    /// Whether it overwrites or adds at a data-dependent position.
    pub kind: StoreKind,
}

/// How a [`Store`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// Overwrites element `index`.
    Write,
    /// Adds the value to element `index + at * stride`, where `at` is an
    /// integer value computed by the kernel (an index tensor's element)
    /// that must lie in `0..len` (a scatter-add; compare
    /// [`Inst::Gather`]). The sum is rounded to the output's dtype at each
    /// add. Several points may add to one element: the CPU adds in domain
    /// order, the GPU with atomics in any order (so float results may
    /// differ in rounding between runs; integer ones never do). An `at`
    /// outside `0..len` is a run-time error: the CPU returns it, the GPU
    /// skips the add and raises the error flag ([`Kernel::has_indirect`]).
    AddAt {
        /// The position along the indexed axis (an integer value).
        at: Val,
        /// Elements between neighbours along the indexed axis.
        stride: i64,
        /// Size of the indexed axis: `at` must lie in `0..len`.
        len: i64,
    },
}

impl Store {
    /// A plain write of `value` to element `index` of output `output`.
    pub fn write(output: usize, index: Expr, value: Val) -> Store {
        Store {
            output,
            index,
            value,
            kind: StoreKind::Write,
        }
    }

    /// The values the store reads: its value and, for an add at a
    /// data-dependent position, that position.
    pub fn operands(&self) -> Vec<Val> {
        match self.kind {
            StoreKind::Write => vec![self.value],
            StoreKind::AddAt { at, .. } => vec![self.value, at],
        }
    }

    /// Whether the store adds into its output (which then holds data
    /// before the kernel runs) instead of overwriting it.
    pub fn is_add(&self) -> bool {
        matches!(self.kind, StoreKind::AddAt { .. })
    }
}

/// A whole kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Human-readable name, e.g. `multireduce_max_sub_exp_sum_div`.
    pub name: String,
    /// Which pattern the kernel follows (elementwise, reduce, matmul...).
    pub kind: KernelKind,
    /// Size of every loop variable: kept ones first.
    pub ranges: Ranges,
    /// How many leading variables are kept.
    pub n_kept: usize,
    /// The input buffers, in parameter order.
    pub inputs: Vec<Arg>,
    /// The output buffers, in parameter order after the inputs.
    pub outputs: Vec<Arg>,
    /// The dtype of each scalar parameter (read by [`Inst::Scalar`]), by
    /// slot. The values are not part of the kernel: kernels are shared
    /// through the schedule, module and disk caches, and each launch binds
    /// its own values.
    pub scalars: Vec<DType>,
    /// The SSA instructions; [`Val`] `i` is `insts[i]`'s result.
    pub insts: Vec<Node>,
    /// What the kernel writes.
    pub stores: Vec<Store>,
}

/// Bytes of kernel parameter space every parameter takes: the emitter
/// declares one 8-byte parameter per input and output (a `.u64` global
/// pointer) and per scalar (8 bytes holding the value, see
/// `ptx::scalar_param`).
pub const PARAM_BYTES: usize = 8;

/// The CUDA driver's limit on a kernel's parameter space (4 KiB; launches
/// with more are rejected). The scheduler splits kernels to stay within it.
pub const PARAM_BYTES_LIMIT: usize = 4096;

/// Instructions (IR nodes, loads included) one kernel may hold. ptxas time
/// grows faster than linearly with kernel size; the scheduler splits longer
/// kernels so JIT stays around a second or less. Measured with ptxas 13
/// for sm_90 on an elementwise chain cycling `mul`, `add`, `exp` (f32,
/// 4096 elements; 2 CPU cores shared with other jobs): 128 insts 0.23 s,
/// 253 insts 0.44 s, 403 insts 0.94 s, 503 insts 1.25 s, 753 insts 2.64 s
/// (sm_80 is about 10x faster).
pub const INST_BUDGET: usize = 400;

impl Kernel {
    /// Bytes of parameter space the kernel's entry declares: the single
    /// accounting of kernel parameters (the PTX emitter declares exactly
    /// these; a new kind of parameter must be added here).
    pub fn param_bytes(&self) -> usize {
        let flag = usize::from(self.has_indirect());
        (self.inputs.len() + self.outputs.len() + self.scalars.len() + flag) * PARAM_BYTES
    }

    /// Whether the kernel has indirect loads ([`Inst::Gather`]) or stores
    /// ([`StoreKind::AddAt`]), whose indices are data and cannot be checked
    /// before launch. Such a kernel takes one more parameter after its
    /// scalars: the address of a device-side `u32` error flag that it sets
    /// to 1 where an index is out of range (the runtime reads it once per
    /// realize).
    pub fn has_indirect(&self) -> bool {
        self.insts.iter().any(|n| matches!(n.inst, Inst::Gather(_)))
            || self.stores.iter().any(Store::is_add)
    }

    /// Checks that every [`Inst::Scalar`] reads a declared scalar parameter
    /// of its own dtype.
    ///
    /// # Errors
    /// A message naming the kernel, the instruction and the slot.
    pub fn check_scalars(&self) -> Result<(), String> {
        for (i, n) in self.insts.iter().enumerate() {
            if let Inst::Scalar(slot) = n.inst {
                if self.scalars.get(slot) != Some(&n.dtype) {
                    return Err(format!(
                        "kernel {}: instruction {i} reads scalar s{slot} as {}, but the kernel declares {:?}",
                        self.name, n.dtype, self.scalars
                    ));
                }
            }
        }
        Ok(())
    }

    /// For a matmul kernel, its one `Reduce(Sum)` in f32 over a `Mul(x, y)`:
    /// `(reduce, x, y)`. `None` for any other kernel (not a matmul, several
    /// reductions, another op or accumulator type, an empty domain).
    pub fn matmul_product(&self) -> Option<(Val, Val, Val)> {
        if self.kind != KernelKind::Matmul || self.ranges.contains(&0) {
            return None;
        }
        let mut reduces = self
            .insts
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n.inst {
                Inst::Reduce(op, a) => Some((i, op, n.dtype, a)),
                _ => None,
            });
        let (reduce, op, acc, prod) = reduces.next()?;
        if reduces.next().is_some() || op != ReduceOp::Sum || acc != DType::F32 {
            return None;
        }
        match self.insts[prod].inst {
            Inst::Binary(BinaryOp::Mul, x, y) => Some((reduce, x, y)),
            _ => None,
        }
    }

    /// The sort of a sort kernel (all its sort instructions share it but
    /// for the part); `None` for other kernels.
    pub fn sort_op(&self) -> Option<SortOp> {
        self.insts.iter().find_map(|n| match n.inst {
            Inst::Sort(op, _) => Some(op),
            _ => None,
        })
    }

    /// How many leading positions of each row the stores write: the `k`
    /// of a sort kernel's sort instructions, else the whole row.
    pub fn stored_len(&self) -> usize {
        self.sort_op().map_or_else(|| self.row_len(), |op| op.k)
    }

    /// The variable ranges element-level stores run over: the domain's,
    /// with a sort kernel's sorted axis (its last) cut to
    /// [`Kernel::stored_len`].
    pub fn store_ranges(&self) -> Ranges {
        let mut ranges = self.ranges.clone();
        if self.kind == KernelKind::Sort {
            if let Some(last) = ranges.last_mut() {
                *last = self.stored_len() as i64;
            }
        }
        ranges
    }

    /// The output of a scan kernel that no store writes, its last: the
    /// look-back status buffer ([`crate::ptx::scan_status_len`]), whose
    /// first [`crate::ptx::scan_status_zeroed_len`] words must hold zeros
    /// when the kernel starts (runtimes zero them before every launch).
    /// `None` for every other kernel.
    pub fn zeroed_output(&self) -> Option<usize> {
        let last = self.outputs.len().checked_sub(1)?;
        let stored = self.stores.iter().any(|s| s.output == last);
        (self.kind == KernelKind::Scan && !stored).then_some(last)
    }

    /// Number of rows (product of kept ranges).
    pub fn rows(&self) -> usize {
        self.ranges[..self.n_kept].iter().product::<i64>() as usize
    }

    /// Elements per row (product of reduced ranges; 1 without reduction).
    pub fn row_len(&self) -> usize {
        self.ranges[self.n_kept..].iter().product::<i64>() as usize
    }

    /// For every instruction, whether it is element-level (depends on a
    /// reduced variable).
    pub fn element_level(&self) -> Vec<bool> {
        let is_reduced = |e: &Expr| {
            let mut vs = Vec::new();
            e.vars(&mut vs);
            vs.iter().any(|v| *v >= self.n_kept)
        };
        let mut level = vec![false; self.insts.len()];
        for (i, n) in self.insts.iter().enumerate() {
            level[i] = match &n.inst {
                Inst::Load { index, valid, .. } => {
                    is_reduced(index) || valid.checks().iter().any(|(e, _, _)| is_reduced(e))
                }
                Inst::Gather(Gather {
                    index, valid, at, ..
                }) => {
                    level[*at]
                        || is_reduced(index)
                        || valid.checks().iter().any(|(e, _, _)| is_reduced(e))
                }
                Inst::Reduce(..) | Inst::Attend(..) => false,
                Inst::Dot(..) => true,
                // Differs along the row even for a row-invariant operand.
                Inst::Scan(..) | Inst::Sort(..) => self.n_kept < self.ranges.len(),
                Inst::Valid(c) => c.checks().iter().any(|(e, _, _)| is_reduced(e)),
                Inst::Index(e) => is_reduced(e),
                inst => inst.operands().iter().any(|o| level[*o]),
            };
        }
        level
    }

    /// True if the store runs in the element-level pass.
    pub fn store_is_element_level(&self, s: &Store, level: &[bool]) -> bool {
        let mut vs = Vec::new();
        s.index.vars(&mut vs);
        s.operands().iter().any(|o| level[*o]) || vs.iter().any(|v| *v >= self.n_kept)
    }

    /// Bytes the kernel reads from its inputs: every input counted by the
    /// elements its loads can touch (the values of the variables its index
    /// uses that pass the load's range checks), at most its length.
    pub fn bytes_read(&self) -> usize {
        let mut touched = vec![0usize; self.inputs.len()];
        for n in &self.insts {
            if let Inst::Load {
                input,
                index,
                valid,
            } = &n.inst
            {
                let mut vs = Vec::new();
                index.vars(&mut vs);
                let span: usize = if valid.is_never() {
                    0
                } else {
                    vs.iter().map(|v| self.valid_values(*v, valid)).product()
                };
                touched[*input] = touched[*input].max(span);
            }
            // A gather touches at most one element per domain point.
            if let Inst::Gather(Gather { input, valid, .. }) = &n.inst {
                let span: usize = if valid.is_never() {
                    0
                } else {
                    (0..self.ranges.len())
                        .map(|v| self.valid_values(v, valid))
                        .product()
                };
                touched[*input] = touched[*input].max(span);
            }
        }
        self.inputs
            .iter()
            .zip(touched)
            .map(|(a, t)| a.len.min(t) * a.dtype.size())
            .sum()
    }

    /// How many values of variable `v` pass the checks of `valid` that
    /// constrain `v` alone (`lo <= v + k < hi`).
    fn valid_values(&self, v: usize, valid: &Cond) -> usize {
        let (mut lo, mut hi) = (0i64, self.ranges[v]);
        for (e, clo, chi) in valid.checks() {
            if let ([(crate::expr::Atom::Var(u), 1)], k) = e.parts() {
                if *u == v {
                    lo = lo.max(clo - k);
                    hi = hi.min(chi - k);
                }
            }
        }
        (hi - lo).max(0) as usize
    }

    /// Bytes the kernel writes: whole outputs, except that an output
    /// only added into ([`StoreKind::AddAt`]) counts one element per
    /// domain point, at most its length.
    pub fn bytes_written(&self) -> usize {
        let points: usize = self.ranges.iter().map(|r| *r as usize).product();
        self.outputs
            .iter()
            .enumerate()
            .map(|(o, a)| {
                let mut stores = self.stores.iter().filter(|s| s.output == o).peekable();
                let adds_only = stores.peek().is_some() && stores.all(Store::is_add);
                let len = if adds_only { a.len.min(points) } else { a.len };
                len * a.dtype.size()
            })
            .sum()
    }

    /// A stable hash of everything that defines the kernel's code, with a
    /// fixed algorithm (FNV-1a) since it keys the on-disk PTX cache. Scalar
    /// parameters count by slot and dtype, not by value: kernels that
    /// differ only in their scalars' values share one compiled module.
    pub fn code_hash(&self) -> u64 {
        let mut h = crate::fnv::Fnv1a::default();
        self.kind.hash(&mut h);
        self.ranges.hash(&mut h);
        self.n_kept.hash(&mut h);
        self.inputs.hash(&mut h);
        self.outputs.hash(&mut h);
        self.scalars.hash(&mut h);
        for n in &self.insts {
            n.dtype.hash(&mut h);
            match &n.inst {
                Inst::Load {
                    input,
                    index,
                    valid,
                } => (0u8, input, index, valid).hash(&mut h),
                Inst::Const(c) => (1u8, c.to_bits()).hash(&mut h),
                Inst::Cast(a) => (2u8, a).hash(&mut h),
                Inst::Unary(op, a) => (3u8, op, a).hash(&mut h),
                Inst::Binary(op, a, b) => (4u8, op, a, b).hash(&mut h),
                Inst::Where(c, a, b) => (5u8, c, a, b).hash(&mut h),
                Inst::Reduce(op, a) => (6u8, op, a).hash(&mut h),
                Inst::Valid(c) => (7u8, c).hash(&mut h),
                Inst::Scalar(slot) => (8u8, slot).hash(&mut h),
                Inst::Scan(op, a) => (9u8, op, a).hash(&mut h),
                Inst::Gather(g) => (10u8, g).hash(&mut h),
                Inst::Index(e) => (11u8, e).hash(&mut h),
                Inst::Random(d, ops) => (12u8, d, ops).hash(&mut h),
                Inst::Sort(op, a) => (13u8, op, a).hash(&mut h),
                Inst::Dot(a, b) => (14u8, a, b).hash(&mut h),
                Inst::Attend(a, b) => (15u8, a, b).hash(&mut h),
            }
        }
        self.stores.hash(&mut h);
        h.finish()
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel {} ({}) kept {:?} reduced {:?}",
            self.name,
            self.kind.name(),
            &self.ranges[..self.n_kept],
            &self.ranges[self.n_kept..]
        )?;
        for (i, a) in self.inputs.iter().enumerate() {
            writeln!(f, "  in{i}: {}[{}]", a.dtype, a.len)?;
        }
        for (i, a) in self.outputs.iter().enumerate() {
            writeln!(f, "  out{i}: {}[{}]", a.dtype, a.len)?;
        }
        for (i, dt) in self.scalars.iter().enumerate() {
            writeln!(f, "  s{i}: {dt}")?;
        }
        for (i, n) in self.insts.iter().enumerate() {
            write!(f, "  %{i}: {} = ", n.dtype)?;
            match &n.inst {
                Inst::Load {
                    input,
                    index,
                    valid,
                } => {
                    write!(f, "load in{input}[{index}]")?;
                    if !valid.is_always() {
                        write!(f, " if {valid}")?;
                    }
                }
                Inst::Const(c) => write!(f, "const {c}")?,
                Inst::Scalar(slot) => write!(f, "scalar s{slot}")?,
                Inst::Valid(c) => write!(f, "valid {c}")?,
                Inst::Cast(a) => write!(f, "cast %{a}")?,
                Inst::Unary(op, a) => write!(f, "{} %{a}", op.name())?,
                Inst::Binary(op, a, b) => write!(f, "{} %{a}, %{b}", op.name())?,
                Inst::Where(c, a, b) => write!(f, "where %{c}, %{a}, %{b}")?,
                Inst::Reduce(op, a) => write!(f, "reduce_{} %{a}", op.name())?,
                Inst::Scan(op, a) => write!(f, "{} %{a}", op.name())?,
                Inst::Gather(Gather {
                    input,
                    index,
                    valid,
                    at,
                    stride,
                    len,
                }) => {
                    write!(
                        f,
                        "gather in{input}[{index} + %{at} * {stride}], %{at} < {len}"
                    )?;
                    if !valid.is_always() {
                        write!(f, " if {valid}")?;
                    }
                }
                Inst::Index(e) => write!(f, "index {e}")?,
                Inst::Random(d, ops) => {
                    let ops: Vec<String> = ops.iter().map(|o| format!("%{o}")).collect();
                    write!(f, "{}{} {}", d.name(), d.word(), ops.join(", "))?
                }
                Inst::Sort(op, a) => write!(f, "{} k={} %{a}", op.name(), op.k)?,
                Inst::Dot(a, b) => write!(f, "dot_d %{a}, %{b}")?,
                Inst::Attend(l, v) => write!(f, "attend_j %{l}, %{v}")?,
            }
            writeln!(f)?;
        }
        for s in &self.stores {
            match s.kind {
                StoreKind::Write => {
                    writeln!(f, "  store out{}[{}] = %{}", s.output, s.index, s.value)?
                }
                StoreKind::AddAt { at, stride, len } => writeln!(
                    f,
                    "  add out{}[{} + %{at} * {stride}] += %{}, %{at} < {len}",
                    s.output, s.index, s.value
                )?,
            }
        }
        Ok(())
    }
}
