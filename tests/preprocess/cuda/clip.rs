//! Parity on the real clip, as RGB and as I420 converted here.

use super::*;

/// RGB to JPEG-style I420 (BT.601 full range, chroma averaged over 2x2, centre-sited).
pub(super) fn rgb_to_i420(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = vec![0u8; w * h + 2 * cw * ch];
    let px = |x: usize, y: usize| {
        let i = (y * w + x) * 3;
        (rgb[i] as f32, rgb[i + 1] as f32, rgb[i + 2] as f32)
    };
    for y in 0..h {
        for x in 0..w {
            let (r, g, b) = px(x, y);
            out[y * w + x] = (0.299 * r + 0.587 * g + 0.114 * b)
                .round()
                .clamp(0.0, 255.0) as u8;
        }
    }
    for cy in 0..ch {
        for cx in 0..cw {
            let (mut u, mut v, mut n) = (0.0, 0.0, 0.0);
            for (x, y) in [
                (2 * cx, 2 * cy),
                (2 * cx + 1, 2 * cy),
                (2 * cx, 2 * cy + 1),
                (2 * cx + 1, 2 * cy + 1),
            ] {
                if x < w && y < h {
                    let (r, g, b) = px(x, y);
                    u += 128.0 - 0.168_736 * r - 0.331_264 * g + 0.5 * b;
                    v += 128.0 + 0.5 * r - 0.418_688 * g - 0.081_312 * b;
                    n += 1.0;
                }
            }
            out[w * h + cy * cw + cx] = (u / n).round().clamp(0.0, 255.0) as u8;
            out[w * h + cw * ch + cy * cw + cx] = (v / n).round().clamp(0.0, 255.0) as u8;
        }
    }
    out
}

/// The clip's classifiable boxes (contract of shared/data/README.md), clipped, >= 2 px.
pub(super) fn clip_boxes(text: &str, fw: u32, fh: u32) -> Vec<(u32, u32, u32, u32)> {
    text.lines()
        .filter_map(|l| {
            let v: Vec<i64> = l.split(',').filter_map(|s| s.trim().parse().ok()).collect();
            if v.len() < 6 || v[4] == 0 || v[5] == 0 || v[5] == 11 {
                return None;
            }
            let (x0, y0) = (v[0].max(0), v[1].max(0));
            let (x1, y1) = ((v[0] + v[2]).min(fw as i64), (v[1] + v[3]).min(fh as i64));
            (x1 - x0 >= 2 && y1 - y0 >= 2)
                .then(|| (x0 as u32, y0 as u32, (x1 - x0) as u32, (y1 - y0) as u32))
        })
        .collect()
}

#[test]
fn parity_on_the_real_clip_rgb_and_i420() {
    if !common::gpu("parity_on_the_real_clip_rgb_and_i420") {
        return;
    }
    let root = data_dir().join("visdrone/clip-9999999");
    if !root.join("images").is_dir() {
        eprintln!(
            "SKIPPED parity_on_the_real_clip: {} not found (set OCTOPIPE_DATA)",
            root.display()
        );
        return;
    }
    let images = common::sorted_files(&root.join("images"));
    let config = PreprocessConfig {
        size: Some((64, 64)),
        ..PreprocessConfig::default()
    };
    let (mut objects, mut worst) = (0usize, [0f32; 2]);
    for chunk in images.chunks(4) {
        for (k, format) in [PixelFormat::Rgb, PixelFormat::I420]
            .into_iter()
            .enumerate()
        {
            let mut batch = CropBatch::default();
            let mut crops = Vec::new();
            for path in chunk {
                let img = image::open(path).unwrap().to_rgb8();
                let (w, h) = img.dimensions();
                let ann = root
                    .join("annotations")
                    .join(path.file_stem().unwrap())
                    .with_extension("txt");
                let text = std::fs::read_to_string(&ann).unwrap();
                let fi = batch.frames.len() as u32;
                for (x, y, bw, bh) in clip_boxes(&text, w, h) {
                    crops.push(CropMeta {
                        frame: fi,
                        x,
                        y,
                        w: bw,
                        h: bh,
                        out_w: 64,
                        out_h: 64,
                        out_offset: 0,
                    });
                }
                let rgb = img.into_raw();
                let (data, col) = match format {
                    PixelFormat::Rgb => (rgb, Colorimetry::JPEG),
                    _ => (rgb_to_i420(&rgb, w as usize, h as usize), Colorimetry::JPEG),
                };
                batch.frames.push(frame_from(
                    FrameLayout::packed(format, w, h),
                    col,
                    data,
                    fi as u64,
                ));
            }
            finish(&mut batch, crops);
            if k == 0 {
                objects += batch.crops.len();
            }
            let d = compare_backends(&mut batch, &config, &format!("clip {format}"));
            worst[k] = worst[k].max(d);
        }
    }
    eprintln!(
        "real clip: {objects} objects; max diff RGB {:.4}, I420 {:.4}",
        worst[0], worst[1]
    );
    assert!(
        objects > 1900,
        "expected about 2,012 objects, found {objects}"
    );
}
