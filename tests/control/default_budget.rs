//! The station's default `--memory-budget` under an address-space limit (issue 50 item 3; the
//! review's case 3 under `prlimit --as`): a real `octopipe run --streams` on loopback under
//! `ulimit -v` logs a default budget of at most half its address space, where the same station
//! without the limit budgets from the machine's memory, and refuses 8192x8192 streams past it
//! naming the budget instead of failing an allocation. Every loop is bounded in count and time.

use crate::common;
use crate::hostile_peers::{add_big_streams, PIPELINE};

use common::station::{status_kb, Station};

/// The budget a station logged at start (`--verbose`: `... --memory-budget N bytes`).
fn logged_budget(log: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.contains("streams added over HTTP") && l.contains("--memory-budget"))
        .unwrap_or_else(|| panic!("no budget line in the log:\n{log}"));
    let after = line.split("--memory-budget ").nth(1).unwrap_or_default();
    after
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no budget in {line:?}"))
}

#[test]
fn the_default_memory_budget_stays_within_the_address_space_limit() {
    let dir = common::temp_dir("default-budget");
    let env = [("MALLOC_ARENA_MAX", "2")];
    let args = ["--verbose", "--max-stream-memory", "8GiB"];
    // Unlimited: the budget comes from the machine's memory (and cgroup).
    let idle = Station::start("default-budget-idle", &dir, PIPELINE, &args, &env);
    let peak = status_kb(idle.child.id(), "VmPeak:");
    assert!(peak > 0, "no VmPeak for the idle station");
    let (status, _, log) = idle.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
    let unlimited = logged_budget(&log);
    // Room for one 8192x8192 stream (its estimate about 1.0 GiB), not for ten (~650 MB each).
    let cap_kb = peak + 3 * 1024 * 1024;
    let cap = cap_kb * 1024;
    let s = Station::start_capped("default-budget", &dir, PIPELINE, &args, &env, Some(cap_kb));
    let budget = logged_budget(&s.log());
    eprintln!("idle VmPeak {peak} kB; cap {cap} B; budget {budget} B (unlimited {unlimited} B)");
    assert!(budget > 0 && budget <= cap / 2, "{budget} of {cap}");
    assert!(budget <= unlimited, "{budget} > {unlimited}");
    let (admitted, refusals) = add_big_streams(&s, 1..=4);
    for e in &refusals {
        assert!(
            e.contains("the station's memory budget (--memory-budget"),
            "{e}"
        );
    }
    let refused = refusals.len();
    assert!(
        !admitted.is_empty() && refused > 0,
        "{admitted:?}\n{}",
        s.log()
    );
    // The admitted streams run within the limit; the station answers throughout.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(s.get("/health").map(|r| r.status), Some(200), "{}", s.log());
    for id in &admitted {
        assert_eq!(s.stream(*id)["state"], "running", "{}", s.log());
    }
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}
