//! A synthetic satellite scene: one 16-bit band with open ocean (dark), sea ice (bright, with
//! leads of dark water) and clouds (brightest, soft-edged), made from seeded value noise. What the
//! satellite filter is tried on, with no download: `octopipe scene --out scene/scene.png` writes it
//! as a 16-bit greyscale PNG (`pipelines/satellite-filter.pipe`).
//!
//! Values are reflectance-like on the full 16-bit scale: ocean about 0.06, ice about 0.5 to 0.7,
//! clouds about 0.85 (times 65535). Features scale with the scene (a 2048x2048 scene is the
//! 8192x8192 one in miniature, not a crop of it), and a seed gives the same pixels on every
//! machine (integer hashing and plain `f32` arithmetic).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};

/// The scene's samples, row by row (`width * height` values).
pub fn scene(width: u32, height: u32, seed: u64) -> Vec<u16> {
    let (w, h) = (width as usize, height as usize);
    let mut out = vec![0u16; w * h];
    let scale = 1.0 / width.max(height) as f32;
    out.par_chunks_mut(w.max(1))
        .enumerate()
        .for_each(|(y, row)| {
            let mut noise = SceneNoise::new(seed);
            for (x, v) in row.iter_mut().enumerate() {
                *v = noise.sample(x as f32 * scale, y as f32 * scale);
            }
        });
    out
}

/// The scene as a GRAY16 frame (little-endian samples), as the `images` source decodes its PNG.
pub fn frame(width: u32, height: u32, seed: u64) -> Frame {
    let bytes = scene(width, height, seed)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    Frame::new(
        0,
        0,
        "synthetic scene",
        FrameLayout::packed(PixelFormat::Gray16, width, height),
        Colorimetry::default(),
        PooledBuf::unpooled(bytes),
    )
}

/// Why the scene could not be written ([`write_png`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SceneError {
    /// Its folder cannot be made.
    #[error("{}: {source}", dir.display())]
    CreateDir {
        /// The folder.
        dir: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file cannot be created (it exists and `overwrite` is off, or the system refuses).
    /// Worded for `octopipe scene`: `--force` replaces an existing file.
    #[error("{}", sink.to_string().replace(
        "overwrite=true on the sink (octopipe run --force) replaces it",
        "--force replaces it",
    ))]
    Create {
        /// The sinks' error for the file (worded for a sink's `overwrite`).
        sink: crate::sink::SinkError,
    },
    /// The PNG encoder failed (no partial file is left).
    #[error("{}: {source}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// The encoder's error.
        source: image::ImageError,
    },
    /// The encoded PNG could not be written out (a full disk, a file-size limit): no partial
    /// file is left.
    #[error("{}: write failed: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Write the scene as a 16-bit greyscale PNG at `path` (its folder made if missing), a new file
/// unless `overwrite` (a user's file is not replaced by accident). A failed write leaves no
/// partial file.
pub fn write_png(
    path: &Path,
    width: u32,
    height: u32,
    seed: u64,
    overwrite: bool,
) -> Result<(), SceneError> {
    use crate::sink::output::PngError;
    use image::codecs::png::{CompressionType, FilterType};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SceneError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    let file = crate::sink::output::create_file(path, overwrite)
        .map_err(|sink| SceneError::Create { sink })?;
    // The PNG encoder takes 16-bit samples in native byte order.
    let bytes: Vec<u8> = scene(width, height, seed)
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let written = crate::sink::output::write_png(
        file,
        &bytes,
        (width, height),
        image::ExtendedColorType::L16,
        CompressionType::Fast,
        FilterType::Up,
    )
    .map_err(|e| {
        let path = path.to_path_buf();
        match e {
            PngError::Write(source) => SceneError::Write { path, source },
            PngError::Encode(source) => SceneError::Encode { path, source },
        }
    });
    if written.is_err() {
        // No partial scene is left behind (a regular file only: never a device such as
        // /dev/full given as the output).
        if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::remove_file(path);
        }
    }
    written
}

/// The scene's noise fields with their lattice values kept: along a row, a field's lattice cell
/// changes every few hundred pixels, so its four corner values are hashed once per cell rather
/// than once per pixel. The arithmetic is [`sample`]'s, step for step: the same samples.
struct SceneNoise {
    layers: [Fbm; 6],
}

impl SceneNoise {
    fn new(seed: u64) -> Self {
        SceneNoise {
            layers: [
                Fbm::new(seed, 5),
                Fbm::new(seed ^ 1, 2),
                Fbm::new(seed ^ 2, 2),
                Fbm::new(seed ^ 3, 3),
                Fbm::new(seed ^ 4, 5),
                Fbm::new(seed ^ 5, 2),
            ],
        }
    }

    /// [`sample`] at (u, v).
    fn sample(&mut self, u: f32, v: f32) -> u16 {
        let [l0, l1, l2, l3, l4, l5] = &mut self.layers;
        let ice_field = l0.at(u * 3.0, v * 3.0) + 0.25 * l1.at(u * 24.0, v * 24.0);
        let ice = smoothstep(0.6, 0.64, ice_field);
        let ocean = 0.05 + 0.02 * l2.at(u * 40.0, v * 40.0);
        let ice_value = 0.4 + 0.4 * l3.at(u * 12.0, v * 12.0);
        let ground = ocean + (ice_value - ocean) * ice;
        let cloud_field = l4.at(u * 4.0 + 7.3, v * 2.5 + 1.9);
        let cloud = smoothstep(0.5, 0.6, cloud_field);
        let cloud_value = 0.82 + 0.06 * l5.at(u * 30.0, v * 30.0);
        let value = ground + (cloud_value - ground) * cloud;
        (value.clamp(0.0, 1.0) * 65535.0).round() as u16
    }
}

/// [`fbm`] with each octave's lattice cell kept.
struct Fbm {
    octaves: Vec<Cell>,
}

impl Fbm {
    fn new(seed: u64, octaves: u32) -> Self {
        Fbm {
            octaves: (0..octaves)
                .map(|o| Cell::new(seed.wrapping_add(u64::from(o) * 0x9E37)))
                .collect(),
        }
    }

    /// [`fbm`] at (x, y).
    fn at(&mut self, x: f32, y: f32) -> f32 {
        let (mut sum, mut weight, mut total, mut f) = (0.0, 1.0, 0.0, 1.0);
        for cell in &mut self.octaves {
            sum += weight * cell.noise(x * f, y * f);
            total += weight;
            weight *= 0.5;
            f *= 2.0;
        }
        sum / total
    }
}

/// [`value_noise`] with the corner values of the last lattice cell it was asked in.
struct Cell {
    seed: u64,
    key: (i64, i64),
    corners: [f32; 4],
}

impl Cell {
    fn new(seed: u64) -> Self {
        Cell {
            seed,
            key: (i64::MIN, i64::MIN),
            corners: [0.0; 4],
        }
    }

    /// [`value_noise`] at (x, y).
    fn noise(&mut self, x: f32, y: f32) -> f32 {
        let (xf, yf) = (floor(x), floor(y));
        let (ix, iy) = (xf as i64, yf as i64);
        if self.key != (ix, iy) {
            let at = |dx: i64, dy: i64| lattice(ix + dx, iy + dy, self.seed);
            self.corners = [at(0, 0), at(1, 0), at(0, 1), at(1, 1)];
            self.key = (ix, iy);
        }
        let (tx, ty) = (smooth(x - xf), smooth(y - yf));
        let [a, b, c, d] = self.corners;
        let top = a + (b - a) * tx;
        let bottom = c + (d - c) * tx;
        top + (bottom - top) * ty
    }
}

/// `x.floor()`, without the call into libm for the scene's (non-negative) coordinates: there,
/// truncation is the floor.
fn floor(x: f32) -> f32 {
    if (0.0..8_388_608.0).contains(&x) {
        (x as i64) as f32
    } else {
        x.floor()
    }
}

/// The sample at scene position (u, v), both in 0..1 of the longer side: the formula
/// [`SceneNoise`] computes faster (the tests hold them equal).
#[cfg(test)]
fn sample(u: f32, v: f32, seed: u64) -> u16 {
    // Sea ice where the large-scale field is high, open water elsewhere; fine noise breaks the ice
    // into floes with leads of dark water between them.
    let ice_field = fbm(u * 3.0, v * 3.0, seed, 5) + 0.25 * fbm(u * 24.0, v * 24.0, seed ^ 1, 2);
    let ice = smoothstep(0.6, 0.64, ice_field);
    let ocean = 0.05 + 0.02 * fbm(u * 40.0, v * 40.0, seed ^ 2, 2);
    let ice_value = 0.4 + 0.4 * fbm(u * 12.0, v * 12.0, seed ^ 3, 3);
    let ground = ocean + (ice_value - ocean) * ice;
    // Clouds: soft-edged banks over everything.
    let cloud_field = fbm(u * 4.0 + 7.3, v * 2.5 + 1.9, seed ^ 4, 5);
    let cloud = smoothstep(0.5, 0.6, cloud_field);
    let cloud_value = 0.82 + 0.06 * fbm(u * 30.0, v * 30.0, seed ^ 5, 2);
    let value = ground + (cloud_value - ground) * cloud;
    (value.clamp(0.0, 1.0) * 65535.0).round() as u16
}

/// Fractal value noise: `octaves` of [`value_noise`], each twice the frequency and half the
/// weight of the one before; about 0..1.
#[cfg(test)]
fn fbm(x: f32, y: f32, seed: u64, octaves: u32) -> f32 {
    let (mut sum, mut weight, mut total, mut f) = (0.0, 1.0, 0.0, 1.0);
    for o in 0..octaves {
        sum += weight * value_noise(x * f, y * f, seed.wrapping_add(u64::from(o) * 0x9E37));
        total += weight;
        weight *= 0.5;
        f *= 2.0;
    }
    sum / total
}

/// Smoothly interpolated random values on the integer lattice: 0..1.
#[cfg(test)]
fn value_noise(x: f32, y: f32, seed: u64) -> f32 {
    let (xf, yf) = (x.floor(), y.floor());
    let (ix, iy) = (xf as i64, yf as i64);
    let (tx, ty) = (smooth(x - xf), smooth(y - yf));
    let at = |dx: i64, dy: i64| lattice(ix + dx, iy + dy, seed);
    let top = at(0, 0) + (at(1, 0) - at(0, 0)) * tx;
    let bottom = at(0, 1) + (at(1, 1) - at(0, 1)) * tx;
    top + (bottom - top) * ty
}

/// The random value of lattice point (ix, iy): 0..1, from an integer hash.
fn lattice(ix: i64, iy: i64, seed: u64) -> f32 {
    let mut z = seed
        ^ (ix as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (iy as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

fn smooth(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

fn smoothstep(a: f32, b: f32, x: f32) -> f32 {
    smooth(((x - a) / (b - a)).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached lattice gives every sample of the plain formula.
    #[test]
    fn the_fast_scene_is_the_formula_sample_for_sample() {
        let (w, h, seed) = (300u32, 170u32, 22);
        let fast = scene(w, h, seed);
        let scale = 1.0 / w.max(h) as f32;
        for y in 0..h {
            for x in 0..w {
                let want = sample(x as f32 * scale, y as f32 * scale, seed);
                assert_eq!(fast[(y * w + x) as usize], want, "({x}, {y})");
            }
        }
    }

    #[test]
    fn the_scene_has_ocean_ice_and_clouds_and_is_the_same_for_a_seed() {
        let s = scene(512, 512, 1);
        assert_eq!(s, scene(512, 512, 1));
        assert_ne!(s, scene(512, 512, 2));
        let share = |lo: f32, hi: f32| {
            s.iter()
                .filter(|&&v| (lo..hi).contains(&(v as f32 / 65535.0)))
                .count() as f64
                / s.len() as f64
        };
        let (ocean, ice, cloud) = (share(0.0, 0.2), share(0.5, 0.78), share(0.8, 1.0));
        assert!(
            ocean > 0.15 && ice > 0.05 && cloud > 0.05,
            "{ocean} {ice} {cloud}"
        );
    }
}
