//! The policy's checks on parsed descriptions: files, elements, caps, URIs, ports.

use super::*;
use octopipe_pipeline::describe::Builtin;
use std::collections::HashMap;

fn check(policy: &Policy, text: &str) -> Result<(), Refusal> {
    let desc = octopipe_pipeline::describe::parse("<test>", text, &HashMap::new()).unwrap();
    policy.check(&desc, &Registry::builtin())
}

#[test]
fn files_only_under_allowed_directories() {
    let dir = std::env::temp_dir().join(format!("octopipe-policy-{}", std::process::id()));
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(dir.join("secret"), "x").unwrap();
    let _ = std::os::unix::fs::symlink(dir.join("secret"), allowed.join("link.mp4"));
    let mut p = Policy::new();
    let a = allowed.display();
    assert!(
        check(&p, &format!("media location={a}/x.mp4 ! boxes")).is_err(),
        "none allowed"
    );
    p.allow_dir(&allowed).unwrap();
    p.allow_udp_port(5004);
    for ok in [
        format!("media location={a}/not-yet.mp4 ! boxes"),
        format!("media location=file://{a}/x.mp4 ! boxes"),
        format!("images location={a}/*.jpg ! boxes"),
        "media location=rtsp://u:p@cam/s ! boxes".to_string(),
        "rtp port=5004 ! boxes format=synthetic".to_string(),
    ] {
        assert_eq!(check(&p, &ok), Ok(()), "{ok}");
    }
    for bad in [
        format!("media location={a}/../secret ! boxes"),
        format!("media location={a}/link.mp4 ! boxes"),
        format!("media location={a}/sub/../../secret ! boxes"),
        "media location=/dev/zero ! boxes".to_string(),
        "media location=fd://0 ! boxes".to_string(),
        format!("testsrc ! boxes format=mot location=rtsp://x/{a}"),
        "filesrc location=/x ! decodebin ! boxes".to_string(),
    ] {
        let e = check(&p, &bad).unwrap_err();
        assert!(e.forbidden, "{bad}: {e:?}");
    }
    let e = check(
        &p,
        "media location=rtsp://admin:hunter2@x/../../etc ! boxes",
    );
    assert_eq!(e, Ok(()), "a URI is the camera's business");
    let e = check(&p, "media location=smb://admin:hunter2@x/y ! boxes").unwrap_err();
    assert!(!e.message.contains("hunter2"), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uris_only_of_allowed_schemes_and_ports_and_no_uri_as_a_stage() {
    let mut p = Policy::new();
    p.allow_element("videotestsrc");
    for (bad, words) in [
        ("file:///etc/shadow ! head decoder=cpu ! boxes", "is a URI"),
        ("fd://0 ! boxes", "is a URI"),
        (
            "videotestsrc ! video/x-raw,x=file:///e ! boxes",
            "is not caps (it holds '://')",
        ),
        ("videotestsrc ! file:/etc/shadow ! boxes", "is not caps"),
        ("videotestsrc ! x-raw ! boxes", "GStreamer element 'x-raw'"),
        (
            "media location=http://h/x.m3u8 ! boxes",
            "--allow-scheme http",
        ),
        ("media location=srt://:7001 ! boxes", "srt only as a caller"),
        (
            "media location=srt://h:7001?mode=listener ! boxes",
            "srt only as a caller",
        ),
        (
            "media location=udp://@:5004 ! boxes",
            "--allow-udp-port 5004",
        ),
        (
            "rtp port=5004 ! boxes",
            "rtp port=5004: UDP port 5004 is not one",
        ),
        (
            "media location=rtsps://cam/x ! boxes",
            "come over TLS, which the station's relay does not read",
        ),
        (
            "media location=rtsph://cam/x ! boxes",
            "--allow-scheme rtsph to take such servers' answers unbounded",
        ),
        (
            "media location=rtsp://0x0:554/x ! boxes",
            "host '0x0' is every interface",
        ),
        (
            "media location=rtsp://[::]/x ! boxes",
            "reaches this station's own machine",
        ),
        (
            "media location=rtsp://%30.0.0.0/x ! boxes",
            "host '0.0.0.0'",
        ),
    ] {
        let e = check(&p, bad).unwrap_err();
        assert!(e.forbidden && e.message.contains(words), "{bad}: {e:?}");
    }
    // As GStreamer reads them: escapes decoded, every mode= looked at, any spelling of
    // every interface (issue 50).
    for bad in [
        "srt://[::0]:7120?mode=caller&mode=listener",
        "srt://cam:7120?mo%64e=listener",
        "srt://cam:7120?MODE=rendezvous",
        "srt://cam:7120?mode=%6Cistener&mode=caller",
        "srt://[::ffff:0.0.0.0]:7120",
        "srt://[::]:7120",
        "srt://[0:0::0]:7120",
        "srt://0:7120",
        "srt://0x0:7120",
        "srt://00.0.0.0:7120",
        "srt://%30.0.0.0:7120",
        "srt://@:7120",
        "SRT://:7120?mode=caller",
        "srt://cam:7120?mode=%zz",
    ] {
        let e = check(&p, &format!("media location=\"{bad}\" ! boxes")).unwrap_err();
        assert!(e.forbidden && e.message.contains("srt"), "{bad}: {e:?}");
    }
    p.allow_scheme("HTTP");
    p.allow_scheme("rtsps");
    p.allow_udp_port(5004);
    let e = check(&p, "media location=http://0.0.0.0:8080/x.m3u8 ! boxes").unwrap_err();
    assert!(e.message.contains("every interface"), "{e:?}");
    for ok in [
        "videotestsrc ! video/x-raw(memory:CUDAMemory),format=NV12,width=[1,64],framerate=30/1 ! boxes",
        "media location=http://h/x.m3u8 ! boxes",
        "media location=rtsps://cam.example/x ! boxes",
        "media location=rtsp://127.0.0.1:8554/x ! boxes",
        "media location=srt://cam.example:7001?latency=200 ! boxes",
        "media location=\"srt://127.0.0.1:7001?mode=caller&mode=caller\" ! boxes",
        "media location=\"srt://[::1]:7001?mo%64e=caller\" ! boxes",
        "media location=udp://@:5004 ! boxes",
        "rtp port=5004 ! boxes",
    ] {
        assert_eq!(check(&p, ok), Ok(()), "{ok}");
    }
}

#[test]
fn each_image_of_a_folder_or_glob_is_checked_with_its_symlinks() {
    let dir = std::env::temp_dir().join(format!("octopipe-policy-glob-{}", std::process::id()));
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(dir.join("z1.jpg"), "x").unwrap();
    std::fs::write(allowed.join("a.jpg"), "x").unwrap();
    let _ = std::os::unix::fs::symlink(dir.join("z1.jpg"), allowed.join("z1.jpg"));
    let mut p = Policy::new();
    p.allow_dir(&allowed).unwrap();
    let a = allowed.display();
    assert_eq!(
        check(&p, &format!("images location={a}/a*.jpg ! boxes")),
        Ok(())
    );
    for bad in [format!("{a}/z*.jpg"), format!("{a}"), format!("{a}/*.jpg")] {
        let e = check(&p, &format!("images location={bad} ! boxes")).unwrap_err();
        assert!(e.message.contains("z1.jpg leads outside"), "{bad}: {e:?}");
        assert!(
            !e.message.contains(&format!("{}/z1.jpg", dir.display())),
            "{e:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn elements_only_when_listed() {
    let mut p = Policy::new();
    let text = "videotestsrc ! video/x-raw,width=64 ! boxes format=synthetic";
    let e = check(&p, text).unwrap_err();
    assert!(e.message.contains("--allow-element videotestsrc"), "{e:?}");
    p.allow_element("videotestsrc");
    assert_eq!(check(&p, text), Ok(()));
    assert!(check(&p, "videotestsrc ! video/x-raw,format=\"I420 ! boxes").is_err());
    assert!(!check(&p, "app name=a").unwrap_err().forbidden);
}
