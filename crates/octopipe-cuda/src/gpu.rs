//! [`Gpu`]: one device's CUDA context, a stream, and every kernel module loaded for the device's
//! architecture, with its entry points looked up once.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::kernels::{self, Kernel, Module};
use crate::{available, CudaError};

/// One GPU as a launcher sees it: its context, the stream all of the owner's work runs on, the
/// loaded kernel modules, and what it knows of the device. Each part that launches kernels (the
/// preprocess engine, `tilestats`, the detector's peaks) owns one.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    sms: u32,
    modules: HashMap<Module, Arc<CudaModule>>,
    funcs: HashMap<Kernel, CudaFunction>,
}

impl Gpu {
    /// Open GPU `ordinal` with a new stream and compile (or take from the cache) every kernel
    /// module for its architecture. Errors with [`CudaError::NoGpu`] when there is no libcuda or
    /// no GPU.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        available()?;
        let ctx = CudaContext::new(ordinal)?;
        let (major, minor) = ctx.compute_capability()?;
        let arch = format!("compute_{major}{minor}");
        let stream = ctx.new_stream()?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )?
            .max(1) as u32;
        let mut modules = HashMap::new();
        for m in Module::ALL {
            let ptx = kernels::cached_ptx(m, &arch)?;
            modules.insert(m, ctx.load_module(Ptx::from_src(ptx))?);
        }
        Ok(Gpu {
            ctx,
            stream,
            arch,
            sms,
            modules,
            funcs: HashMap::new(),
        })
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all work of this GPU's owner runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The virtual architecture the kernels were compiled for (`compute_90`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Multiprocessors of the GPU.
    pub fn multiprocessors(&self) -> u32 {
        self.sms
    }

    /// The GPU's name.
    pub fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    }

    /// Registers per thread, local (spill) bytes per thread and static shared bytes of kernel `k`.
    pub fn kernel_resources(&mut self, k: Kernel) -> Result<(i32, i32, i32), CudaError> {
        let f = self.func(k)?;
        Ok((f.num_regs()?, f.local_size_bytes()?, f.shared_size_bytes()?))
    }

    /// Kernel `k` of the loaded modules (looked up once, then cached).
    pub fn func(&mut self, k: Kernel) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.funcs.get(&k) {
            return Ok(f.clone());
        }
        let module = self
            .modules
            .get(&k.module())
            .ok_or_else(|| CudaError::Invalid(format!("{k:?}")))?;
        let f = module.load_function(k.name())?;
        self.funcs.insert(k, f.clone());
        Ok(f)
    }
}
