//! The on-chip bitonic sort of a chunk of `2^c` `(key, position)` pairs
//! in shared memory (`c <= 14`), with its compare steps in registers.
//!
//! A bitonic network sorts `2^c` elements in `c(c+1)/2` compare steps:
//! for each block size `2^m` (`m = 1..=c`, blocks sorted in alternating
//! directions: descending where bit `m` of the index is set), a step for
//! each bit `j = m-1..0` compares element `i` with `i + 2^j` (bit `j` of
//! `i` clear). Doing each step in shared memory, as a naive kernel does,
//! costs two loads, two stores and a barrier per comparison step: 78
//! barriers and about 1.5 KB of shared traffic per pair for 4096 pairs.
//!
//! Here each of `T = 2^(c-r)` threads holds `E = 2^r` pairs in registers
//! (`r` up to 4, [`reg_bits`]): those whose indices differ only in a
//! *window* of `r` index bits `w..w+r`; the thread's number supplies the
//! other bits. A step on a bit inside the window compares two registers of
//! one thread, with no memory traffic and no barrier. The steps of a block
//! size are cut top-down into runs of at most `r` bits, and between runs
//! whose windows differ the pairs go through shared memory once (a
//! *transpose*: every pair stored, a barrier, every pair loaded in the new
//! window). 4096 pairs take 20 transposes (40 barriers) and 78 register
//! steps, 320 bytes of shared traffic per pair.
//!
//! Shared memory holds pair `i` at slot `i + i / 16`: one padding slot per
//! 16 keeps every window's accesses within the minimum of two 128-byte
//! wavefronts per warp for 8-byte pairs (a thread's 16 consecutive pairs
//! would otherwise put a warp's lanes 128 bytes apart, all on one bank).
//! Pairs of any form ([`Pairs`]) go through the same schedule; a 16-byte
//! pair of a 64-bit key moves in one vector access, and a compare step on
//! it compares two words.

use super::builder::{ins, Builder, Reg, RegKind};
use super::pairs::Pairs;
use super::sort_cx::{begin_loop, end_loop, SortCx};

/// `log2` of the pairs a thread holds for a chunk of `chunk` (a power of
/// two, at least 2): 16 from 2^9 pairs on (so 32 threads or more, 256
/// for 4096, 1024 for 16384), fewer below, so that a warp's lanes keep working (a
/// chunk of 64: 32 threads of 2 pairs), and 2 for the smallest chunks.
pub(super) fn reg_bits(chunk: u32) -> u32 {
    chunk.trailing_zeros().saturating_sub(5).clamp(1, 4)
}

/// The threads that sort a chunk of `chunk` pairs (a CTA may have more;
/// the others wait at the barriers).
pub(super) fn threads(chunk: u32) -> u32 {
    chunk >> reg_bits(chunk)
}

/// Bytes of shared memory holding a chunk of `chunk` pairs (with the
/// padding slots).
pub(super) fn bytes(chunk: u32, pairs: Pairs) -> u32 {
    pairs.size() * (chunk + chunk / 16)
}

/// One step of the sort's schedule ([`schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Move the pairs into the window starting at index bit `w` (through
    /// shared memory, unless it is the current one).
    Window(u32),
    /// The compare step of block size `2^m` on index bit `j`.
    Step { m: u32, j: u32 },
}

/// The sort of `2^c` pairs held `2^r` a thread, as windows and steps: the
/// bits `m-1..0` of each block size `2^m` top-down in runs of at most `r`
/// (the first takes `m % r` bits, or `r`, so the last run is `r-1..0`),
/// each run in the window ending at its top bit (or starting at bit 0).
fn schedule(c: u32, r: u32) -> Vec<Op> {
    let mut ops = vec![Op::Window(0)];
    for m in 1..=c {
        let mut hi = m;
        while hi > 0 {
            let run = if hi == m && m % r != 0 { m % r } else { r };
            let lo = hi - run.min(hi);
            ops.push(Op::Window(hi.saturating_sub(r)));
            ops.extend((lo..hi).rev().map(|j| Op::Step { m, j }));
            hi = lo;
        }
    }
    ops
}

/// The index of a thread's register `e` in the window at bit `w` (`r`
/// bits): bits `w..w+r` are `e`, the thread's number `t` gives the
/// others (its low `w` bits below the window, the rest above).
#[cfg(test)]
fn index(t: u32, e: u32, w: u32, r: u32) -> u32 {
    ((t >> w) << (w + r)) | (e << w) | (t & ((1 << w) - 1))
}

/// Where the direction of a compare step comes from: blocks of size
/// `2^m` are descending where bit `m` of the index is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Desc {
    /// Ascending: bit `c` of every index of a chunk of `2^c` is 0.
    Ascending,
    /// This bit of the register number.
    Reg(u32),
    /// This bit of the thread's number.
    Thread(u32),
}

/// The [`Desc`] of block size `2^m` in the window at bit `w` (`r` bits)
/// of a chunk of `2^c` (see `index`).
fn desc(c: u32, r: u32, w: u32, m: u32) -> Desc {
    if m == c {
        Desc::Ascending
    } else if m < w {
        Desc::Thread(m)
    } else if m >= w + r {
        Desc::Thread(m - r)
    } else {
        Desc::Reg(m - w)
    }
}

impl SortCx<'_> {
    /// Shared-memory address of pair `i` (`u32`) of a chunk sorted by
    /// [`SortCx::sort_pairs`] (from byte 0, see [`bytes`]).
    pub(super) fn pair_at(&self, b: &mut Builder, i: Reg, pairs: Pairs) -> Reg {
        let base = self.shared(b, 0);
        let (q, a) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "shr.u32 {q}, {i}, 4");
        ins!(b, "add.u32 {q}, {q}, {i}");
        ins!(b, "mad.lo.u32 {a}, {q}, {}, {base}", pairs.size());
        a
    }

    /// Sorts `len <= chunk` pairs into shared memory (from byte 0, see
    /// [`bytes`]), ascending; `chunk` is a power of two, at least 2, with
    /// [`threads`]`(chunk)` at most the CTA's threads; the slots from
    /// `len` on are padded with all-ones pairs, which sort last (above
    /// every real pair). `pair(b, t, valid)` gives pair `t` where `valid`.
    /// Ends with a barrier.
    pub(super) fn sort_pairs(
        &self,
        b: &mut Builder,
        len: Reg,
        chunk: u32,
        pairs: Pairs,
        pair: impl Fn(&mut Builder, Reg, Reg) -> Vec<Reg>,
    ) {
        let (_, bt, _) = pairs.types();
        let tid = self.tid;
        let end = b.mov(RegKind::B32, "u32", chunk);
        let l = begin_loop(b, tid, end, self.block);
        let t = l.0;
        let valid = b.reg(RegKind::Pred);
        ins!(b, "setp.lt.u32 {valid}, {t}, {len}");
        let p = pair(b, t, valid);
        for w in &p {
            ins!(b, "@!{valid} mov.{bt} {w}, -1");
        }
        let a = self.pair_at(b, t, pairs);
        pairs.access(b, "st", "shared", "", &p, (a, 0));
        end_loop(b, l);
        ins!(b, "bar.sync 0");
        let c = chunk.trailing_zeros();
        let r = reg_bits(chunk);
        assert!(
            threads(chunk) <= self.block,
            "a bitonic sort of {chunk} pairs in CTAs of {}",
            self.block
        );
        // Threads past `threads(chunk)` hold no pairs: they never store
        // their registers (which start as -1s).
        let active = (threads(chunk) < self.block).then(|| {
            let p = b.reg(RegKind::Pred);
            ins!(b, "setp.lt.u32 {p}, {tid}, {}", threads(chunk));
            p
        });
        let mut regs: Vec<Vec<Reg>> = (0..1u32 << r).map(|_| pairs.fill(b, -1)).collect();
        let mut window = None;
        for op in schedule(c, r) {
            match op {
                Op::Window(w) if window == Some(w) => {}
                Op::Window(w) => {
                    if let Some(old) = window {
                        self.move_pairs(b, old, &regs, pairs, active, "st");
                        ins!(b, "bar.sync 0");
                    }
                    self.move_pairs(b, w, &regs, pairs, active, "ld");
                    ins!(b, "bar.sync 0");
                    window = Some(w);
                }
                Op::Step { m, j } => {
                    let w = window.expect("the schedule starts with a window");
                    self.step(b, desc(c, r, w, m), j - w, pairs, &mut regs);
                }
            }
        }
        let w = window.expect("the schedule starts with a window");
        self.move_pairs(b, w, &regs, pairs, active, "st");
        ins!(b, "bar.sync 0");
    }

    /// Stores (`op` "st") or loads ("ld") this thread's registers `regs`
    /// to or from their pairs' slots in the window at bit `w` (the
    /// thread's indices, as `index` maps them), where `active`.
    fn move_pairs(
        &self,
        b: &mut Builder,
        w: u32,
        regs: &[Vec<Reg>],
        pairs: Pairs,
        active: Option<Reg>,
        op: &str,
    ) {
        let r = regs.len().trailing_zeros();
        // The thread's index bits: `tid`'s low `w` bits stay, the rest
        // move above the window.
        let (hi, base) = (b.reg(RegKind::B32), b.reg(RegKind::B32));
        ins!(b, "shr.u32 {hi}, {}, {w}", self.tid);
        ins!(b, "shl.b32 {hi}, {hi}, {}", w + r);
        ins!(b, "and.b32 {base}, {}, {}", self.tid, (1u32 << w) - 1);
        ins!(b, "or.b32 {base}, {base}, {hi}");
        let guard = active.map(|p| format!("@{p} ")).unwrap_or_default();
        // `base` and `e << w` have no bit in common, so the slot of their
        // sum (`i + i / 16`) is the sum of their slots: a constant offset
        // from `base`'s.
        let a = self.pair_at(b, base, pairs);
        for (e, x) in regs.iter().enumerate() {
            let i = (e as u32) << w;
            let off = pairs.size() * (i + i / 16);
            pairs.access(b, op, "shared", &guard, x, (a, off.into()));
        }
    }

    /// A compare step on bit `bit` of the register number, in direction
    /// `desc`: each pair of registers differing in that bit ends ordered
    /// (the lower register the smaller pair where ascending).
    fn step(&self, b: &mut Builder, desc: Desc, bit: u32, pairs: Pairs, regs: &mut [Vec<Reg>]) {
        let (kind, _, ut) = pairs.types();
        let thread = match desc {
            Desc::Thread(t) => {
                let (x, p) = (b.reg(RegKind::B32), b.reg(RegKind::Pred));
                ins!(b, "bfe.u32 {x}, {}, {t}, 1", self.tid);
                ins!(b, "setp.ne.u32 {p}, {x}, 0");
                Some(p)
            }
            _ => None,
        };
        for lo in (0..regs.len()).filter(|e| e >> bit & 1 == 0) {
            let hi = lo | 1 << bit;
            let down = match desc {
                Desc::Reg(d) => lo >> d & 1 == 1,
                _ => false,
            };
            let (nx, ny) = match (pairs, thread) {
                // 32-bit pairs: a min and a max (swapped where descending).
                (Pairs::Narrow { .. }, None) => {
                    let (x, y) = (regs[lo][0], regs[hi][0]);
                    let (first, second) = if down { ("max", "min") } else { ("min", "max") };
                    let (nx, ny) = (b.reg(kind), b.reg(kind));
                    ins!(b, "{first}.{ut} {nx}, {x}, {y}");
                    ins!(b, "{second}.{ut} {ny}, {x}, {y}");
                    (vec![nx], vec![ny])
                }
                _ => {
                    let (x, y) = (&regs[lo], &regs[hi]);
                    let swap = pairs.compare(b, if down { "lt" } else { "gt" }, x, y);
                    if let Some(p) = thread {
                        ins!(b, "xor.pred {swap}, {swap}, {p}");
                    }
                    (pairs.select(b, swap, y, x), pairs.select(b, swap, x, y))
                }
            };
            regs[lo] = nx;
            regs[hi] = ny;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule run on a model of the threads' registers (windows
    /// through a shared array by [`index`], steps with the directions of
    /// [`desc`]) sorts every chunk size, ties included.
    #[test]
    fn schedule_sorts_every_chunk() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for c in 1..=14u32 {
            let chunk = 1u32 << c;
            let r = reg_bits(chunk);
            let t_n = threads(chunk);
            assert_eq!(t_n << r, chunk);
            for distinct in [3u64, 1 << 40] {
                let mut shared: Vec<u64> = (0..chunk)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed % distinct
                    })
                    .collect();
                let mut want = shared.clone();
                want.sort();
                let mut regs = vec![vec![0u64; 1 << r]; t_n as usize];
                let mut window = None;
                let mut transposes = 0;
                for op in schedule(c, r) {
                    match op {
                        Op::Window(w) if window == Some(w) => {}
                        Op::Window(w) => {
                            if let Some(old) = window {
                                for (t, regs) in regs.iter().enumerate() {
                                    for (e, x) in regs.iter().enumerate() {
                                        shared[index(t as u32, e as u32, old, r) as usize] = *x;
                                    }
                                }
                                transposes += 1;
                            }
                            for (t, regs) in regs.iter_mut().enumerate() {
                                for (e, x) in regs.iter_mut().enumerate() {
                                    *x = shared[index(t as u32, e as u32, w, r) as usize];
                                }
                            }
                            window = Some(w);
                        }
                        Op::Step { m, j } => {
                            let w = window.unwrap();
                            assert!((w..w + r).contains(&j) && w + r <= c);
                            let bit = j - w;
                            for (t, regs) in regs.iter_mut().enumerate() {
                                for lo in (0..1usize << r).filter(|e| e >> bit & 1 == 0) {
                                    let hi = lo | 1 << bit;
                                    let down = match desc(c, r, w, m) {
                                        Desc::Ascending => false,
                                        Desc::Reg(d) => lo >> d & 1 == 1,
                                        Desc::Thread(d) => t >> d & 1 == 1,
                                    };
                                    // The model's direction is the index's bit m.
                                    let i = index(t as u32, lo as u32, w, r);
                                    assert_eq!(down, i >> m & 1 == 1, "c={c} m={m} w={w}");
                                    if (regs[lo] > regs[hi]) != down && regs[lo] != regs[hi] {
                                        regs.swap(lo, hi);
                                    }
                                }
                            }
                        }
                    }
                }
                let w = window.unwrap();
                for (t, regs) in regs.iter().enumerate() {
                    for (e, x) in regs.iter().enumerate() {
                        shared[index(t as u32, e as u32, w, r) as usize] = *x;
                    }
                }
                assert_eq!(shared, want, "chunk {chunk}");
                if c == 12 {
                    assert_eq!(transposes, 20);
                }
            }
        }
    }
}
