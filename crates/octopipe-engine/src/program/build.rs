//! Each plan step as its kernel: the geometry, the weights' tensors and the fused epilogue a
//! step's nodes give, or the reason the kernels cannot run it.

use crate::model::{Model, Node, Op};
use crate::plan::{Fused, Plan, StepKind};
use crate::shape::{Source, TensorId};

use super::kernel::{ConvKind, EpiOp, Epilogue, Geom, Kernel, ProgramError, EPILOGUE_MAX};

/// Builds kernels for the steps of one plan of one model.
pub(super) struct Builder<'a> {
    pub(super) model: &'a Model,
    pub(super) plan: &'a Plan,
}

impl Builder<'_> {
    fn shape(&self, t: TensorId) -> &[u64] {
        &self.plan.shapes.tensors[t].shape
    }

    fn is_weight(&self, t: TensorId) -> bool {
        self.plan.shapes.tensors[t].source == Source::Weight
    }

    fn inputs(&self, n: usize) -> Vec<TensorId> {
        self.plan.shapes.nodes[n]
            .inputs
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    fn output(&self, n: usize) -> TensorId {
        self.plan.shapes.nodes[n].outputs[0]
    }

    fn refuse(&self, n: usize, reason: impl Into<String>) -> ProgramError {
        let node = &self.model.nodes[n];
        ProgramError {
            node: node.name.clone(),
            op: node.op.name(),
            reason: reason.into(),
        }
    }

    /// [N, C, H, W] (or [N, C]) as (pixels over the batch, channels, pixels per image).
    fn pixels(&self, t: TensorId, n: usize) -> Result<(u64, u32, u32), ProgramError> {
        match self.shape(t) {
            [b, c, rest @ ..] if rest.len() <= 2 => {
                let hw: u64 = rest.iter().product();
                Ok((b * hw, *c as u32, hw as u32))
            }
            s => Err(self.refuse(n, format!("a tensor of shape {s:?}, not [N, C, H, W]"))),
        }
    }

    /// A constant of an input (Clip's bounds), if given.
    fn constant(&self, n: usize, slot: usize) -> Option<f32> {
        let t = self.plan.shapes.nodes[n]
            .inputs
            .get(slot)
            .copied()
            .flatten()?;
        let w = self.model.weights.get(&self.plan.shapes.tensors[t].name)?;
        w.data.to_f32().first().copied()
    }

    fn activation(&self, n: usize) -> Result<EpiOp, ProgramError> {
        let node: &Node = &self.model.nodes[n];
        Ok(match node.op {
            Op::Relu => EpiOp::Relu,
            Op::HardSwish => EpiOp::HardSwish,
            Op::HardSigmoid => EpiOp::HardSigmoid {
                alpha: node.float("alpha", 0.2),
                beta: node.float("beta", 0.5),
            },
            Op::Sigmoid => EpiOp::Sigmoid,
            Op::Clip => EpiOp::Clip {
                lo: self.constant(n, 1).unwrap_or(node.float("min", f32::MIN)),
                hi: self.constant(n, 2).unwrap_or(node.float("max", f32::MAX)),
            },
            _ => return Err(self.refuse(n, "not an activation")),
        })
    }

    /// The other operand of a binary node whose first-computed operand is `cur`.
    fn other(&self, n: usize, cur: TensorId) -> Result<TensorId, ProgramError> {
        match self.inputs(n)[..] {
            [a, b] => Ok(if a == cur { b } else { a }),
            _ => Err(self.refuse(n, "a binary op without two operands")),
        }
    }

    fn epilogue(&self, ops: Vec<EpiOp>, out: TensorId, n: usize) -> Result<Epilogue, ProgramError> {
        if ops.len() > EPILOGUE_MAX {
            return Err(self.refuse(
                n,
                format!(
                    "{} fused operations (the kernels take {EPILOGUE_MAX})",
                    ops.len()
                ),
            ));
        }
        Ok(Epilogue {
            ops,
            nchw: self.plan.shapes.outputs.contains(&out),
        })
    }

    /// The kernel that runs one plan step (its `nodes`), or why none can.
    pub(super) fn kernel(&self, kind: &StepKind, nodes: &[usize]) -> Result<Kernel, ProgramError> {
        match kind {
            StepKind::Conv { fused, .. } => self.conv(fused, nodes),
            StepKind::Single(_) => self.single(nodes[0], Vec::new(), nodes[0]),
            StepKind::Joined { .. } => {
                let mut acts = Vec::new();
                for &f in &nodes[1..] {
                    acts.push(self.activation(f)?);
                }
                self.single(nodes[0], acts, *nodes.last().expect("a node"))
            }
        }
    }

    fn conv(&self, fused: &[Fused], nodes: &[usize]) -> Result<Kernel, ProgramError> {
        let (gate_in, rest) = match fused.first() {
            Some(Fused::GateIn) => (Some(nodes[0]), &nodes[1..]),
            _ => (None, nodes),
        };
        let c = rest[0];
        let node = &self.model.nodes[c];
        if node.op != Op::Conv {
            return Err(self.refuse(c, "the kernels run Conv, not ConvTranspose"));
        }
        let ins = &self.plan.shapes.nodes[c].inputs;
        let x = ins[0].ok_or_else(|| self.refuse(c, "no input"))?;
        let w = ins
            .get(1)
            .copied()
            .flatten()
            .ok_or_else(|| self.refuse(c, "no filter"))?;
        if !self.is_weight(w) {
            return Err(self.refuse(c, "its filter is computed, not a weight"));
        }
        let gate = match gate_in {
            Some(m) => Some(
                self.inputs(m)
                    .into_iter()
                    .find(|&t| self.shape(t).get(2..) == Some(&[1, 1][..]) && t != x)
                    .ok_or_else(|| self.refuse(m, "no [N, C, 1, 1] gate"))?,
            ),
            None => None,
        };
        // The convolution reads what the gate multiplies.
        let x = match gate_in {
            Some(m) => self
                .inputs(m)
                .into_iter()
                .find(|&t| Some(t) != gate)
                .ok_or_else(|| self.refuse(m, "no gated tensor"))?,
            None => x,
        };
        let out_conv = self.output(c);
        let (is, os, ws) = (self.shape(x), self.shape(out_conv), self.shape(w));
        if is.len() != 4 || os.len() != 4 || ws.len() != 4 {
            return Err(self.refuse(c, "only 2-D convolutions run"));
        }
        let at =
            |v: Option<&[i64]>, i: usize, d: i64| v.and_then(|v| v.get(i).copied()).unwrap_or(d);
        let (strides, dil, pads) = (
            node.ints("strides"),
            node.ints("dilations"),
            node.ints("pads"),
        );
        if node.string("auto_pad", "NOTSET") != "NOTSET" {
            return Err(self.refuse(c, "auto_pad (the kernels take explicit pads)"));
        }
        let geom = Geom {
            kh: ws[2] as u32,
            kw: ws[3] as u32,
            sh: at(strides, 0, 1) as u32,
            sw: at(strides, 1, 1) as u32,
            dh: at(dil, 0, 1) as u32,
            dw: at(dil, 1, 1) as u32,
            pt: at(pads, 0, 0) as u32,
            pl: at(pads, 1, 0) as u32,
            ..Geom::between(is, os)
        };
        let group = node.int("group", 1).max(1) as u32;
        let kind = if group == 1 {
            if (geom.kh, geom.kw, geom.sh, geom.sw, geom.pt, geom.pl) == (1, 1, 1, 1, 0, 0) {
                ConvKind::Pointwise
            } else {
                ConvKind::Direct
            }
        } else if group == geom.cin && group == geom.cout {
            ConvKind::Depthwise
        } else {
            return Err(self.refuse(
                c,
                format!("a grouped convolution ({group} groups) that is not depthwise"),
            ));
        };
        let mut ops = Vec::new();
        let mut cur = out_conv;
        let mut f_nodes = rest[1..].iter();
        for f in fused {
            match f {
                Fused::GateIn => {}
                Fused::Bias => ops.push(EpiOp::Bias(
                    ins.get(2)
                        .copied()
                        .flatten()
                        .ok_or_else(|| self.refuse(c, "no bias"))?,
                )),
                other => {
                    let &n = f_nodes
                        .next()
                        .ok_or_else(|| self.refuse(c, "a fused node missing"))?;
                    ops.push(match other {
                        Fused::Activation(_) => self.activation(n)?,
                        Fused::Residual => EpiOp::Residual(self.other(n, cur)?),
                        Fused::Gate => EpiOp::Gate(self.other(n, cur)?),
                        Fused::Scale => EpiOp::Scale(self.other(n, cur)?),
                        Fused::Shift => EpiOp::Shift(self.other(n, cur)?),
                        Fused::GateIn | Fused::Bias => unreachable!("handled above"),
                    });
                    cur = self.output(n);
                }
            }
        }
        let last = *nodes.last().expect("a node");
        let out = self.output(last);
        Ok(Kernel::Conv {
            kind,
            x,
            w,
            gate_in: gate,
            out,
            geom,
            epi: self.epilogue(ops, out, last)?,
        })
    }

    fn single(&self, n: usize, acts: Vec<EpiOp>, last: usize) -> Result<Kernel, ProgramError> {
        let node = &self.model.nodes[n];
        let ins = self.inputs(n);
        let out = self.output(last);
        let own = self.output(n);
        match node.op {
            Op::Transpose => {
                let from = ins[0];
                let input = self.plan.shapes.tensors[from].source == Source::Input;
                if input && node.ints("perm") == Some(&[0, 3, 1, 2][..]) && acts.is_empty() {
                    Ok(Kernel::Alias { from, to: out })
                } else {
                    Err(self.refuse(n, "a Transpose other than the input's NHWC to NCHW"))
                }
            }
            Op::GlobalAveragePool => {
                if !acts.is_empty() {
                    return Err(self.refuse(n, "an activation after the pool"));
                }
                let (_, c, hw) = self.pixels(ins[0], n)?;
                Ok(Kernel::Gap {
                    x: ins[0],
                    out,
                    n: self.shape(ins[0])[0] as u32,
                    hw,
                    c,
                })
            }
            Op::Resize => {
                let node_mode = node.string("mode", "nearest");
                let ctm = node.string("coordinate_transformation_mode", "half_pixel");
                if node_mode != "linear" || ctm != "asymmetric" {
                    return Err(self.refuse(n, format!("Resize {node_mode}/{ctm}")));
                }
                let (i, o) = (self.shape(ins[0]), self.shape(own));
                let geom = Geom::between(i, o);
                if i[..2] != o[..2] {
                    return Err(self.refuse(n, "a Resize of the batch or channels"));
                }
                Ok(Kernel::Resize {
                    x: ins[0],
                    out,
                    geom,
                    epi: self.epilogue(acts, out, last)?,
                })
            }
            Op::Concat => {
                let axis = node.int("axis", 1);
                let rank = self.shape(own).len() as i64;
                if axis != 1 && axis != 1 - rank {
                    return Err(
                        self.refuse(n, format!("a Concat along axis {axis}, not the channels"))
                    );
                }
                let [a, b] = ins[..] else {
                    return Err(
                        self.refuse(n, format!("a Concat of {} tensors, not two", ins.len()))
                    );
                };
                let (pixels, ca, _) = self.pixels(a, n)?;
                let (_, cb, _) = self.pixels(b, n)?;
                Ok(Kernel::Concat {
                    a,
                    b,
                    out,
                    pixels,
                    ca,
                    cb,
                    epi: self.epilogue(acts, out, last)?,
                })
            }
            Op::Add | Op::Mul => {
                let [a, b] = ins[..] else {
                    return Err(self.refuse(n, "a binary op without two operands"));
                };
                let os = self.shape(own);
                let (x, y) = if self.shape(a) == os { (a, b) } else { (b, a) };
                let ys = self.shape(y);
                let first = match (node.op, self.is_weight(y)) {
                    (Op::Add, true) => EpiOp::Shift(y),
                    (Op::Mul, true) => EpiOp::Scale(y),
                    (Op::Add, false) if ys == os => EpiOp::Residual(y),
                    (Op::Mul, false)
                        if ys.len() == 4 && ys[..2] == os[..2] && ys[2..] == [1, 1] =>
                    {
                        EpiOp::Gate(y)
                    }
                    _ => {
                        return Err(
                            self.refuse(n, format!("operands {:?} and {ys:?}", self.shape(x)))
                        )
                    }
                };
                if self.shape(x) != os {
                    return Err(self.refuse(n, "an operand broadcast to a larger shape"));
                }
                let (pixels, c, _) = self.pixels(x, n)?;
                let mut ops = vec![first];
                ops.extend(acts);
                Ok(Kernel::Pointwise {
                    x,
                    out,
                    pixels,
                    c,
                    epi: self.epilogue(ops, out, last)?,
                })
            }
            op if op.is_activation() => {
                let (pixels, c, _) = self.pixels(ins[0], n)?;
                let mut ops = vec![self.activation(n)?];
                ops.extend(acts);
                Ok(Kernel::Pointwise {
                    x: ins[0],
                    out,
                    pixels,
                    c,
                    epi: self.epilogue(ops, out, last)?,
                })
            }
            _ => Err(self.refuse(n, "no kernel for it")),
        }
    }
}
