//! [`Gpu`]: one device's CUDA context, a stream, and the kernel modules its owner launches,
//! loaded for the device's architecture, with their entry points looked up once.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::kernels::{self, KernelError, KernelModule};
use crate::stream::{new_stream, StreamPriority};
use crate::{available, CudaError};

/// One GPU as a launcher sees it: its context, the stream all of the owner's work runs on, the
/// kernel modules it loaded (by name), and what it knows of the device. Each part that launches
/// kernels (the preprocess engine, `tilestats`, the detector's peaks, an application's stage)
/// owns one.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    sms: u32,
    /// By name: the source it was loaded from, and the module.
    modules: HashMap<&'static str, (&'static str, Arc<CudaModule>)>,
    /// By module and entry point name: the module's source, and the function.
    funcs: HashMap<(&'static str, &'static str), (&'static str, CudaFunction)>,
}

impl Gpu {
    /// Open GPU `ordinal` with a new stream and load `modules`, compiled for its architecture
    /// (or taken from the cache), so that the first launch does not wait for NVRTC; other
    /// modules load on first use ([`Self::func`]). Errors with [`CudaError::NoGpu`] when there is
    /// no libcuda or no GPU.
    pub fn new(ordinal: usize, modules: &[&KernelModule]) -> Result<Self, CudaError> {
        Self::with_priority(ordinal, modules, StreamPriority::Normal)
    }

    /// [`Self::new`] with the stream at `priority`.
    pub fn with_priority(
        ordinal: usize,
        modules: &[&KernelModule],
        priority: StreamPriority,
    ) -> Result<Self, CudaError> {
        available()?;
        let ctx = CudaContext::new(ordinal)?;
        let (major, minor) = ctx.compute_capability()?;
        let arch = format!("compute_{major}{minor}");
        let stream = new_stream(&ctx, priority)?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )?
            .max(1) as u32;
        let mut gpu = Gpu {
            ctx,
            stream,
            arch,
            sms,
            modules: HashMap::new(),
            funcs: HashMap::new(),
        };
        for m in modules {
            gpu.load(m)?;
        }
        Ok(gpu)
    }

    /// Load `module` (compiled once per process for this architecture: [`kernels::cached_ptx`]),
    /// unless loaded already. Errors when another module of the same name is loaded.
    pub fn load(&mut self, module: &KernelModule) -> Result<(), CudaError> {
        if let Some((source, _)) = self.modules.get(module.name) {
            return match std::ptr::eq(*source, module.source) || *source == module.source {
                true => Ok(()),
                false => Err(KernelError::NameClash {
                    module: module.name,
                }
                .into()),
            };
        }
        let ptx = kernels::cached_ptx(module, &self.arch)?;
        let loaded = self.ctx.load_module(Ptx::from_src(&*ptx))?;
        self.modules.insert(module.name, (module.source, loaded));
        Ok(())
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

    /// Registers per thread, local (spill) bytes per thread and static shared bytes of entry
    /// point `function` of `module`.
    pub fn kernel_resources(
        &mut self,
        module: &KernelModule,
        function: &str,
    ) -> Result<(i32, i32, i32), CudaError> {
        let f = self.func(module, function)?;
        Ok((f.num_regs()?, f.local_size_bytes()?, f.shared_size_bytes()?))
    }

    /// Entry point `function` of `module` (the module loaded on first use; looked up once, then
    /// cached). Errors when the module does not declare it.
    pub fn func(
        &mut self,
        module: &KernelModule,
        function: &str,
    ) -> Result<CudaFunction, CudaError> {
        if let Some((source, f)) = self.funcs.get(&(module.name, function)) {
            if std::ptr::eq(*source, module.source) {
                return Ok(f.clone());
            }
            // Another declaration of that name: the same module, or a clash.
            let f = f.clone();
            self.load(module)?;
            return Ok(f);
        }
        let Some(name) = module.functions.iter().find(|f| **f == function) else {
            return Err(KernelError::Undeclared {
                module: module.name,
                function: function.to_string(),
            }
            .into());
        };
        self.load(module)?;
        let (_, loaded) = &self.modules[module.name];
        let f = loaded.load_function(name)?;
        self.funcs
            .insert((module.name, name), (module.source, f.clone()));
        Ok(f)
    }
}
