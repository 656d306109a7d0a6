//! cuBLAS through cudarc, for the matmul benchmark's reference columns:
//! the library found and loaded without a panic, row-major products mapped
//! onto cuBLAS's column-major GEMMs, and GPU time measured with the
//! protocol of `common::kernel_ms`.
//!
//! cudarc opens cuBLAS by name through the dynamic loader: `libcublas.so`,
//! `libcublas.so.12`, `.11`, `.10`, ... (for its CUDA 12.8 bindings; never
//! `libcublas.so.13`), and panics when none opens. The loader reads
//! `LD_LIBRARY_PATH` only when a process starts, so when none of those names
//! opens, [`make_loadable`] finds a `libcublas.so.N` itself, links it as
//! `libcublas.so` (and its `libcublasLt.so.N` as `libcublasLt.so`, for the
//! FP8 column, `lt.rs`) in a temporary folder and runs the benchmark again
//! with that folder and the library's own on `LD_LIBRARY_PATH` (the entry
//! points cudarc calls have kept their signatures from cuBLAS 12 to 13).

mod lt;

pub use lt::Fp8Gemm;

use crate::common::{median, RUNS, WARMUP};
use cudarc::cublas::{result, sys, CudaBlas};
use cudarc::driver::{result as driver, sys as cu, CudaContext, CudaEvent, CudaStream};
use smelt::{cuda, DType, Device, Error, Result};
use std::ffi::{c_int, c_longlong, c_void};
use std::fmt::Display;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// Microseconds of spin queued before each timed GEMM, as in
/// `common::kernel_ms` (whose constant is private there): longer than the
/// host takes to queue a cuBLAS call.
const QUEUE_AHEAD_US: u32 = 200;

/// Set on the re-run process (to the library it was re-run for), so that a
/// library that still does not load ends the attempt instead of looping.
const RERUN: &str = "SMELT_CUBLAS_RERUN";

/// Names a `libcublas.so.N` (or its folder) to use instead of searching.
const OVERRIDE: &str = "SMELT_CUBLAS";

/// The entry points used here. cudarc resolves each on first call and
/// panics if it is missing, so all are looked up before the first call.
const SYMBOLS: [&str; 6] = [
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasGetVersion_v2",
    "cublasGemmEx",
    "cublasGemmStridedBatchedEx",
];

/// A cuBLAS handle on GPU 0's primary context (the one smelt uses) with a
/// stream of its own.
pub struct Blas {
    handle: CudaBlas,
    stream: Arc<CudaStream>,
    /// cuBLAS's version, e.g. "13.0.2".
    pub version: String,
    /// The library file, when this process was re-run to load it.
    pub file: Option<String>,
    /// cuBLASLt (FP8 products), or why it is not there.
    pub lt: std::result::Result<lt::Lt, String>,
}

/// How B is stored: `[n, k]` (B transposed, k-contiguous) or row-major
/// `[k, n]`, the two layouts of smelt's columns.
#[derive(Clone, Copy)]
pub enum BLayout {
    Transposed,
    RowMajor,
}

/// The arithmetic of an f32 product: exact f32, or TF32 tensor cores.
/// f16 and bf16 always multiply on tensor cores and accumulate in f32.
#[derive(Clone, Copy, PartialEq)]
pub enum Math {
    Exact,
    Tf32,
}

/// A batched row-major product `C[i] = A[i] · B[i]` over contiguous GPU
/// buffers: A `[batch, m, k]`, B as `b_layout` says, C `[batch, m, n]`, all
/// of `dtype`.
pub struct Gemm {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: DType,
    pub b_layout: BLayout,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// An error of the cuBLAS side, as a smelt error.
pub(crate) fn fail(what: &str, e: impl Display) -> Error {
    Error::Runtime(format!("cuBLAS bench: {what}: {e}"))
}

/// cuBLAS ready on GPU 0, or why it cannot be used, once
/// [`make_loadable`] has succeeded. Never panics.
pub fn load() -> std::result::Result<Blas, String> {
    if !cuda::is_available() {
        return Err("no CUDA device".into());
    }
    // SAFETY: only tries to open the library under cudarc's names.
    if !unsafe { sys::is_culib_present() } {
        return Err("cudarc cannot open it".into());
    }
    // SAFETY: the library opens under one of cudarc's names (checked
    // above), so `culib` returns it instead of panicking.
    let lib = unsafe { sys::culib() };
    for s in SYMBOLS {
        // SAFETY: only looks the symbol up; nothing is called.
        unsafe { lib.get::<*const c_void>(s.as_bytes()) }
            .map_err(|e| format!("the library lacks {s}: {e}"))?;
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("opening GPU 0: {e}"))?;
    let stream = ctx
        .new_stream()
        .map_err(|e| format!("creating a stream: {e}"))?;
    let handle = CudaBlas::new(stream.clone()).map_err(|e| format!("creating a handle: {e}"))?;
    let mut v: c_int = 0;
    // SAFETY: a valid handle and a place for the result.
    unsafe { sys::cublasGetVersion_v2(*handle.handle(), &mut v) }
        .result()
        .map_err(|e| format!("reading the version: {e}"))?;
    Ok(Blas {
        handle,
        stream,
        version: format!("{}.{}.{}", v / 10_000, v / 100 % 100, v % 100),
        file: std::env::var(RERUN).ok(),
        lt: lt::Lt::new(),
    })
}

/// Ok when cudarc can open cuBLAS; otherwise re-runs the process with a
/// `libcublas.so` it can open (returning only if that fails), or says why
/// there is none. Call it first thing, before CUDA is initialised and
/// before any output that should not appear twice.
pub fn make_loadable() -> std::result::Result<(), String> {
    // SAFETY: only tries to open the library under cudarc's names.
    let blas = unsafe { sys::is_culib_present() };
    // Without cuBLASLt only the FP8 column is lost: no re-run for it alone
    // when the re-run has been made.
    if blas && (lt::present() || std::env::var_os(RERUN).is_some()) {
        return Ok(());
    }
    if let Some(lib) = std::env::var_os(RERUN) {
        return Err(format!(
            "{} does not load even on LD_LIBRARY_PATH",
            Path::new(&lib).display()
        ));
    }
    match find() {
        Some(lib) => Err(rerun_with(&lib)),
        None => Err(format!(
            "no libcublas.so.N in ${OVERRIDE}, LD_LIBRARY_PATH, python3's nvidia/*/lib \
             or /usr/local/cuda/lib64"
        )),
    }
}

/// The newest `libcublas.so.N` found: `$SMELT_CUBLAS` if it names a file,
/// else the highest N in `$SMELT_CUBLAS` (a folder), the folders on
/// `LD_LIBRARY_PATH`, python3's `nvidia` wheels (nvidia-cublas puts it in
/// `nvidia/cu13/lib` for CUDA 13, `nvidia/cublas/lib` before), and
/// `/usr/local/cuda/lib64`; the earlier folder on a tie.
fn find() -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os(OVERRIDE).map(PathBuf::from) {
        if p.is_file() {
            return Some(p);
        }
        dirs.push(p);
    }
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&paths));
    }
    dirs.extend(python_wheel_dirs());
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.iter()
        .filter_map(|d| newest_in(d))
        .rev() // `max_by_key` keeps the last of equal keys
        .max_by_key(|(major, _)| *major)
        .map(|(_, p)| p)
}

/// The `lib` folders of python3's `nvidia` namespace package (the pip
/// wheels of the CUDA libraries), if python3 and the wheels are there.
fn python_wheel_dirs() -> Vec<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"])
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|root| std::fs::read_dir(root.trim()).ok())
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("lib"))
        .collect()
}

/// The `libcublas.so.N[.x.y]` in `dir` with the highest N, and N.
fn newest_in(dir: &Path) -> Option<(u32, PathBuf)> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("libcublas.so.")?;
            let major = version.split('.').next()?.parse().ok()?;
            Some((major, e.path()))
        })
        .max_by_key(|(major, _)| *major)
}

/// Links `lib` as `libcublas.so` (and the `libcublasLt.so.N` beside it,
/// if any, as `libcublasLt.so`) in `$TMPDIR/smelt-cublas` and replaces
/// this process by a new run of it with that folder and `lib`'s own first
/// on `LD_LIBRARY_PATH`. Returns only on failure, with the reason.
fn rerun_with(lib: &Path) -> String {
    let shim = std::env::temp_dir().join("smelt-cublas");
    // Link under a private name, then rename: concurrent runs never see a
    // half-made link.
    let link = |target: &Path, name: &str| {
        let tmp = shim.join(format!("link-{}", std::process::id()));
        std::os::unix::fs::symlink(target, &tmp)
            .and_then(|()| std::fs::rename(&tmp, shim.join(name)))
    };
    let lt = lib.file_name().and_then(|f| {
        let f = f.to_str()?.replacen("libcublas.", "libcublasLt.", 1);
        Some(lib.with_file_name(f)).filter(|p| p.is_file())
    });
    let linked = std::fs::create_dir_all(&shim)
        .and_then(|()| link(lib, "libcublas.so"))
        .and_then(|()| lt.as_deref().map_or(Ok(()), |p| link(p, "libcublasLt.so")));
    if let Err(e) = linked {
        return format!(
            "found {} but cannot link it in {}: {e}",
            lib.display(),
            shim.display()
        );
    }
    let mut dirs = vec![shim];
    dirs.extend(lib.parent().map(Path::to_path_buf));
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&paths));
    }
    let path = match std::env::join_paths(&dirs) {
        Ok(p) => p,
        Err(e) => {
            return format!(
                "found {} but cannot build LD_LIBRARY_PATH: {e}",
                lib.display()
            )
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return format!("found {} but cannot re-run: {e}", lib.display()),
    };
    println!(
        "cuBLAS: cudarc does not open {} under its name; re-running with LD_LIBRARY_PATH={}",
        lib.display(),
        path.to_string_lossy()
    );
    let e = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", &path)
        .env(RERUN, lib)
        .exec();
    format!("found {} but re-running failed: {e}", lib.display())
}

/// The cuBLAS element type of `dt`.
fn data_type(dt: DType) -> Result<sys::cudaDataType> {
    Ok(match dt {
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        _ => return Err(fail("dtype", format!("{} is not benchmarked", dt.name()))),
    })
}

/// A value as cuBLAS's `int`.
fn int(v: usize) -> Result<c_int> {
    c_int::try_from(v).map_err(|e| fail("dimension", e))
}

/// A value as cuBLAS's `long long` (batch strides).
fn long(v: usize) -> Result<c_longlong> {
    c_longlong::try_from(v).map_err(|e| fail("stride", e))
}

impl Blas {
    /// Queues `g` on cuBLAS's stream, with f32 accumulation (and TF32
    /// products for an f32 `g` when `math` says so).
    ///
    /// cuBLAS is column-major, and a row-major `[r, c]` matrix read
    /// column-major is its transpose (`c x r`, leading dimension `c`). So
    /// row-major `C = A·B` is computed as column-major `Cᵀ = Bᵀ·Aᵀ`:
    /// cuBLAS's first operand is our B, its second our A, its (m, n) our
    /// (n, m), and Cᵀ column-major is C row-major `[m, n]` (ldc = n):
    /// - A `[m, k]` reads as Aᵀ (`k x m`, ld k): taken as is (N);
    /// - B row-major `[k, n]` reads as Bᵀ (`n x k`, ld n): as is (N);
    /// - B stored `[n, k]` reads as B (`k x n`, ld k): transposed (T).
    pub fn gemm(&self, g: &Gemm, math: Math) -> Result<()> {
        use sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
        let ty = data_type(g.dtype)?;
        let compute = if g.dtype == DType::F32 && math == Math::Tf32 {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            // Exact f32 for f32: the handle keeps the default math mode, so
            // no TF32 (unless NVIDIA_TF32_OVERRIDE=1 is set).
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let (op_b, ld_b) = match g.b_layout {
            BLayout::Transposed => (CUBLAS_OP_T, g.k),
            BLayout::RowMajor => (CUBLAS_OP_N, g.n),
        };
        // Scale factors of an f32 compute type are f32.
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (alpha, beta) = (
            &alpha as *const f32 as *const c_void,
            &beta as *const f32 as *const c_void,
        );
        let (a, b, c) = (
            g.a as *const c_void,
            g.b as *const c_void,
            g.c as *mut c_void,
        );
        let h = *self.handle.handle();
        let algo = sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        let (m, n, k) = (int(g.n)?, int(g.m)?, int(g.k)?);
        let (lda, ldb, ldc) = (int(ld_b)?, int(g.k)?, int(g.n)?);
        // SAFETY: the buffers hold `batch` contiguous matrices of the
        // shapes above (callers pass realized tensors of those shapes), and
        // the scale factors outlive the call.
        let status = unsafe {
            if g.batch == 1 {
                result::gemm_ex(
                    h,
                    op_b,
                    CUBLAS_OP_N,
                    m,
                    n,
                    k,
                    alpha,
                    b,
                    ty,
                    lda,
                    a,
                    ty,
                    ldb,
                    beta,
                    c,
                    ty,
                    ldc,
                    compute,
                    algo,
                )
            } else {
                result::gemm_strided_batched_ex(
                    h,
                    op_b,
                    CUBLAS_OP_N,
                    m,
                    n,
                    k,
                    alpha,
                    b,
                    ty,
                    lda,
                    long(g.n * g.k)?,
                    a,
                    ty,
                    ldb,
                    long(g.m * g.k)?,
                    beta,
                    c,
                    ty,
                    ldc,
                    long(g.m * g.n)?,
                    int(g.batch)?,
                    compute,
                    algo,
                )
            }
        };
        status.map_err(|e| fail("gemm", e))
    }

    /// Queues the FP8 product `g` on cuBLAS's stream through cuBLASLt
    /// (`lt.rs`), accumulating on the tensor cores alone when `fast_accum`.
    pub fn fp8_gemm(&self, g: &Fp8Gemm, fast_accum: bool) -> Result<()> {
        let lt = self.lt.as_ref().map_err(|e| fail("cuBLASLt", e))?;
        lt.fp8_gemm(g, fast_accum, self.stream.cu_stream() as _)
    }

    /// Waits for the work queued on cuBLAS's stream.
    pub fn sync(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| fail("synchronising", e))
    }

    /// A timing event (cudarc's default event records no time).
    fn event(&self) -> Result<CudaEvent> {
        self.stream
            .context()
            .new_event(Some(cu::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| fail("creating an event", e))
    }

    /// Median GPU milliseconds of the cuBLAS work `f` queues, timed like
    /// `common::kernel_ms`: 10 warm-up runs, then 50 runs, each between
    /// two events on cuBLAS's stream, which first waits (through an event)
    /// for a spin kernel queued on smelt's stream. The GEMM is thus already
    /// queued when the GPU reaches it, and the events time the GPU, not the
    /// host's launch. (Timing a loop of back-to-back GEMMs instead would
    /// count the host's per-call time wherever a GEMM is shorter, e.g. a
    /// few microseconds for 1024³ f16, and give a mean, not a median.)
    pub fn time_ms(&self, dev: &Device, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        for _ in 0..WARMUP {
            f()?;
        }
        self.sync()?;
        // smelt's stream, where the spin runs (same primary context).
        let smelt_stream = cuda::stream(dev)? as cu::CUstream;
        let mut pairs = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let spun = self.event()?;
            cuda::sleep(dev, QUEUE_AHEAD_US)?;
            self.stream
                .context()
                .bind_to_thread()
                .map_err(|e| fail("binding the context", e))?;
            // SAFETY: a live event and stream of the same context.
            unsafe { driver::event::record(spun.cu_event(), smelt_stream) }
                .map_err(|e| fail("recording the spin", e))?;
            self.stream
                .wait(&spun)
                .map_err(|e| fail("waiting for the spin", e))?;
            let (s, e) = (self.event()?, self.event()?);
            s.record(&self.stream).map_err(|e| fail("recording", e))?;
            f()?;
            e.record(&self.stream).map_err(|e| fail("recording", e))?;
            pairs.push((s, e));
        }
        self.sync()?;
        let mut t: Vec<f64> = pairs
            .iter()
            .map(|(s, e)| {
                s.elapsed_ms(e)
                    .map(f64::from)
                    .map_err(|e| fail("reading an event", e))
            })
            .collect::<Result<_>>()?;
        Ok(median(&mut t))
    }
}
