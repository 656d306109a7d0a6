//! The epilogue on the accumulator registers: every accumulator becomes a
//! point of the kernel's kept domain, the `Reduce` takes its value, and the
//! kernel's row-level instructions and stores run there through the
//! generic evaluator, masked to the matrix.
//!
//! [`emit`] evaluates each accumulator where its thread holds it. The
//! tensor-core fragments scatter a thread's accumulators over 8-row
//! blocks, so stores from there are 2-byte pieces of many rows; [`staged`]
//! first writes the CTA's tile to shared memory and then gives each thread
//! runs of consecutive columns of one row: 16-byte loads of bias-like
//! operands and 16-byte, coalesced stores.

use super::shape::Shape;
use crate::ptx::builder::{ins, Builder, Reg, RegKind};
use crate::ptx::eval::{needs, Cx, Point, Vals};
use crate::ptx::memory;
use crate::ptx::ops::Value;
use crate::DType;

/// The thread's origin in C: `m` and `n` (u32) that its accumulators'
/// offsets are relative to, and the batch variables' registers.
pub struct Origin {
    pub m: Reg,
    pub n: Reg,
    pub batch: Vec<Reg>,
}

/// One f32 accumulator and its `(m, n)` offset from the [`Origin`].
pub struct Item {
    pub reg: Reg,
    pub dm: u32,
    pub dn: u32,
}

/// Emits the epilogue for every accumulator.
pub fn emit(b: &mut Builder, cx: &Cx, s: &Shape, items: &[Item], o: &Origin) {
    let insts = row_insts(cx, s);
    let batch = widened(b, cx, &o.batch);
    for it in items {
        let (m, n) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "add.u32 {m}, {}, {}", o.m, it.dm);
        ins!(b, "add.u32 {n}, {}, {}", o.n, it.dn);
        point(b, cx, s, &insts, &batch, (m, n), &[it.reg]);
    }
}

/// Where a CTA stages its tile: shared memory of at least
/// [`staging_bytes`], the thread and team size, the tile and its origin in
/// C, and the thread's origin within the tile (what [`Item`] offsets are
/// relative to).
pub struct Staging {
    pub smem: Reg,
    pub tid: Reg,
    pub threads: u32,
    pub bm: u32,
    pub bn: u32,
    /// `(m0, n0)`: the tile's first row and column in C.
    pub origin: (Reg, Reg),
    /// The thread's first row and column within the tile.
    pub local: (Reg, Reg),
    /// Columns staged at once: `bn`, or (for [`Sink::Kernel`]) a
    /// multiple of 8 dividing it, the tile then going through in slices
    /// of these columns, each staged and stored before the next (a smaller
    /// staging area: the persistent kernel's, see `specialized.rs`).
    pub cols: u32,
    /// The `threads` synchronise on named barrier 1 (other threads of the
    /// CTA take no part), not on the CTA's barrier 0.
    pub named_barrier: bool,
}

impl Staging {
    /// Waits for the staging threads.
    fn sync(&self, b: &mut Builder) {
        if self.named_barrier {
            ins!(b, "bar.sync 1, {}", self.threads);
        } else {
            ins!(b, "bar.sync 0");
        }
    }
}

/// f32 words of padding per staged row: 8 rows of fragments written at
/// once land on different banks (at most 2-way conflicts).
const PAD: u32 = 8;

/// Shared bytes the staged tile needs.
pub fn staging_bytes(bm: u32, bn: u32) -> u32 {
    bm * (bn + PAD) * 4
}

/// Columns per thread and run in the second phase: 16 bytes of the widest
/// output a store writes (not split-K's scratch), when every row of C
/// splits into whole runs (else 1).
pub fn run_lanes(cx: &Cx, s: &Shape, bn: u32) -> u32 {
    let widest =
        cx.k.stores
            .iter()
            .map(|st| cx.k.outputs[st.output].dtype.size())
            .max()
            .unwrap_or(4);
    let lanes = (16 / widest.max(1)) as u32;
    let fits = s.n_var.is_some() && s.n % lanes as i64 == 0 && bn.is_multiple_of(lanes);
    if fits {
        lanes
    } else {
        1
    }
}

/// Where the staged epilogue sends a CTA's tile.
pub enum Sink {
    /// Through the kernel's epilogue to its stores.
    Kernel,
    /// Split-K (`split.rs`): the f32 sums as they are, to the partial
    /// plane at this u64 address (element `m N + n`), masked to C.
    Partial(Reg),
    /// Split-K in a cluster (`split.rs`): the `count` CTAs of the tile's
    /// splits, cluster ranks `0 .. count`, sum their staged tiles in
    /// split order through distributed shared memory; this CTA (rank
    /// `rank`, u32) takes rows `rank bm / count ..` of the tile through the
    /// kernel's epilogue.
    Cluster { count: u32, rank: Reg },
}

/// The epilogue through shared memory: after a barrier (the caller has
/// waited for its copies and MMAs, so the pipeline's buffers are free),
/// every thread writes its accumulators to a `bm x bn` f32 tile; after a
/// second barrier (over the cluster for [`Sink::Cluster`]) each thread
/// takes runs of consecutive columns, neighbouring threads taking
/// neighbouring runs of a row, to `sink`. With [`Staging::cols`] below
/// `bn`, slice by slice of those columns.
pub fn staged(
    b: &mut Builder,
    cx: &Cx,
    s: &Shape,
    items: &[Item],
    st: &Staging,
    batch: &[Reg],
    sink: &Sink,
) {
    let cols = st.cols;
    debug_assert!(
        cols == st.bn
            || (matches!(sink, Sink::Kernel)
                && cols.is_multiple_of(8)
                && st.bn.is_multiple_of(cols))
    );
    let pitch = (cols + PAD) * 4;
    // Partials go out 16 bytes at a time where rows split into them.
    let lanes = match sink {
        Sink::Kernel | Sink::Cluster { .. } => run_lanes(cx, s, cols),
        Sink::Partial(_) if s.n % 4 == 0 => 4,
        Sink::Partial(_) => 1,
    };
    let runs_per_row = cols / lanes;
    // Lanes step along n (with one lane, the lane variable is unused).
    let cxl = cx.with_lanes_along(s.n_var.unwrap_or(cx.lane_var), s.reduce);
    let insts = row_insts(&cxl, s);
    let mut start: Option<(Reg, Vec<Reg>)> = None;
    for slice in 0..st.bn / cols {
        st.sync(b);
        let first_col = slice * cols;
        let base = match &start {
            Some((base, _)) => *base,
            None => {
                let base = b.reg(RegKind::B32);
                ins!(b, "mad.lo.u32 {base}, {}, {pitch}, {}", st.local.0, st.smem);
                let col = b.reg(RegKind::B32);
                ins!(b, "shl.b32 {col}, {}, 2", st.local.1);
                ins!(b, "add.u32 {base}, {base}, {col}");
                base
            }
        };
        // A thread's column `dn` lies in slice `dn / cols`: the
        // fragments' column within an 8-column group is below 8.
        let mine: Vec<&Item> = items.iter().filter(|it| it.dn / cols == slice).collect();
        let mut i = 0;
        while i < mine.len() {
            let it = mine[i];
            let off = it.dm * pitch + (it.dn - first_col) * 4;
            // Column pairs (even dn, thread columns even) as one 8-byte store.
            let pair = mine
                .get(i + 1)
                .filter(|n| n.dm == it.dm && n.dn == it.dn + 1 && it.dn.is_multiple_of(2));
            match pair {
                Some(n) => {
                    ins!(
                        b,
                        "st.shared.v2.f32 [{base}+{off}], {{{}, {}}}",
                        it.reg,
                        n.reg
                    );
                    i += 2;
                }
                None => {
                    ins!(b, "st.shared.f32 [{base}+{off}], {}", it.reg);
                    i += 1;
                }
            }
        }
        let batch = &start
            .get_or_insert_with(|| {
                let batch = match sink {
                    Sink::Kernel | Sink::Cluster { .. } => widened(b, &cxl, batch),
                    Sink::Partial(_) => Vec::new(),
                };
                (base, batch)
            })
            .1;
        // The tile's rows this CTA takes: all, or its rank's share.
        let (rows, first_row) = match sink {
            Sink::Cluster { count, rank } => {
                memory::cluster_barrier(b);
                let first = b.reg(RegKind::B32);
                ins!(b, "mul.lo.u32 {first}, {rank}, {}", st.bm / count);
                (st.bm / count, Some(first))
            }
            Sink::Kernel | Sink::Partial(_) => {
                st.sync(b);
                (st.bm, None)
            }
        };
        for j in 0..rows * runs_per_row / st.threads {
            let (g, row, run, m, n) = (
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
                b.reg(RegKind::B32),
            );
            ins!(b, "add.u32 {g}, {}, {}", st.tid, j * st.threads);
            ins!(b, "div.u32 {row}, {g}, {runs_per_row}");
            if let Some(first) = first_row {
                ins!(b, "add.u32 {row}, {row}, {first}");
            }
            ins!(b, "rem.u32 {run}, {g}, {runs_per_row}");
            ins!(b, "mul.lo.u32 {run}, {run}, {lanes}");
            ins!(b, "add.u32 {m}, {}, {row}", st.origin.0);
            ins!(b, "add.u32 {n}, {}, {run}", st.origin.1);
            if first_col > 0 {
                ins!(b, "add.u32 {n}, {n}, {first_col}");
            }
            let addr = b.reg(RegKind::B32);
            ins!(b, "mad.lo.u32 {addr}, {row}, {pitch}, {}", st.smem);
            ins!(b, "mad.lo.u32 {addr}, {run}, 4, {addr}");
            let regs: Vec<Reg> = (0..lanes).map(|_| b.reg(RegKind::F32)).collect();
            match sink {
                Sink::Kernel | Sink::Partial(_) => {
                    for (q, quad) in regs.chunks(4).enumerate() {
                        memory::load_shared_f32(b, quad, addr, 16 * q as u32);
                    }
                }
                Sink::Cluster { count, .. } => peer_sum(b, addr, *count, &regs),
            }
            match sink {
                Sink::Kernel | Sink::Cluster { .. } => {
                    point(b, &cxl, s, &insts, batch, (m, n), &regs)
                }
                Sink::Partial(plane) => partial(b, s, *plane, (m, n), &regs),
            }
        }
    }
    if let Sink::Cluster { .. } = sink {
        // Peers may still read this CTA's staged tile.
        memory::cluster_barrier(b);
    }
}

/// Sets `acc` to the sum of the run at shared address `at` in the staged
/// tiles of cluster ranks `0 .. count` (the splits, in order).
fn peer_sum(b: &mut Builder, at: Reg, count: u32, acc: &[Reg]) {
    let peer = b.reg(RegKind::B32);
    sum_splits(b, count, acc, |b, rank, part| {
        ins!(b, "mapa.shared::cluster.u32 {peer}, {at}, {rank}");
        for (q, quad) in part.chunks(4).enumerate() {
            memory::load_peer_f32(b, quad, peer, 16 * q as u32);
        }
    });
}

/// Sets `acc` to the sum of `count` splits' partial runs, which `load`
/// puts in its registers, split by split from `+0`: both ways split-K
/// adds up (`split.rs`) go through here, so they give the same bits.
pub fn sum_splits(
    b: &mut Builder,
    count: u32,
    acc: &[Reg],
    mut load: impl FnMut(&mut Builder, u32, &[Reg]),
) {
    for a in acc {
        ins!(b, "mov.f32 {a}, 0f00000000");
    }
    let part: Vec<Reg> = acc.iter().map(|_| b.reg(RegKind::F32)).collect();
    for split in 0..count {
        load(b, split, &part);
        for (a, p) in acc.iter().zip(&part) {
            ins!(b, "add.f32 {a}, {a}, {p}");
        }
    }
}

/// Stores the run `regs` of row `m` from column `n` to the partial plane
/// at `plane` where it lies inside C (a run of several lanes lies wholly
/// inside or outside: `N` is a multiple of its length).
pub(super) fn partial(b: &mut Builder, s: &Shape, plane: Reg, (m, n): (Reg, Reg), regs: &[Reg]) {
    let pred = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.u32 {pred}, {m}, {}", s.m);
    ins!(b, "setp.lt.and.u32 {pred}, {n}, {}, {pred}", s.n);
    let (at, n64) = (b.reg(RegKind::B64), b.reg(RegKind::B64));
    ins!(b, "cvt.u64.u32 {n64}, {n}");
    ins!(b, "mad.wide.u32 {at}, {m}, {}, {n64}", s.n);
    ins!(b, "shl.b64 {at}, {at}, 2");
    ins!(b, "add.u64 {at}, {at}, {plane}");
    let list = regs
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    match regs.len() {
        4 => ins!(b, "@{pred} st.global.v4.f32 [{at}], {{{list}}}"),
        _ => ins!(b, "@{pred} st.global.f32 [{at}], {list}"),
    }
}

/// The kernel's epilogue and stores at row `m` (u32), columns `n ..` (one
/// per value of `acc`, the `Reduce`'s values), batch variables `batch`
/// (u32), masked to C: split-K's reduction (`split.rs`) ends with it.
pub fn evaluate(
    b: &mut Builder,
    cx: &Cx,
    s: &Shape,
    (m, n): (Reg, Reg),
    batch: &[Reg],
    acc: &[Reg],
) {
    let cxl = cx.with_lanes_along(s.n_var.unwrap_or(cx.lane_var), s.reduce);
    let insts = row_insts(&cxl, s);
    let batch = widened(b, &cxl, batch);
    point(b, &cxl, s, &insts, &batch, (m, n), acc);
}

/// The row-level instructions the stores need, but for the `Reduce`
/// (whose value the accumulators give).
fn row_insts(cx: &Cx, s: &Shape) -> Vec<usize> {
    let row_level: Vec<bool> = cx
        .level
        .iter()
        .enumerate()
        .map(|(i, l)| !l && i != s.reduce)
        .collect();
    let roots: Vec<usize> = cx.k.stores.iter().map(|st| st.value).collect();
    needs(cx.k, &row_level, &roots)
}

/// `r` in the kernel's index width.
fn widen(b: &mut Builder, cx: &Cx, r: Reg) -> Reg {
    if cx.width.wide {
        let x = b.reg(RegKind::B64);
        ins!(b, "cvt.u64.u32 {x}, {r}");
        x
    } else {
        r
    }
}

fn widened(b: &mut Builder, cx: &Cx, regs: &[Reg]) -> Vec<Reg> {
    regs.iter().map(|r| widen(b, cx, *r)).collect()
}

/// Evaluates `insts` and the stores at the point group `(m, n)` whose
/// `Reduce` values (one per lane along `n`) are `acc`, masked to C.
fn point(
    b: &mut Builder,
    cx: &Cx,
    s: &Shape,
    insts: &[usize],
    batch: &[Reg],
    (m, n): (Reg, Reg),
    acc: &[Reg],
) {
    let k = cx.k;
    let pred = b.reg(RegKind::Pred);
    ins!(b, "setp.lt.u32 {pred}, {m}, {}", s.m);
    ins!(b, "setp.lt.and.u32 {pred}, {n}, {}, {pred}", s.n);
    let mut vars = vec![None; k.ranges.len()];
    for (v, r) in s.batch_vars.iter().zip(batch) {
        vars[*v] = Some(*r);
    }
    if let Some(v) = s.m_var {
        vars[v] = Some(widen(b, cx, m));
    }
    if let Some(v) = s.n_var {
        vars[v] = Some(widen(b, cx, n));
    }
    let p = Point {
        vars,
        lanes: acc.len(),
        pred: Some(pred),
    };
    let mut vals: Vals = vec![None; k.insts.len()];
    vals[s.reduce] = Some(
        acc.iter()
            .map(|reg| Value {
                reg: *reg,
                dtype: DType::F32,
            })
            .collect(),
    );
    cx.eval(b, &p, insts, &mut vals);
    for st in &k.stores {
        cx.store(b, &p, st, &vals);
    }
}
