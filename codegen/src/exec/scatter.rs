//! A scatter's adds (`index_add`, `scatter_add`: [`StoreKind::AddAt`]
//! stores) in the interpreter's order, with the work before them spread
//! over the threads.
//!
//! Repeated positions make the order of the adds part of the result (`f32`
//! sums round), so they are applied point after point in domain order, on
//! one thread. What comes before them, the values and positions, is most
//! of the time (about 7/8 of an `f32` `index_add`) and has no order: row
//! blocks compute theirs in parallel into [`Pending`] lists, a wave of
//! blocks at a time, and one thread applies each wave's lists in block
//! order while the other threads compute the next wave.
//!
//! A scatter kernel has no reduced variable, so its stores are row-level:
//! [`crate::exec::tile::row_store`] collects them into the block's list.

use std::sync::Mutex;

use rayon::prelude::*;

use crate::exec::memory::Space;
use crate::exec::runs::Runs;
use crate::exec::tile::RowState;
use crate::exec::vals::{class, convert, Class, Vals};
use crate::interp::{self, InterpError};
use crate::ir::{Kernel, Store, StoreKind};
use crate::outs::Outs;
use crate::DType;

/// The adds of a row block, computed but not yet applied, in domain
/// order: runs of points whose positions are all equal (each row of an
/// `index_add`) as one span of output elements, the others point by
/// point. Its vectors are reused from block to block.
#[derive(Default)]
pub struct Pending {
    /// The output elements of the adds made point by point.
    elems: Vec<usize>,
    /// The values of adds into `f32`, `F16`, `BF16` and FP8 outputs.
    f32s: Vec<f32>,
    /// The values of adds into `F64` outputs.
    f64s: Vec<f64>,
    /// The values of adds into integer and `Bool` outputs.
    i64s: Vec<i64>,
    /// The adds in order.
    parts: Vec<Part>,
}

/// Consecutive adds of one store, their values next in the list's value
/// vector of the output's class.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    /// `n` adds to elements `e0, e0 + step, ..`.
    Span {
        store: usize,
        e0: usize,
        step: i64,
        n: usize,
    },
    /// `n` adds to the next `n` of [`Pending::elems`].
    Points { store: usize, n: usize },
}

impl Pending {
    /// Empties the list, keeping its allocations.
    fn clear(&mut self) {
        self.elems.clear();
        self.f32s.clear();
        self.f64s.clear();
        self.i64s.clear();
        self.parts.clear();
    }

    /// Appends the adds of store `s` (`st`, an [`StoreKind::AddAt`]) at
    /// the points of `sp`: `vals` (of dtype `from`, one per point) added
    /// to element `index + at * stride` of the output, `ats` the
    /// positions. A position outside its axis, or an element outside the
    /// output, is an error (the interpreter's, for the first such point).
    #[allow(clippy::too_many_arguments)]
    pub fn collect(
        &mut self,
        k: &Kernel,
        (s, st): (usize, &Store),
        runs: &Runs,
        (vals, from): (&Vals, DType),
        ats: &Vals,
        sp: Space,
    ) -> Result<(), InterpError> {
        let StoreKind::AddAt { stride, len, .. } = st.kind else {
            unreachable!("pending adds are of AddAt stores")
        };
        let (o, out_len) = (st.output, k.outputs[st.output].len);
        let vals = convert(vals, from, k.outputs[o].dtype);
        let ats = ats.ints();
        let step = runs.index;
        // The element of point `j` of run `r` at position `a`.
        let elem = |r: &crate::exec::runs::Run, j: usize, a: i64| {
            if a < 0 || a >= len {
                return Err(interp::position_error(k, a, len));
            }
            let e = r.base + step * j as i64 + a * stride;
            if e < 0 || e as usize >= out_len {
                return Err(interp::store_outside(k, o, e));
            }
            Ok(e as usize)
        };
        sp.runs(Some(&st.index), &crate::expr::Cond::always(), runs, |r| {
            let at = &ats[r.off..r.off + r.len];
            let Some(&a) = at.first() else {
                return Ok(());
            };
            if at.iter().all(|&x| x == a) {
                // One position: the elements step through the output, so
                // the first and the last bound them all.
                let e0 = elem(&r, 0, a)?;
                elem(&r, r.len - 1, a)?;
                self.parts.push(Part::Span {
                    store: s,
                    e0,
                    step,
                    n: r.len,
                });
            } else {
                for (j, &a) in at.iter().enumerate() {
                    self.elems.push(elem(&r, j, a)?);
                }
                match self.parts.last_mut() {
                    Some(Part::Points { store, n }) if *store == s => *n += r.len,
                    _ => self.parts.push(Part::Points { store: s, n: r.len }),
                }
            }
            let at = r.off..r.off + r.len;
            match &*vals {
                Vals::F32(_) | Vals::F32In(_) => self.f32s.extend_from_slice(&vals.f32s()[at]),
                Vals::F64(v) => self.f64s.extend_from_slice(&v[at]),
                Vals::I64(v) => self.i64s.extend_from_slice(&v[at]),
            }
            Ok(())
        })
    }

    /// Adds the list's values to the outputs, in order, each sum rounded
    /// (or wrapped) to the output's dtype as the interpreter adds.
    fn apply(&self, k: &Kernel, outs: &Outs) {
        // How many of `elems`, `f32s`, `f64s` and `i64s` earlier parts took.
        let (mut taken, mut f0, mut d0, mut i0) = (0, 0, 0, 0);
        for &part in &self.parts {
            let (store, n) = match part {
                Part::Span { store, n, .. } | Part::Points { store, n } => (store, n),
            };
            let points = match part {
                Part::Points { .. } => {
                    taken += n;
                    &self.elems[taken - n..taken]
                }
                Part::Span { .. } => &[],
            };
            // The elements of the part's adds, in order.
            let elems = || -> Box<dyn Iterator<Item = usize> + '_> {
                match part {
                    Part::Span { e0, step, n, .. } => {
                        Box::new((0..n).map(move |j| (e0 as i64 + step * j as i64) as usize))
                    }
                    Part::Points { .. } => Box::new(points.iter().copied()),
                }
            };
            let o = k.stores[store].output;
            let (dt, len) = (k.outputs[o].dtype, k.outputs[o].len);
            let size = dt.size();
            // SAFETY: adds are applied on one thread, and nothing else
            // touches the output while they are (the other threads only
            // compute values).
            let whole = unsafe { outs.elems(o, 0, len, size) };
            if dt == DType::F32 && cfg!(target_endian = "little") {
                // SAFETY: any bit pattern is an `f32`; only aligned
                // elements are in the middle.
                let (head, f32s, _) = unsafe { whole.align_to_mut::<f32>() };
                if head.is_empty() {
                    // `f32` sums rounded once are `f32` additions; a
                    // contiguous span is one vector loop.
                    let vs = &self.f32s[f0..f0 + n];
                    match part {
                        Part::Span { e0, step: 1, n, .. } => {
                            for (x, v) in f32s[e0..e0 + n].iter_mut().zip(vs) {
                                *x += v;
                            }
                        }
                        _ => elems().zip(vs).for_each(|(e, v)| f32s[e] += v),
                    }
                    f0 += n;
                    continue;
                }
            }
            let at = |e: usize| e * size..(e + 1) * size;
            match class(dt) {
                Class::F32 => {
                    for (e, v) in elems().zip(&self.f32s[f0..f0 + n]) {
                        interp::add_float(dt, &mut whole[at(e)], f64::from(*v));
                    }
                    f0 += n;
                }
                Class::F64 => {
                    for (e, v) in elems().zip(&self.f64s[d0..d0 + n]) {
                        interp::add_float(dt, &mut whole[at(e)], *v);
                    }
                    d0 += n;
                }
                Class::I64 => {
                    for (e, v) in elems().zip(&self.i64s[i0..i0 + n]) {
                        interp::add_int(dt, &mut whole[at(e)], *v);
                    }
                    i0 += n;
                }
            }
        }
    }
}

/// Points per wave, at least: each wave costs a wake-up of the threads
/// (about 0.1 ms on the 2-core build machine, where an `f32` `index_add`
/// of 2^26 points took 70 ms with waves of 8 blocks of 16384 points, 60
/// with 32 and 57 with 64; at 128 its lists no longer stayed in cache).
const WAVE_POINTS: usize = 1 << 19;

/// Row blocks per thread in a wave, at least: each thread's share evens
/// out.
const WAVE_PER_THREAD: usize = 4;

/// Runs `blocks` row blocks of `block_points` points of kernel `k` with
/// `block(state, b)`, which leaves block `b`'s adds in the state's
/// [`RowState::adds`], and applies them to `outs` in block order. Without
/// `parallel`, every block runs on the calling thread. The first error in
/// block order is returned, after the adds of the blocks before it.
pub(crate) fn run<'a, E: Send>(
    (k, outs): (&Kernel, &Outs),
    (blocks, block_points): (usize, usize),
    parallel: bool,
    states: impl Fn() -> (RowState<'a>, E) + Sync,
    block: impl Fn(&mut (RowState<'a>, E), usize) -> Result<(), InterpError> + Sync,
) -> Result<(), InterpError> {
    // One slot per block of a wave: the block's list and how it ended.
    type Slot = (Pending, Result<(), InterpError>);
    let fill = |st: &mut (RowState<'a>, E), slot: &mut Slot, b: usize| {
        st.0.adds.clear();
        slot.1 = block(st, b);
        std::mem::swap(&mut st.0.adds, &mut slot.0);
    };
    let apply = |slots: &mut [Slot]| {
        slots.iter_mut().try_for_each(|(p, r)| {
            std::mem::replace(r, Ok(()))?;
            p.apply(k, outs);
            Ok(())
        })
    };
    if !parallel {
        let (mut st, mut slot) = (states(), (Pending::default(), Ok(())));
        return (0..blocks).try_for_each(|b| {
            fill(&mut st, &mut slot, b);
            apply(std::slice::from_mut(&mut slot))
        });
    }
    let threads = rayon::current_num_threads();
    let wave = (WAVE_PER_THREAD * threads).max(WAVE_POINTS / block_points.max(1));
    let new = || -> Vec<Slot> { (0..wave).map(|_| (Pending::default(), Ok(()))).collect() };
    // One state per thread for the whole kernel (fresh ones every wave
    // would grow their tile vectors again, page faults included), each
    // on its own cache lines.
    #[repr(align(128))]
    struct Own<T>(Mutex<Option<T>>);
    let own: Vec<Own<(RowState<'a>, E)>> = (0..threads).map(|_| Own(Mutex::new(None))).collect();
    let compute = |slots: &mut [Slot], b0: usize| {
        slots.par_iter_mut().enumerate().for_each(|(i, slot)| {
            // A thread's own state: never contended.
            let t = rayon::current_thread_index().unwrap_or(0) % threads;
            let mut st = own[t].0.lock().unwrap_or_else(|e| e.into_inner());
            fill(st.get_or_insert_with(&states), slot, b0 + i)
        });
    };
    // Wave `w` is computed while wave `w - 1` is applied, all inside the
    // pool: joins from outside it would park the calling thread and wake
    // it again at every wave.
    rayon::scope(|_| {
        let (mut done, mut next) = (new(), new());
        let mut ready = 0;
        for b0 in (0..blocks).step_by(wave) {
            let n = wave.min(blocks - b0);
            let (applied, ()) =
                rayon::join(|| apply(&mut done[..ready]), || compute(&mut next[..n], b0));
            applied?;
            std::mem::swap(&mut done, &mut next);
            ready = n;
        }
        apply(&mut done[..ready])
    })
}
