//! The kernel modules' compile path and cache: the header pasted with `#line`, NVRTC's errors
//! naming the module's file and line, one compile per process for every caller, and (on a GPU)
//! the entry points a module declares, and only those, given to each caller, and a stream of
//! high priority.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::kernels::{self, check_module, compile_module, KernelError, KernelModule};
use crate::nvrtc::find_nvrtc;
use crate::{CudaError, Gpu};

/// A module of one tiny kernel that uses the shared header's types.
const SCALE: KernelModule = KernelModule {
    name: "scale",
    source: "// scales a vector\n#include \"common.cuh\"\n\
             extern \"C\" __global__ void scale_f32(float* v, u32 n, float k) {\n\
                 u32 i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                 if (i < n) v[i] *= k;\n\
             }\n",
    functions: &["scale_f32"],
};

/// NVRTC, held by one test at a time (a compile here fails now and then to open NVRTC's builtins
/// library while another test of the process compiles); `None`, with the reason printed, when
/// it is not here.
fn nvrtc() -> Option<MutexGuard<'static, ()>> {
    static ONE: Mutex<()> = Mutex::new(());
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if find_nvrtc() {
        return Some(guard);
    }
    eprintln!("SKIPPED: libnvrtc not found (install pip `nvidia-cuda-nvrtc` or set NVRTC_LIB_DIR)");
    None
}

#[test]
fn the_header_is_pasted_with_line_directives() {
    let full = SCALE.full_source();
    assert!(full.starts_with("// scales a vector\n#line 1 \"common.cuh\"\n"));
    assert!(full.contains("typedef unsigned int u32;"));
    assert!(full.contains("\n#line 3 \"scale.cu\"\nextern \"C\" __global__ void scale_f32("));
    assert!(!full.contains("#include \"common.cuh\""));
}

#[test]
fn nvrtc_errors_name_the_module_file_and_line() {
    let Some(_nvrtc) = nvrtc() else {
        return;
    };
    let broken = KernelModule {
        name: "broken",
        source: "#include \"common.cuh\"\n\nextern \"C\" __global__ void f(u32* v) { v[0] = ; }\n",
        functions: &["f"],
    };
    match compile_module(&broken, "compute_75") {
        Err(e @ KernelError::Compile { .. }) => {
            let text = e.to_string();
            assert!(
                text.starts_with("broken.cu does not compile for compute_75:"),
                "{text}"
            );
            assert!(text.contains("broken.cu(3)"), "{text}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    let missing = KernelModule {
        functions: &["scale_f32", "scale_f16"],
        ..SCALE
    };
    match check_module(&missing, "compute_75") {
        Err(KernelError::Missing { function, .. }) => assert_eq!(function, "scale_f16"),
        other => panic!("expected scale_f16 missing, got {other:?}"),
    }
    assert!(check_module(&SCALE, "compute_75").is_ok_and(|bytes| bytes > 0));
}

#[test]
fn a_module_is_compiled_once_per_process_for_every_caller() {
    let Some(_nvrtc) = nvrtc() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("octopipe-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let once = KernelModule {
        name: "once",
        ..SCALE
    };
    let first = kernels::cached_ptx_in(&once, "compute_75", Some(dir.clone())).unwrap();
    assert!(first.contains(".entry scale_f32("));
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "one PTX file on disk");
    let name = written[0].file_name().to_string_lossy().into_owned();
    assert!(name.starts_with("once.cu-compute_75-"), "{name}");
    std::fs::remove_file(written[0].path()).unwrap();
    // A second caller: the same PTX, neither compiled nor written again.
    let second = kernels::cached_ptx_in(&once, "compute_75", Some(dir.clone())).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // Another source under the same name is another entry.
    let other = KernelModule {
        source:
            "#include \"common.cuh\"\nextern \"C\" __global__ void zero_u32(u32* v) { v[0] = 0; }\n",
        functions: &["zero_u32"],
        ..once
    };
    let third = kernels::cached_ptx_in(&other, "compute_75", Some(dir.clone())).unwrap();
    assert!(third.contains(".entry zero_u32("));
    assert!(!Arc::ptr_eq(&first, &third));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gpu_gives_declared_entry_points_only() {
    if crate::available().is_err() {
        eprintln!("SKIPPED: no GPU");
        return;
    }
    let Some(_nvrtc) = nvrtc() else {
        return;
    };
    let mut a = Gpu::new(0, &[&SCALE]).unwrap();
    let f = a.func(&SCALE, "scale_f32").unwrap();
    let again = a.func(&SCALE, "scale_f32").unwrap();
    assert_eq!(f.num_regs().unwrap(), again.num_regs().unwrap());
    assert!(matches!(
        a.func(&SCALE, "scale_f16"),
        Err(CudaError::Kernel(KernelError::Undeclared { .. }))
    ));
    let clash = KernelModule {
        functions: &["zero_u32"],
        source:
            "#include \"common.cuh\"\nextern \"C\" __global__ void zero_u32(u32* v) { v[0] = 0; }\n",
        ..SCALE
    };
    assert!(matches!(
        a.load(&clash),
        Err(CudaError::Kernel(KernelError::NameClash {
            module: "scale"
        }))
    ));
    // A second caller, modules loaded on first use.
    let mut b = Gpu::new(0, &[]).unwrap();
    assert!(b.func(&SCALE, "scale_f32").is_ok());
}

#[test]
fn a_high_priority_gpu_stream_is_ahead_of_a_normal_one() {
    if crate::available().is_err() {
        eprintln!("SKIPPED: no GPU");
        return;
    }
    let normal = Gpu::new(0, &[]).unwrap();
    let high = Gpu::with_priority(0, &[], crate::StreamPriority::High).unwrap();
    let (n, h) = (
        crate::stream_priority(normal.stream()).unwrap(),
        crate::stream_priority(high.stream()).unwrap(),
    );
    // Every GPU since Kepler has more than one priority: numerically less is sooner.
    assert_eq!(n, 0);
    assert!(h < n, "high {h}, normal {n}");
}
