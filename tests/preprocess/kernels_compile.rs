//! Every kernel module compiles under NVRTC for the architectures we ship for, with no GPU needed.
//!
//! Skips (with a printed reason) when libnvrtc cannot be found; fails, with NVRTC's log naming the
//! `.cu` file and line, when a kernel does not compile. libnvrtc is looked for on the loader path,
//! then under `$NVRTC_LIB_DIR`, then in pip's `nvidia-cuda-nvrtc` wheel of the active Pythons.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::PathBuf;

use octopipe::preprocess::cuda::kernels::{self, Kernel, Module};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
}

/// Load libnvrtc from a known directory by full path, so that cudarc's later `dlopen` by soname
/// finds the already-loaded library.
fn preload_nvrtc() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("NVRTC_LIB_DIR") {
        dirs.push(d.into());
    }
    let mut roots: Vec<PathBuf> = vec!["/usr/local/lib".into(), "/usr/lib".into()];
    if let Some(home) = std::env::var_os("HOME") {
        let versions = PathBuf::from(home).join(".pyenv/versions");
        if let Ok(rd) = std::fs::read_dir(versions) {
            roots.extend(rd.flatten().map(|e| e.path().join("lib")));
        }
    }
    for root in roots {
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        for py in rd.flatten() {
            let name = py.file_name();
            if name.to_string_lossy().starts_with("python3") {
                for cu in ["cu13", "cu12", "cuda_nvrtc"] {
                    dirs.push(py.path().join("site-packages/nvidia").join(cu).join("lib"));
                    dirs.push(py.path().join("dist-packages/nvidia").join(cu).join("lib"));
                }
            }
        }
    }
    for d in dirs {
        for lib in ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] {
            let p = d.join(lib);
            if p.exists() {
                let c = CString::new(p.to_string_lossy().as_bytes()).ok()?;
                // SAFETY: dlopen with a valid NUL-terminated path; RTLD_NOW | RTLD_GLOBAL.
                let h = unsafe { dlopen(c.as_ptr(), 0x2 | 0x100) };
                if !h.is_null() {
                    // NVRTC opens its builtins library by name at compile time; without an RPATH
                    // (some wheels) that needs it loaded already.
                    if let Ok(rd) = std::fs::read_dir(&d) {
                        for e in rd.flatten() {
                            let n = e.file_name().to_string_lossy().into_owned();
                            if n.starts_with("libnvrtc-builtins.so") {
                                if let Ok(c) = CString::new(e.path().to_string_lossy().as_bytes()) {
                                    // SAFETY: as above.
                                    unsafe { dlopen(c.as_ptr(), 0x2 | 0x100) };
                                }
                            }
                        }
                    }
                    return Some(p);
                }
            }
        }
    }
    None
}

#[test]
fn every_kernel_module_compiles_under_nvrtc() {
    if !kernels::nvrtc_present() {
        match preload_nvrtc() {
            Some(p) => eprintln!("using {}", p.display()),
            None => {
                eprintln!(
                    "SKIPPED: libnvrtc not found (install pip `nvidia-cuda-nvrtc` or set NVRTC_LIB_DIR); kernels not compile-checked"
                );
                return;
            }
        }
    }
    let mut failures = Vec::new();
    for arch in ["compute_75", "compute_90"] {
        for m in Module::ALL {
            match kernels::compile_module(m, arch) {
                Ok(ptx) => {
                    let src = ptx.to_src();
                    for k in Kernel::ALL.iter().filter(|k| k.module() == m) {
                        if !src.contains(&format!(".entry {}(", k.name())) {
                            failures.push(format!(
                                "{arch}: kernels/{} has no entry {}",
                                m.file_name(),
                                k.name()
                            ));
                        }
                    }
                    eprintln!(
                        "kernels/{} compiles for {arch} ({} bytes of PTX)",
                        m.file_name(),
                        src.len()
                    );
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_kernel_is_listed_once() {
    let mut names: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Kernel::ALL.len());
    for k in Kernel::ALL {
        let op = k.name().split('_').next().unwrap_or_default();
        assert!(
            k.module().source().contains(op),
            "{} does not look defined in kernels/{}",
            k.name(),
            k.module().file_name()
        );
    }
}
