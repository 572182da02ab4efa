//! Moving a batch to the device: its frames (whole, only the rows the crops touch, or only each
//! crop's rectangle, gathered on the host or pulled by the GPU from page-locked frames) into the
//! engine's frame arena, and its metadata (frame descriptors, crops, blocks) with one copy through
//! a ring of pinned buffers. The GPU's own gather of crop rectangles is `gather.rs`.

use cudarc::driver::{CudaEvent, DevicePtr, PinnedHostSlice};
use octopipe_cuda::{grow, grow_pinned, push_aligned};

use super::meta::{FrameDesc, InputKind};
use super::CudaError;
use super::Engine;
use octopipe_core::crops::{BlockMeta, CropMeta};
use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, Planes};

/// How frames reach the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UploadMode {
    /// Rows when they move under half the bytes of whole frames, else whole frames.
    #[default]
    Auto,
    /// Every frame whole, one copy per frame.
    Whole,
    /// Only the row ranges the frame's crops touch (chroma rows too), one copy per range and plane.
    Rows,
    /// Only each crop's own rectangle (per plane; chroma widened by one sample for the bilinear
    /// chroma taps), gathered on the host into one pinned staging buffer and uploaded with one
    /// copy, or pulled by the GPU from page-locked frames (see [`Engine::set_device_gather`]);
    /// each crop gets its own frame descriptor pointing at its rectangle.
    Rects,
}

/// One frame of a batch: its geometry, colorimetry and planes, as host bytes (pinned or
/// pageable) to upload, or already in the engine's device memory.
#[derive(Clone, Copy)]
pub struct HostFrame<'a> {
    /// Plane geometry.
    pub layout: FrameLayout,
    /// YUV to RGB conversion.
    pub colorimetry: Colorimetry,
    /// The host bytes (at least `layout.size()`); empty for a device frame.
    pub data: &'a [u8],
    /// The device address of the planes when they are on the engine's device already: read in
    /// place, nothing uploaded.
    pub device: Option<u64>,
}

impl<'a> HostFrame<'a> {
    /// A pipeline frame's geometry, colorimetry and planes (none once released: the upload then
    /// reports the frame's missing bytes).
    pub fn of(frame: &'a Frame) -> Self {
        HostFrame {
            layout: frame.layout,
            colorimetry: frame.colorimetry,
            data: frame.data().unwrap_or(&[]),
            device: match frame.planes.as_deref() {
                Some(Planes::Device(d)) => Some(d.ptr()),
                _ => None,
            },
        }
    }
}

/// Byte counts of the last batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Frame bytes copied to the device.
    pub frame_bytes: usize,
    /// Frame copies issued.
    pub frame_copies: usize,
    /// Metadata bytes copied to the device.
    pub meta_bytes: usize,
    /// Crop rectangles the GPU pulled from page-locked frames ([`Engine::set_device_gather`]);
    /// their bytes count in `frame_bytes`, with no frame copy.
    pub device_rects: usize,
}

/// Where the parts of the packed metadata lie in the device metadata buffer (byte ranges).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MetaLayout {
    pub(crate) frames: (usize, usize),
    pub(crate) crops: (usize, usize),
    pub(crate) blocks: (usize, usize),
}

/// Pinned slots the packed metadata goes through, reused round robin; `done` is recorded after
/// the copy out of the slot, and waited on before the slot is written again.
const META_RING: usize = 3;

pub(crate) struct MetaSlot {
    host: PinnedHostSlice<u8>,
    done: CudaEvent,
}

impl Engine {
    /// Copy `frames` into the device arena (once each; whole or only the rows `crops` touch, see
    /// [`UploadMode`]) and build their descriptors. All frames must share one [`InputKind`].
    pub fn upload_frames(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
        mode: UploadMode,
    ) -> Result<TransferStats, CudaError> {
        let total = self.describe_frames(frames)?;
        if use_rects(frames, crops, mode) {
            return self.upload_rects(frames, crops);
        }
        self.copy_frames(frames, crops, mode, total)
    }

    /// Check `frames` (one input kind, enough bytes) and lay them out one after another in the
    /// arena: their descriptors, sizes and arena offsets. Returns the arena bytes they take.
    fn describe_frames(&mut self, frames: &[HostFrame<'_>]) -> Result<usize, CudaError> {
        self.descs.clear();
        self.dims.clear();
        self.bases.clear();
        self.remap = false;
        self.kind = None;
        let mut total = 0usize;
        for f in frames {
            let kind = InputKind::of(f.layout.format);
            if *self.kind.get_or_insert(kind) != kind {
                return Err(CudaError::Invalid(format!(
                    "frames of one batch must share one input kind; found {:?} and {kind:?}",
                    self.kind
                )));
            }
            self.dims.push((f.layout.width, f.layout.height));
            if f.device.is_some() {
                // Read in place: its descriptor is made once the arena's address is known.
                self.bases.push(0);
                self.descs
                    .push(FrameDesc::new(&f.layout, &f.colorimetry, 0));
                continue;
            }
            if f.data.len() < f.layout.size() {
                return Err(CudaError::Invalid(format!(
                    "frame has {} bytes, its layout needs {}",
                    f.data.len(),
                    f.layout.size()
                )));
            }
            self.bases.push(total);
            self.descs
                .push(FrameDesc::new(&f.layout, &f.colorimetry, total as u64));
            total = (total + f.layout.size()).next_multiple_of(256);
        }
        Ok(total)
    }

    /// [`UploadMode::Whole`] and [`UploadMode::Rows`] (per frame, for `Auto`): each frame at its
    /// arena offset from [`Self::describe_frames`], whole or as its touched row ranges.
    fn copy_frames(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
        mode: UploadMode,
        total: usize,
    ) -> Result<TransferStats, CudaError> {
        grow(self.gpu.stream(), &mut self.arena, total.max(256))?;
        let arena = self.arena.as_mut().expect("grown above");
        let mut stats = TransferStats::default();
        for (i, f) in frames.iter().enumerate() {
            if let Some(ptr) = f.device {
                // The kernels read `arena + plane offset` (64-bit wrapping): an offset of
                // `ptr - arena` reaches the frame's own memory.
                let (base, _sync) = arena.device_ptr(self.gpu.stream());
                self.descs[i] = FrameDesc::new(&f.layout, &f.colorimetry, ptr.wrapping_sub(base));
                continue;
            }
            let size = f.layout.size();
            let base = self.bases[i];
            self.rows.clear();
            collect_rows(
                &f.layout,
                crops.iter().filter(|c| c.frame as usize == i),
                &mut self.spans,
                &mut self.rows,
            );
            let row_bytes: usize = self.rows.iter().map(|r| r.1 - r.0).sum();
            let use_rows = match mode {
                UploadMode::Whole | UploadMode::Rects => false,
                UploadMode::Rows => true,
                UploadMode::Auto => row_bytes * 2 < size,
            };
            if use_rows {
                for &(a, b) in &self.rows {
                    let mut dst = arena.slice_mut(base + a..base + b);
                    self.gpu.stream().memcpy_htod(&f.data[a..b], &mut dst)?;
                    stats.frame_bytes += b - a;
                    stats.frame_copies += 1;
                }
            } else {
                let mut dst = arena.slice_mut(base..base + size);
                self.gpu.stream().memcpy_htod(&f.data[..size], &mut dst)?;
                stats.frame_bytes += size;
                stats.frame_copies += 1;
            }
        }
        self.stats.frame_bytes = stats.frame_bytes;
        self.stats.frame_copies = stats.frame_copies;
        self.stats.device_rects = 0;
        Ok(stats)
    }

    /// [`UploadMode::Rects`]: gather every crop's rectangles into the pinned staging buffer, one
    /// copy to the arena, one descriptor per crop (plane offsets shifted so that the kernels'
    /// absolute frame coordinates land in the rectangle).
    fn upload_rects(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
    ) -> Result<TransferStats, CudaError> {
        let mut total = 0usize;
        for c in crops {
            let f = frames.get(c.frame as usize).ok_or_else(|| {
                CudaError::Invalid(format!("crop names frame {} of {}", c.frame, frames.len()))
            })?;
            if !c.inside(f.layout.width, f.layout.height) {
                return Err(CudaError::Invalid("crop does not fit its frame".into()));
            }
            total += rect_bytes(&f.layout, c).next_multiple_of(16);
        }
        let total = total.max(16);
        if self.device_gather {
            return self.gather_on_device(frames, crops, total);
        }
        if let Some(done) = &self.rect_done {
            // The copy that last read the staging buffer must be finished before it is rewritten.
            done.synchronize()?;
        }
        grow_pinned(self.gpu.context(), &mut self.rect_host, total)?;
        grow(self.gpu.stream(), &mut self.arena, total)?;
        let host = self.rect_host.as_mut().expect("grown").as_mut_slice()?;
        layout_rects(frames, crops, &mut self.descs, &mut self.rect_crops, |r| {
            let data = frames[r.frame].data;
            for i in 0..r.rows {
                let (d, s) = (r.dst + i * r.row_bytes, r.src + i * r.stride);
                host[d..d + r.row_bytes].copy_from_slice(&data[s..s + r.row_bytes]);
            }
        });
        let arena = self.arena.as_mut().expect("grown above");
        let host = self.rect_host.as_ref().expect("grown");
        self.gpu
            .stream()
            .memcpy_htod(&host.as_slice()?[..total], &mut arena.slice_mut(..total))?;
        if self.rect_done.is_none() {
            self.rect_done = Some(self.gpu.context().new_event(None)?);
        }
        self.rect_done
            .as_ref()
            .expect("made")
            .record(self.gpu.stream())?;
        self.remap = true;
        self.stats.frame_bytes = total;
        self.stats.frame_copies = 1;
        self.stats.device_rects = 0;
        Ok(self.stats)
    }

    /// Order the engine's work after everything queued so far on `producer` (a raw `CUstream` of
    /// another component, e.g. the one that wrote a device frame; 0 for none): the engine's
    /// stream waits on an event recorded there, no device-wide synchronization.
    pub fn after_stream(&self, producer: u64) -> Result<(), CudaError> {
        octopipe_cuda::order_after(self.gpu.context(), self.gpu.stream(), producer)
    }

    /// Pack the frame descriptors (from the last [`Self::upload_frames`]), `crops` and `blocks`
    /// into one buffer and upload it with one copy through pinned memory. Returns the metadata
    /// bytes.
    pub fn upload_meta(
        &mut self,
        crops: &[CropMeta],
        blocks: &[BlockMeta],
    ) -> Result<usize, CudaError> {
        let mut l = self.begin_meta(crops)?;
        let off = push_aligned(&mut self.host_meta, blocks);
        l.blocks = (off, self.host_meta.len());
        self.finish_meta(l)
    }

    /// Start the packed metadata in [`Self::host_meta`]: the frame descriptors of the last upload,
    /// then `crops` (renumbered to their own descriptors after a rectangle upload). The caller
    /// appends its own parts, then calls [`Self::finish_meta`].
    pub(crate) fn begin_meta(&mut self, crops: &[CropMeta]) -> Result<MetaLayout, CudaError> {
        let buf = &mut self.host_meta;
        buf.clear();
        let mut l = MetaLayout::default();
        let off = push_aligned(buf, &self.descs);
        l.frames = (off, buf.len());
        if self.remap {
            if self.rect_crops.len() != crops.len() {
                return Err(CudaError::Invalid(format!(
                    "{} crops, the rectangle upload was made for {}",
                    crops.len(),
                    self.rect_crops.len()
                )));
            }
            let off = push_aligned(buf, &self.rect_crops);
            l.crops = (off, buf.len());
        } else {
            let off = push_aligned(buf, crops);
            l.crops = (off, buf.len());
        }
        Ok(l)
    }

    /// Upload [`Self::host_meta`] with one copy through the next pinned slot of the ring and make
    /// `l` the layout the launchers read. Returns the metadata bytes.
    pub(crate) fn finish_meta(&mut self, l: MetaLayout) -> Result<usize, CudaError> {
        let len = self.host_meta.len().max(16);
        self.host_meta.resize(len, 0);
        let i = self.ring_next;
        self.ring_next = (i + 1) % META_RING;
        if self.meta_ring.len() <= i || self.meta_ring[i].host.len() < len {
            if let Some(old) = self.meta_ring.get(i) {
                old.done.synchronize()?;
            }
            let slot = MetaSlot {
                // SAFETY: the slot is written (below) before any copy reads it.
                host: unsafe { self.gpu.context().alloc_pinned::<u8>(len + len / 4) }?,
                done: self.gpu.context().new_event(None)?,
            };
            if self.meta_ring.len() <= i {
                self.meta_ring.push(slot);
            } else {
                self.meta_ring[i] = slot;
            }
        }
        let slot = &mut self.meta_ring[i];
        // The copy that last read this slot must be finished before it is overwritten.
        slot.done.synchronize()?;
        slot.host.as_mut_slice()?[..len].copy_from_slice(&self.host_meta);
        grow(self.gpu.stream(), &mut self.meta, len)?;
        let meta = self.meta.as_mut().expect("grown above");
        self.gpu
            .stream()
            .memcpy_htod(&slot.host.as_slice()?[..len], &mut meta.slice_mut(..len))?;
        slot.done.record(self.gpu.stream())?;
        self.layout = l;
        self.stats.meta_bytes = len;
        Ok(len)
    }
}

/// Whether `mode` uploads crop rectangles for these frames and crops. `Auto` does when the
/// rectangles are under a quarter of the frames' bytes: the host gather costs about what the copy
/// saves per byte, so only when far fewer bytes move.
fn use_rects(frames: &[HostFrame<'_>], crops: &[CropMeta], mode: UploadMode) -> bool {
    if frames.iter().any(|f| f.device.is_some()) {
        // Frames on the device are read in place.
        return false;
    }
    match mode {
        UploadMode::Rects => true,
        UploadMode::Whole | UploadMode::Rows => false,
        UploadMode::Auto => {
            let frame_bytes: usize = frames.iter().map(|f| f.layout.size()).sum();
            let fits = |c: &CropMeta| {
                frames
                    .get(c.frame as usize)
                    .is_some_and(|f| c.inside(f.layout.width, f.layout.height))
            };
            // A crop outside its frame: upload whole frames and let `launch` report it.
            crops.iter().all(fits)
                && crops
                    .iter()
                    .map(|c| rect_bytes(&frames[c.frame as usize].layout, c))
                    .sum::<usize>()
                    * 4
                    < frame_bytes
        }
    }
}

/// One plane's rectangle: (plane, first byte of a row, bytes per row, first row, rows).
type Rect = (usize, usize, usize, usize, usize);

/// The rectangles of crop `c` that the kernels read, per plane. Chroma is widened by one sample on
/// each side (the bilinear chroma taps reach floor(x / 2 - shift) and one past it), clamped to the
/// plane.
fn crop_rects(layout: &FrameLayout, c: &CropMeta) -> [Option<Rect>; 3] {
    let (x, y, w, h) = (c.x as usize, c.y as usize, c.w as usize, c.h as usize);
    let (cw, ch) = (
        (layout.width as usize).div_ceil(2),
        (layout.height as usize).div_ceil(2),
    );
    let (cx0, cx1) = ((x / 2).saturating_sub(1), ((x + w - 1) / 2 + 2).min(cw));
    let (cy0, cy1) = ((y / 2).saturating_sub(1), ((y + h - 1) / 2 + 2).min(ch));
    match layout.format {
        PixelFormat::I420 => [
            Some((0, x, w, y, h)),
            Some((1, cx0, cx1 - cx0, cy0, cy1 - cy0)),
            Some((2, cx0, cx1 - cx0, cy0, cy1 - cy0)),
        ],
        PixelFormat::Nv12 => [
            Some((0, x, w, y, h)),
            Some((1, 2 * cx0, 2 * (cx1 - cx0), cy0, cy1 - cy0)),
            None,
        ],
        other => {
            let bpp = other.packed_bytes();
            [Some((0, x * bpp, w * bpp, y, h)), None, None]
        }
    }
}

/// One plane rectangle of [`layout_rects`]: `rows` rows of `row_bytes` bytes from byte `src` of
/// frame `frame`'s buffer (rows `stride` apart), packed to arena byte `dst`.
pub(super) struct RectCopy {
    pub(super) frame: usize,
    pub(super) src: usize,
    pub(super) stride: usize,
    pub(super) row_bytes: usize,
    pub(super) rows: usize,
    pub(super) dst: usize,
}

/// The arena layout of [`UploadMode::Rects`]: each crop's plane rectangles packed one after
/// another (each crop 16-byte aligned), one descriptor per crop into `descs` whose plane offsets
/// are shifted (wrapping) so that the kernels' absolute frame coordinates land in its
/// rectangles, and the crops renumbered to their own descriptors into `rect_crops`. `each` moves
/// one rectangle (on the host, or lists it for the GPU). The crops were checked against their
/// frames by the caller.
pub(super) fn layout_rects(
    frames: &[HostFrame<'_>],
    crops: &[CropMeta],
    descs: &mut Vec<FrameDesc>,
    rect_crops: &mut Vec<CropMeta>,
    mut each: impl FnMut(RectCopy),
) {
    descs.clear();
    rect_crops.clear();
    let mut off = 0usize;
    for (i, c) in crops.iter().enumerate() {
        let f = &frames[c.frame as usize];
        let mut d = FrameDesc::new(&f.layout, &f.colorimetry, 0);
        for (plane, xb, rb, y0, rows) in crop_rects(&f.layout, c).into_iter().flatten() {
            let (po, ps) = (f.layout.offsets[plane], f.layout.strides[plane]);
            each(RectCopy {
                frame: c.frame as usize,
                src: po + y0 * ps + xb,
                stride: ps,
                row_bytes: rb,
                rows,
                dst: off,
            });
            // Row y, byte x of the plane lies at off + (y - y0) * rb + (x - xb).
            d.plane[plane] = (off as u64).wrapping_sub((y0 * rb + xb) as u64);
            d.stride[plane] = rb as u32;
            off += rb * rows;
        }
        off = off.next_multiple_of(16);
        descs.push(d);
        rect_crops.push(CropMeta {
            frame: i as u32,
            ..*c
        });
    }
}

/// Bytes of [`crop_rects`].
fn rect_bytes(layout: &FrameLayout, c: &CropMeta) -> usize {
    crop_rects(layout, c)
        .iter()
        .flatten()
        .map(|r| r.2 * r.4)
        .sum()
}

/// Byte ranges (relative to the frame buffer) of the rows `crops` touch, merged, per plane.
fn collect_rows<'a>(
    layout: &FrameLayout,
    crops: impl Iterator<Item = &'a CropMeta>,
    spans: &mut Vec<(usize, usize)>,
    out: &mut Vec<(usize, usize)>,
) {
    let h = layout.height as usize;
    let ch = h.div_ceil(2);
    spans.clear();
    spans.extend(crops.map(|c| (c.y as usize, (c.y + c.h) as usize)));
    spans.sort_unstable();
    // Merge in place: spans[..m] holds the merged ranges.
    let mut m = 0;
    for i in 0..spans.len() {
        let (a, b) = spans[i];
        if m > 0 && a <= spans[m - 1].1 {
            spans[m - 1].1 = spans[m - 1].1.max(b);
        } else {
            spans[m] = (a, b);
            m += 1;
        }
    }
    spans.truncate(m);
    let merged = &*spans;
    let mut push = |plane: usize, rows: usize, a: usize, b: usize| {
        let (a, b) = (a.min(rows), b.min(rows));
        if a < b {
            let (o, s) = (layout.offsets[plane], layout.strides[plane]);
            out.push((o + a * s, o + b * s));
        }
    };
    for &(a, b) in merged {
        push(0, h, a, b);
        match layout.format {
            // Chroma taps of rows a..b reach chroma rows floor(a/2 - 0.25) ..= floor((b-1)/2 - 0.25) + 1.
            PixelFormat::I420 => {
                push(1, ch, (a / 2).saturating_sub(1), b / 2 + 1);
                push(2, ch, (a / 2).saturating_sub(1), b / 2 + 1);
            }
            PixelFormat::Nv12 => push(1, ch, (a / 2).saturating_sub(1), b / 2 + 1),
            _ => {}
        }
    }
}
