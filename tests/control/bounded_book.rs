//! The station's own bookkeeping is bounded (issue 50): of the streams that are over it keeps
//! the newest `KEPT_RECORDS`, so listing a page, `/health` and `/metrics` cost what the live
//! streams and the page cost, not every stream the station ever had; ids are not taken again.
//! Loopback only; every loop is bounded.

use crate::common;

use std::time::{Duration, Instant};

use common::station::Station;
use octopipe::pipeline::KEPT_RECORDS;

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";
/// A stream that ends at once: one frame.
const MINIMAL: &str = "testsrc width=16 height=16 num-buffers=1 ! boxes format=synthetic count=1";
/// Streams added (each ends by itself), well past what is kept.
const STREAMS: usize = 3000;

/// Every stream `GET /streams` lists, page after page (bounded), and the pages' count.
fn everything(s: &Station) -> (Vec<serde_json::Value>, usize) {
    let mut all = Vec::new();
    let mut after = None::<u64>;
    for page in 1..=STREAMS / 500 + 2 {
        let path = match after {
            None => "/streams?limit=500".to_string(),
            Some(a) => format!("/streams?limit=500&after={a}"),
        };
        let reply = s.get(&path).expect("GET /streams");
        assert_eq!(reply.status, 200, "{reply:?}");
        all.extend(reply.json().as_array().unwrap().iter().cloned());
        match reply.header("X-Next-After") {
            Some(next) => after = Some(next.parse().unwrap()),
            None => return (all, page),
        }
    }
    panic!("more pages than {STREAMS} streams make");
}

/// The value of the `octopipe_streams{state="STATE"}` series of a `/metrics` page.
fn streams_in(metrics: &str, state: &str) -> u64 {
    let key = format!("octopipe_streams{{state=\"{state}\"}} ");
    let line = metrics.lines().find_map(|l| l.strip_prefix(&key));
    line.unwrap_or_else(|| panic!("no {key} in /metrics"))
        .parse()
        .unwrap()
}

#[test]
fn a_station_keeps_the_newest_ended_streams_and_lists_a_page_of_them() {
    let dir = common::temp_dir("bounded-book");
    let s = Station::start("bounded-book", &dir, SINK, &["--max-streams", "64"], &[]);
    let start = Instant::now();
    let mut waited = 0;
    for n in 0..STREAMS {
        // Streams not over yet count toward --max-streams: a 429 waits for them (bounded).
        let mut reply = s.add(MINIMAL, None);
        for _ in 0..500 {
            if reply.status != 429 {
                break;
            }
            waited += 1;
            std::thread::sleep(Duration::from_millis(10));
            reply = s.add(MINIMAL, None);
        }
        assert_eq!(reply.status, 201, "stream {n}: {reply:?}");
        // Automatic ids keep growing past the streams no longer kept.
        assert_eq!(reply.json()["id"], n, "stream {n}");
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{n} streams in 300 s"
        );
    }
    // Every stream ends by itself: wait (bounded) until none runs.
    let start_end = Instant::now();
    loop {
        let health = s.get("/health").expect("GET /health").json();
        if health["streams"] == 0 {
            break;
        }
        assert!(
            start_end.elapsed() < Duration::from_secs(30),
            "still running: {health}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (all, pages) = everything(&s);
    eprintln!(
        "{STREAMS} streams in {:.1} s ({waited} adds waited); {} kept, listed in {pages} pages",
        start.elapsed().as_secs_f64(),
        all.len()
    );
    // The newest KEPT_RECORDS streams over are kept, in id order, every one of them ended.
    assert_eq!(all.len(), KEPT_RECORDS, "streams kept");
    let ids: Vec<u64> = all.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "id order: {ids:?}");
    assert!(all.iter().all(|e| e["state"] == "ended"), "{all:?}");
    // Those dropped are older ones: streams end about in the order they were added.
    let oldest = (STREAMS - KEPT_RECORDS - 64) as u64;
    assert!(ids[0] >= oldest, "oldest kept {} (< {oldest})", ids[0]);
    assert_eq!(*ids.last().unwrap(), STREAMS as u64 - 1);
    // A page of one is the first kept, and names it as the next page's start.
    let first = s.get("/streams?limit=1").unwrap();
    assert_eq!(first.status, 200);
    let page = first.json();
    assert_eq!(page.as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page[0]["id"], ids[0]);
    assert_eq!(page[0]["state"], "ended");
    assert_eq!(first.header("X-Next-After"), Some(ids[0].to_string()));
    let second = s
        .get(&format!("/streams?limit=1&after={}", ids[0]))
        .unwrap();
    assert_eq!(second.json()[0]["id"], ids[1]);
    assert_eq!(second.header("X-Next-After"), Some(ids[1].to_string()));
    // The last page has no next.
    let last = s.get(&format!("/streams?limit=1&after={}", ids[KEPT_RECORDS - 2]));
    let last = last.unwrap();
    assert_eq!(last.json()[0]["id"], STREAMS as u64 - 1);
    assert_eq!(last.header("X-Next-After"), None);
    // The counts by state count every stream so far; /health none running, none failed.
    let metrics = s.get("/metrics").unwrap().body;
    assert_eq!(streams_in(&metrics, "ended"), STREAMS as u64);
    assert_eq!(streams_in(&metrics, "running"), 0);
    assert_eq!(streams_in(&metrics, "failed"), 0);
    let health = s.get("/health").unwrap().json();
    assert_eq!(
        (health["status"].as_str(), health["failed"].as_u64()),
        (Some("running"), Some(0))
    );
    // A stream no longer kept is unknown now, and its id is not taken again.
    let gone = s.request("DELETE", "/streams/0", "").unwrap();
    assert_eq!(gone.status, 404, "{gone:?}");
    let again = s.add(MINIMAL, Some(0));
    assert_eq!(again.status, 409, "{again:?}");
    assert!(again.error().contains('0'), "{again:?}");
    // A kept one is removed: it leaves `ended` for `removed`.
    let removed = s.request("DELETE", &format!("/streams/{}", ids[5]), "");
    assert_eq!(removed.map(|r| r.status), Some(200));
    let metrics = s.get("/metrics").unwrap().body;
    assert_eq!(streams_in(&metrics, "ended"), STREAMS as u64 - 1);
    assert_eq!(streams_in(&metrics, "removed"), 1);
    let (status, report, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
    // The report keeps a row per stream (the run's record), whatever the station lists.
    assert_eq!(report["streams"].as_array().unwrap().len(), STREAMS);
}
