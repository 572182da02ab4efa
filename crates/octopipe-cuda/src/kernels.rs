//! Kernel modules: an open list, like the stage registry. Each crate that launches kernels keeps
//! its `.cu` file beside its launcher and declares it there as a [`KernelModule`] (its name, its
//! source brought in with `include_str!`, its entry points); this crate names no stage. It
//! compiles any module it is handed with NVRTC, once per process for each architecture, keyed by
//! the module's name and a hash of its source, with an optional on-disk PTX cache. Every module
//! is compiled with the shared header [`COMMON_HEADER`] (`common.cuh`, this crate's) pasted in
//! place of its `#include "common.cuh"`.
//!
//! ```
//! use octopipe_cuda::kernels::KernelModule;
//!
//! /// A kernel family of one's own, beside its launcher (there: `include_str!("scale.cu")`).
//! const SCALE_KERNELS: KernelModule = KernelModule {
//!     name: "scale",
//!     source: "#include \"common.cuh\"\n\
//!              extern \"C\" __global__ void scale_f32(float* v, u32 n, float k) {\n\
//!                  u32 i = blockIdx.x * blockDim.x + threadIdx.x;\n\
//!                  if (i < n) v[i] *= k;\n\
//!              }\n",
//!     functions: &["scale_f32"],
//! };
//! // `Gpu::new(0, &[&SCALE_KERNELS])` compiles it (or takes it from the cache) and loads it;
//! // `gpu.func(&SCALE_KERNELS, "scale_f32")` is its entry point.
//! assert!(SCALE_KERNELS.full_source().contains("#line 2 \"scale.cu\""));
//! ```

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

/// The shared header every kernel family includes (`#include "common.cuh"`): integer types, the
/// preprocess metadata structs, the sampling and output helpers.
pub const COMMON_HEADER: &str = include_str!("common.cuh");

/// The virtual architectures the compile checks ([`check_module`]) compile for: the oldest GPU
/// octopipe runs on (Turing) and the one it is tuned on (Hopper).
pub const CHECK_ARCHS: [&str; 2] = ["compute_75", "compute_90"];

/// One `.cu` file: a family of kernels compiled together, declared by the crate that launches
/// them, beside its launcher.
#[derive(Clone, Copy)]
pub struct KernelModule {
    /// The module's name, its `.cu` file's stem: compile logs and errors name `NAME.cu`. Two
    /// modules with one name may not be loaded on one [`Gpu`](crate::Gpu).
    pub name: &'static str,
    /// The source as written (`include_str!("NAME.cu")`), with its `#include "common.cuh"`.
    pub source: &'static str,
    /// Its `extern "C"` entry points, the names launchers look up ([`Gpu::func`](crate::Gpu::func)).
    pub functions: &'static [&'static str],
}

impl std::fmt::Debug for KernelModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelModule")
            .field("name", &self.name)
            .field("functions", &self.functions)
            .finish_non_exhaustive()
    }
}

impl KernelModule {
    /// The `.cu` file name compile logs show: `NAME.cu`.
    pub fn file_name(&self) -> String {
        format!("{}.cu", self.name)
    }

    /// Whether `function` is one of the module's declared entry points.
    pub fn declares(&self, function: &str) -> bool {
        self.functions.contains(&function)
    }

    /// The source NVRTC compiles: the header pasted in place of the include, with `#line`
    /// directives so that compile logs name `common.cuh` or the `.cu` file and its own line numbers.
    pub fn full_source(&self) -> String {
        let file = self.file_name();
        let mut out = String::with_capacity(COMMON_HEADER.len() + self.source.len() + 128);
        for (i, line) in self.source.lines().enumerate() {
            if line.trim() == "#include \"common.cuh\"" {
                out.push_str("#line 1 \"common.cuh\"\n");
                out.push_str(&COMMON_HEADER.replace("#pragma once", ""));
                out.push_str(&format!("\n#line {} \"{file}\"\n", i + 2));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// A kernel module that NVRTC could not compile, or NVRTC itself missing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// libnvrtc could not be loaded.
    #[error("NVRTC (libnvrtc.so) is not available: install the CUDA toolkit or pip `nvidia-cuda-nvrtc` and put it on LD_LIBRARY_PATH")]
    NoNvrtc,
    /// The source did not compile; `log` is NVRTC's log, naming the file and line.
    #[error("{module}.cu does not compile for {arch}:\n{log}")]
    Compile {
        /// The module's name (its file is `NAME.cu`).
        module: &'static str,
        /// Target architecture (`compute_90`).
        arch: String,
        /// NVRTC's compile log.
        log: String,
    },
    /// A declared entry point is not in the compiled module.
    #[error("{module}.cu declares kernel {function}, which its PTX for {arch} does not define")]
    Missing {
        /// The module's name.
        module: &'static str,
        /// The entry point it declares.
        function: &'static str,
        /// Target architecture.
        arch: String,
    },
    /// A launcher asked for an entry point its module does not declare.
    #[error("kernel module {module} declares no kernel {function}")]
    Undeclared {
        /// The module's name.
        module: &'static str,
        /// The entry point asked for.
        function: String,
    },
    /// Two different modules of one name were loaded on one GPU.
    #[error("two different kernel modules are named {module}")]
    NameClash {
        /// The name they share.
        module: &'static str,
    },
}

/// Whether libnvrtc can be loaded in this process.
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compile `module` to PTX for virtual architecture `arch` (e.g. `compute_90`), with no cache.
pub fn compile_module(module: &KernelModule, arch: &str) -> Result<Ptx, KernelError> {
    if !nvrtc_present() {
        return Err(KernelError::NoNvrtc);
    }
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        "-lineinfo".into(),
    ];
    options.extend(extra_defines());
    let opts = CompileOptions {
        name: Some(module.file_name()),
        options,
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(module.full_source(), opts).map_err(|e| {
        KernelError::Compile {
            module: module.name,
            arch: arch.to_string(),
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            },
        }
    })
}

/// Compile `module` for `arch` with no cache and check that every entry point it declares is in
/// the PTX; returns the PTX's size in bytes. What the compile-check tests of each crate that
/// declares a module run (no GPU needed).
pub fn check_module(module: &KernelModule, arch: &str) -> Result<usize, KernelError> {
    let ptx = compile_module(module, arch)?.to_src();
    match module
        .functions
        .iter()
        .find(|f| !ptx.contains(&format!(".entry {f}(")))
    {
        Some(function) => Err(KernelError::Missing {
            module: module.name,
            function,
            arch: arch.to_string(),
        }),
        None => Ok(ptx.len()),
    }
}

/// The compile check of a crate that declares kernel modules (its test, no GPU needed): each of
/// `modules` checked ([`check_module`]) for every architecture of [`CHECK_ARCHS`]. `None` when
/// libnvrtc cannot be found, even by [`find_nvrtc`](crate::find_nvrtc); otherwise one line per
/// module and architecture, or every failure (NVRTC's log naming the `.cu` file and line).
pub fn check_modules(modules: &[&KernelModule]) -> Option<Result<Vec<String>, String>> {
    if !crate::nvrtc::find_nvrtc() {
        return None;
    }
    let (mut lines, mut failures) = (Vec::new(), Vec::new());
    for arch in CHECK_ARCHS {
        for m in modules {
            match check_module(m, arch) {
                Ok(bytes) => lines.push(format!(
                    "{} compiles for {arch} ({bytes} bytes of PTX)",
                    m.file_name()
                )),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    Some(match failures.is_empty() {
        true => Ok(lines),
        false => Err(failures.join("\n\n")),
    })
}

/// Extra `-D` options from `$OCTOPIPE_NVRTC_DEFINES` (space separated, e.g.
/// `-DOCTOPUS_MIN_BLOCKS=5`): for tuning experiments on the device; part of the cache key.
fn extra_defines() -> Vec<String> {
    std::env::var("OCTOPIPE_NVRTC_DEFINES")
        .map(|v| {
            v.split_whitespace()
                .filter(|d| d.starts_with("-D"))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `-DNAME=VALUE` (or `"1"` for `-DNAME`) in `$OCTOPIPE_NVRTC_DEFINES`, if given.
pub fn nvrtc_define(name: &str) -> Option<String> {
    extra_defines().iter().find_map(|d| {
        let d = d.strip_prefix("-D")?;
        match d.split_once('=') {
            Some((n, v)) if n == name => Some(v.to_string()),
            None if d == name => Some("1".into()),
            _ => None,
        }
    })
}

/// What a compiled module is known by: its name, and a hash of what NVRTC compiles (the source
/// with the header, the architecture, the extra defines).
fn cache_key(module: &KernelModule, arch: &str) -> (&'static str, u64) {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    module.full_source().hash(&mut h);
    arch.hash(&mut h);
    extra_defines().hash(&mut h);
    (module.name, h.finish())
}

/// The on-disk PTX cache: `$OCTOPIPE_KERNEL_CACHE`, else `$XDG_CACHE_HOME/octopipe`, else
/// `~/.cache/octopipe`.
fn disk_cache_dir() -> Option<PathBuf> {
    std::env::var_os("OCTOPIPE_KERNEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("octopipe")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/octopipe")))
}

/// PTX of `module` for `arch`, compiled at most once per process (every caller of the same
/// module, source and architecture gets the same PTX); reused from the on-disk cache
/// (`$OCTOPIPE_KERNEL_CACHE`, else `~/.cache/octopipe`, keyed by name and a hash of the source)
/// when present.
pub fn cached_ptx(module: &KernelModule, arch: &str) -> Result<Arc<str>, KernelError> {
    cached_ptx_in(module, arch, disk_cache_dir())
}

/// [`cached_ptx`] with the on-disk cache in `dir` (none: no disk cache).
pub(crate) fn cached_ptx_in(
    module: &KernelModule,
    arch: &str,
    dir: Option<PathBuf>,
) -> Result<Arc<str>, KernelError> {
    type Cache = Mutex<HashMap<((&'static str, u64), String), Arc<str>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = cache_key(module, arch);
    let slot = (key, arch.to_string());
    if let Some(p) = cache.lock().ok().and_then(|c| c.get(&slot).cloned()) {
        return Ok(p);
    }
    let (name, hash) = key;
    let path = dir.map(|d| d.join(format!("{name}.cu-{arch}-{hash:016x}.ptx")));
    let ptx: Arc<str> = match path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        Some(p) => p.into(),
        None => {
            let p = compile_module(module, arch)?.to_src();
            if let Some(path) = &path {
                // Best effort: a read-only cache directory only costs a recompile next time.
                let _ = std::fs::create_dir_all(path.parent().unwrap_or(path));
                let _ = std::fs::write(path, &p);
            }
            p.into()
        }
    };
    match cache.lock() {
        // Two threads may both have compiled it: the first one's PTX is everyone's.
        Ok(mut c) => Ok(c.entry(slot).or_insert(ptx).clone()),
        Err(_) => Ok(ptx),
    }
}
