//! (e) Bad models, labels, annotation files and property values are element errors naming the
//! element and the file or property; `gst-launch-1.0` exits non-zero with that message.

use gstreamer as gst;
use gstreamer::prelude::*;

use super::*;

/// The error `launch` ends with, run in this process.
fn error_of(launch: &str) -> String {
    init();
    let pipeline = gst::parse::launch(launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    run(&pipeline).expect_err("the pipeline fails")
}

const VIDEO: &str =
    "videotestsrc num-buffers=2 ! video/x-raw,format=I420,width=320,height=240,framerate=30/1";

#[test]
fn a_missing_model_and_annotations_fail_gst_launch_naming_them() {
    let _serial = serial();
    let Some(plugins) = plugin_dir() else { return };
    for (element, file) in [
        (
            "octoclassify model=/nonexistent/crops.onnx",
            "/nonexistent/crops.onnx",
        ),
        (
            "octoboxes format=det location=/nonexistent/annotations",
            "/nonexistent/annotations",
        ),
        (
            "octoboxes format=mot location=/nonexistent/seq.txt",
            "/nonexistent/seq.txt",
        ),
    ] {
        let name = element.split(' ').next().unwrap();
        let out = gst_command("gst-launch-1.0", &plugins)
            .args(format!("{VIDEO} ! {element} ! fakesink").split(' '))
            .output()
            .expect("gst-launch-1.0 runs (apt-get install gstreamer1.0-tools)");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{element}: exit 0\n{text}");
        assert!(
            text.contains(&format!("{name}0")),
            "{element}: names the element\n{text}"
        );
        assert!(text.contains(file), "{element}: names the file\n{text}");
    }
}

#[test]
fn labels_that_do_not_name_the_model_classes_are_an_element_error() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let model = data.join("models/visdrone-crops-64.onnx");
    let e = error_of(&format!(
        "{VIDEO} ! octoclassify model={} labels=car,person ! fakesink",
        model.display()
    ));
    assert!(e.starts_with("octoclassify"), "{e}");
    assert!(
        e.contains(&model.display().to_string()) && e.contains("4 classes"),
        "{e}"
    );
    let labels = tmp("labels").join("none.txt");
    let e = error_of(&format!(
        "{VIDEO} ! octoclassify model={} labels-file={} ! fakesink",
        model.display(),
        labels.display()
    ));
    assert!(
        e.starts_with("octoclassify") && e.contains(&labels.display().to_string()),
        "{e}"
    );
}

#[test]
fn a_bad_property_value_is_an_element_error_naming_it() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let e = error_of(&format!(
        "{VIDEO} ! octoclassify model={} layout=nhcw ! fakesink",
        data.join("models/visdrone-crops-64.onnx").display()
    ));
    assert!(e.starts_with("octoclassify"), "{e}");
    assert!(
        e.contains("layout") && e.contains("nhcw") && e.contains("nchw"),
        "{e}"
    );
    let e = error_of(&format!("{VIDEO} ! octoboxes format=mot ! fakesink"));
    assert!(e.starts_with("octoboxes") && e.contains("location"), "{e}");
}

#[test]
fn an_existing_output_is_refused() {
    let _serial = serial();
    let dir = tmp("exists");
    let out = dir.join("objects.jsonl");
    std::fs::write(&out, "earlier\n").unwrap();
    let e = error_of(&format!(
        "{VIDEO} ! octoboxes format=synthetic ! octojsonl location={} ! fakesink",
        out.display()
    ));
    assert!(
        e.starts_with("octojsonl") && e.contains(&out.display().to_string()),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "earlier\n",
        "left alone"
    );
}

/// The error message `launch` posts first: its domain and code, and its text.
fn error_message_of(launch: &str) -> (String, String) {
    init();
    let pipeline = gst::parse::launch(launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let _ = pipeline.set_state(gst::State::Playing);
    let bus = pipeline.bus().unwrap();
    let msg = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(120),
            &[gst::MessageType::Error, gst::MessageType::Eos],
        )
        .expect("an error within 120 s");
    pipeline.set_state(gst::State::Null).unwrap();
    let gst::MessageView::Error(e) = msg.view() else {
        panic!("the pipeline ends without an error: {launch}");
    };
    let error = e.error();
    let code = format!(
        "{:?} {:?} {:?} {:?}",
        error.kind::<gst::CoreError>(),
        error.kind::<gst::LibraryError>(),
        error.kind::<gst::ResourceError>(),
        error.kind::<gst::StreamError>()
    );
    (code, error.message().to_string())
}

/// A classifier whose model gives NaN logits fails the same way shared as alone: the shared
/// stage's error reaches the element typed (a model's failure, not a stream format error), with
/// the stage's own message.
#[test]
fn a_shared_stage_failing_is_the_element_error_the_element_alone_gives() {
    let _serial = serial();
    if data_and_ort().is_none() {
        return;
    }
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models/nan-logits.onnx");
    let launch = |shared: &str| {
        format!(
            "videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=160,height=120,framerate=30/1 \
             ! octoboxes format=synthetic count=3 ! octoclassify model={} {shared} ! fakesink",
            model.display()
        )
    };
    let (alone, alone_text) = error_message_of(&launch(""));
    let (shared, shared_text) = error_message_of(&launch("shared=nan0"));
    assert!(alone_text.contains("NaN logits"), "{alone_text}");
    assert!(shared_text.contains("NaN logits"), "{shared_text}");
    assert_eq!(shared, alone, "{shared_text} vs {alone_text}");
    assert!(alone.contains("OpenRead"), "a model's failure: {alone}");
}

/// Two branches sharing a classifier whose model gives NaN logits: the shared stage stops at its
/// first error (as a stage does in `octopipe run`), and each element posts that error, typed,
/// whether its frames were held in the failing call or handed to the stage after it stopped
/// (never "the shared stage stopped").
#[test]
fn every_element_sharing_a_failed_stage_posts_its_error() {
    let _serial = serial();
    if data_and_ort().is_none() {
        return;
    }
    init();
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models/nan-logits.onnx");
    let mut launch =
        "videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=160,height=120,framerate=30/1 \
         ! octoboxes format=synthetic count=3 ! tee name=t"
            .to_string();
    // The second branch's frames come 300 ms late: after the stage failed on the first's.
    for (k, late) in [(0, ""), (1, "identity sleep-time=300000 ! ")] {
        launch += &format!(
            " t. ! queue ! {late}octoclassify name=c{k} model={} shared=nan1 ! fakesink",
            model.display()
        );
    }
    let pipeline = gst::parse::launch(&launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let _ = pipeline.set_state(gst::State::Playing);
    let bus = pipeline.bus().unwrap();
    let mut errors = std::collections::BTreeMap::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while errors.len() < 2 && std::time::Instant::now() < until {
        let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_seconds(1),
            &[gst::MessageType::Error, gst::MessageType::Eos],
        ) else {
            continue;
        };
        match msg.view() {
            gst::MessageView::Error(e) => {
                let src = e.src().map(|s| s.name().to_string()).unwrap_or_default();
                let kind = format!("{:?}", e.error().kind::<gst::ResourceError>());
                errors
                    .entry(src)
                    .or_insert((kind, e.error().message().to_string()));
            }
            _ => break,
        }
    }
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["c0", "c1"],
        "both elements post an error: {errors:?}"
    );
    for (src, (kind, text)) in &errors {
        assert!(text.contains("NaN logits"), "{src}: {text}");
        assert!(
            kind.contains("OpenRead"),
            "{src}: a model's failure: {kind}"
        );
    }
}
