//! `(key, position)` pairs as the sort kernels hold them, and the few
//! operations every method needs on them, whatever their form: padding,
//! loads and stores, comparison, selection, the position.
//!
//! A pair is one or two words, most significant first; pairs compare
//! lexicographically by their words (so a one-word pair compares as one
//! unsigned integer). A pair's key is [`crate::sort::sort_key`] in the
//! sort's direction, its position its element's place in the row: pairs
//! are all distinct and order as the stable sort does. The all-ones pair
//! (every word `-1`) sorts after every real pair, whose position is below
//! `2^31`: it pads a chunk to a power of two.

use super::builder::{ins, Builder, Reg, RegKind};
use crate::sort::SortOp;

/// The form of a kernel's pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pairs {
    /// One `u32` word, `packed key << pos_bits | position`, for narrow
    /// keys ([`crate::sort::Narrow`]) on chip: half the shared traffic of
    /// [`Pairs::Wide`] and compares in one instruction.
    Narrow { pos_bits: u32 },
    /// One `u64` word, `key << 32 | position`: 32-bit keys.
    Wide,
    /// Two `u64` words, the key and then the position: 64-bit keys
    /// (`F64`, `I64`). 16 bytes in shared memory, so the on-chip chunk is
    /// half as long ([`crate::sort::sort_chunk`]).
    Split,
}

impl Pairs {
    /// The pairs of sort `op` outside the on-chip narrow packing.
    pub(super) fn of(op: SortOp) -> Pairs {
        if op.key_bits() > 32 {
            Pairs::Split
        } else {
            Pairs::Wide
        }
    }

    /// Words of a pair.
    pub(super) fn words(self) -> usize {
        match self {
            Pairs::Split => 2,
            _ => 1,
        }
    }

    /// Bytes of a pair in memory.
    pub(super) fn size(self) -> u32 {
        match self {
            Pairs::Narrow { .. } => 4,
            Pairs::Wide => 8,
            Pairs::Split => 16,
        }
    }

    /// The register kind, and the bit and unsigned types, of a word.
    pub(super) fn types(self) -> (RegKind, &'static str, &'static str) {
        match self {
            Pairs::Narrow { .. } => (RegKind::B32, "b32", "u32"),
            _ => (RegKind::B64, "b64", "u64"),
        }
    }

    /// Fresh registers for a pair.
    pub(super) fn regs(self, b: &mut Builder) -> Vec<Reg> {
        let (kind, _, _) = self.types();
        (0..self.words()).map(|_| b.reg(kind)).collect()
    }

    /// Fresh registers holding a pair whose every word is `imm`.
    pub(super) fn fill(self, b: &mut Builder, imm: i64) -> Vec<Reg> {
        let (kind, bt, _) = self.types();
        (0..self.words()).map(|_| b.mov(kind, bt, imm)).collect()
    }

    /// Loads (`op` "ld") registers `pair` from, or stores (`op` "st") them
    /// to, the pair at byte `off` past `addr` in state space `space`
    /// ("shared" or "global"), under `guard` ("" or "@p "). Shared pairs
    /// move in one vector access (the emitters keep them aligned to their
    /// size); global ones a word at a time (8-byte aligned).
    pub(super) fn access(
        self,
        b: &mut Builder,
        op: &str,
        space: &str,
        guard: &str,
        pair: &[Reg],
        (addr, off): (Reg, u64),
    ) {
        let (_, bt, _) = self.types();
        let at = |o: u64| match o {
            0 => format!("[{addr}]"),
            _ => format!("[{addr}+{o}]"),
        };
        if pair.len() == 2 && space == "shared" {
            let regs = format!("{{{}, {}}}", pair[0], pair[1]);
            match op {
                "st" => ins!(b, "{guard}st.shared.v2.{bt} {}, {regs}", at(off)),
                _ => ins!(b, "{guard}ld.shared.v2.{bt} {regs}, {}", at(off)),
            }
            return;
        }
        let word = u64::from(self.size()) / pair.len() as u64;
        for (w, r) in pair.iter().enumerate() {
            let a = at(off + w as u64 * word);
            match op {
                "st" => ins!(b, "{guard}st.{space}.{bt} {a}, {r}"),
                _ => ins!(b, "{guard}ld.{space}.{bt} {r}, {a}"),
            }
        }
    }

    /// A predicate: whether pair `x` compares `cmp` ("lt", "gt") to pair
    /// `y`, lexicographically by word.
    pub(super) fn compare(self, b: &mut Builder, cmp: &str, x: &[Reg], y: &[Reg]) -> Reg {
        let (_, _, ut) = self.types();
        let p = b.reg(RegKind::Pred);
        let last = x.len() - 1;
        ins!(b, "setp.{cmp}.{ut} {p}, {}, {}", x[last], y[last]);
        // From the least significant word up: strictly `cmp` on a word, or
        // equal there and `cmp` on the words below.
        for w in (0..last).rev() {
            ins!(b, "setp.eq.and.{ut} {p}, {}, {}, {p}", x[w], y[w]);
            ins!(b, "setp.{cmp}.or.{ut} {p}, {}, {}, {p}", x[w], y[w]);
        }
        p
    }

    /// Fresh registers holding pair `x` where `p`, else pair `y`.
    pub(super) fn select(self, b: &mut Builder, p: Reg, x: &[Reg], y: &[Reg]) -> Vec<Reg> {
        let (kind, bt, _) = self.types();
        x.iter()
            .zip(y)
            .map(|(x, y)| {
                let r = b.reg(kind);
                ins!(b, "selp.{bt} {r}, {x}, {y}, {p}");
                r
            })
            .collect()
    }

    /// The position (`u32`) of `pair`.
    pub(super) fn position(self, b: &mut Builder, pair: &[Reg]) -> Reg {
        let pos = b.reg(RegKind::B32);
        match self {
            Pairs::Narrow { pos_bits } => {
                ins!(b, "and.b32 {pos}, {}, {}", pair[0], (1u32 << pos_bits) - 1);
            }
            Pairs::Wide => {
                let key = b.reg(RegKind::B32);
                ins!(b, "mov.b64 {{{pos}, {key}}}, {}", pair[0]);
            }
            Pairs::Split => ins!(b, "cvt.u32.u64 {pos}, {}", pair[1]),
        }
        pos
    }
}
