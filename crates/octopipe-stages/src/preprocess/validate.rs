//! Checks that a batch is self-consistent before a backend runs on it.

use octopipe_core::crops::CropBatch;

use super::error::PreprocessError;

/// Check that `batch` is self-consistent: crops inside their frames, outputs inside the tensor,
/// blocks inside their crops. O(crops + blocks).
pub fn validate(batch: &CropBatch) -> Result<(), PreprocessError> {
    let len = batch.tensor_len(3);
    for (i, c) in batch.crops.iter().enumerate() {
        let f = batch.frames.get(c.frame as usize).ok_or_else(|| {
            PreprocessError::InvalidBatch(format!(
                "crop {i} names frame {} of {}",
                c.frame,
                batch.frames.len()
            ))
        })?;
        let (fw, fh) = (f.layout.width, f.layout.height);
        if !c.inside(fw, fh) || c.out_w == 0 || c.out_h == 0 {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {i} box [{}, {}, {}, {}] -> {}x{} does not fit frame {fw}x{fh}",
                c.x, c.y, c.w, c.h, c.out_w, c.out_h
            )));
        }
        if c.out_offset as usize + (c.out_pixels() * 3) as usize > len {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {i} output runs past the tensor"
            )));
        }
        let Some(planes) = f.planes.as_ref() else {
            return Err(PreprocessError::NoPixels {
                stream: f.stream,
                seq: f.seq,
            });
        };
        f.layout
            .check(planes.host().map(<[u8]>::len))
            .map_err(|e| {
                PreprocessError::InvalidBatch(format!(
                    "frame {} of stream {}: {e}",
                    f.seq, f.stream
                ))
            })?;
    }
    // Blocks must be in crop order and never overlap (backends write them in parallel), and
    // must cover every crop's tiles: an uncovered crop would be left unwritten.
    let uncovered = |crop: u32, from: u32| -> Result<(), PreprocessError> {
        let c = &batch.crops[crop as usize];
        let tiles = c.out_pixels().div_ceil(batch.tile_pixels.max(1));
        if from < tiles {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {crop} has no block for its tiles {from}..{tiles}: build the batch's blocks (CropBatch::build_blocks) after adding its crops"
            )));
        }
        Ok(())
    };
    // The crop and tile the next block must start at (or the crop after it).
    let mut next = (0u32, 0u32);
    for b in &batch.blocks {
        let c = batch
            .crops
            .get(b.crop as usize)
            .ok_or_else(|| PreprocessError::InvalidBatch(format!("block names crop {}", b.crop)))?;
        if b.crop < next.0 || (b.crop == next.0 && b.tile_begin < next.1) {
            return Err(PreprocessError::InvalidBatch(format!(
                "block for crop {} tiles {}..{} overlaps or is out of order",
                b.crop, b.tile_begin, b.tile_end
            )));
        }
        if b.tile_begin >= b.tile_end || (b.tile_begin * batch.tile_pixels) >= c.out_pixels() {
            return Err(PreprocessError::InvalidBatch(format!(
                "block tiles {}..{} outside crop {}",
                b.tile_begin, b.tile_end, b.crop
            )));
        }
        while next.0 < b.crop {
            uncovered(next.0, next.1)?;
            next = (next.0 + 1, 0);
        }
        if b.tile_begin > next.1 {
            uncovered(b.crop, next.1)?;
        }
        next = (b.crop, b.tile_end);
    }
    while (next.0 as usize) < batch.crops.len() {
        uncovered(next.0, next.1)?;
        next = (next.0 + 1, 0);
    }
    Ok(())
}
