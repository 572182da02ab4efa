//! Where a stage runs (CPU or CUDA), and the preprocess backend chosen when `--backend` is not
//! given.

/// Where a stage runs: the preprocess backend or the classifier's execution provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compute {
    /// The CPU.
    Cpu,
    /// A CUDA GPU.
    Cuda,
}

impl Compute {
    /// The name, as the pipeline text writes it.
    pub fn name(self) -> &'static str {
        match self {
            Compute::Cpu => "cpu",
            Compute::Cuda => "cuda",
        }
    }

    /// Parse `cpu` or `cuda`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cpu" => Some(Compute::Cpu),
            "cuda" => Some(Compute::Cuda),
            _ => None,
        }
    }
}

/// The preprocess backend when `--backend` is not given: CUDA when the classifier reads device
/// tensors (`ep=cuda`) or the frames are in device memory (`decoder=nvdec` or `nvjpeg`: the
/// CPU backend reads host frames only), else the CPU.
pub fn default_backend(decoder: &str, ep: Compute) -> Compute {
    if ep == Compute::Cuda || decoder == "nvdec" || decoder == "nvjpeg" {
        Compute::Cuda
    } else {
        Compute::Cpu
    }
}
