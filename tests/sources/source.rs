//! Source stage against real GStreamer: test source, image folders and globs, VisDrone frames, an
//! H.264 file, and the errors a user can meet.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;

use gstreamer as gst;
use gstreamer::prelude::*;
use octopipe::frame::{
    BufferPool, ChromaSite, Colorimetry, Frame, FrameLayout, Matrix, PixelFormat, Range,
};
use octopipe::source::{self, FrameSource, SourceConfig, SourceError, SourceKind};

/// A folder under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("octopipe-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn location(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(kind: SourceKind) -> Result<Box<dyn FrameSource>, SourceError> {
    source::open(&SourceConfig::new(kind), BufferPool::new())
}

fn images(location: &str) -> SourceKind {
    SourceKind::Images {
        location: location.to_string(),
    }
}

/// All frames to end of stream, checking seq, pts order and that each layout describes its data.
fn drain(source: &mut dyn FrameSource) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    while let Some(frame) = source.next_frame().expect("frame") {
        assert_eq!(frame.seq, frames.len() as u64);
        assert_eq!(frame.stream, 0);
        let pts = frame.pts.expect("pts");
        if let Some(prev) = frames.last() {
            assert!(pts > prev.pts.unwrap(), "pts must increase");
        }
        let l = frame.layout;
        assert_eq!(l, FrameLayout::packed(l.format, l.width, l.height));
        assert_eq!(frame.data().expect("pixels").len(), l.size());
        assert!(frame.detections.is_empty() && frame.skipped.is_empty());
        assert!(frame.times.arrival.elapsed() < Duration::from_secs(60));
        frames.push(frame);
    }
    // End of stream stays end of stream.
    assert!(source.next_frame().expect("after eos").is_none());
    frames
}

/// Mean of plane `plane` of a YUV 4:2:0 frame.
fn plane_mean(frame: &Frame, plane: usize) -> f64 {
    let l = frame.layout;
    let rows = if plane == 0 {
        l.height as usize
    } else {
        (l.height as usize).div_ceil(2)
    };
    let data = &frame.data().unwrap()[l.offsets[plane]..l.offsets[plane] + l.strides[plane] * rows];
    data.iter().map(|&v| v as f64).sum::<f64>() / data.len() as f64
}

#[test]
fn test_source_formats() {
    for format in [PixelFormat::I420, PixelFormat::Nv12, PixelFormat::Rgb] {
        let mut src = open(SourceKind::Test {
            pattern: "smpte".into(),
            width: 320,
            height: 240,
            num_buffers: 5,
            format,
        })
        .expect("open");
        let frames = drain(src.as_mut());
        assert_eq!(frames.len(), 5, "{format}");
        for f in &frames {
            assert_eq!(&*f.source, "videotestsrc pattern=smpte");
            assert_eq!(
                (f.layout.format, f.layout.width, f.layout.height),
                (format, 320, 240)
            );
        }
        let f = &frames[0];
        assert_eq!(f.pts, Some(Duration::ZERO));
        assert_eq!(frames[1].pts, Some(Duration::from_nanos(33_333_333)));
        let expected = match format {
            PixelFormat::I420 => ([0, 76800, 96000], [320, 160, 160]),
            PixelFormat::Nv12 => ([0, 76800, 0], [320, 320, 0]),
            _ => ([0, 0, 0], [960, 0, 0]),
        };
        assert_eq!((f.layout.offsets, f.layout.strides), expected, "{format}");
        let data = f.data().unwrap();
        match format {
            // SMPTE bars start with white: Y 235 in limited range, neutral chroma.
            PixelFormat::I420 | PixelFormat::Nv12 => {
                // No colorimetry in videotestsrc's caps: GStreamer's SD default, BT.601 limited.
                assert_eq!(f.colorimetry.matrix, Matrix::Bt601);
                assert_eq!(f.colorimetry.range, Range::Limited);
                assert!((data[0] as i32 - 235).abs() <= 2, "Y {}", data[0]);
                assert!((data[76800] as i32 - 128).abs() <= 2, "U {}", data[76800]);
            }
            _ => assert!(data[..3].iter().all(|&v| v >= 253), "{:?}", &data[..3]),
        }
    }
}

#[test]
fn stop_ends_the_stream() {
    let mut config = SourceConfig::new(SourceKind::Test {
        pattern: "ball".into(),
        width: 64,
        height: 48,
        num_buffers: 1000,
        format: PixelFormat::I420,
    });
    config.stream = 3;
    let mut src = source::open(&config, BufferPool::new()).expect("open");
    let frame = src.next_frame().expect("frame").expect("not eos");
    assert_eq!((frame.stream, frame.seq), (3, 0));
    let decode = frame.times.arrival.elapsed();
    assert!(decode < Duration::from_secs(1), "{decode:?}");
    src.stop();
    src.stop();
    assert!(src.next_frame().expect("after stop").is_none());
}

#[test]
fn jpeg_folder_in_name_order() {
    let dir = TempDir::new("jpeg");
    // Created in an order that differs from name order, each with its own size and colour.
    let made = [
        ("c.jpg", 80, 60, [0u8, 0, 255]),
        ("a.JPG", 64, 48, [255, 0, 0]),
        ("b.jpeg", 33, 17, [0, 255, 0]),
    ];
    for (name, w, h, rgb) in made {
        image::RgbImage::from_pixel(w, h, image::Rgb(rgb))
            .save_with_format(dir.join(name), image::ImageFormat::Jpeg)
            .expect("write jpeg");
    }
    std::fs::write(dir.join("notes.txt"), "not an image").unwrap();

    let mut src = open(images(&dir.location())).expect("open");
    let frames = drain(src.as_mut());
    let got: Vec<_> = frames
        .iter()
        .map(|f| (&*f.source, f.layout.width, f.layout.height))
        .collect();
    assert_eq!(
        got,
        [("a.JPG", 64, 48), ("b.jpeg", 33, 17), ("c.jpg", 80, 60)]
    );
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.layout.format, PixelFormat::I420);
        assert_eq!(f.colorimetry, Colorimetry::JPEG);
        assert_eq!(f.pts, Some(Duration::from_secs_f64(i as f64 / 30.0)));
    }
    // 33x17: luma rows of 33 bytes, chroma 17x9.
    assert_eq!(frames[1].layout.strides, [33, 17, 17]);
    assert_eq!(frames[1].layout.offsets, [0, 561, 561 + 153]);
    // The pixels are the file's: red has high V (Cr), blue high U (Cb), green both low.
    let uv = |f: &Frame| (plane_mean(f, 1), plane_mean(f, 2));
    let (ua, va) = uv(&frames[0]);
    let (ub, vb) = uv(&frames[1]);
    let (uc, vc) = uv(&frames[2]);
    assert!(va > 200.0 && ua < 128.0, "red: U {ua} V {va}");
    assert!(ub < 80.0 && vb < 80.0, "green: U {ub} V {vb}");
    assert!(uc > 200.0 && vc < 160.0, "blue: U {uc} V {vc}");
}

#[test]
fn png_folder_and_glob() {
    let dir = TempDir::new("png");
    let rgb = image::RgbImage::from_fn(33, 17, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let rgba = image::RgbaImage::from_fn(20, 10, |x, y| image::Rgba([x as u8, y as u8, 9, 200]));
    rgb.save(dir.join("frame_2.png")).unwrap();
    rgba.save(dir.join("frame_10.png")).unwrap();
    image::RgbImage::new(8, 8)
        .save(dir.join("other.jpg"))
        .unwrap();

    let glob = format!("{}/frame_*.png", dir.location());
    let frames = drain(open(images(&glob)).expect("open").as_mut());
    let names: Vec<_> = frames.iter().map(|f| &*f.source).collect();
    assert_eq!(names, ["frame_10.png", "frame_2.png"]);

    let (a, b) = (&frames[0], &frames[1]);
    assert_eq!(
        (a.layout.format, a.layout.width, a.layout.height),
        (PixelFormat::Rgba, 20, 10)
    );
    assert_eq!(
        (b.layout.format, b.layout.width, b.layout.height),
        (PixelFormat::Rgb, 33, 17)
    );
    assert_eq!(a.data().unwrap(), rgba.as_raw().as_slice());
    assert_eq!(b.data().unwrap(), rgb.as_raw().as_slice());

    // Without the glob the folder mixes PNG and JPEG: the odd file is named.
    let err = open(images(&dir.location())).err().expect("mixed folder");
    assert!(matches!(err, SourceError::Input { .. }), "{err}");
    assert!(err.to_string().contains("other.jpg"), "{err}");
    // `?` matches one character.
    let glob = format!("{}/frame_?.png", dir.location());
    let frames = drain(open(images(&glob)).expect("open").as_mut());
    assert_eq!(frames.len(), 1);
    assert_eq!(&*frames[0].source, "frame_2.png");
}

#[test]
fn visdrone_clip_frames() {
    let data = std::env::var("OCTOPIPE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let clip = data.join("visdrone/clip-9999999/images");
    let Ok(entries) = std::fs::read_dir(&clip) else {
        eprintln!("skipping: no VisDrone clip at {}", clip.display());
        return;
    };
    // Absolute, so that the links below resolve from the temporary folder.
    let clip = clip.canonicalize().unwrap();
    let mut names: Vec<_> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".jpg"))
        .collect();
    names.sort();
    names.truncate(3);
    let dir = TempDir::new("visdrone");
    for name in &names {
        std::os::unix::fs::symlink(clip.join(name), dir.join(name)).unwrap();
    }

    let frames = drain(open(images(&dir.location())).expect("open").as_mut());
    let got: Vec<_> = frames.iter().map(|f| f.source.to_string()).collect();
    assert_eq!(got, names);
    assert_eq!(names[0], "9999999_00023_d_0000001.jpg");
    for f in &frames {
        assert_eq!(
            (f.layout.format, f.layout.width, f.layout.height),
            (PixelFormat::I420, 2000, 1500)
        );
        assert_eq!(f.colorimetry, Colorimetry::JPEG);
        // An aerial photo, not a flat grey picture.
        let y = &f.data().unwrap()[..2000 * 1500];
        let (lo, hi) = (y.iter().min().unwrap(), y.iter().max().unwrap());
        assert!(hi - lo > 100, "luma range {lo}..{hi}");
    }
}

#[test]
fn h264_mp4() {
    let dir = TempDir::new("media");
    let path = dir.join("ball.mp4");
    common::encode(&format!(
        "videotestsrc num-buffers=10 pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc ! mp4mux ! filesink location={}",
        path.display()
    ));

    let frames = drain(
        open(SourceKind::Media {
            location: path.display().to_string(),
        })
        .expect("open")
        .as_mut(),
    );
    assert_eq!(frames.len(), 10);
    for f in &frames {
        assert!(f.source.starts_with("file:///"), "{}", f.source);
        assert!(f.source.ends_with("/ball.mp4"), "{}", f.source);
        assert!(matches!(
            f.layout.format,
            PixelFormat::I420 | PixelFormat::Nv12
        ));
        assert_eq!((f.layout.width, f.layout.height), (160, 120));
        assert_eq!(f.colorimetry.range, Range::Limited);
        assert_eq!(f.colorimetry.chroma_site, ChromaSite::Left);
    }
    // x264enc's B-frames shift the first pts; the spacing is the frame rate's.
    let span = frames[9].pts.unwrap() - frames[0].pts.unwrap();
    assert!(
        span.abs_diff(Duration::from_millis(300)) < Duration::from_millis(1),
        "{span:?}"
    );
}

#[test]
fn missing_decoder_is_named() {
    let dir = TempDir::new("missing");
    let path = dir.join("part2.mkv");
    common::encode(&format!(
        "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 ! avenc_mpeg4 ! matroskamux \
         ! filesink location={}",
        path.display()
    ));
    // Hide the only MPEG-4 part 2 decoder from decodebin (no other test uses it).
    let decoder = gst::Registry::get()
        .lookup_feature("avdec_mpeg4")
        .expect("avdec_mpeg4");
    decoder.set_rank(gst::Rank::NONE);
    let mut src = open(SourceKind::Media {
        location: path.display().to_string(),
    })
    .expect("open");
    let err = src.next_frame().expect_err("no decoder");
    decoder.set_rank(gst::Rank::PRIMARY);
    match &err {
        SourceError::MissingElement { element, package } => {
            assert!(element.contains("MPEG-4"), "{err}");
            assert!(package.contains("gstreamer1.0-libav"), "{err}");
        }
        _ => panic!("expected MissingElement, got {err:?}"),
    }
}

#[test]
fn input_errors() {
    let dir = TempDir::new("errors");

    let missing = dir.join("nope.mp4");
    let err = open(SourceKind::Media {
        location: missing.display().to_string(),
    })
    .err()
    .expect("missing file");
    assert!(matches!(err, SourceError::Input { .. }), "{err}");
    assert!(err.to_string().contains("nope.mp4"), "{err}");

    let text = dir.join("readme.txt");
    std::fs::write(&text, "this is not a video\n".repeat(100)).unwrap();
    let start = Instant::now();
    let mut src = open(SourceKind::Media {
        location: text.display().to_string(),
    })
    .expect("open");
    let err = src.next_frame().expect_err("text file as media");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert!(matches!(err, SourceError::Stream { .. }), "{err}");
    assert!(err.to_string().contains("readme.txt"), "{err}");
    assert!(src.next_frame().expect("after error").is_none());

    let empty = TempDir::new("empty");
    let err = open(images(&empty.location())).err().expect("empty folder");
    assert!(matches!(err, SourceError::Input { .. }), "{err}");
    assert!(err.to_string().contains(&empty.location()), "{err}");

    let err = open(images(&format!("{}/*.png", dir.location())))
        .err()
        .expect("glob without matches");
    assert!(err.to_string().contains("*.png"), "{err}");

    let err = open(SourceKind::Test {
        pattern: "plaid".into(),
        width: 64,
        height: 48,
        num_buffers: 1,
        format: PixelFormat::I420,
    })
    .err()
    .expect("unknown pattern");
    assert!(matches!(err, SourceError::Setting { .. }), "{err}");
    assert!(err.to_string().contains("smpte"), "{err}");
}

/// With `on-damaged=fail` a file that is no image ends the stream after the frames before it,
/// naming it; by default (`skip`) it is left out and counted, and the next image comes.
#[test]
fn broken_image_is_named_after_the_good_ones() {
    let dir = TempDir::new("broken");
    image::RgbImage::new(16, 16)
        .save(dir.join("1.jpg"))
        .unwrap();
    std::fs::write(dir.join("2.jpg"), "not a jpeg").unwrap();
    image::RgbImage::new(16, 16)
        .save(dir.join("3.jpg"))
        .unwrap();

    let mut config = SourceConfig::new(images(&dir.location()));
    config.on_damaged = source::OnDamaged::Fail;
    let mut src = source::open(&config, BufferPool::new()).expect("open");
    let first = src.next_frame().expect("first frame").expect("not eos");
    assert_eq!(&*first.source, "1.jpg");
    let err = src.next_frame().expect_err("broken file");
    assert!(err.to_string().contains("2.jpg: not a JPEG file"), "{err}");
    assert!(src.next_frame().expect("after error").is_none());

    let mut src = open(images(&dir.location())).expect("open");
    let names: Vec<String> = std::iter::from_fn(|| src.next_frame().expect("frame"))
        .map(|f| f.source.to_string())
        .collect();
    assert_eq!(names, ["1.jpg", "3.jpg"]);
    assert_eq!(src.skipped(), 1);
}
