//! The `appinfer` stage through the library API: the application takes each batch's
//! preprocessed tensor, answers with labels, and the labels reach the sinks; labels that do not
//! fit are refused and may be given again; a dropped reply passes the batch on unlabelled; a
//! batch left unanswered past `timeout=` fails the run naming the stage. No model file, no ONNX
//! Runtime: the application is the model.

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use octopipe::appinfer::{LabelError, Labels, NoBatch};
use octopipe::{AppBox, AppFrame, Object, Outcome, Pipeline, PixelFormat, PushError};

const DESC: &str = "app name=cam ! batch max-frames=1 ! preprocess size=16x16 \
                    ! appinfer labels=even,odd ! appsink";

/// A 64x48 RGB frame with `boxes` (x, y, w, h).
fn frame(boxes: &[[f64; 4]]) -> AppFrame {
    let rgb: Vec<u8> = (0..64 * 48 * 3).map(|i| (i % 251) as u8).collect();
    AppFrame::packed(PixelFormat::Rgb, 64, 48, rgb)
        .boxes(boxes.iter().map(|b| AppBox::new(b[0], b[1], b[2], b[3])))
}

/// The pipeline of `desc`, running on its thread, with its results channel.
fn start(
    desc: &str,
) -> (
    octopipe::AppSource,
    octopipe::AppInfer,
    crossbeam_channel::Receiver<Object>,
    thread::JoinHandle<Outcome>,
) {
    let mut p = Pipeline::from_description(desc, &HashMap::new()).expect("description");
    let cam = p.app_source(Some("cam")).expect("app source");
    let infer = p.app_infer(None).expect("appinfer stage");
    let objects = p.results(256);
    (cam, infer, objects, thread::spawn(move || p.run()))
}

#[test]
fn labels_reach_the_sinks_row_by_row() {
    let (cam, infer, objects, run) = start(DESC);
    cam.push(frame(&[[0.0, 0.0, 8.0, 8.0], [10.0, 10.0, 20.0, 20.0]]))
        .unwrap();
    let mut b = infer
        .next_timeout(Duration::from_secs(30))
        .expect("a batch");
    assert_eq!(b.tensor.shape, vec![2, 3, 16, 16]);
    assert_eq!(b.tensor.len(), 2 * 3 * 16 * 16);
    let boxes: Vec<_> = b.rows.iter().map(|r| (r.box_index, r.bbox)).collect();
    assert_eq!(boxes, vec![(0, [0, 0, 8, 8]), (1, [10, 10, 20, 20])]);
    assert_eq!((b.rows[1].offset, b.rows[1].size), (768, (16, 16)));
    b.reply
        .send(Labels::Ids {
            ids: vec![1, 0],
            scores: Some(vec![0.75, 0.5]),
        })
        .unwrap();
    assert!(b.reply.is_sent());
    cam.push(frame(&[[0.0, 0.0, 8.0, 8.0]])).unwrap();
    let mut b = infer
        .next_timeout(Duration::from_secs(30))
        .expect("a batch");
    // Logits: softmax, then the best class, as `classify` does.
    b.reply
        .send(Labels::Scores {
            values: vec![2.0, 0.0],
            classes: 2,
            softmax: true,
        })
        .unwrap();
    cam.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let got: Vec<_> = objects
        .iter()
        .map(|o| {
            (
                o.frame,
                o.label.as_deref().map(str::to_string),
                o.class_id,
                o.score,
            )
        })
        .collect();
    let p = 2f32.exp() / (2f32.exp() + 1.0);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], (0, Some("odd".into()), Some(1), Some(0.75)));
    assert_eq!(got[1], (0, Some("even".into()), Some(0), Some(0.5)));
    assert_eq!(
        (got[2].0, got[2].1.as_deref(), got[2].2),
        (1, Some("even"), Some(0))
    );
    assert!((got[2].3.unwrap() - p).abs() < 1e-6, "{:?}", got[2]);
    assert!(outcome
        .report
        .extra
        .iter()
        .any(|l| l
            .contains("appinfer 'appinfer': 2 batches labelled by the application (3 objects)")));
}

#[test]
fn labels_that_do_not_fit_are_refused_and_may_be_given_again() {
    let (cam, infer, objects, run) = start(DESC);
    cam.push(frame(&[[0.0, 0.0, 8.0, 8.0], [10.0, 10.0, 8.0, 8.0]]))
        .unwrap();
    let mut b = infer
        .next_timeout(Duration::from_secs(30))
        .expect("a batch");
    let wrong = [
        Labels::Ids {
            ids: vec![0],
            scores: None,
        },
        Labels::Ids {
            ids: vec![0, 2],
            scores: None,
        },
        Labels::Names {
            names: vec!["even".into(), "cat".into()],
            scores: None,
        },
        Labels::Scores {
            values: vec![0.0; 6],
            classes: 3,
            softmax: true,
        },
    ];
    let said = [
        "batch 0 has 2 rows, but 1 labels were given",
        "class id 2 is not one of the 2 classes",
        "label 'cat' is not one of labels=even,odd",
        "3 scores per row",
    ];
    for (labels, words) in wrong.into_iter().zip(said) {
        let e = b.reply.send(labels).unwrap_err();
        assert!(e.to_string().contains(words), "{e} (wanted: {words})");
        assert!(!b.reply.is_sent());
    }
    let names = Labels::Names {
        names: vec!["odd".into(), "even".into()],
        scores: None,
    };
    b.reply.send(names.clone()).unwrap();
    let again = b.reply.send(names).unwrap_err();
    assert!(matches!(again, LabelError::Gone { .. }), "{again}");
    assert!(
        again.to_string().contains("labels were given already"),
        "{again}"
    );
    cam.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let labels: Vec<_> = objects
        .iter()
        .map(|o| o.label.unwrap().to_string())
        .collect();
    assert_eq!(labels, ["odd", "even"]);
}

#[test]
fn a_dropped_reply_passes_the_batch_on_unlabelled() {
    let (cam, infer, objects, run) = start(DESC);
    cam.push(frame(&[[0.0, 0.0, 8.0, 8.0]])).unwrap();
    let b = infer
        .next_timeout(Duration::from_secs(30))
        .expect("a batch");
    drop(b);
    cam.close();
    // The stage ends after the source: no more batches.
    let end = infer.next_timeout(Duration::from_secs(30)).unwrap_err();
    assert_eq!(end, NoBatch::Ended);
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let got: Vec<_> = objects.iter().collect();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].bbox, got[0].label.is_none()), ([0, 0, 8, 8], true));
    assert!(outcome
        .report
        .extra
        .iter()
        .any(|l| l.contains("1 passed on without labels")));
}

#[test]
fn an_unanswered_batch_past_its_timeout_fails_the_run() {
    let (cam, infer, _objects, run) = start(&DESC.replace("labels=even,odd", "timeout=0.3"));
    cam.push(frame(&[[0.0, 0.0, 8.0, 8.0]])).unwrap();
    let held = infer
        .next_timeout(Duration::from_secs(30))
        .expect("a batch");
    let outcome = run.join().unwrap();
    let e = outcome.error.expect("the run fails").to_string();
    // "within 0.3 s" or a little more: the stage looks every 50 ms.
    assert!(
        e.contains("appinfer 'appinfer': batch 0 got no labels within 0.")
            && e.ends_with(" s (timeout)"),
        "{e}"
    );
    // Labels after the end are refused, naming why.
    let mut reply = held.reply;
    let late = reply
        .send(Labels::Ids {
            ids: vec![0],
            scores: None,
        })
        .unwrap_err();
    assert!(late.to_string().contains("no longer waits"), "{late}");
    // And the source refuses frames once the run is over.
    let refused = cam.try_push(frame(&[])).unwrap_err();
    assert!(
        matches!(
            refused,
            PushError::Stopped { .. } | PushError::Closed { .. }
        ),
        "{refused}"
    );
}
