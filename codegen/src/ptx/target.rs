//! The GPU a kernel is emitted for.

/// 32-bit registers of one SM (every architecture since sm_50).
pub const REGISTERS_PER_SM: u32 = 64 * 1024;

/// Shared memory of one sm_90 SM, 1 KiB of which each CTA reserves beyond
/// what it asks for (sm_80: 164 KiB).
pub const SHARED_PER_SM_90: u32 = 228 * 1024;

/// The GPU the PTX is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Compute capability times ten (80 for A100, 90 for H100/H200).
    pub sm: u32,
    /// Number of streaming multiprocessors (sizes persistent grids).
    pub num_sms: u32,
}

impl Target {
    /// The targets every generated kernel is assembled for in CI: an A100
    /// (sm_80, 108 SMs) and an H100 (sm_90, 132 SMs).
    pub const CHECKED: [Target; 2] = [
        Target {
            sm: 80,
            num_sms: 108,
        },
        Target {
            sm: 90,
            num_sms: 132,
        },
    ];
}
