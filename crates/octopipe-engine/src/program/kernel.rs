//! The program's kernels as the launcher packs them: each launch, its geometry and its fused
//! epilogue (the structs `engine.cu` declares), and why a step has none.

use crate::shape::TensorId;

/// Why a plan cannot run on the engine's kernels.
#[derive(Debug, thiserror::Error)]
#[error("the engine cannot run node {node:?} ({op}): {reason}")]
pub struct ProgramError {
    /// The node's name.
    pub node: String,
    /// Its op.
    pub op: &'static str,
    /// What the kernels lack.
    pub reason: String,
}

/// One operation of an epilogue, applied in order to each value a kernel writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpiOp {
    /// Plus a per-channel bias (a weight).
    Bias(TensorId),
    /// max(v, 0).
    Relu,
    /// v * clamp(v + 3, 0, 6) / 6.
    HardSwish,
    /// clamp(alpha * v + beta, 0, 1).
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// 1 / (1 + e^-v).
    Sigmoid,
    /// clamp(v, lo, hi).
    Clip {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// Plus a tensor of the output's shape (an activation).
    Residual(TensorId),
    /// Times a per-image, per-channel gate [N, C, 1, 1] (an activation).
    Gate(TensorId),
    /// Times a constant (a weight: one value or one per channel).
    Scale(TensorId),
    /// Plus a constant (a weight: one value or one per channel).
    Shift(TensorId),
}

/// What follows a kernel's value, and where it writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue {
    /// The operations, in order (at most [`EPILOGUE_MAX`]).
    pub ops: Vec<EpiOp>,
    /// The output is a graph output, written NCHW.
    pub nchw: bool,
}

/// The most operations an epilogue holds (`EPI_MAX` in engine.cu).
pub const EPILOGUE_MAX: usize = 6;

/// A convolution's geometry (`Geom` in engine.cu), NHWC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Geom {
    /// Images.
    pub n: u32,
    /// Input height.
    pub ih: u32,
    /// Input width.
    pub iw: u32,
    /// Input channels.
    pub cin: u32,
    /// Output height.
    pub oh: u32,
    /// Output width.
    pub ow: u32,
    /// Output channels.
    pub cout: u32,
    /// Kernel height.
    pub kh: u32,
    /// Kernel width.
    pub kw: u32,
    /// Vertical stride.
    pub sh: u32,
    /// Horizontal stride.
    pub sw: u32,
    /// Vertical dilation.
    pub dh: u32,
    /// Horizontal dilation.
    pub dw: u32,
    /// Top padding.
    pub pt: u32,
    /// Left padding.
    pub pl: u32,
}

impl Geom {
    /// The sizes of an NCHW input `i` and output `o` (batch, channels, rows, columns), the rest
    /// zero: what a kernel with no window of its own (a resize) needs.
    pub(crate) fn between(i: &[u64], o: &[u64]) -> Geom {
        Geom {
            n: i[0] as u32,
            cin: i[1] as u32,
            ih: i[2] as u32,
            iw: i[3] as u32,
            cout: o[1] as u32,
            oh: o[2] as u32,
            ow: o[3] as u32,
            ..Geom::default()
        }
    }
}

/// How a convolution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// 1 x 1, stride 1, dense: a matrix product (`engine_conv1x1`).
    Pointwise,
    /// One filter per channel (`engine_conv_dw`).
    Depthwise,
    /// Dense, any kernel size (`engine_conv_direct`).
    Direct,
}

/// One kernel launch of the program.
#[derive(Clone, Debug, PartialEq)]
pub enum Kernel {
    /// No kernel: `to` is `from`'s buffer (the input's NHWC-to-NCHW Transpose).
    Alias {
        /// The graph input.
        from: TensorId,
        /// The Transpose's output.
        to: TensorId,
    },
    /// A convolution with its epilogue.
    Conv {
        /// How it runs.
        kind: ConvKind,
        /// Its input.
        x: TensorId,
        /// Its filter (a weight, [cout, cin / group, kh, kw]).
        w: TensorId,
        /// The squeeze-excite gate on its input ([N, cin, 1, 1]), if the plan took one.
        gate_in: Option<TensorId>,
        /// Its output.
        out: TensorId,
        /// Its geometry.
        geom: Geom,
        /// Its epilogue.
        epi: Epilogue,
    },
    /// The mean over each image's pixels.
    Gap {
        /// Input.
        x: TensorId,
        /// Output [N, C, 1, 1].
        out: TensorId,
        /// Images.
        n: u32,
        /// Pixels per image.
        hw: u32,
        /// Channels.
        c: u32,
    },
    /// Linear resize, asymmetric coordinates.
    Resize {
        /// Input.
        x: TensorId,
        /// Output.
        out: TensorId,
        /// The input's geometry (n, ih, iw, c) and the output's (oh, ow) in `geom`.
        geom: Geom,
        /// Epilogue.
        epi: Epilogue,
    },
    /// Two tensors joined along the channels.
    Concat {
        /// First.
        a: TensorId,
        /// Second.
        b: TensorId,
        /// Output.
        out: TensorId,
        /// Pixels over the batch.
        pixels: u64,
        /// First's channels.
        ca: u32,
        /// Second's channels.
        cb: u32,
        /// Epilogue.
        epi: Epilogue,
    },
    /// An elementwise step: x through its epilogue.
    Pointwise {
        /// Input.
        x: TensorId,
        /// Output.
        out: TensorId,
        /// Pixels over the batch.
        pixels: u64,
        /// Channels.
        c: u32,
        /// Epilogue.
        epi: Epilogue,
    },
}

impl Kernel {
    /// The activations it reads.
    pub fn reads(&self) -> Vec<TensorId> {
        let epi_reads = |e: &Epilogue| {
            e.ops
                .iter()
                .filter_map(|o| match o {
                    EpiOp::Residual(t) | EpiOp::Gate(t) => Some(*t),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        match self {
            Kernel::Alias { from, .. } => vec![*from],
            Kernel::Conv {
                x, gate_in, epi, ..
            } => {
                let mut v = vec![*x];
                v.extend(gate_in);
                v.extend(epi_reads(epi));
                v
            }
            Kernel::Gap { x, .. } => vec![*x],
            Kernel::Resize { x, epi, .. } | Kernel::Pointwise { x, epi, .. } => {
                let mut v = vec![*x];
                v.extend(epi_reads(epi));
                v
            }
            Kernel::Concat { a, b, epi, .. } => {
                let mut v = vec![*a, *b];
                v.extend(epi_reads(epi));
                v
            }
        }
    }

    /// The tensor it writes.
    pub fn output(&self) -> TensorId {
        match self {
            Kernel::Alias { to, .. } => *to,
            Kernel::Conv { out, .. }
            | Kernel::Gap { out, .. }
            | Kernel::Resize { out, .. }
            | Kernel::Concat { out, .. }
            | Kernel::Pointwise { out, .. } => *out,
        }
    }
}
