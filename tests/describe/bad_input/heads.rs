//! GStreamer heads and their decoders: demuxers, decodebin, queues inside a head, and decoders
//! slow to start, never starting or stalling, told apart from a source held back downstream.

use super::*;

#[test]
fn a_head_with_a_demuxer_decodes_an_mp4() {
    let dir = common::temp_dir("head-qtdemux");
    let path = h264_mp4(&dir, true);
    let head = format!(
        "filesrc location={} ! qtdemux ! h264parse ! avdec_h264",
        path.display()
    );
    succeeds_with_frames(&run(&boxes_only(&head)), 60);
}

#[test]
fn a_decodebin_head_decodes_the_video_of_a_file_with_audio() {
    let dir = common::temp_dir("head-decodebin");
    let path = dir.join("flight.mkv");
    common::encode(&format!(
        "videotestsrc num-buffers=30 ! video/x-raw,width=160,height=120,framerate=30/1 ! x264enc ! mux. \
         audiotestsrc num-buffers=40 ! audioconvert ! vorbisenc ! mux. \
         matroskamux name=mux ! filesink location={}",
        path.display()
    ));
    let head = format!("filesrc location={} ! decodebin", path.display());
    succeeds_with_frames(&run(&boxes_only(&head)), 30);
}

#[test]
fn a_queue_inside_a_head_is_gstreamers_and_one_with_size_or_policy_is_octopipes() {
    let head =
        "videotestsrc num-buffers=5 ! queue ! videoconvert ! queue2 ! queue max-size-buffers=2";
    let text = boxes_only(&format!("{head} ! queue size=2 policy=block"));
    let graph = common::graph(&text);
    let source = &graph.nodes[0];
    assert_eq!(source.element.describe_source().as_deref(), Some(head));
    assert_eq!(
        source.queue,
        octopipe::pipeline::Queue {
            size: 2,
            policy: octopipe::pipeline::EdgePolicy::Block
        },
        "the last queue sets the edge after the head"
    );
    succeeds_with_frames(&run(&text), 5);
}

#[test]
fn a_decoder_slow_to_start_is_not_a_stall() {
    // The first frame comes after 2 s (clocksync holds it), then the rest at once.
    let head = "videotestsrc num-buffers=10 ! clocksync ts-offset=2000000000";
    let stderr = succeeds_with_frames(
        &run(&boxes_only(&format!("{head} ! head stall-timeout=1"))),
        10,
    );
    assert!(
        stderr.contains(&format!(
            "octopipe: warning: {head}: the decoder has given no first frame in 1 s: still starting (start-timeout=60)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_decoder_that_never_starts_fails_after_its_start_timeout() {
    let head = "videotestsrc num-buffers=10 ! clocksync ts-offset=20000000000";
    let stderr = fails_with(
        &run(&boxes_only(&format!("{head} ! head start-timeout=1"))),
        &[&format!(
            "octopipe: error: {head}: the decoder gave no first frame in 1 s (start-timeout=1): a damaged file, or a decoder that cannot start?"
        )],
    );
    assert!(
        !stderr.contains("frames: "),
        "no frame entered: no report of zeros (issue 39): {stderr}"
    );
}

#[test]
fn a_decoder_that_stops_after_its_first_frame_has_stalled() {
    // Frames 3 s apart: after the first, nothing for longer than the stall time.
    let head = "videotestsrc num-buffers=3 ! video/x-raw,framerate=1/3 ! clocksync";
    let stderr = fails_with(
        &run(&boxes_only(&format!("{head} ! head stall-timeout=1"))),
        &[&format!(
            "octopipe: error: {head}: decoding stalled: no frame, no end of stream and no error for 1 s after frame 1 (stall-timeout=1; a damaged or truncated file?)"
        )],
    );
    assert_eq!(common::frame_accounting(&stderr), (1, 1, 0), "{stderr}");
}

#[test]
fn a_source_held_back_by_downstream_is_not_stalled() {
    use std::io::Read;
    // The sink writes to a pipe nobody reads for 2.5 s: every stage waits on the next, the
    // source longer than its stall time. Then the reader drains it and the run completes.
    let text = "testsrc width=320 height=240 num-buffers=300 stall-timeout=1 \
                ! boxes format=synthetic count=50 ! jsonl location=-";
    let mut child = octopipe()
        .args(["run", text])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running: {}", err_reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = reader.join().unwrap().split(|b| *b == b'\n').count() - 1;
    let stderr = err_reader.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("stalled"), "{stderr}");
    assert_eq!(common::frame_accounting(&stderr), (300, 300, 0), "{stderr}");
    assert_eq!(lines, 300 * 50, "{stderr}");
}
