//! cuBLASLt through cudarc's raw bindings (`cudarc::cublaslt`), for the
//! matmul benchmark's FP8 reference column: `cublasLtMatmul` with e4m3
//! operands, f32 accumulation and per-tensor scales read from device
//! pointers, the layout cuBLASLt requires for FP8 ("TN": its first
//! operand transposed), written in bf16.
//!
//! cudarc opens `libcublasLt.so` (or `.so.12`, ...) like cuBLAS, so the
//! shim of `make_loadable` links `libcublasLt.so` beside `libcublas.so`.

use super::fail;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::{result, sys};
use smelt::{DType, Device, Result, Tensor};
use std::ffi::c_void;

/// Workspace bytes cuBLASLt may use (what PyTorch gives it on Hopper).
const WORKSPACE: usize = 32 << 20;

/// A cuBLASLt handle and its workspace (a smelt buffer on GPU 0).
pub struct Lt {
    handle: sys::cublasLtHandle_t,
    workspace: Tensor,
}

/// One row-major FP8 product `C = (A · B) · scale_a · scale_b` over
/// contiguous GPU buffers: A `[m, k]` and B stored `[n, k]` (B transposed,
/// k-contiguous: PyTorch's `_scaled_mm` layout) in e4m3, C `[m, n]` in
/// bf16, the scales one f32 each on the GPU.
pub struct Fp8Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: u64,
    pub bt: u64,
    pub c: u64,
    pub scale_a: u64,
    pub scale_b: u64,
}

/// Whether cudarc can open cuBLASLt under its names.
pub fn present() -> bool {
    // SAFETY: only tries to open the library under cudarc's names.
    unsafe { sys::is_culib_present() }
}

/// The cuBLASLt entry points used here; cudarc panics on a missing one at
/// its first call, so all are looked up first.
const SYMBOLS: [&str; 12] = [
    "cublasLtCreate",
    "cublasLtDestroy",
    "cublasLtMatmulDescCreate",
    "cublasLtMatmulDescSetAttribute",
    "cublasLtMatmulDescDestroy",
    "cublasLtMatrixLayoutCreate",
    "cublasLtMatrixLayoutDestroy",
    "cublasLtMatmulPreferenceCreate",
    "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulPreferenceDestroy",
    "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmul",
];

impl Lt {
    /// A handle on the current context with its workspace, or why not.
    pub fn new() -> std::result::Result<Lt, String> {
        if !present() {
            return Err("cudarc cannot open libcublasLt".into());
        }
        // SAFETY: the library opens (checked above), so `culib` returns it.
        let lib = unsafe { sys::culib() };
        for s in SYMBOLS {
            // SAFETY: only looks the symbol up; nothing is called.
            unsafe { lib.get::<*const c_void>(s.as_bytes()) }
                .map_err(|e| format!("libcublasLt lacks {s}: {e}"))?;
        }
        let handle = result::create_handle().map_err(|e| format!("cublasLtCreate: {e}"))?;
        let workspace = Tensor::zeros([WORKSPACE], DType::U8, &Device::Cuda(0)).contiguous();
        workspace
            .realize()
            .map_err(|e| format!("allocating the workspace: {e}"))?;
        Ok(Lt { handle, workspace })
    }

    /// Queues `g` on `stream`: row-major `C = A·B` is column-major `Cᵀ =
    /// Bᵀ·Aᵀ` (see `Blas::gemm`), so cuBLASLt's first operand is our B
    /// stored `[n, k]`, read as `k x n` (ld k) and transposed (the "T"
    /// FP8 requires), its second our A read as `k x m` (ld k) as is, and
    /// its `n x m` result (ld n) our row-major C. Its A scale is thus our
    /// B's and its B scale our A's. `fast_accum` lets the tensor cores
    /// accumulate the whole `k` (smelt's kernel does; without it cuBLASLt
    /// adds partial sums in f32 on the CUDA cores every few MMAs).
    pub fn fp8_gemm(&self, g: &Fp8Gemm, fast_accum: bool, stream: sys::cudaStream_t) -> Result<()> {
        use sys::cublasLtMatmulDescAttributes_t as D;
        use sys::cudaDataType::{CUDA_R_16BF, CUDA_R_8F_E4M3};
        let e = |what: &'static str| move |err| fail(what, err);
        let (m, n, k) = (g.n as u64, g.m as u64, g.k as u64);
        let desc = result::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(e("matmul descriptor"))?;
        let transa = cublasOperation_t::CUBLAS_OP_T as i32;
        let accum = i8::from(fast_accum);
        let attrs: [(D, *const c_void, usize); 4] = [
            (D::CUBLASLT_MATMUL_DESC_TRANSA, ptr(&transa), 4),
            (D::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, ptr(&g.scale_b), 8),
            (D::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, ptr(&g.scale_a), 8),
            (D::CUBLASLT_MATMUL_DESC_FAST_ACCUM, ptr(&accum), 1),
        ];
        let layouts = [
            (CUDA_R_8F_E4M3, k, m, k),
            (CUDA_R_8F_E4M3, k, n, k),
            (CUDA_R_16BF, m, n, m),
        ]
        .map(|(ty, rows, cols, ld)| result::create_matrix_layout(ty, rows, cols, ld as i64));
        let pref = result::create_matmul_pref();
        let run = || -> Result<()> {
            for (attr, buf, size) in attrs {
                // SAFETY: a live descriptor; `buf` points at `size` bytes
                // that outlive the call.
                unsafe { result::set_matmul_desc_attribute(desc, attr, buf, size) }
                    .map_err(e("matmul attribute"))?;
            }
            let mut l = Vec::new();
            for layout in &layouts {
                l.push((*layout).map_err(e("matrix layout"))?);
            }
            let pref = pref.map_err(e("preference"))?;
            let bytes = WORKSPACE as u64;
            // SAFETY: a live preference; the u64 outlives the call.
            unsafe {
                result::set_matmul_pref_attribute(
                    pref,
                    sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    ptr(&bytes),
                    8,
                )
            }
            .map_err(e("workspace preference"))?;
            // SAFETY: live descriptors and layouts.
            let heuristic = unsafe {
                result::get_matmul_algo_heuristic(self.handle, desc, l[0], l[1], l[2], l[2], pref)
            }
            .map_err(e("no FP8 algorithm"))?;
            let (alpha, beta) = (1.0f32, 0.0f32);
            let ws = self.workspace.data_ptr()? as *mut c_void;
            // SAFETY: the buffers hold the matrices the layouts describe
            // (callers pass realized contiguous tensors of those shapes),
            // the scales are device f32s, and the workspace holds the
            // bytes the preference allows.
            unsafe {
                result::matmul(
                    self.handle,
                    desc,
                    ptr(&alpha),
                    ptr(&beta),
                    g.bt as *const c_void,
                    l[0],
                    g.a as *const c_void,
                    l[1],
                    g.c as *const c_void,
                    l[2],
                    g.c as *mut c_void,
                    l[2],
                    &heuristic.algo,
                    ws,
                    WORKSPACE,
                    stream,
                )
            }
            .map_err(e("cublasLtMatmul"))
        };
        let out = run();
        // SAFETY: each object is destroyed once, after its last use.
        unsafe {
            for layout in layouts.into_iter().flatten() {
                let _ = result::destroy_matrix_layout(layout);
            }
            if let Ok(p) = pref {
                let _ = result::destroy_matmul_pref(p);
            }
            let _ = result::destroy_matmul_desc(desc);
        }
        out
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `new` and is destroyed once.
        let _ = unsafe { result::destroy_handle(self.handle) };
    }
}

/// `v` as the untyped pointer cuBLASLt's attribute calls take.
fn ptr<T>(v: &T) -> *const c_void {
    v as *const T as *const c_void
}
