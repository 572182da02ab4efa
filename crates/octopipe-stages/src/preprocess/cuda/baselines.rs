//! The baseline strategies `octopipe bench preprocess` compares strategy C with (kernels in
//! `baselines.cu`, beside this file: [`BASELINE_KERNELS`]): A, a per-output-pixel table of crop indices; B, a binary search over
//! the crops' pixel prefix sums; D, one launch per crop; E, the crops gathered into a stack padded
//! to the largest crop, then resized. [`BenchEngine`] runs them (and C) on an [`Engine`], using its
//! uploads and its metadata buffer and adding the metadata and buffers only the baselines need.

use std::ops::{Deref, DerefMut};

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use octopipe_cuda::{grow, launch_config, part, CudaError, KernelModule};

use super::launch::uploaded;
use super::meta::{InputKind, Norm};
use super::{Engine, OutType};
use octopipe_core::crops::{BlockMeta, CropMeta};

/// Strategies A, B, D and E: `baselines.cu`.
pub const BASELINE_KERNELS: KernelModule = KernelModule {
    name: "baselines",
    source: include_str!("baselines.cu"),
    functions: &[
        "lut_bilinear_i420_f32",
        "lut_bilinear_nv12_f32",
        "lut_bilinear_packed_f32",
        "bsearch_bilinear_i420_f32",
        "bsearch_bilinear_nv12_f32",
        "bsearch_bilinear_packed_f32",
        "percrop_bilinear_i420_f32",
        "percrop_bilinear_nv12_f32",
        "percrop_bilinear_packed_f32",
        "pad_gather_i420_u8",
        "pad_gather_nv12_u8",
        "pad_gather_packed_u8",
        "pad_resize_rgb_f32",
    ],
};

/// Threads per block of the one-thread-per-pixel kernels (A, B, D, E).
pub const FLAT_THREADS: u32 = 256;

/// How a batch's crops are mapped to GPU threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// A: a per-output-pixel table of crop indices (O(pixels) metadata).
    Lut,
    /// B: each thread binary-searches the crops' pixel prefix sums.
    Bsearch,
    /// C: Octopus block metadata, O(blocks), one launch (the production path, [`Engine::launch`]).
    Octopus,
    /// D: one launch per crop.
    PerCrop,
    /// E: gather crops into a stack padded to the largest crop, then resize the stack.
    Pad,
}

impl Strategy {
    /// All strategies, A to E.
    pub const ALL: [Strategy; 5] = [
        Strategy::Lut,
        Strategy::Bsearch,
        Strategy::Octopus,
        Strategy::PerCrop,
        Strategy::Pad,
    ];

    /// Row label in reports.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Lut => "A lut",
            Strategy::Bsearch => "B bsearch",
            Strategy::Octopus => "C octopus",
            Strategy::PerCrop => "D per-crop",
            Strategy::Pad => "E pad",
        }
    }
}

/// An [`Engine`] that also runs the baseline strategies. It dereferences to the engine, so the
/// uploads, downloads and strategy C launchers are the production ones.
pub struct BenchEngine {
    engine: Engine,
    /// Byte ranges, in the engine's device metadata, of the crops' pixel prefix sums (A and B)
    /// and of the per-pixel crop table (A) of the last [`Self::upload_meta_for`].
    first: (usize, usize),
    table: (usize, usize),
    /// E's padded RGB stack.
    pad: Option<CudaSlice<u8>>,
}

impl Deref for BenchEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl DerefMut for BenchEngine {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

impl BenchEngine {
    /// Open GPU `ordinal` (see [`Engine::new`]).
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let mut engine = Engine::new(ordinal)?;
        engine.load(&BASELINE_KERNELS)?;
        Ok(BenchEngine {
            engine,
            first: (0, 0),
            table: (0, 0),
            pad: None,
        })
    }

    /// Upload the metadata `strategy` reads: for C, as [`Engine::upload_meta`]; otherwise the
    /// frame descriptors and crops, plus for A and B the crops' output-pixel prefix sums and for A
    /// the per-pixel crop table, in one copy. Returns the metadata bytes.
    pub fn upload_meta_for(
        &mut self,
        strategy: Strategy,
        crops: &[CropMeta],
        blocks: &[BlockMeta],
    ) -> Result<usize, CudaError> {
        self.first = (0, 0);
        self.table = (0, 0);
        if strategy == Strategy::Octopus {
            return self.engine.upload_meta(crops, blocks);
        }
        let l = self.engine.begin_meta(crops)?;
        if matches!(strategy, Strategy::Lut | Strategy::Bsearch) {
            let buf = &mut self.engine.host_meta;
            // Prefix sums of output pixels (ncrops + 1 entries), then for A the per-pixel table.
            let start = buf.len().next_multiple_of(16);
            buf.resize(start, 0);
            let mut acc = 0u32;
            buf.extend_from_slice(&acc.to_ne_bytes());
            for c in crops {
                acc += c.out_pixels();
                buf.extend_from_slice(&acc.to_ne_bytes());
            }
            self.first = (start, buf.len());
            if strategy == Strategy::Lut {
                let start = buf.len().next_multiple_of(16);
                buf.resize(start, 0);
                buf.reserve(acc as usize * 4);
                for (i, c) in crops.iter().enumerate() {
                    let b = (i as u32).to_ne_bytes();
                    for _ in 0..c.out_pixels() {
                        buf.extend_from_slice(&b);
                    }
                }
                self.table = (start, buf.len());
            }
        }
        self.engine.finish_meta(l)
    }

    /// Launch `strategy` over the crops of the last [`Self::upload_meta_for`]: `out_len` output
    /// elements, `tile_pixels` as used to build the blocks (C), threads per block `threads` (C;
    /// the others use [`FLAT_THREADS`]). Only C writes f16. Asynchronous on the engine's stream.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_strategy(
        &mut self,
        strategy: Strategy,
        ty: OutType,
        norm: Norm,
        crops: &[CropMeta],
        nblocks: usize,
        tile_pixels: u32,
        threads: u32,
        out_len: usize,
    ) -> Result<(), CudaError> {
        if strategy == Strategy::Octopus {
            return self
                .engine
                .launch(ty, norm, crops, nblocks, tile_pixels, threads, out_len);
        }
        if ty == OutType::F16 {
            return Err(CudaError::Invalid(
                "f16 output is implemented for strategy C only".into(),
            ));
        }
        let Some(kind) = self.engine.prepare_launch(crops, out_len, ty, None)? else {
            return Ok(());
        };
        match strategy {
            Strategy::Lut | Strategy::Bsearch => self.launch_flat(strategy, kind, norm, crops),
            Strategy::PerCrop => {
                let k = match kind {
                    InputKind::I420 => "percrop_bilinear_i420_f32",
                    InputKind::Nv12 => "percrop_bilinear_nv12_f32",
                    InputKind::Packed => "percrop_bilinear_packed_f32",
                };
                let f = self.engine.func(&BASELINE_KERNELS, k)?;
                for (i, c) in crops.iter().enumerate() {
                    self.launch_percrop(&f, i as u32, c.out_pixels(), norm)?;
                }
                Ok(())
            }
            Strategy::Pad => self.launch_pad(kind, norm, crops),
            Strategy::Octopus => unreachable!("launched above"),
        }
    }

    /// A or B: one thread per output pixel of the batch, which finds its crop in the table (A) or
    /// by binary search over the prefix sums (B).
    fn launch_flat(
        &mut self,
        strategy: Strategy,
        kind: InputKind,
        norm: Norm,
        crops: &[CropMeta],
    ) -> Result<(), CudaError> {
        let total: u32 = crops.iter().map(|c| c.out_pixels()).sum();
        let ncrops = crops.len() as u32;
        let k = match (strategy, kind) {
            (Strategy::Lut, InputKind::I420) => "lut_bilinear_i420_f32",
            (Strategy::Lut, InputKind::Nv12) => "lut_bilinear_nv12_f32",
            (Strategy::Lut, InputKind::Packed) => "lut_bilinear_packed_f32",
            (_, InputKind::I420) => "bsearch_bilinear_i420_f32",
            (_, InputKind::Nv12) => "bsearch_bilinear_nv12_f32",
            (_, InputKind::Packed) => "bsearch_bilinear_packed_f32",
        };
        let e = &mut self.engine;
        let f = e.func(&BASELINE_KERNELS, k)?;
        let l = e.layout;
        let (arena, meta) = uploaded(&e.arena, &e.meta);
        let (fr, cr, first, table) = (
            part(meta, l.frames),
            part(meta, l.crops),
            part(meta, self.first),
            part(meta, self.table),
        );
        let cfg = launch_config((total.div_ceil(FLAT_THREADS), 1), FLAT_THREADS);
        let out = e.out32.as_mut().expect("reserved");
        let mut b = e.gpu.stream().launch_builder(&f);
        b.arg(arena).arg(&fr).arg(&cr);
        if strategy == Strategy::Lut {
            b.arg(&table).arg(&first).arg(&total);
        } else {
            b.arg(&first).arg(&ncrops);
        }
        b.arg(&norm).arg(out);
        // SAFETY: argument types match; the table/prefix sums cover `total` pixels of checked crops.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// D: the launch for crop `ci` alone.
    fn launch_percrop(
        &mut self,
        f: &CudaFunction,
        ci: u32,
        pixels: u32,
        norm: Norm,
    ) -> Result<(), CudaError> {
        let e = &mut self.engine;
        let l = e.layout;
        let (arena, meta) = uploaded(&e.arena, &e.meta);
        let (fr, cr) = (part(meta, l.frames), part(meta, l.crops));
        let out = e.out32.as_mut().expect("reserved");
        let cfg = launch_config((pixels.div_ceil(FLAT_THREADS), 1), FLAT_THREADS);
        let mut b = e.gpu.stream().launch_builder(f);
        b.arg(arena).arg(&fr).arg(&cr).arg(&ci).arg(&norm).arg(out);
        // SAFETY: argument types match `percrop_bilinear_*`; crop `ci` was bounds checked by
        // `launch_strategy`.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// E: gather every crop as RGB bytes into a stack of slots the size of the largest crop, then
    /// resize every slot.
    fn launch_pad(
        &mut self,
        kind: InputKind,
        norm: Norm,
        crops: &[CropMeta],
    ) -> Result<(), CudaError> {
        let ncrops = crops.len() as u32;
        let (pw, ph) = crops
            .iter()
            .fold((1, 1), |(w, h), c| (c.w.max(w), c.h.max(h)));
        let maxpix = crops.iter().map(|c| c.out_pixels()).max().unwrap_or(1);
        let need = crops.len() * pw as usize * ph as usize * 3;
        let k = match kind {
            InputKind::I420 => "pad_gather_i420_u8",
            InputKind::Nv12 => "pad_gather_nv12_u8",
            InputKind::Packed => "pad_gather_packed_u8",
        };
        let e = &mut self.engine;
        grow(e.gpu.stream(), &mut self.pad, need)?;
        let gather = e.func(&BASELINE_KERNELS, k)?;
        let resize = e.func(&BASELINE_KERNELS, "pad_resize_rgb_f32")?;
        let l = e.layout;
        let (arena, meta) = uploaded(&e.arena, &e.meta);
        let (fr, cr) = (part(meta, l.frames), part(meta, l.crops));
        let pad = self.pad.as_mut().expect("grown");
        let cfg = launch_config(((pw * ph).div_ceil(FLAT_THREADS), ncrops), FLAT_THREADS);
        let mut b = e.gpu.stream().launch_builder(&gather);
        b.arg(arena)
            .arg(&fr)
            .arg(&cr)
            .arg(&pw)
            .arg(&ph)
            .arg(&mut *pad);
        // SAFETY: argument types match `pad_gather_*`; the stack holds ncrops slots of pw x ph x 3 bytes.
        unsafe { b.launch(cfg) }?;
        let out = e.out32.as_mut().expect("reserved");
        let cfg = launch_config((maxpix.div_ceil(FLAT_THREADS), ncrops), FLAT_THREADS);
        let mut b = e.gpu.stream().launch_builder(&resize);
        b.arg(&*pad).arg(&cr).arg(&pw).arg(&ph).arg(&norm).arg(out);
        // SAFETY: argument types match `pad_resize_rgb_f32`; reads stay inside each crop's slot.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}
