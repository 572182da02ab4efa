//! Image sequences: JPEG or PNG files played in file-name order.
//!
//! ```text
//! appsrc (one file per buffer) ! jpegdec idct-method=islow (or pngdec) ! videoconvert
//!   ! video/x-raw,format={I420,NV12,RGB,BGR,RGBA,BGRA,RGBx,BGRx} ! appsink
//! ```
//!
//! A sequence whose first file is a 16-bit greyscale PNG (IHDR bit depth 16, colour type 0 or 4:
//! `pngdec` gives `GRAY16_BE`) is decoded as one 16-bit band instead: `videoconvert` swaps it to
//! `GRAY16_LE` ([`PixelFormat::Gray16`](octopipe_core::frame::PixelFormat::Gray16)) and the appsink takes
//! that format only, so every file of the sequence arrives as 16-bit grey, values unchanged.
//!
//! Image files are read by a feeder thread that pushes one file per buffer with `pts = index /
//! framerate`; `appsrc` holds at most [`IMAGE_QUEUE`](build::IMAGE_QUEUE) files, so memory stays
//! bounded whatever the size of the folder. With a time segment `jpegdec` and `pngdec` decode each
//! buffer as one picture, and each decoded frame is mapped back to its file through its pts.
//!
//! The feeder checks each file's structure before it pushes it (`damage::image_damage`: a JPEG cut
//! short, corrupt entropy data, a file that is not of the sequence's kind): a damaged file is
//! pushed anyway (`on-damaged=keep`), left out (`skip`, the default: its index gets no frame) or
//! ends the stream with an error naming it (`fail`). What it found is noted by index
//! ([`DamageLog`](sequence::DamageLog)) for the source to count and log when the frames around it
//! come out.

mod build;
mod feed;
mod list;
mod sequence;

use crate::props::ImagesProps;
use octopipe_core::stage::{Properties, Role, StageDecl};

pub(crate) use build::build_images;
pub(crate) use feed::{Feeder, OnFile};
pub(crate) use list::{inputs, list_images, matching_files};
pub(crate) use sequence::{ImageList, Images};

/// `images location=DIR framerate=30`: JPEG/PNG images in file-name order.
pub const IMAGES: StageDecl = StageDecl {
    name: "images",
    role: Role::Source,
    doc: "JPEG/PNG images in file-name order, decoded by GStreamer",
    props: ImagesProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(ImagesProps::from_props(p)?.config())),
};
