//! Finding libnvrtc where the loader does not look: for the compile checks (the tests of every
//! crate that declares a kernel module, tools) on machines that have NVRTC from pip but not on
//! `LD_LIBRARY_PATH`. The library's own compiles never call it: they load libnvrtc by its usual
//! names only.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
}

/// `RTLD_NOW | RTLD_GLOBAL`.
const FLAGS: c_int = 0x2 | 0x100;

/// Whether libnvrtc loads in this process, after loading it by full path, when the loader does
/// not find it by name, from `$NVRTC_LIB_DIR` or from pip's `nvidia-cuda-nvrtc` wheel of the
/// system's or pyenv's Pythons (so that later loads by name find the loaded library).
pub fn find_nvrtc() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    let present = || unsafe { cudarc::nvrtc::sys::is_culib_present() };
    present() || candidate_dirs().iter().any(|d| preload(d)) && present()
}

/// Folders that may hold libnvrtc: `$NVRTC_LIB_DIR`, then pip's wheel folders.
fn candidate_dirs() -> Vec<PathBuf> {
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
            if py.file_name().to_string_lossy().starts_with("python3") {
                for cu in ["cu13", "cu12", "cuda_nvrtc"] {
                    dirs.push(py.path().join("site-packages/nvidia").join(cu).join("lib"));
                    dirs.push(py.path().join("dist-packages/nvidia").join(cu).join("lib"));
                }
            }
        }
    }
    dirs
}

/// Load libnvrtc from `dir` by full path, and its builtins library beside it: NVRTC opens that
/// one by name at compile time, which without an RPATH (some wheels) needs it loaded already.
fn preload(dir: &Path) -> bool {
    let Some(lib) = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
        .iter()
        .map(|l| dir.join(l))
        .find(|p| p.exists())
    else {
        return false;
    };
    if !open(&lib) {
        return false;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with("libnvrtc-builtins.so")
            {
                open(&e.path());
            }
        }
    }
    true
}

/// `dlopen` of `path`; whether it loaded.
fn open(path: &Path) -> bool {
    let Ok(c) = CString::new(path.to_string_lossy().as_bytes()) else {
        return false;
    };
    // SAFETY: dlopen with a valid NUL-terminated path; the handle is kept for the process.
    !unsafe { dlopen(c.as_ptr(), FLAGS) }.is_null()
}
