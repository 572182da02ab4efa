//! Benchmark inputs: a small seeded generator, real VisDrone box sizes, synthetic frames.

use std::path::Path;

use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};

/// xorshift64* : deterministic, seeded, good enough for benchmark inputs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Object sizes `(w, h)` of the VisDrone2019-DET-val annotations under `data_dir`
/// (`visdrone/det-val-annotations`, classifiable objects only), and whether they were found; without
/// them, a fixed synthetic spread around the real median (39x56) and P95 (162x151).
pub fn box_sizes(data_dir: Option<&Path>) -> (Vec<(u32, u32)>, bool) {
    let mut sizes = Vec::new();
    if let Some(dir) = data_dir {
        if let Ok(rd) = std::fs::read_dir(dir.join("visdrone/det-val-annotations")) {
            let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let Ok(text) = std::fs::read_to_string(&f) else {
                    continue;
                };
                for line in text.lines() {
                    let v: Vec<i64> = line
                        .split(',')
                        .filter_map(|s| s.trim().parse().ok())
                        .collect();
                    if v.len() >= 6 && v[4] != 0 && (1..=10).contains(&v[5]) && v[2] > 0 && v[3] > 0
                    {
                        sizes.push((v[2] as u32, v[3] as u32));
                    }
                }
            }
        }
    }
    if !sizes.is_empty() {
        return (sizes, true);
    }
    let mut rng = Rng::new(7);
    let sizes = (0..1000)
        .map(|_| {
            let s = 0.35 + (rng.below(1000) as f32 / 1000.0).powi(3) * 3.5;
            ((39.0 * s) as u32 + 1, (56.0 * s) as u32 + 1)
        })
        .collect();
    (sizes, false)
}

/// A `w`x`h` frame of seeded noise in `format` (tightly packed, JPEG colorimetry for YUV).
pub fn synthetic_frame(format: PixelFormat, w: u32, h: u32, seed: u64) -> Frame {
    let layout = FrameLayout::packed(format, w, h);
    let mut rng = Rng::new(seed);
    let mut data = vec![0u8; layout.size()];
    for chunk in data.chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    frame_from(layout, Colorimetry::JPEG, data, seed)
}

/// A frame holding `data` laid out as `layout`.
pub fn frame_from(layout: FrameLayout, colorimetry: Colorimetry, data: Vec<u8>, seq: u64) -> Frame {
    Frame::new(
        0,
        seq,
        "synthetic",
        layout,
        colorimetry,
        PooledBuf::unpooled(data),
    )
}

/// RGB bytes at pixel (x, y) with nearest chroma: what a naive conversion does.
pub fn rgb_at(f: &Frame, x: u32, y: u32) -> [u8; 3] {
    let l = &f.layout;
    let d = f.data().unwrap_or(&[]);
    let (x, y) = (x as usize, y as usize);
    match l.format {
        PixelFormat::I420 | PixelFormat::Nv12 => {
            let (y_off, m) = f.colorimetry.yuv_to_rgb();
            let luma = d[l.offsets[0] + y * l.strides[0] + x] as f32 - y_off;
            let (u, v) = if l.format == PixelFormat::I420 {
                (
                    d[l.offsets[1] + (y / 2) * l.strides[1] + x / 2],
                    d[l.offsets[2] + (y / 2) * l.strides[2] + x / 2],
                )
            } else {
                let i = l.offsets[1] + (y / 2) * l.strides[1] + (x / 2) * 2;
                (d[i], d[i + 1])
            };
            let (cb, cr) = (u as f32 - 128.0, v as f32 - 128.0);
            std::array::from_fn(|c| {
                (m[c][0] * luma + m[c][1] * cb + m[c][2] * cr)
                    .round()
                    .clamp(0.0, 255.0) as u8
            })
        }
        fmt => {
            let i = l.offsets[0] + y * l.strides[0] + x * fmt.packed_bytes();
            match fmt {
                PixelFormat::Bgr | PixelFormat::Bgra => [d[i + 2], d[i + 1], d[i]],
                _ => [d[i], d[i + 1], d[i + 2]],
            }
        }
    }
}
