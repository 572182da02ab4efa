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
