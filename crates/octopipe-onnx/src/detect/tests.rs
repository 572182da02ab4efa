//! The detector's boxes from tiles to frame pixels: merged across tile borders, rounded and
//! clipped.

use super::place::pixel_box;
use super::*;
use octopipe_core::frame::SkipReason;
use octopipe_stages::tiles::Edge;

#[test]
fn an_object_across_a_tile_border_is_one_box() {
    // 640x640 tiles of a 1184x640 frame with overlap 0.15: the second starts at 544. A car at
    // x 600..700 is cut at 640 in the first tile and whole in the second.
    let tiles = octopipe_stages::tiles::regular(1184, 640, 640, 640, 0.15, Edge::Shift);
    assert_eq!(tiles, [[0, 0, 640, 640], [544, 0, 640, 640]]);
    let input = (320, 320);
    // Each tile's model input is its 640x640 pixels halved.
    let cut = tiles::to_frame([300.0, 50.0, 320.0, 70.0], tiles[0], input, Fit::Stretch);
    let whole = tiles::to_frame([28.0, 50.0, 78.0, 70.0], tiles[1], input, Fit::Stretch);
    assert_eq!(cut, [600.0, 100.0, 640.0, 140.0]);
    assert_eq!(whole, [600.0, 100.0, 700.0, 140.0]);
    // Another car beside it, overlapping the whole one a little: kept either way.
    let beside = [690.0, 100.0, 790.0, 140.0];
    let boxes = vec![
        RawBox {
            b: cut,
            score: 0.8,
            class: 2,
        },
        RawBox {
            b: whole,
            score: 0.7,
            class: 2,
        },
        RawBox {
            b: beside,
            score: 0.6,
            class: 2,
        },
    ];
    let plain = Suppress { iou: 0.5, ios: 1.0 };
    let mut v = boxes.clone();
    nms(&mut v, plain, 100, |c| c);
    assert_eq!(v.len(), 3, "IoU 0.4: plain NMS keeps the cut box");
    let merging = Suppress {
        iou: 0.5,
        ios: 0.85,
    };
    let mut v = boxes;
    nms(&mut v, merging, 100, |c| c);
    let kept: Vec<[f32; 4]> = v.iter().map(|b| b.b).collect();
    assert_eq!(
        kept,
        [whole, beside],
        "the cut box, best scored, grows to the whole object"
    );
}

#[test]
fn pixel_boxes_round_and_clip() {
    assert_eq!(
        pixel_box([10.4, 20.6, 30.5, 40.0], 100, 100),
        Ok([10, 21, 21, 19])
    );
    assert_eq!(
        pixel_box([-5.0, -5.0, 10.0, 10.0], 100, 100),
        Ok([0, 0, 10, 10])
    );
    assert_eq!(
        pixel_box([99.2, 0.0, 120.0, 10.0], 100, 100),
        Err(SkipReason::TooSmall)
    );
    assert_eq!(
        pixel_box([150.0, 0.0, 160.0, 10.0], 100, 100),
        Err(SkipReason::OutsideFrame)
    );
}

#[test]
fn the_engine_names_everything_of_the_models_io_it_does_not_run() {
    use octopipe_stages::preprocess::{DType, Layout};
    let heads = [
        ("heat".to_string(), DType::F16),
        ("wh".to_string(), DType::F16),
    ];
    let fits = engine::check_io((DType::F16, Layout::Nhwc), Decoder::CenterNet, &heads);
    assert!(fits.is_ok(), "{fits:?}");
    let one = [("out".to_string(), DType::F32)];
    let err = engine::check_io((DType::F32, Layout::Nchw), Decoder::Yolov8, &one).unwrap_err();
    let IoError::NotForEngine(unfit) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        unfit,
        &[
            Unfit::InputType(DType::F32),
            Unfit::Nchw,
            Unfit::Outputs(Decoder::Yolov8),
            Unfit::OutputType {
                name: "out".into(),
                dtype: DType::F32
            },
        ]
    );
    assert_eq!(
        err.to_string(),
        "engine=octopipe runs a CenterNet with an f16 NHWC input and f16 heads (the shared \
         CenterNet's heads model, docs/engine.md); its input is f32, not f16; its input is \
         NCHW, not NHWC; its outputs are read as Yolov8, not as CenterNet's two heads; output \
         'out' is f32, not f16"
    );
}
