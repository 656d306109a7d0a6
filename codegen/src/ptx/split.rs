//! The split count of a kernel that divides its reduction among CTAs
//! (split-K matmuls, split-KV attention): each output tile's work is
//! `count` CTAs', each over `chunk` units of the kernel's own loop (the
//! matmul's k-tiles, the attention kernel's keys), the last over the rest.

/// How a kernel's reduction is split: `count` CTAs per output tile, each
/// over `chunk` units (the last over the rest). `count` 1 is no split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// CTAs per output tile (1: unsplit).
    pub count: u32,
    /// Units of each split but the last (0 unsplit).
    pub chunk: u32,
}

impl Split {
    /// No split: one CTA walks the whole reduction.
    pub const NONE: Split = Split { count: 1, chunk: 0 };

    /// Whether the reduction is split at all.
    pub fn is_split(self) -> bool {
        self.count > 1
    }
}
