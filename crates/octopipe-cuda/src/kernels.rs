//! The CUDA kernels: their sources (`kernels/*.cu`, brought in with `include_str!`), the list of
//! entry points, and a per-process cache that compiles each module once with NVRTC (plus an optional
//! on-disk PTX cache).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

/// The shared header every kernel family includes.
pub const COMMON_HEADER: &str = include_str!("../../../kernels/common.cuh");

/// One `.cu` file: a family of kernels compiled together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Module {
    /// `kernels/octopus.cu`: strategy C (block metadata), bilinear, f32 and f16.
    Octopus,
    /// `kernels/baselines.cu`: strategies A, B, D and E.
    Baselines,
    /// `kernels/resample.cu`: strategy C for area (antialiased) resizing and letterbox.
    Resample,
    /// `kernels/gather.cu`: crop rectangles pulled from page-locked host frames by the GPU.
    Gather,
    /// `kernels/tilestats.cu`: per-tile sums of the `tilestats` stage (block metadata by tile
    /// area, two-level reduction), and its padded baseline.
    Tilestats,
    /// `kernels/centernet.cu`: the detect stage's CenterNet peaks.
    CenterNet,
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 6] = [
        Module::Octopus,
        Module::Baselines,
        Module::Resample,
        Module::Gather,
        Module::Tilestats,
        Module::CenterNet,
    ];

    /// File name under `kernels/`, shown in compile logs.
    pub fn file_name(self) -> &'static str {
        match self {
            Module::Octopus => "octopus.cu",
            Module::Baselines => "baselines.cu",
            Module::Resample => "resample.cu",
            Module::Gather => "gather.cu",
            Module::Tilestats => "tilestats.cu",
            Module::CenterNet => "centernet.cu",
        }
    }

    /// The module's source as written (with its `#include "common.cuh"`).
    pub fn source(self) -> &'static str {
        match self {
            Module::Octopus => include_str!("../../../kernels/octopus.cu"),
            Module::Baselines => include_str!("../../../kernels/baselines.cu"),
            Module::Resample => include_str!("../../../kernels/resample.cu"),
            Module::Gather => include_str!("../../../kernels/gather.cu"),
            Module::Tilestats => include_str!("../../../kernels/tilestats.cu"),
            Module::CenterNet => include_str!("../../../kernels/centernet.cu"),
        }
    }

    /// The source NVRTC compiles: the header pasted in place of the include, with `#line`
    /// directives so that compile logs name `common.cuh` or the `.cu` file and its own line numbers.
    pub fn full_source(self) -> String {
        let mut out = String::with_capacity(COMMON_HEADER.len() + self.source().len() + 128);
        for (i, line) in self.source().lines().enumerate() {
            if line.trim() == "#include \"common.cuh\"" {
                out.push_str("#line 1 \"common.cuh\"\n");
                out.push_str(&COMMON_HEADER.replace("#pragma once", ""));
                out.push_str(&format!("\n#line {} \"{}\"\n", i + 2, self.file_name()));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// Every kernel entry point, named `operation_interpolation_input_output`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    OctopusBilinearI420F32,
    OctopusBilinearNv12F32,
    OctopusBilinearPackedF32,
    OctopusBilinearI420F16,
    OctopusBilinearNv12F16,
    OctopusBilinearPackedF16,
    LutBilinearI420F32,
    LutBilinearNv12F32,
    LutBilinearPackedF32,
    BsearchBilinearI420F32,
    BsearchBilinearNv12F32,
    BsearchBilinearPackedF32,
    PercropBilinearI420F32,
    PercropBilinearNv12F32,
    PercropBilinearPackedF32,
    PadGatherI420U8,
    PadGatherNv12U8,
    PadGatherPackedU8,
    PadResizeRgbF32,
    ResampleBilinearI420F32,
    ResampleBilinearI420F16,
    ResampleBilinearNv12F32,
    ResampleBilinearNv12F16,
    ResampleBilinearPackedF32,
    ResampleBilinearPackedF16,
    ResampleAreaI420F32,
    ResampleAreaI420F16,
    ResampleAreaNv12F32,
    ResampleAreaNv12F16,
    ResampleAreaPackedF32,
    ResampleAreaPackedF16,
    GatherRects,
    TilestatsGray16,
    TilestatsGray8,
    TilestatsPacked,
    TilestatsPaddedGray16,
    CenternetPeaksF32,
    CenternetPeaksF16,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 38] = [
        Kernel::OctopusBilinearI420F32,
        Kernel::OctopusBilinearNv12F32,
        Kernel::OctopusBilinearPackedF32,
        Kernel::OctopusBilinearI420F16,
        Kernel::OctopusBilinearNv12F16,
        Kernel::OctopusBilinearPackedF16,
        Kernel::LutBilinearI420F32,
        Kernel::LutBilinearNv12F32,
        Kernel::LutBilinearPackedF32,
        Kernel::BsearchBilinearI420F32,
        Kernel::BsearchBilinearNv12F32,
        Kernel::BsearchBilinearPackedF32,
        Kernel::PercropBilinearI420F32,
        Kernel::PercropBilinearNv12F32,
        Kernel::PercropBilinearPackedF32,
        Kernel::PadGatherI420U8,
        Kernel::PadGatherNv12U8,
        Kernel::PadGatherPackedU8,
        Kernel::PadResizeRgbF32,
        Kernel::ResampleBilinearI420F32,
        Kernel::ResampleBilinearI420F16,
        Kernel::ResampleBilinearNv12F32,
        Kernel::ResampleBilinearNv12F16,
        Kernel::ResampleBilinearPackedF32,
        Kernel::ResampleBilinearPackedF16,
        Kernel::ResampleAreaI420F32,
        Kernel::ResampleAreaI420F16,
        Kernel::ResampleAreaNv12F32,
        Kernel::ResampleAreaNv12F16,
        Kernel::ResampleAreaPackedF32,
        Kernel::ResampleAreaPackedF16,
        Kernel::GatherRects,
        Kernel::TilestatsGray16,
        Kernel::TilestatsGray8,
        Kernel::TilestatsPacked,
        Kernel::TilestatsPaddedGray16,
        Kernel::CenternetPeaksF32,
        Kernel::CenternetPeaksF16,
    ];

    /// The `extern "C"` name.
    pub fn name(self) -> &'static str {
        use Kernel::*;
        match self {
            OctopusBilinearI420F32 => "octopus_bilinear_i420_f32",
            OctopusBilinearNv12F32 => "octopus_bilinear_nv12_f32",
            OctopusBilinearPackedF32 => "octopus_bilinear_packed_f32",
            OctopusBilinearI420F16 => "octopus_bilinear_i420_f16",
            OctopusBilinearNv12F16 => "octopus_bilinear_nv12_f16",
            OctopusBilinearPackedF16 => "octopus_bilinear_packed_f16",
            LutBilinearI420F32 => "lut_bilinear_i420_f32",
            LutBilinearNv12F32 => "lut_bilinear_nv12_f32",
            LutBilinearPackedF32 => "lut_bilinear_packed_f32",
            BsearchBilinearI420F32 => "bsearch_bilinear_i420_f32",
            BsearchBilinearNv12F32 => "bsearch_bilinear_nv12_f32",
            BsearchBilinearPackedF32 => "bsearch_bilinear_packed_f32",
            PercropBilinearI420F32 => "percrop_bilinear_i420_f32",
            PercropBilinearNv12F32 => "percrop_bilinear_nv12_f32",
            PercropBilinearPackedF32 => "percrop_bilinear_packed_f32",
            PadGatherI420U8 => "pad_gather_i420_u8",
            PadGatherNv12U8 => "pad_gather_nv12_u8",
            PadGatherPackedU8 => "pad_gather_packed_u8",
            PadResizeRgbF32 => "pad_resize_rgb_f32",
            ResampleBilinearI420F32 => "resample_bilinear_i420_f32",
            ResampleBilinearI420F16 => "resample_bilinear_i420_f16",
            ResampleBilinearNv12F32 => "resample_bilinear_nv12_f32",
            ResampleBilinearNv12F16 => "resample_bilinear_nv12_f16",
            ResampleBilinearPackedF32 => "resample_bilinear_packed_f32",
            ResampleBilinearPackedF16 => "resample_bilinear_packed_f16",
            ResampleAreaI420F32 => "resample_area_i420_f32",
            ResampleAreaI420F16 => "resample_area_i420_f16",
            ResampleAreaNv12F32 => "resample_area_nv12_f32",
            ResampleAreaNv12F16 => "resample_area_nv12_f16",
            ResampleAreaPackedF32 => "resample_area_packed_f32",
            ResampleAreaPackedF16 => "resample_area_packed_f16",
            GatherRects => "gather_rects",
            TilestatsGray16 => "tilestats_gray16",
            TilestatsGray8 => "tilestats_gray8",
            TilestatsPacked => "tilestats_packed",
            TilestatsPaddedGray16 => "tilestats_padded_gray16",
            CenternetPeaksF32 => "centernet_peaks_f32",
            CenternetPeaksF16 => "centernet_peaks_f16",
        }
    }

    /// The module that defines it.
    pub fn module(self) -> Module {
        if self.name().starts_with("octopus_") {
            Module::Octopus
        } else if self.name().starts_with("resample_") {
            Module::Resample
        } else if self.name().starts_with("gather_") {
            Module::Gather
        } else if self.name().starts_with("tilestats_") {
            Module::Tilestats
        } else if self.name().starts_with("centernet_") {
            Module::CenterNet
        } else {
            Module::Baselines
        }
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
    #[error("kernels/{file} does not compile for {arch}:\n{log}")]
    Compile {
        /// The `.cu` file.
        file: &'static str,
        /// Target architecture (`compute_90`).
        arch: String,
        /// NVRTC's compile log.
        log: String,
    },
}

/// Whether libnvrtc can be loaded in this process.
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compile `module` to PTX for virtual architecture `arch` (e.g. `compute_90`), with no cache.
pub fn compile_module(module: Module, arch: &str) -> Result<Ptx, KernelError> {
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
        name: Some(module.file_name().to_string()),
        options,
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(module.full_source(), opts).map_err(|e| {
        KernelError::Compile {
            file: module.file_name(),
            arch: arch.to_string(),
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            },
        }
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

fn disk_cache_path(module: Module, arch: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("OCTOPIPE_KERNEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("octopipe")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/octopipe")))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    module.full_source().hash(&mut h);
    arch.hash(&mut h);
    extra_defines().hash(&mut h);
    Some(dir.join(format!(
        "{}-{arch}-{:016x}.ptx",
        module.file_name(),
        h.finish()
    )))
}

/// PTX of `module` for `arch`, compiled at most once per process; reused from the on-disk cache
/// (`$OCTOPIPE_KERNEL_CACHE`, else `~/.cache/octopipe`, keyed by a hash of the source) when present.
pub fn cached_ptx(module: Module, arch: &str) -> Result<String, KernelError> {
    static CACHE: OnceLock<Mutex<HashMap<(Module, String), String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (module, arch.to_string());
    if let Some(p) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(p);
    }
    let path = disk_cache_path(module, arch);
    let ptx = match path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        Some(p) => p,
        None => {
            let p = compile_module(module, arch)?.to_src();
            if let Some(path) = &path {
                // Best effort: a read-only cache directory only costs a recompile next time.
                let _ = std::fs::create_dir_all(path.parent().unwrap_or(path));
                let _ = std::fs::write(path, &p);
            }
            p
        }
    };
    if let Ok(mut c) = cache.lock() {
        c.insert(key, ptx.clone());
    }
    Ok(ptx)
}
