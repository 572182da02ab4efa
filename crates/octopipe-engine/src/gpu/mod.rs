//! The engine on a GPU: the [`Program`](crate::program::Program) of a model's plan launched
//! with octopipe's own kernels (`engine.cu`, beside this file: [`ENGINE_KERNELS`]) on FP16 NHWC
//! activations, each convolution with its fused epilogue, optionally replayed as one CUDA graph.
//!
//! The weights are uploaded once in the layouts the kernels read (a 1 x 1 filter as [cin, cout]
//! f16, a depthwise one as [kh * kw, c] f32, a dense one as [kh, kw, cin, cout] f32; biases,
//! scales and shifts f32); every activation has its own buffer, sized for the batch.

mod engine;
mod prepare;
mod types;

pub use engine::Engine;
pub use types::{EngineError, KernelTime, Kernels, ENGINE_KERNELS};

#[cfg(test)]
mod tests {
    use octopipe_cuda::kernels::check_modules;

    use super::ENGINE_KERNELS;

    /// engine.cu compiles under NVRTC for the checked architectures and defines every entry
    /// point: no GPU needed.
    #[test]
    fn the_engine_kernels_compile_under_nvrtc() {
        match check_modules(&[&ENGINE_KERNELS]) {
            None => eprintln!("SKIPPED: libnvrtc not found; engine.cu not compile-checked"),
            Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
            Some(Err(failures)) => panic!("{failures}"),
        }
    }
}
