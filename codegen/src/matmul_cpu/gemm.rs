//! A cache-blocked f32 matrix product `C += A · Bᵀ` on the host.
//!
//! Classic three-level blocking: a `KC`-deep slice of the reduction, packed
//! `NR`-column panels of `B` (stay in L1 during a panel's sweep) and `MC`-row
//! blocks of `A` packed into `MR`-row panels (stay in L2), multiplied by an
//! `MR x NR` register-blocked micro-kernel the compiler vectorises.
//!
//! Every `C[i][j]` is accumulated in ascending `k` as `c = c + a * b` with
//! both operations rounded to f32 (Rust never contracts into an FMA): the
//! order of a GPU's k loop. The generic interpreter sums pairwise instead,
//! so the two agree to f32 rounding, not bit for bit.

/// Rows of the micro-kernel's register tile.
const MR: usize = 4;
/// Columns of the micro-kernel's register tile (two SSE vectors per row).
const NR: usize = 8;
/// Reduction depth per packed block.
const KC: usize = 256;
/// Rows of `A` per packed block.
const MC: usize = 64;
/// Work (multiply-adds) below which one thread is faster than spawning.
const PARALLEL_MIN: usize = 1 << 22;

/// Operands of one product: `a` is `m x k` and `bt` is `n x k`, both
/// row-major (so `B = btᵀ` is `k x n`); `c` is `m x n` row-major.
pub(super) struct Gemm<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: &'a [f32],
    pub bt: &'a [f32],
}

impl Gemm<'_> {
    /// `c += a · btᵀ`, split over threads by blocks of rows when large.
    pub fn run(&self, c: &mut [f32]) {
        let (m, n, k) = (self.m, self.n, self.k);
        debug_assert!(self.a.len() >= m * k && self.bt.len() >= n * k && c.len() >= m * n);
        if m == 0 || n == 0 {
            return;
        }
        let threads = if m * n * k < PARALLEL_MIN {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |t| t.get())
        };
        let mut bpack = Vec::new();
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            pack_panels::<NR>(self.bt, k, n, k0, kc, &mut bpack);
            let rows_per = m.div_ceil(threads).div_ceil(MC) * MC;
            let bpack = &bpack;
            std::thread::scope(|s| {
                for (t, c) in c[..m * n].chunks_mut(rows_per * n).enumerate() {
                    let (i0, rows) = (t * rows_per, c.len() / n);
                    if rows == m {
                        self.rows(i0, rows, k0, kc, bpack, c);
                    } else {
                        s.spawn(move || self.rows(i0, rows, k0, kc, bpack, c));
                    }
                }
            });
        }
    }

    /// Rows `i0..i0 + rows` of the product for reduction slice `k0..k0 + kc`
    /// into `c` (those rows of `C`).
    fn rows(&self, i0: usize, rows: usize, k0: usize, kc: usize, bpack: &[f32], c: &mut [f32]) {
        let n = self.n;
        let mut apack = Vec::new();
        for ib in (0..rows).step_by(MC) {
            let mc = MC.min(rows - ib);
            pack_panels::<MR>(
                &self.a[(i0 + ib) * self.k..],
                self.k,
                mc,
                k0,
                kc,
                &mut apack,
            );
            for (jp, bp) in bpack.chunks_exact(NR * kc).enumerate() {
                let j = jp * NR;
                for (ip, ap) in apack.chunks_exact(MR * kc).enumerate() {
                    let i = ib + ip * MR;
                    let tile = Tile {
                        rows: MR.min(rows - i),
                        cols: NR.min(n - j),
                        ldc: n,
                    };
                    micro(ap, bp, &mut c[i * n + j..], &tile);
                }
            }
        }
    }
}

/// Packs rows `0..rows` of the row-major `src` (row length `ld`), columns
/// `k0..k0 + kc`, into panels of `P` rows stored column by column
/// (`out[panel][kk * P + p]`), zero-padding the last panel.
fn pack_panels<const P: usize>(
    src: &[f32],
    ld: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    out: &mut Vec<f32>,
) {
    out.clear();
    out.resize(rows.div_ceil(P) * P * kc, 0.0);
    for (p0, panel) in (0..rows).step_by(P).zip(out.chunks_exact_mut(P * kc)) {
        for p in 0..P.min(rows - p0) {
            let row = &src[(p0 + p) * ld + k0..][..kc];
            for (kk, v) in row.iter().enumerate() {
                panel[kk * P + p] = *v;
            }
        }
    }
}

/// The part of `C` one micro-kernel call owns.
struct Tile {
    rows: usize,
    cols: usize,
    ldc: usize,
}

/// `C[0..rows][0..cols] += Apanel · Bpanel` over the panels' depth.
#[inline(always)]
fn micro(ap: &[f32], bp: &[f32], c: &mut [f32], t: &Tile) {
    let mut acc = [[0f32; NR]; MR];
    for (i, row) in acc.iter_mut().enumerate().take(t.rows) {
        row[..t.cols].copy_from_slice(&c[i * t.ldc..][..t.cols]);
    }
    for (a, b) in ap.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
        for (row, ai) in acc.iter_mut().zip(a) {
            for (x, bj) in row.iter_mut().zip(b) {
                *x += ai * bj;
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(t.rows) {
        c[i * t.ldc..][..t.cols].copy_from_slice(&row[..t.cols]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_sequential_f32_sums_exactly() {
        for (m, n, k) in [(1, 1, 1), (5, 9, 3), (70, 17, 300), (3, 1, 513)] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 7.0)
                .collect();
            let bt: Vec<f32> = (0..n * k)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let mut c = vec![0f32; m * n];
            Gemm {
                m,
                n,
                k,
                a: &a,
                bt: &bt,
            }
            .run(&mut c);
            for i in 0..m {
                for j in 0..n {
                    let want = (0..k).fold(0f32, |s, p| s + a[i * k + p] * bt[j * k + p]);
                    assert_eq!(
                        c[i * n + j].to_bits(),
                        want.to_bits(),
                        "{m}x{n}x{k} at {i},{j}"
                    );
                }
            }
        }
    }
}
