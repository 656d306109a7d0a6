//! Compiling a module's IR text for the host: parsed into a context of its
//! own, optimised at O3 for the host CPU (its name and features, so AVX2,
//! AVX-512 or NEON where present; set on every function, which MCJIT's
//! code generator reads), and loaded by MCJIT with the shims mapped.

use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;

use super::shims;

/// The host's CPU name and features, once.
struct Host {
    cpu: String,
    features: String,
}

fn host() -> Result<&'static Host, String> {
    static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
    HOST.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default())?;
        Ok(Host {
            cpu: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The function attributes that make LLVM generate code for the host CPU.
/// On a CPU with AVX-512 the loops are vectorised 512 bits wide: LLVM's
/// tuning for such CPUs prefers 256 (against the clock drop of older
/// server parts), which left the JIT's `exp` polynomial at half the width
/// of the executor's `avx512` loops. Lanes are independent, so the values
/// do not depend on the width.
///
/// # Errors
/// The native target failed to initialise.
pub fn host_attrs() -> Result<String, String> {
    let h = host()?;
    let wide = (h.features.split(',')).any(|f| f == "+avx512f");
    Ok(format!(
        "{}\"target-cpu\"=\"{}\" \"target-features\"=\"{}\"",
        if wide {
            "\"prefer-vector-width\"=\"512\" "
        } else {
            ""
        },
        h.cpu,
        h.features
    ))
}

/// A loaded module: its engine (which owns the machine code) and the
/// context both live as long as this.
pub struct Loaded {
    module: ManuallyDrop<Module<'static>>,
    engine: ManuallyDrop<ExecutionEngine<'static>>,
    context: *mut Context,
}

// SAFETY: the context, module and engine are used by the thread that
// compiles them and then only dropped (by whichever thread drops the last
// reference); the machine code they own is immutable and is what threads
// share.
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: dropped once, module and engine before their context
        // (which was leaked from a `Box` in `compile`).
        unsafe {
            ManuallyDrop::drop(&mut self.module);
            ManuallyDrop::drop(&mut self.engine);
            drop(Box::from_raw(self.context));
        }
    }
}

impl Loaded {
    /// The address of function `name`.
    ///
    /// # Errors
    /// No such function.
    pub fn address(&self, name: &str) -> Result<usize, String> {
        self.engine
            .get_function_address(name)
            .map_err(|e| format!("{name}: {e:?}"))
    }
}

/// Parses, optimises and loads `ir`.
///
/// # Errors
/// LLVM's message when the text does not parse or verify, or the host
/// target is unavailable.
pub fn compile(ir: &str) -> Result<Loaded, String> {
    let h = host()?;
    let context: &'static Context = Box::leak(Box::new(Context::create()));
    let ctx_ptr = context as *const Context as *mut Context;
    let fail = |e: String| {
        // SAFETY: nothing borrows the context any more.
        unsafe { drop(Box::from_raw(ctx_ptr)) };
        e
    };
    let built = (|| {
        let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "kernel");
        let module = context
            .create_module_from_ir(buf)
            .map_err(|e| e.to_string())?;
        let triple = TargetMachine::get_default_triple();
        let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
        let tm = target
            .create_target_machine(
                &triple,
                &h.cpu,
                &h.features,
                OptimizationLevel::Aggressive,
                RelocMode::Default,
                CodeModel::JITDefault,
            )
            .ok_or("no target machine for the host")?;
        module.set_triple(&triple);
        module.set_data_layout(&tm.get_target_data().get_data_layout());
        module.verify().map_err(|e| e.to_string())?;
        module
            .run_passes("default<O3>", &tm, PassBuilderOptions::create())
            .map_err(|e| e.to_string())?;
        let engine = module
            .create_jit_execution_engine(OptimizationLevel::Aggressive)
            .map_err(|e| e.to_string())?;
        for s in shims::all() {
            if let Some(f) = module.get_function(s.name) {
                engine.add_global_mapping(&f, s.addr);
            }
        }
        Ok::<_, String>((module, engine))
    })();
    match built {
        Ok((module, engine)) => Ok(Loaded {
            module: ManuallyDrop::new(module),
            engine: ManuallyDrop::new(engine),
            context: ctx_ptr,
        }),
        Err(e) => Err(fail(e)),
    }
}
