//! The graph run node by node on the CPU in f32, NCHW, with the plainest loops: the reference the
//! GPU engine's fused kernels are checked against (itself checked against ONNX Runtime's CPU
//! provider in the tests). Slow on purpose (no tiling, no threads): for a few images.

use crate::model::{Model, Op};
use crate::shape::{self, ShapeError, Source, TensorId};

/// Why the reference could not run a model.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The shapes do not infer.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The input is not the batch's size.
    #[error("the input holds {got} values; batch {batch} takes {expected}")]
    Input {
        /// Values given.
        got: usize,
        /// Values expected.
        expected: usize,
        /// The batch.
        batch: u64,
    },
    /// A node the reference does not run.
    #[error("node {node:?} ({op}): {reason}")]
    Node {
        /// The node.
        node: String,
        /// Its op.
        op: &'static str,
        /// Why.
        reason: String,
    },
}

/// Runs `model` on `input` (the graph input's values, `batch` images in its declared layout) and
/// returns each graph output's values in its declared layout.
pub fn run(model: &Model, input: &[f32], batch: u64) -> Result<Vec<Vec<f32>>, ReferenceError> {
    let shapes = shape::infer(model, batch)?;
    let mut values: Vec<Option<Vec<f32>>> = vec![None; shapes.tensors.len()];
    for (t, info) in shapes.tensors.iter().enumerate() {
        match info.source {
            Source::Weight => values[t] = model.weights.get(&info.name).map(|w| w.data.to_f32()),
            Source::Input => {
                let expected = info.shape.iter().product::<u64>() as usize;
                if input.len() != expected {
                    return Err(ReferenceError::Input {
                        got: input.len(),
                        expected,
                        batch,
                    });
                }
                values[t] = Some(input.to_vec());
            }
            Source::Node(_) => {}
        }
    }
    for (n, node) in model.nodes.iter().enumerate() {
        let io = &shapes.nodes[n];
        let fail = |reason: String| ReferenceError::Node {
            node: node.name.clone(),
            op: node.op.name(),
            reason,
        };
        let get = |slot: usize| -> Option<(&[f32], &[u64])> {
            let t: TensorId = io.inputs.get(slot).copied().flatten()?;
            Some((values[t].as_deref()?, &shapes.tensors[t].shape[..]))
        };
        let (x, xs) = get(0).ok_or_else(|| fail("its input is not computed".into()))?;
        let out_shape = shapes.tensors[io.outputs[0]].shape.clone();
        let size: usize = out_shape.iter().product::<u64>() as usize;
        let act = |f: &dyn Fn(f32) -> f32| x.iter().map(|&v| f(v)).collect::<Vec<f32>>();
        let y: Vec<f32> = match node.op {
            Op::Relu => act(&|v| v.max(0.0)),
            Op::HardSwish => act(&|v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
            Op::HardSigmoid => {
                let (a, b) = (node.float("alpha", 0.2), node.float("beta", 0.5));
                act(&|v| (a * v + b).clamp(0.0, 1.0))
            }
            Op::Sigmoid => act(&|v| 1.0 / (1.0 + (-v).exp())),
            Op::Clip => {
                let lo = get(1)
                    .map(|(v, _)| v[0])
                    .unwrap_or(node.float("min", f32::MIN));
                let hi = get(2)
                    .map(|(v, _)| v[0])
                    .unwrap_or(node.float("max", f32::MAX));
                act(&|v| v.clamp(lo, hi))
            }
            Op::Add | Op::Mul => {
                let (b, bs) = get(1).ok_or_else(|| fail("no second operand".into()))?;
                let add = node.op == Op::Add;
                let ia = broadcast_index(xs, &out_shape);
                let ib = broadcast_index(bs, &out_shape);
                (0..size)
                    .map(|i| {
                        let (p, q) = (x[ia(i)], b[ib(i)]);
                        if add {
                            p + q
                        } else {
                            p * q
                        }
                    })
                    .collect()
            }
            Op::GlobalAveragePool => {
                let (nc, hw) = (
                    (xs[0] * xs[1]) as usize,
                    xs[2..].iter().product::<u64>() as usize,
                );
                (0..nc)
                    .map(|i| x[i * hw..(i + 1) * hw].iter().sum::<f32>() / hw as f32)
                    .collect()
            }
            Op::Transpose => {
                let perm: Vec<usize> = node
                    .ints("perm")
                    .map(|p| p.iter().map(|&a| a as usize).collect())
                    .unwrap_or_else(|| (0..xs.len()).rev().collect());
                let strides = strides(xs);
                let mut y = vec![0.0; size];
                for (i, v) in y.iter_mut().enumerate() {
                    let idx = unravel(i, &out_shape);
                    let src: usize = (0..idx.len()).map(|k| idx[k] * strides[perm[k]]).sum();
                    *v = x[src];
                }
                y
            }
            Op::Concat => {
                let rank = out_shape.len() as i64;
                let axis = node.int("axis", 1);
                let axis = if axis < 0 { axis + rank } else { axis } as usize;
                let outer: usize = out_shape[..axis].iter().product::<u64>() as usize;
                let mut y = Vec::with_capacity(size);
                for o in 0..outer {
                    for slot in 0..io.inputs.len() {
                        let (v, s) = get(slot).ok_or_else(|| fail("an input missing".into()))?;
                        let chunk: usize = s[axis..].iter().product::<u64>() as usize;
                        y.extend_from_slice(&v[o * chunk..(o + 1) * chunk]);
                    }
                }
                y
            }
            Op::Resize => {
                if node.string("mode", "nearest") != "linear"
                    || node.string("coordinate_transformation_mode", "half_pixel") != "asymmetric"
                {
                    return Err(fail("only linear, asymmetric resizes run".into()));
                }
                resize_linear_asymmetric(x, xs, &out_shape)
            }
            Op::Conv => {
                let (w, ws) = get(1).ok_or_else(|| fail("no filter".into()))?;
                let bias = get(2).map(|(v, _)| v);
                conv(node, x, xs, w, ws, bias, &out_shape)
            }
            Op::ConvTranspose => return Err(fail("the reference does not run it".into())),
        };
        values[io.outputs[0]] = Some(y);
    }
    Ok(shapes
        .outputs
        .iter()
        .map(|&t| values[t].clone().unwrap_or_default())
        .collect())
}

fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1] as usize;
    }
    s
}

fn unravel(mut i: usize, shape: &[u64]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = i % shape[k] as usize;
        i /= shape[k] as usize;
    }
    idx
}

/// The index into a tensor of shape `from` (broadcast numpy-style) of output element `i`.
fn broadcast_index<'a>(from: &'a [u64], out: &'a [u64]) -> impl Fn(usize) -> usize + 'a {
    let st = strides(from);
    move |i| {
        let idx = unravel(i, out);
        let lead = out.len() - from.len();
        (0..from.len())
            .map(|k| {
                if from[k] == 1 {
                    0
                } else {
                    idx[lead + k] * st[k]
                }
            })
            .sum()
    }
}

fn resize_linear_asymmetric(x: &[f32], xs: &[u64], out: &[u64]) -> Vec<f32> {
    let (nc, ih, iw) = ((xs[0] * xs[1]) as usize, xs[2] as usize, xs[3] as usize);
    let (oh, ow) = (out[2] as usize, out[3] as usize);
    let (sy, sx) = (oh as f32 / ih as f32, ow as f32 / iw as f32);
    let mut y = vec![0.0; nc * oh * ow];
    for p in 0..nc {
        let plane = &x[p * ih * iw..(p + 1) * ih * iw];
        for oy in 0..oh {
            let fy = (oy as f32 / sy).min((ih - 1) as f32);
            let (y0, wy) = (fy as usize, fy - fy.floor());
            let y1 = (y0 + 1).min(ih - 1);
            for ox in 0..ow {
                let fx = (ox as f32 / sx).min((iw - 1) as f32);
                let (x0, wx) = (fx as usize, fx - fx.floor());
                let x1 = (x0 + 1).min(iw - 1);
                let at = |r: usize, c: usize| plane[r * iw + c];
                let top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * wx;
                let bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * wx;
                y[(p * oh + oy) * ow + ox] = top + (bottom - top) * wy;
            }
        }
    }
    y
}

fn conv(
    node: &crate::model::Node,
    x: &[f32],
    xs: &[u64],
    w: &[f32],
    ws: &[u64],
    bias: Option<&[f32]>,
    out: &[u64],
) -> Vec<f32> {
    let at = |name: &str, i: usize, d: i64| {
        node.ints(name).and_then(|v| v.get(i).copied()).unwrap_or(d) as isize
    };
    let (n, cin, ih, iw) = (
        xs[0] as usize,
        xs[1] as usize,
        xs[2] as isize,
        xs[3] as isize,
    );
    let (cout, oh, ow) = (out[1] as usize, out[2] as usize, out[3] as usize);
    let (kh, kw) = (ws[2] as usize, ws[3] as usize);
    let (sh, sw, dh, dw) = (
        at("strides", 0, 1),
        at("strides", 1, 1),
        at("dilations", 0, 1),
        at("dilations", 1, 1),
    );
    let (pt, pl) = (at("pads", 0, 0), at("pads", 1, 0));
    let group = node.int("group", 1).max(1) as usize;
    let (cin_g, cout_g) = (cin / group, cout / group);
    let mut y = vec![0.0; n * cout * oh * ow];
    for b in 0..n {
        for co in 0..cout {
            let g = co / cout_g;
            let bias = bias.map(|v| v[co]).unwrap_or(0.0);
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias;
                    for ci in 0..cin_g {
                        let c = g * cin_g + ci;
                        let plane = &x[(b * cin + c) * (ih * iw) as usize..];
                        let filt = &w[(co * cin_g + ci) * kh * kw..];
                        for ky in 0..kh {
                            let iy = oy as isize * sh + ky as isize * dh - pt;
                            if iy < 0 || iy >= ih {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = ox as isize * sw + kx as isize * dw - pl;
                                if ix < 0 || ix >= iw {
                                    continue;
                                }
                                acc += plane[(iy * iw + ix) as usize] * filt[ky * kw + kx];
                            }
                        }
                    }
                    y[((b * cout + co) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    y
}
