#!/usr/bin/env python3
"""Churn figures of a station (issue 50): RSS, threads and fds over mixed add/removes.

Starts the release `octopipe run --streams` station on 127.0.0.1 with one live stream that runs
throughout, then makes CYCLES cycles of one `POST /streams` and (once four are alive) one
`DELETE /streams/{oldest}` (mode drop and drain in turn), the streams rotating between a live
`testsrc`, a finite `testsrc` and an `images` folder (the shapes of tests/control/churn.rs).
Every 100 cycles it removes the streams alive (the live one excepted), waits until none is
being removed (every sample in the same state), and samples the station's /proc/PID/status
(VmRSS, Threads) and /proc/PID/fd, each the least of ten looks over a second (threads that are ending are not what a stream left
behind), and the size of /metrics. Prints one row per sample and the RSS growth per 100 cycles
after cycle 200 (the figure docs/security.md gives); exit 1 when it is 1 MiB or more, or threads
or fds grew by more than 2.

    . scripts/env.sh && python3 scripts/churn.py [--cycles 2000] [--size 64x48] [--binary target/release/octopipe]

Python 3 standard library only; loopback only; every wait is bounded. GStreamer's
videotestsrc/jpegenc/multifilesink make the images (gst-launch-1.0).
"""

import argparse
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time

SINK = "batch max-frames=4 ! jsonl location=/dev/null"
LIVE = "testsrc width={w} height={h} live=true num-buffers=100000000 ! boxes format=synthetic count=2"
ALIVE = 4
EVERY = 100
BASE = 200


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(addr, method, path, body=None):
    """(status, headers, body) of one request; (None, {}, error text) when none came."""
    conn = http.client.HTTPConnection(*addr, timeout=10)
    try:
        headers = {"Host": f"{addr[0]}:{addr[1]}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    except OSError as e:
        return None, {}, str(e)
    finally:
        conn.close()


def usage(pid):
    """(VmRSS KiB, threads, fds) of `pid`."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return int(fields["VmRSS"][0]), int(fields["Threads"][0]), len(os.listdir(f"/proc/{pid}/fd"))


def settled_usage(pid):
    """`usage`, each the least of ten looks over a second."""
    least = usage(pid)
    for _ in range(9):
        time.sleep(0.1)
        now = usage(pid)
        least = tuple(min(a, b) for a, b in zip(least, now))
    return least


def by_state(addr):
    """The `octopipe_streams{state=...}` series of /metrics, by state."""
    status, _, body = request(addr, "GET", "/metrics")
    counts = {}
    for line in body.splitlines() if status == 200 else []:
        if line.startswith('octopipe_streams{state="'):
            key, _, value = line.partition(" ")
            counts[key.split('"')[1]] = int(float(value))
    return counts


def settle(addr, alive, deadline):
    """Remove the streams in `alive`, then wait (bounded) until only the live one runs and
    none is being removed: every sample is taken in the same state."""
    for old in alive:
        status, _, body = request(addr, "DELETE", f"/streams/{old}?mode=drop")
        if status != 200:
            sys.exit(f"churn: DELETE /streams/{old}: {status} {body}")
    alive.clear()
    while True:
        counts = by_state(addr)
        if counts.get("running") == 1 and counts.get("removing") == 0:
            return
        if time.monotonic() > deadline:
            sys.exit(f"churn: streams still busy after their removal: {counts}")
        time.sleep(0.05)


def add(addr, source, deadline):
    """POST a stream, waiting (bounded) while --max-streams is full (429); its id."""
    while True:
        status, _, body = request(addr, "POST", "/streams", {"source": source})
        if status == 201:
            return json.loads(body)["id"]
        if status != 429 or time.monotonic() > deadline:
            sys.exit(f"churn: POST /streams {source!r}: {status} {body}")
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=2000, help="adds (and removes) in all")
    ap.add_argument("--binary", default="target/release/octopipe")
    ap.add_argument("--glibc-tunables", default="",
                    help="GLIBC_TUNABLES for the station (default: none, glibc's defaults)")
    ap.add_argument("--size", default="64x48", help="the streams' frames, WxH (default 64x48)")
    args = ap.parse_args()
    try:
        w, h = (int(v) for v in args.size.split("x"))
    except ValueError:
        sys.exit(f"churn: --size {args.size!r}: expected WxH, e.g. 640x480")
    if not (16 <= w <= 4096 and 16 <= h <= 4096):
        sys.exit(f"churn: --size {args.size}: each side from 16 to 4096")
    if args.cycles < BASE + EVERY or args.cycles % EVERY:
        sys.exit(f"churn: --cycles must be a multiple of {EVERY}, at least {BASE + EVERY}")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"churn: {args.binary}: no such program (cargo build --release)")
    work = tempfile.mkdtemp(prefix="octopipe-churn-")
    images = os.path.join(work, "images")
    os.makedirs(images)
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "num-buffers=3", "!",
                    f"video/x-raw,width={w},height={h}", "!", "jpegenc", "!", "multifilesink",
                    f"location={images}/%05d.jpg"], check=True, timeout=60)
    sources = [
        f"testsrc width={w} height={h} live=true num-buffers=100000 ! boxes format=synthetic count=2",
        f"testsrc width={w} height={h} num-buffers=5 ! boxes format=synthetic count=2",
        f"images location={images} ! boxes format=synthetic count=2",
    ]
    addr = ("127.0.0.1", free_port())
    env = dict(os.environ)
    env.pop("RUST_LOG", None)
    if args.glibc_tunables:
        env["GLIBC_TUNABLES"] = args.glibc_tunables
    log = open(os.path.join(work, "station.log"), "w")
    station = subprocess.Popen(
        [args.binary, "run", SINK, "--streams", "--progress", "off",
         "--metrics-addr", f"{addr[0]}:{addr[1]}", "--report", "json",
         "--report-file", os.path.join(work, "report.json"),
         "--allow-dir", work, "--max-streams", "16"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while request(addr, "GET", "/health")[0] != 200:
            if station.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"churn: the station did not answer /health (log: {log.name})")
            time.sleep(0.05)
        live = add(addr, LIVE.format(w=w, h=h), time.monotonic() + 10)
        rows = []
        alive = []
        start = time.monotonic()
        for cycle in range(1, args.cycles + 1):
            alive.append(add(addr, sources[cycle % 3], time.monotonic() + 10))
            if len(alive) > ALIVE:
                old = alive.pop(0)
                mode = "drop" if cycle % 2 == 0 else "drain"
                status, _, body = request(addr, "DELETE", f"/streams/{old}?mode={mode}")
                if status != 200:
                    sys.exit(f"churn: DELETE /streams/{old}: {status} {body}")
            # Each stream lives a few cycles: long enough to give frames.
            time.sleep(0.02)
            if cycle % EVERY == 0:
                settle(addr, alive, time.monotonic() + 30)
                rss, threads, fds = settled_usage(station.pid)
                metrics = len(request(addr, "GET", "/metrics")[2])
                rows.append((cycle, rss, threads, fds, metrics, time.monotonic() - start))
                print(f"cycle {cycle}: RSS {rss} KiB, {threads} threads, {fds} fds, "
                      f"/metrics {metrics} bytes", file=sys.stderr, flush=True)
        # The live stream ran throughout: its row alone, a page of one.
        path = "/streams?limit=1" + (f"&after={live - 1}" if live else "")
        status, _, body = request(addr, "GET", path)
        listed = json.loads(body) if status == 200 else []
        if not listed or listed[0]["id"] != live or listed[0]["state"] != "running":
            sys.exit(f"churn: the live stream {live} is not running: {status} {body}")
    finally:
        station.terminate()
        try:
            station.wait(timeout=30)
        except subprocess.TimeoutExpired:
            station.kill()
    by_cycle = {r[0]: r for r in rows}
    base, end = by_cycle[BASE], rows[-1]
    per100 = (end[1] - base[1]) / ((end[0] - BASE) / EVERY)
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: "
          f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    print(f"command: python3 scripts/churn.py --cycles {args.cycles} --size {args.size}"
          + (f" --glibc-tunables {args.glibc_tunables}" if args.glibc_tunables else ""))
    print(f"live stream: {listed[0]['frames_in']} frames in, {listed[0]['dropped']} dropped")
    print()
    print("| cycle | RSS (MiB) | threads | fds | /metrics (bytes) | elapsed (s) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for cycle, rss, threads, fds, metrics, elapsed in rows:
        print(f"| {cycle} | {rss / 1024:.1f} | {threads} | {fds} | {metrics} | {elapsed:.0f} |")
    print()
    print(f"RSS growth after cycle {BASE}: {per100 / 1024:.2f} MiB per {EVERY} cycles "
          f"({base[1] / 1024:.1f} -> {end[1] / 1024:.1f} MiB); threads {base[2]} -> {end[2]}, "
          f"fds {base[3]} -> {end[3]}")
    ok = per100 < 1024 and end[2] <= base[2] + 2 and end[3] <= base[3] + 2
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
