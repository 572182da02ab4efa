//! The program's kernels made ready to launch: the weights uploaded in the layouts the kernels
//! read, each kernel's grid and arguments with the device addresses of its buffers.

use cudarc::driver::{DevicePtr, LaunchConfig};
use octopipe_cuda::launch_config;

use super::engine::Engine;
use super::types::{
    Args, Buffer, EngineError, EpiC, EpiOpC, Kernels, Launch, Uploader, ENGINE_KERNELS,
};
use crate::program::{ConvKind, EpiOp, Epilogue, Geom, Kernel};
use crate::shape::TensorId;

impl Engine {
    /// The GPU's compute capability major number (`compute_90`: 9).
    fn gpu_major(&self) -> u32 {
        let digits = self.gpu.arch().trim_start_matches("compute_");
        digits[..digits.len().saturating_sub(1)]
            .parse()
            .unwrap_or(0)
    }

    pub(super) fn ptr(&self, t: TensorId) -> u64 {
        let t = self.alias.get(&t).copied().unwrap_or(t);
        match self.buffers.get(&t) {
            Some(Buffer::Half(b)) => b.device_ptr(&self.stream).0,
            Some(Buffer::Float(b)) => b.device_ptr(&self.stream).0,
            None => 0,
        }
    }

    fn upload_half(&mut self, v: Vec<u16>) -> Result<u64, EngineError> {
        let b = self.stream.clone_htod(&v)?;
        let ptr = b.device_ptr(&self.stream).0;
        self.consts.push(Buffer::Half(b));
        Ok(ptr)
    }

    fn upload_float(&mut self, v: Vec<f32>) -> Result<u64, EngineError> {
        let b = self.stream.clone_htod(&v)?;
        let ptr = b.device_ptr(&self.stream).0;
        self.consts.push(Buffer::Float(b));
        Ok(ptr)
    }

    fn epi(&mut self, e: &Epilogue, out: TensorId, up: &Uploader) -> Result<EpiC, EngineError> {
        let shape = &up.plan.shapes.tensors[out].shape;
        let channels = shape.get(1).copied().unwrap_or(1) as u32;
        let hw = shape.iter().skip(2).product::<u64>().max(1) as u32;
        let mut c = EpiC {
            n: e.ops.len() as u32,
            nchw: e.nchw as u32,
            hw,
            channels,
            ..EpiC::default()
        };
        for (slot, op) in e.ops.iter().enumerate() {
            let mut o = EpiOpC::default();
            match *op {
                EpiOp::Bias(w) | EpiOp::Scale(w) | EpiOp::Shift(w) => {
                    let v = up.values(w)?;
                    if v.len() != 1 && v.len() != channels as usize {
                        return Err(up.weight_error(
                            w,
                            format!("{} values for {channels} channels", v.len()),
                        ));
                    }
                    o.kind = match op {
                        EpiOp::Bias(_) => 1,
                        EpiOp::Scale(_) => 9,
                        _ => 10,
                    };
                    o.count = v.len() as u32;
                    o.ptr = self.upload_float(v)?;
                }
                EpiOp::Relu => o.kind = 2,
                EpiOp::HardSwish => o.kind = 3,
                EpiOp::HardSigmoid { alpha, beta } => (o.kind, o.a, o.b) = (4, alpha, beta),
                EpiOp::Sigmoid => o.kind = 5,
                EpiOp::Clip { lo, hi } => (o.kind, o.a, o.b) = (6, lo, hi),
                EpiOp::Residual(t) => (o.kind, o.ptr) = (7, self.ptr(t)),
                EpiOp::Gate(t) => (o.kind, o.ptr) = (8, self.ptr(t)),
            }
            c.op[slot] = o;
        }
        Ok(c)
    }

    pub(super) fn prepare(
        &mut self,
        k: &Kernel,
        up: &Uploader,
    ) -> Result<Option<Launch>, EngineError> {
        let sms = self.gpu.multiprocessors();
        let grid_stride = |total: u64| {
            launch_config(
                (total.div_ceil(256).clamp(1, sms as u64 * 32) as u32, 1),
                256,
            )
        };
        let func = |e: &mut Engine, name: &str| e.gpu.func(&ENGINE_KERNELS, name);
        Ok(Some(match k {
            Kernel::Alias { .. } => return Ok(None),
            Kernel::Conv {
                kind,
                x,
                w,
                gate_in,
                out,
                geom,
                epi,
            } => {
                let epi = self.epi(epi, *out, up)?;
                let (x, o) = (self.ptr(*x), self.ptr(*out));
                let gin = gate_in.map(|g| self.ptr(g)).unwrap_or(0);
                let g = *geom;
                let wv = up.values(*w)?;
                let kk = (g.kh * g.kw) as usize;
                let out_values = g.n as f64 * g.oh as f64 * g.ow as f64 * g.cout as f64;
                let flops = 2.0
                    * out_values
                    * kk as f64
                    * match kind {
                        ConvKind::Depthwise => 1.0,
                        _ => g.cin as f64,
                    };
                let bytes =
                    2.0 * (g.n as f64 * g.ih as f64 * g.iw as f64 * g.cin as f64 + out_values);
                let tensor_cores = self.kernels == Kernels::Tuned && self.gpu_major() >= 8;
                match kind {
                    ConvKind::Pointwise if tensor_cores => {
                        let (cin, cout) = (g.cin as usize, g.cout as usize);
                        let cinp = cin.div_ceil(8) * 8;
                        let mut t = vec![0u16; cout * cinp];
                        for co in 0..cout {
                            for ci in 0..cin {
                                t[co * cinp + ci] =
                                    half::f16::from_f32(wv[co * cin + ci]).to_bits();
                            }
                        }
                        let wp = self.upload_half(t)?;
                        let pixels = g.n as u64 * g.oh as u64 * g.ow as u64;
                        let bn = tile_n(g.cout);
                        let config = LaunchConfig {
                            grid_dim: (
                                g.cout.div_ceil(bn),
                                pixels.div_ceil(128).min(65535) as u32,
                                1,
                            ),
                            block_dim: (128, 1, 1),
                            shared_mem_bytes: 0,
                        };
                        let name = format!("engine_conv1x1_tc{bn}");
                        Launch {
                            func: func(self, &name)?,
                            config,
                            args: Args::Conv1x1Tc {
                                x,
                                w: wp,
                                gin,
                                out: o,
                                pixels,
                                cin: g.cin,
                                cinp: cinp as u32,
                                cout: g.cout,
                                epi,
                            },
                            label: format!("conv1x1_tc{bn} {}", shape_label(&g)),
                            flops,
                            bytes,
                        }
                    }
                    ConvKind::Pointwise => {
                        let (cin, cout) = (g.cin as usize, g.cout as usize);
                        let mut t = vec![0u16; cin * cout];
                        for co in 0..cout {
                            for ci in 0..cin {
                                t[ci * cout + co] =
                                    half::f16::from_f32(wv[co * cin + ci]).to_bits();
                            }
                        }
                        let wp = self.upload_half(t)?;
                        let pixels = g.n as u64 * g.oh as u64 * g.ow as u64;
                        let config = LaunchConfig {
                            grid_dim: (pixels.div_ceil(64) as u32, g.cout.div_ceil(64), 1),
                            block_dim: (256, 1, 1),
                            shared_mem_bytes: 0,
                        };
                        Launch {
                            func: func(self, "engine_conv1x1")?,
                            config,
                            args: Args::Conv1x1 {
                                x,
                                w: wp,
                                gin,
                                out: o,
                                pixels,
                                cin: g.cin,
                                cout: g.cout,
                                epi,
                            },
                            label: format!("conv1x1 {}", shape_label(&g)),
                            flops,
                            bytes,
                        }
                    }
                    ConvKind::Depthwise => {
                        let c = g.cout as usize;
                        let mut t = vec![0f32; kk * c];
                        for ch in 0..c {
                            for i in 0..kk {
                                t[i * c + ch] = wv[ch * kk + i];
                            }
                        }
                        let wp = self.upload_float(t)?;
                        let total = g.n as u64 * g.oh as u64 * g.ow as u64 * g.cout as u64;
                        let tuned = self.kernels == Kernels::Tuned;
                        // A 3 x 3 or 5 x 5 filter at stride 1 or 2: 4 outputs of a row and 8
                        // channels a thread (the kernel's index in 32 bits, 8 times over).
                        let tile_threads = g.n as u64
                            * g.oh as u64
                            * g.ow.div_ceil(4) as u64
                            * (g.cout / 8) as u64;
                        let tiled = tuned
                            && g.cout % 8 == 0
                            && g.kh == g.kw
                            && matches!(g.kh, 3 | 5)
                            && g.sh == g.sw
                            && matches!(g.sh, 1 | 2)
                            && g.dh == 1
                            && g.dw == 1
                            && tile_threads * 8 < 1 << 32;
                        let (name, threads) = if tiled {
                            let name = format!("engine_conv_dw_k{}s{}", g.kh, g.sh);
                            (name, tile_threads)
                        } else if tuned && g.cout % 8 == 0 {
                            ("engine_conv_dw8".to_string(), total / 8)
                        } else if tuned && g.cout % 2 == 0 {
                            ("engine_conv_dw2".to_string(), total / 2)
                        } else {
                            ("engine_conv_dw".to_string(), total)
                        };
                        Launch {
                            func: func(self, &name)?,
                            config: grid_stride(threads),
                            args: Args::Conv {
                                x,
                                w: wp,
                                gin,
                                out: o,
                                geom: g,
                                epi,
                            },
                            label: format!("{} {}", &name[7..], shape_label(&g)),
                            flops,
                            bytes,
                        }
                    }
                    ConvKind::Direct => {
                        let (cin, cout) = (g.cin as usize, g.cout as usize);
                        let mut t = vec![0f32; kk * cin * cout];
                        for co in 0..cout {
                            for ci in 0..cin {
                                for i in 0..kk {
                                    t[(i * cin + ci) * cout + co] = wv[(co * cin + ci) * kk + i];
                                }
                            }
                        }
                        let wp = self.upload_float(t)?;
                        let total = g.n as u64 * g.oh as u64 * g.ow as u64 * g.cout as u64;
                        let tuned = self.kernels == Kernels::Tuned;
                        let (name, per_thread) = match g.cout {
                            c if tuned && c % 8 == 0 => ("engine_conv_direct8", 8),
                            _ => ("engine_conv_direct", 1),
                        };
                        Launch {
                            func: func(self, name)?,
                            config: grid_stride(total / per_thread),
                            args: Args::Conv {
                                x,
                                w: wp,
                                gin,
                                out: o,
                                geom: g,
                                epi,
                            },
                            label: format!("{} {}", &name[7..], shape_label(&g)),
                            flops,
                            bytes,
                        }
                    }
                }
            }
            Kernel::Gap { x, out, n, hw, c } => Launch {
                func: func(self, "engine_gap")?,
                config: LaunchConfig {
                    grid_dim: (*n, c.div_ceil(32), 1),
                    block_dim: (32, 8, 1),
                    shared_mem_bytes: 0,
                },
                args: Args::Gap {
                    x: self.ptr(*x),
                    out: self.ptr(*out),
                    hw: *hw,
                    c: *c,
                },
                label: format!("gap {n}x{hw}x{c}"),
                flops: 0.0,
                bytes: 2.0 * (*n as f64) * (*hw as f64 + 1.0) * *c as f64,
            },
            Kernel::Resize { x, out, geom, epi } => {
                let g = *geom;
                let epi = self.epi(epi, *out, up)?;
                let total = g.n as u64 * g.oh as u64 * g.ow as u64 * g.cin as u64;
                let wide = self.kernels == Kernels::Tuned && g.cin % 8 == 0 && total < 1 << 32;
                let (name, per_thread) = if wide {
                    ("engine_resize_linear8", 8)
                } else {
                    ("engine_resize_linear", 1)
                };
                Launch {
                    func: func(self, name)?,
                    config: grid_stride(total / per_thread),
                    args: Args::Resize {
                        x: self.ptr(*x),
                        out: self.ptr(*out),
                        geom: g,
                        sy: g.oh as f32 / g.ih as f32,
                        sx: g.ow as f32 / g.iw as f32,
                        epi,
                    },
                    label: format!(
                        "{} {}x{}x{}>{}x{}",
                        &name[7..],
                        g.ih,
                        g.iw,
                        g.cin,
                        g.oh,
                        g.ow
                    ),
                    flops: 0.0,
                    bytes: 2.0 * g.n as f64 * g.cin as f64 * (g.ih * g.iw + g.oh * g.ow) as f64,
                }
            }
            Kernel::Concat {
                a,
                b,
                out,
                pixels,
                ca,
                cb,
                epi,
            } => {
                let epi = self.epi(epi, *out, up)?;
                let wide = self.kernels == Kernels::Tuned && ca % 8 == 0 && cb % 8 == 0;
                let (name, per_thread) = if wide {
                    ("engine_concat8", 8)
                } else {
                    ("engine_concat2", 1)
                };
                Launch {
                    func: func(self, name)?,
                    config: grid_stride(pixels * (ca + cb) as u64 / per_thread),
                    args: Args::Concat {
                        a: self.ptr(*a),
                        b: self.ptr(*b),
                        out: self.ptr(*out),
                        pixels: *pixels,
                        ca: *ca,
                        cb: *cb,
                        epi,
                    },
                    label: format!("{} {pixels}x({ca}+{cb})", &name[7..]),
                    flops: 0.0,
                    bytes: 4.0 * *pixels as f64 * (ca + cb) as f64,
                }
            }
            Kernel::Pointwise {
                x,
                out,
                pixels,
                c,
                epi,
            } => {
                let epi = self.epi(epi, *out, up)?;
                let wide = self.kernels == Kernels::Tuned && c % 8 == 0;
                let (name, per_thread) = if wide {
                    ("engine_pointwise8", 8)
                } else {
                    ("engine_pointwise", 1)
                };
                Launch {
                    func: func(self, name)?,
                    config: grid_stride(pixels * *c as u64 / per_thread),
                    args: Args::Pointwise {
                        x: self.ptr(*x),
                        out: self.ptr(*out),
                        pixels: *pixels,
                        c: *c,
                        epi,
                    },
                    label: format!("{} {pixels}x{c}", &name[7..]),
                    flops: 0.0,
                    bytes: 4.0 * *pixels as f64 * *c as f64,
                }
            }
        }))
    }
}

/// The output channels a tensor-core block computes for `cout` channels: the fewest tiles of at
/// most 64, each a multiple of 8 (72 channels: two of 40; 4: one of 8).
fn tile_n(cout: u32) -> u32 {
    let tiles = cout.div_ceil(64).max(1);
    (cout.div_ceil(tiles).div_ceil(8) * 8).clamp(8, 64)
}

/// `128x128x24>72 k1s1`: a convolution's input, output channels, kernel and stride.
fn shape_label(g: &Geom) -> String {
    format!(
        "{}x{}x{}>{}x{}x{} k{}s{}",
        g.ih, g.iw, g.cin, g.oh, g.ow, g.cout, g.kh, g.sh
    )
}
