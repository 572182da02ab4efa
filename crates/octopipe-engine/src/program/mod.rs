//! The plan as the engine's kernels: each step of a [`Plan`] mapped to one kernel of
//! `gpu/engine.cu` with its geometry and its epilogue, the tensors named by id. This half runs on
//! the CPU (and is tested there); [`crate::gpu`] uploads the weights and launches the program.
//!
//! Activations live NHWC on the device: a tensor the shapes call [N, C, H, W] is `N * H * W`
//! pixels of `C` channels. The model's leading Transpose (its NHWC input to NCHW) is therefore no
//! kernel: its output is its input's buffer. A graph output is written NCHW, the layout the model
//! declares.

mod build;
mod kernel;

use crate::model::Model;
use crate::plan::Plan;

use build::Builder;
pub use kernel::{ConvKind, EpiOp, Epilogue, Geom, Kernel, ProgramError, EPILOGUE_MAX};

/// The plan as kernels, in order.
#[derive(Clone, Debug)]
pub struct Program {
    /// The kernels.
    pub kernels: Vec<Kernel>,
}

impl Program {
    /// Maps each step of `plan` (made from `model`) to its kernel; a step the kernels cannot run
    /// refuses the model naming its node.
    pub fn new(model: &Model, plan: &Plan) -> Result<Program, ProgramError> {
        let b = Builder { model, plan };
        let mut kernels = Vec::with_capacity(plan.steps.len());
        for step in &plan.steps {
            kernels.push(b.kernel(&step.kind, &step.nodes)?);
        }
        // A graph output is written NCHW: nothing may read it as an activation.
        for k in &kernels {
            for t in k.reads() {
                if plan.shapes.outputs.contains(&t) {
                    return Err(ProgramError {
                        node: plan.shapes.tensors[t].name.clone(),
                        op: "output",
                        reason: "a graph output read by another step".into(),
                    });
                }
            }
        }
        Ok(Program { kernels })
    }

    /// How many kernels launch (aliases are none).
    pub fn launches(&self) -> usize {
        self.kernels
            .iter()
            .filter(|k| !matches!(k, Kernel::Alias { .. }))
            .count()
    }
}
