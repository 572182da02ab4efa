//! Every kernel module this crate declares (the preprocess backend's, `tilestats`'s and, with the
//! `bench` feature, the baselines') compiles under NVRTC for the architectures octopipe ships for
//! and defines every entry point it declares: no GPU needed. Skips, saying why, without libnvrtc.

use octopipe_cuda::kernels::{check_modules, KernelModule};

use crate::preprocess::cuda::{GATHER_KERNELS, OCTOPUS_KERNELS, RESAMPLE_KERNELS};
use crate::tilestats::TILESTATS_KERNELS;

#[test]
fn every_kernel_module_compiles_under_nvrtc() {
    #[allow(unused_mut)]
    let mut modules: Vec<&KernelModule> = vec![
        &OCTOPUS_KERNELS,
        &RESAMPLE_KERNELS,
        &GATHER_KERNELS,
        &TILESTATS_KERNELS,
    ];
    #[cfg(feature = "bench")]
    modules.push(&crate::preprocess::cuda::baselines::BASELINE_KERNELS);
    match check_modules(&modules) {
        None => eprintln!(
            "SKIPPED: libnvrtc not found (install pip `nvidia-cuda-nvrtc` or set NVRTC_LIB_DIR); kernels not compile-checked"
        ),
        Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
        Some(Err(failures)) => panic!("{failures}"),
    }
}
