//! The production launchers: strategy C over the block metadata of the last upload, either the
//! bilinear fast path (`octopus.cu`, beside this file) or the area / letterbox kernels
//! (`resample.cu`), each declared here as a kernel module ([`OCTOPUS_KERNELS`],
//! [`RESAMPLE_KERNELS`]). The launch configuration and metadata helpers every launcher shares
//! are octopipe-cuda's (`octopipe_cuda::launch`).

use cudarc::driver::{CudaSlice, PushKernelArg};
use octopipe_cuda::{launch_config, part, KernelModule};

use super::meta::{InputKind, Norm};
use super::output::OutType;
use super::CudaError;
use super::Engine;
use crate::preprocess::Interpolation;
use octopipe_core::crops::CropMeta;

/// Strategy C (block metadata), bilinear, f32 and f16: `octopus.cu`.
pub const OCTOPUS_KERNELS: KernelModule = KernelModule {
    name: "octopus",
    source: include_str!("octopus.cu"),
    functions: &[
        "octopus_bilinear_i420_f32",
        "octopus_bilinear_nv12_f32",
        "octopus_bilinear_packed_f32",
        "octopus_bilinear_i420_f16",
        "octopus_bilinear_nv12_f16",
        "octopus_bilinear_packed_f16",
    ],
};

/// Strategy C for area (antialiased) resizing and letterbox: `resample.cu`.
pub const RESAMPLE_KERNELS: KernelModule = KernelModule {
    name: "resample",
    source: include_str!("resample.cu"),
    functions: &[
        "resample_bilinear_i420_f32",
        "resample_bilinear_i420_f16",
        "resample_bilinear_nv12_f32",
        "resample_bilinear_nv12_f16",
        "resample_bilinear_packed_f32",
        "resample_bilinear_packed_f16",
        "resample_area_i420_f32",
        "resample_area_i420_f16",
        "resample_area_nv12_f32",
        "resample_area_nv12_f16",
        "resample_area_packed_f32",
        "resample_area_packed_f16",
    ],
};

/// Most threads per block of the strategy C kernels (`OCTOPUS_MAX_THREADS` in `octopus.cu`).
pub const OCTOPUS_MAX_THREADS: u32 = 256;

/// Threads per block for strategy C: one thread per four output pixels of a block, 32 to
/// [`OCTOPUS_MAX_THREADS`] (threads loop over the rest).
pub fn octopus_threads(tile_pixels: u32, tiles_per_block: u32) -> u32 {
    (tile_pixels * tiles_per_block / 4)
        .next_multiple_of(32)
        .clamp(32, OCTOPUS_MAX_THREADS)
}

/// The frame arena and the packed metadata of the last upload (both made by the uploads every
/// launcher checks for first).
pub(crate) fn uploaded<'a>(
    arena: &'a Option<CudaSlice<u8>>,
    meta: &'a Option<CudaSlice<u8>>,
) -> (&'a CudaSlice<u8>, &'a CudaSlice<u8>) {
    (
        arena.as_ref().expect("uploaded"),
        meta.as_ref().expect("uploaded"),
    )
}

/// The bilinear strategy C kernel of [`OCTOPUS_KERNELS`] for `kind` frames and `ty` output.
fn octopus_kernel(kind: InputKind, ty: OutType) -> &'static str {
    match (kind, ty) {
        (InputKind::I420, OutType::F32) => "octopus_bilinear_i420_f32",
        (InputKind::Nv12, OutType::F32) => "octopus_bilinear_nv12_f32",
        (InputKind::Packed, OutType::F32) => "octopus_bilinear_packed_f32",
        (InputKind::I420, OutType::F16) => "octopus_bilinear_i420_f16",
        (InputKind::Nv12, OutType::F16) => "octopus_bilinear_nv12_f16",
        (InputKind::Packed, OutType::F16) => "octopus_bilinear_packed_f16",
    }
}

/// The kernel of [`RESAMPLE_KERNELS`] (area or bilinear with letterbox) for `kind` frames and
/// `ty` output.
fn resample_kernel(area: bool, kind: InputKind, ty: OutType) -> &'static str {
    match (area, kind, ty) {
        (false, InputKind::I420, OutType::F32) => "resample_bilinear_i420_f32",
        (false, InputKind::Nv12, OutType::F32) => "resample_bilinear_nv12_f32",
        (false, InputKind::Packed, OutType::F32) => "resample_bilinear_packed_f32",
        (false, InputKind::I420, OutType::F16) => "resample_bilinear_i420_f16",
        (false, InputKind::Nv12, OutType::F16) => "resample_bilinear_nv12_f16",
        (false, InputKind::Packed, OutType::F16) => "resample_bilinear_packed_f16",
        (true, InputKind::I420, OutType::F32) => "resample_area_i420_f32",
        (true, InputKind::Nv12, OutType::F32) => "resample_area_nv12_f32",
        (true, InputKind::Packed, OutType::F32) => "resample_area_packed_f32",
        (true, InputKind::I420, OutType::F16) => "resample_area_i420_f16",
        (true, InputKind::Nv12, OutType::F16) => "resample_area_nv12_f16",
        (true, InputKind::Packed, OutType::F16) => "resample_area_packed_f16",
    }
}

impl Engine {
    /// Launch strategy C (the bilinear fast path of `octopus.cu`) over the crops and
    /// blocks of the last [`Self::upload_meta`]: `out_len` output elements of `ty`, `tile_pixels`
    /// as used to build the blocks, `threads` per CUDA block (see [`octopus_threads`]).
    /// Asynchronous on [`Self::stream`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &mut self,
        ty: OutType,
        norm: Norm,
        crops: &[CropMeta],
        nblocks: usize,
        tile_pixels: u32,
        threads: u32,
        out_len: usize,
    ) -> Result<(), CudaError> {
        let Some(kind) = self.prepare_launch(crops, out_len, ty, Some(nblocks))? else {
            return Ok(());
        };
        let f = self.func(&OCTOPUS_KERNELS, octopus_kernel(kind, ty))?;
        let l = self.layout;
        let (arena, meta) = uploaded(&self.arena, &self.meta);
        let (fr, cr, bl) = (
            part(meta, l.frames),
            part(meta, l.crops),
            part(meta, l.blocks),
        );
        let nb = nblocks as u32;
        let grid = if self.octopus_grid > 0 {
            nb.min(self.octopus_grid)
        } else {
            nb
        };
        let cfg = launch_config((grid, 1), threads.min(OCTOPUS_MAX_THREADS));
        let mut b = self.gpu.stream().launch_builder(&f);
        b.arg(arena)
            .arg(&fr)
            .arg(&cr)
            .arg(&bl)
            .arg(&nb)
            .arg(&tile_pixels)
            .arg(&norm);
        match ty {
            OutType::F32 => b.arg(self.out32.as_mut().expect("reserved")),
            OutType::F16 => b.arg(self.out16.as_mut().expect("reserved")),
        };
        // SAFETY: argument types match the kernel's signature; blocks and crops were bounds
        // checked above (each block's tiles lie in its crop by construction), frames lie in the arena.
        unsafe { b.launch(cfg) }?;
        self.launches += 1;
        Ok(())
    }

    /// Launch the area / letterbox kernels (`resample.cu`, block metadata as strategy C)
    /// over the crops and blocks of the last [`Self::upload_meta`]. `letterbox`: the pad value
    /// (0..255 scale) when letterboxing. Asynchronous on [`Self::stream`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch_resample(
        &mut self,
        interpolation: Interpolation,
        letterbox: Option<f32>,
        ty: OutType,
        norm: Norm,
        crops: &[CropMeta],
        nblocks: usize,
        tile_pixels: u32,
        threads: u32,
        out_len: usize,
    ) -> Result<(), CudaError> {
        let Some(kind) = self.prepare_launch(crops, out_len, ty, Some(nblocks))? else {
            return Ok(());
        };
        let area = interpolation == Interpolation::Area;
        let f = self.func(&RESAMPLE_KERNELS, resample_kernel(area, kind, ty))?;
        let l = self.layout;
        let (arena, meta) = uploaded(&self.arena, &self.meta);
        let (fr, cr, bl) = (
            part(meta, l.frames),
            part(meta, l.crops),
            part(meta, l.blocks),
        );
        let lb = letterbox.is_some() as u32;
        let pad = letterbox.unwrap_or(0.0);
        let cfg = launch_config((nblocks as u32, 1), threads.min(OCTOPUS_MAX_THREADS));
        let mut b = self.gpu.stream().launch_builder(&f);
        b.arg(arena)
            .arg(&fr)
            .arg(&cr)
            .arg(&bl)
            .arg(&tile_pixels)
            .arg(&norm)
            .arg(&lb)
            .arg(&pad);
        match ty {
            OutType::F32 => b.arg(self.out32.as_mut().expect("reserved")),
            OutType::F16 => b.arg(self.out16.as_mut().expect("reserved")),
        };
        // SAFETY: argument types match `resample_*`'s signature; crops were bounds checked above
        // and each block's tiles lie in its crop by construction; frames lie in the arena.
        unsafe { b.launch(cfg) }?;
        self.launches += 1;
        Ok(())
    }

    /// What every launcher checks first: frames uploaded (their input kind is returned), something
    /// to do (`None`: nothing to launch), every crop inside its frame and its output inside
    /// `out_len`, with `nblocks`: the block count the metadata holds; then the output reserved.
    pub(crate) fn prepare_launch(
        &mut self,
        crops: &[CropMeta],
        out_len: usize,
        ty: OutType,
        nblocks: Option<usize>,
    ) -> Result<Option<InputKind>, CudaError> {
        let kind = self
            .kind
            .ok_or_else(|| CudaError::Invalid("no frames uploaded".into()))?;
        if crops.is_empty() || out_len == 0 {
            return Ok(None);
        }
        self.check_crops(crops, out_len)?;
        if let Some(n) = nblocks {
            if n == 0 || self.layout.blocks.1 - self.layout.blocks.0 != n * 12 {
                return Err(CudaError::Invalid(format!(
                    "{n} blocks, metadata holds another count"
                )));
            }
        }
        self.reserve_output(ty, out_len)?;
        Ok(Some(kind))
    }

    /// Every crop inside its frame and its output inside `out_len` elements.
    fn check_crops(&self, crops: &[CropMeta], out_len: usize) -> Result<(), CudaError> {
        for (i, c) in crops.iter().enumerate() {
            let &(fw, fh) = self.dims.get(c.frame as usize).ok_or_else(|| {
                CudaError::Invalid(format!(
                    "crop {i} names frame {} of {}",
                    c.frame,
                    self.dims.len()
                ))
            })?;
            if !c.inside(fw, fh) || c.out_w == 0 || c.out_h == 0 {
                return Err(CudaError::Invalid(format!(
                    "crop {i} does not fit its frame"
                )));
            }
            if c.out_offset as usize + c.out_pixels() as usize * 3 > out_len {
                return Err(CudaError::Invalid(format!(
                    "crop {i} output runs past {out_len} elements"
                )));
            }
        }
        Ok(())
    }
}
