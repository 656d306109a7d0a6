//! The vector width of the executor's hot loops, chosen at run time.
//!
//! The crate is built for its target's baseline (SSE2 on x86-64: 4 `f32`
//! lanes). On x86-64 the loops (elementwise arithmetic, `exp`,
//! conversions, the reductions' folds) are also compiled for AVX2 + FMA
//! and for AVX-512 (F, VL, BW, DQ) from their one generic body: [`vectorised`]
//! calls the body inside a function with the level's `#[target_feature]`,
//! where LLVM inlines it and vectorises it for that width. The level is
//! the best the CPU has, detected once, or the one `SMELT_CPU_SIMD` names
//! (never above what the CPU has). Other architectures run the baseline.
//!
//! Results are the same at every level, bit for bit: Rust never contracts
//! `a * b + c` into a fused multiply-add, and the one body that calls
//! `mul_add` (`exp_f32`'s polynomial) gets one rounding at every level
//! (the instruction on AVX2 and AVX-512, libm's `fmaf` on the baseline),
//! so every level rounds each operation as the baseline does, in the same
//! order (a reduction's order is set by its code, not by the width).

use std::sync::OnceLock;

use crate::env;
pub use crate::env::CpuSimd as Level;

/// The level the executor runs at: `SMELT_CPU_SIMD` if set and supported
/// here (else a warning and the best level), otherwise the best level the
/// CPU supports. Decided once per process (printed with `SMELT_DEBUG>=1`).
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let best = best();
        let level = match env::var("SMELT_CPU_SIMD", env::parse_cpu_simd) {
            Some(l) if supported(l) => l,
            Some(l) => {
                eprintln!("smelt: SMELT_CPU_SIMD={l:?}: this CPU lacks it; using {best:?}");
                best
            }
            None => best,
        };
        if env::var("SMELT_DEBUG", env::parse_debug).unwrap_or(0) >= 1 {
            eprintln!("smelt: CPU executor vector width {level:?} (the CPU's best: {best:?})");
        }
        level
    })
}

/// The widest level this CPU supports.
pub fn best() -> Level {
    [Level::Avx512, Level::Avx2]
        .into_iter()
        .find(|l| supported(*l))
        .unwrap_or(Level::Sse2)
}

/// Whether this CPU (and this build's architecture) runs code of `level`.
pub fn supported(level: Level) -> bool {
    match level {
        Level::Sse2 => true,
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            supported(Level::Avx2)
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => false,
    }
}

/// Every level this CPU supports, narrowest first (for tests that compare
/// the levels).
#[cfg(test)]
pub fn levels() -> Vec<Level> {
    [Level::Sse2, Level::Avx2, Level::Avx512]
        .into_iter()
        .filter(|l| supported(*l))
        .collect()
}

/// Evaluates `$body` compiled for level `$level` (a [`Level`] this CPU
/// supports: [`level`] or one of [`levels`]). `$body` should call
/// `#[inline(always)]` code holding the loops: each level's arm puts
/// `$body` in an `#[inline(always)]` closure called from a function with
/// the level's `#[target_feature]`, so the loops are compiled there, for
/// its width (a closure left out of line is compiled for the baseline).
///
/// # Panics
/// If the CPU does not support `$level` (a caller bug).
macro_rules! vectorised {
    ($level:expr, $body:expr) => {{
        let level: $crate::exec::simd::Level = $level;
        assert!(
            $crate::exec::simd::supported(level),
            "the CPU lacks {level:?}"
        );
        match level {
            // SAFETY: the CPU has the level's features (checked above).
            #[cfg(target_arch = "x86_64")]
            $crate::exec::simd::Level::Avx512 => unsafe {
                $crate::exec::simd::avx512(
                    #[inline(always)]
                    || $body,
                )
            },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::exec::simd::Level::Avx2 => unsafe {
                $crate::exec::simd::avx2(
                    #[inline(always)]
                    || $body,
                )
            },
            _ => $body,
        }
    }};
}
pub(crate) use vectorised;

/// `f()` with AVX-512 enabled.
///
/// # Safety
/// The CPU must support [`Level::Avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
pub(crate) unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()` with AVX2 and FMA enabled.
///
/// # Safety
/// The CPU must support [`Level::Avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_supported() {
        let ls = levels();
        assert_eq!(ls[0], Level::Sse2);
        assert!(ls.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*ls.last().unwrap(), best());
        assert!(supported(level()));
        // AVX-512 implies AVX2 here.
        assert!(!supported(Level::Avx512) || supported(Level::Avx2));
    }

    #[test]
    fn smelt_cpu_simd_forces_a_supported_level() {
        // Set when a test suite is run once per level.
        match env::var("SMELT_CPU_SIMD", env::parse_cpu_simd) {
            Some(l) if supported(l) => assert_eq!(level(), l),
            _ => assert_eq!(level(), best()),
        }
    }
}
