//! The boxes stage's unit tests.

use super::settings::DEFAULT_SKIP_CATEGORIES;
use super::*;
use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, ImageFile, PixelFormat, PooledBuf};

#[test]
fn the_declared_defaults_are_the_constants() {
    let b = BoxesProps::default();
    assert_eq!((b.count, b.seed), (28, 7));
    let skip: Vec<i64> = DEFAULT_SKIP_CATEGORIES.iter().map(|&c| c.into()).collect();
    assert_eq!(b.skip_categories, skip);
}

/// A 64x48 frame at position `seq`, from image `name` when given.
fn frame(seq: u64, name: Option<&str>) -> Frame {
    let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
    let pixels = PooledBuf::unpooled(vec![0; layout.size()]);
    let mut f = Frame::new(
        0,
        seq,
        name.unwrap_or("t"),
        layout,
        Colorimetry::JPEG,
        pixels,
    );
    f.image = name.map(ImageFile::from_name);
    f
}

/// A MOT replay of one box per frame index 1..=`n`, the box at x = 2 * index.
fn mot(name: &str, n: u64) -> Boxes {
    let dir = std::env::temp_dir().join(format!("octopipe-boxes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.txt"));
    let rows: String = (1..=n)
        .map(|i| format!("{i},{i},{},1,6,6,1,4,0,0\n", 2 * i))
        .collect();
    std::fs::write(&path, rows).unwrap();
    Boxes::new(BoxesConfig::new(BoxSource::Mot { location: path })).unwrap()
}

/// The MOT frame index a frame got (its box's x / 2), after attaching.
fn index_of(boxes: &mut Boxes, mut f: Frame) -> Result<Option<u32>, BoxesError> {
    boxes.attach(&mut f)?;
    Ok(f.detections.first().map(|d| d.bbox[0] / 2))
}

#[test]
fn images_take_the_mot_rows_of_the_number_their_names_end_with() {
    let mut b = mot("gap", 8);
    // Images 3 and 4 are missing from the folder: positions 0, 1, 2, 3 are images 1, 2, 5, 6.
    let names = [
        "s_0000001.jpg",
        "s_0000002.jpg",
        "s_0000005.jpg",
        "s_0000006.jpg",
    ];
    let got: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(seq, n)| index_of(&mut b, frame(seq as u64, Some(n))).unwrap())
        .collect();
    assert_eq!(got, [Some(1), Some(2), Some(5), Some(6)]);
    assert_eq!(b.unused(), [3, 4, 7, 8]);
    let notes = b.end_notes(false);
    assert!(
        notes[0].ends_with(
            "got no frame (no image name ends with them, or dropped before boxes): 3, 4"
        ),
        "{notes:?}"
    );
    assert!(
        notes[1].ends_with("have no frame in the stream (7, 8)"),
        "{notes:?}"
    );
}

#[test]
fn images_without_numbers_and_video_frames_go_by_position() {
    let mut b = mot("position", 4);
    assert_eq!(index_of(&mut b, frame(0, Some("a.jpg"))).unwrap(), Some(1));
    assert_eq!(index_of(&mut b, frame(1, Some("b.jpg"))).unwrap(), Some(2));
    // A video frame: its position by presentation time (frame 2 was lost).
    let mut b = mot("video", 4);
    assert_eq!(index_of(&mut b, frame(0, None)).unwrap(), Some(1));
    assert_eq!(index_of(&mut b, frame(3, None)).unwrap(), Some(4));
    assert!(b.end_notes(false)[0]
        .ends_with("got no frame (lost by the decoder or dropped before boxes): 2, 3"));
}

#[test]
fn an_image_played_again_gets_its_rows_again() {
    let mut b = mot("loop", 2);
    for seq in 0..4 {
        let name = ["0000001.jpg", "0000002.jpg"][seq as usize % 2];
        let want = (seq % 2 + 1) as u32;
        assert_eq!(
            index_of(&mut b, frame(seq, Some(name))).unwrap(),
            Some(want)
        );
    }
    assert!(b.unused().is_empty());
}

#[test]
fn names_that_number_frames_inconsistently_are_an_error_naming_the_image() {
    let message = |names: &[&str]| {
        let mut b = mot("bad", 4);
        let mut error = None;
        for (seq, n) in names.iter().enumerate() {
            if let Err(e) = index_of(&mut b, frame(seq as u64, Some(n))) {
                error = Some(e.to_string());
                break;
            }
        }
        error.expect("an error")
    };
    let e = message(&["0000001.jpg", "cover.jpg"]);
    assert!(
        e.starts_with("cover.jpg: its name ends with no frame number, but the sequence's first image, 0000001.jpg, ends with one: boxes format=mot location="),
        "{e}"
    );
    assert!(e.ends_with("name every image of the sequence by its 1-based frame index (as VisDrone's 0000001.jpg), or none (then images are numbered by position)"), "{e}");
    let e = message(&["cover.jpg", "0000002.jpg"]);
    assert!(e.starts_with("0000002.jpg: its name ends with frame number 2, but the sequence's first image, cover.jpg, has no number"), "{e}");
    let e = message(&["cam1_0001.jpg", "cam2_0001.jpg"]);
    assert!(e.starts_with("cam2_0001.jpg: its name ends with frame number 1, as cam1_0001.jpg's does: two images cannot both be frame 1"), "{e}");
    let e = message(&["frame_00000.jpg"]);
    assert!(
        e.starts_with(
            "frame_00000.jpg: its name ends with frame number 0, but MOT frame indices start at 1"
        ),
        "{e}"
    );
}
