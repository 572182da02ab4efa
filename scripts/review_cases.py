"""The cases of the third review (issue 50) that scripts/review-under-cap.py replays: each
`case_*(station, case, ctx)` attacks the station on 127.0.0.1, bounded in count and time, and
records on `case` what it saw (`outcome`, `reason`, `notes`) and which checks failed. Python 3
standard library only."""

import json
import os
import re
import socket
import subprocess
import threading
import time

from review_net import (HEALTHY_ID, HostileRtsp, cpu_seconds, drip, endless_sdp, free_port,
                        many_media, proc_status, request, short)

# ---------------------------------------------------------------- the cases

RTSP_SOURCE = "media location=rtsp://127.0.0.1:{port}/cam start-timeout=0 retry=0 ! boxes format=synthetic"


def case_rtsp_describe(st, c, ctx):
    endless = HostileRtsp(endless_sdp, 30)
    many = HostileRtsp(many_media, 30)
    try:
        rss0 = proc_status(st.proc.pid).get("VmRSS", 0)
        cases = [(101, endless.port, "Content-Length 1500000000, more than 65536 bytes"),
                 (102, many.port, "an SDP of 1000 media sections (m= lines; at most 16)")]
        for sid, port, _ in cases:
            r = st.add(RTSP_SOURCE.format(port=port), sid)
            c.expect(r is not None and r.status == 201, f"add {sid}: {r and r.status} {r and r.body}")
        reasons = []
        for sid, _, cap in cases:
            e = st.until_over(sid, 30)
            err = e.get("error") or ""
            reasons.append(err)
            c.expect(e.get("state") == "failed", f"stream {sid} {e.get('state')}: {short(err)}")
            c.expect(cap in err and "answered past a bound of the station" in err,
                     f"stream {sid}: reason {short(err)!r}")
        # The review's station kept growing after the stream was marked failed: watch 5 s.
        time.sleep(5)
        rss1 = proc_status(st.proc.pid).get("VmRSS", 0) if st.alive() else 0
        c.notes.append(f"RSS {rss0 // 1024} -> {rss1 // 1024} MB 5 s after the failures")
        c.expect(rss1 < rss0 + 200 * 1024, "RSS grew more than 200 MB")
        c.outcome = "failed" if all("past a bound" in r for r in reasons) else "?"
        c.reason = reasons[0]
    finally:
        endless.close()
        many.close()


def giant_jpeg(workdir):
    seed = os.path.join(workdir, "seed.jpg")
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "num-buffers=1", "!",
                    "video/x-raw,width=16,height=16", "!", "jpegenc", "!", "filesink",
                    f"location={seed}"], check=True, timeout=30,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = bytearray(open(seed, "rb").read())
    sof = data.find(b"\xff\xc0")
    data[sof + 5:sof + 7] = (30000).to_bytes(2, "big")
    data[sof + 7:sof + 9] = (30000).to_bytes(2, "big")
    data[sof:sof] = b"\x00"  # the stray byte libjpeg skips
    folder = os.path.join(workdir, "giant")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "giant.jpg")
    open(path, "wb").write(data)
    return folder, path


def case_jpeg(st, c, ctx):
    folder, path = ctx["jpeg"]
    sources = [
        f"images location={folder} on-damaged=keep ! boxes format=synthetic count=1",
        f"images location={folder} on-damaged=keep framerate=5 ! boxes format=synthetic count=1",
        f"media location={path} ! boxes format=synthetic count=1",
        f"media location={path} ! boxes format=synthetic count=1",
    ]
    for sid, src in enumerate(sources, 201):
        r = st.add(src, sid)
        c.expect(r is not None and r.status == 201, f"add {sid}: {r and r.status} {r and r.body}")
    reasons = []
    for sid in range(201, 205):
        e = st.until_over(sid, 30)
        err = e.get("error") or ""
        reasons.append(err)
        c.expect(e.get("state") == "failed", f"stream {sid} {e.get('state')}")
        c.expect("too large to decode: 30000x30000 is 900000000 pixels" in err,
                 f"stream {sid}: reason {short(err)!r}")
    c.outcome = "failed" if c.ok else "?"
    c.reason = reasons[0]


def case_budget(st, c, ctx):
    big = ("testsrc width=8192 height=8192 pattern=black live=true framerate=2 "
           "num-buffers=100000 ! boxes format=synthetic count=1")
    admitted, refused, other = [], [], []
    for sid in range(301, 311):
        r = st.add(big, sid, limit=20.0)
        if r is None:
            other.append(f"{sid}: no answer")
            if not st.alive():
                break
        elif r.status == 201:
            admitted.append(sid)
        elif r.status in (429, 507):
            refused.append(r.error())
        else:
            other.append(f"{sid}: {r.status} {short(r.error())}")
        time.sleep(0.5)  # let an admitted one open its pool before the next asks
    if st.alive():
        time.sleep(5)  # the admitted ones running together
    c.notes.append(f"{len(admitted)} admitted, {len(refused)} refused")
    c.expect(not other, "; ".join(other))
    c.expect(refused and all("--memory-budget" in e for e in refused),
             "no stream refused naming --memory-budget")
    running = [sid for sid in admitted if st.alive() and st.stream(sid).get("state") == "running"]
    c.expect(len(running) == len(admitted), f"admitted but not running: {set(admitted) - set(running)}")
    for sid in admitted:
        if st.alive():
            st.delete(sid, "drop")
    for sid in admitted:
        st.wait(lambda: st.stream(sid).get("state") == "removed", 20)
    c.outcome = "refused" if refused else ("ok" if st.alive() else "?")
    c.reason = refused[0] if refused else f"all {len(admitted)} admitted"


def threads_fds(st):
    s = proc_status(st.proc.pid)
    return s.get("Threads", 0), s.get("fds", 0)


def case_drip(st, c, ctx):
    server = HostileRtsp(drip, 120)
    try:
        source = RTSP_SOURCE.format(port=server.port)
        # A first round warms GStreamer's own threads up (its pools stay).
        for sid in (400, 401):
            st.add(source, sid)
        time.sleep(2)
        for sid in (400, 401):
            st.delete(sid)
        st.wait(lambda: all(st.stream(s).get("state") == "removed" for s in (400, 401)), 20)
        time.sleep(1)
        base = threads_fds(st)
        refusals, counts, peak, next_id = [], [], base, 4000
        for rnd in range(3):
            # Streams until the station refuses one (--max-streams 64 with the healthy one, or
            # the memory budget first: a camera is counted at 4K frames), at most 64 tries.
            ids, refused = [], None
            for _ in range(65):
                r = st.add(source, next_id)
                next_id += 1
                if r is not None and r.status == 201:
                    ids.append(next_id - 1)
                    continue
                if r is not None and r.status == 429:
                    refused = r.error()
                else:
                    c.fail(f"round {rnd}: add {next_id - 1}: {r and r.status} {short(r and r.error())}")
                break
            counts.append(len(ids))
            c.expect(refused is not None and ("--max-streams" in refused or "--memory-budget" in refused),
                     f"round {rnd}: {len(ids)} streams taken, none refused naming a cap")
            if refused:
                refusals.append(refused)
            peak = max(peak, threads_fds(st))
            time.sleep(2)
            for sid in ids:
                st.delete(sid)
            done = st.wait(lambda: all(st.stream(s).get("state") == "removed" for s in ids)
                           and threads_fds(st)[0] <= base[0] + 2 and threads_fds(st)[1] <= base[1] + 2,
                           15, step=0.25)
            if not done:
                states = {}
                for s in ids:
                    states[st.stream(s).get("state")] = states.get(st.stream(s).get("state"), 0) + 1
                c.fail(f"round {rnd}: 15 s after the removals: (threads, fds) {threads_fds(st)}, "
                       f"baseline {base}, states {states}")
                break
        # Each round takes as many as the first: what the removed ones held was given back.
        c.expect(len(set(counts)) == 1, f"streams taken per round differ: {counts}")
        after = threads_fds(st)
        c.notes.append(f"dripping streams taken per round {counts}; (threads, fds) {base} -> {peak} -> {after}")
        c.expect("left to stop on its own" not in st.log(), "a pipeline left to stop on its own")
        c.outcome = "refused" if refusals else "?"
        c.reason = f"stream {counts[0] + 1 if counts else '?'}: " + (refusals[0] if refusals else "none refused")
    finally:
        server.close()


def case_track(st, c, ctx):
    heavy = ("testsrc width=640 height=480 live=true num-buffers=100000 "
             "! boxes format=synthetic count=100000 ! track")
    slowest = 0.0
    for k in range(24):
        sid = 5000 + k
        r = st.add(heavy, sid)
        if not c.expect(r is not None and r.status == 201, f"add {sid}: {r and r.status}"):
            break
        if not st.wait(lambda: st.frames(sid) >= 1, 20):
            c.fail(f"stream {sid} gave no frame in 20 s")
        t0 = time.monotonic()
        st.delete(sid)
        if not st.wait(lambda: st.stream(sid).get("state") == "removed", 8):
            c.fail(f"stream {sid} not removed 8 s after DELETE: {st.stream(sid).get('state')}")
        slowest = max(slowest, time.monotonic() - t0)
    time.sleep(1)
    cpu0 = cpu_seconds(st.proc.pid)
    time.sleep(3)
    load = (cpu_seconds(st.proc.pid) - cpu0) / 3
    log = st.log()
    c.notes.append(f"24 removed, slowest {slowest:.2f} s; station CPU after: {load:.2f} cores")
    c.expect("detached" not in log, "a removed stream was detached")
    c.expect(load < 0.5, f"the station still computes: {load:.2f} cores")
    m = re.search(r"track: a frame of \d+ boxes: its 1024 highest-scoring are tracked[^\n]*", log)
    c.outcome = "ok" if c.ok else "?"
    c.reason = (m.group(0) if m else "no tracker bound in the log") + f"; removed in <= {slowest:.2f} s"


def case_srt(st, c, ctx):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
    attacks = [
        f"srt://[::0]:{port}?mode=caller&mode=listener", f"srt://cam.example:{port}?mo%64e=listener",
        f"srt://cam.example:{port}?mode=%6cistener", f"srt://cam.example:{port}?mode=rendezvous",
        f"srt://[::ffff:0.0.0.0]:{port}", f"srt://[::]:{port}?mode=caller", f"srt://[0:0::0]:{port}",
        f"srt://0:{port}", f"srt://0x0:{port}", f"srt://00.0.0.0:{port}", f"srt://%30.0.0.0:{port}",
        f"srt://:{port}", f"srt://user@:{port}",
    ]
    refused, first = 0, ""
    for uri in attacks:
        r = st.add(f'media location="{uri}" ! boxes format=synthetic')
        if r is not None and r.status == 403 and "srt only as a caller" in r.error():
            refused += 1
            first = first or r.error()
        else:
            c.fail(f"{uri}: {r and r.status} {short(r and r.error())}")
    time.sleep(0.2)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("0.0.0.0", port))
    except OSError as e:
        c.fail(f"UDP port {port} taken on 0.0.0.0: {e}")
    c.notes.append(f"{refused} of {len(attacks)} spellings refused; nothing listens on {port}")
    c.outcome = "refused" if refused == len(attacks) else "?"
    c.reason = first


def case_idle(st, c, ctx):
    stop = threading.Event()
    opened = [0]

    def attack():
        held, n, t0 = [], 0, time.monotonic()
        while not stop.is_set() and time.monotonic() - t0 < 12:
            for _ in range(50):
                src = f"127.0.0.{2 + n % 4}"
                n += 1
                try:
                    s = socket.socket()
                    s.bind((src, 0))
                    s.settimeout(0.5)
                    s.connect(st.addr)
                    held.append(s)
                except OSError:
                    s.close()
                if len(held) > 600:
                    held.pop(0).close()
            stop.wait(0.05)
        opened[0] = n
        for s in held:
            s.close()

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    time.sleep(1.5)
    answered, slow = 0, []
    for i in range(35):
        t0 = time.monotonic()
        r = request(st.addr, "GET", "/health", limit=1.0)
        if r is not None and r.status == 200 and time.monotonic() - t0 <= 1.0:
            answered += 1
        else:
            slow.append(i)
        time.sleep(0.1)
    stop.set()
    t.join(20)
    c.notes.append(f"{opened[0]} idle sockets opened from 127.0.0.2-5")
    c.expect(opened[0] > 1000, f"the attack opened only {opened[0]} sockets")
    c.expect(answered == 35, f"probes not answered within 1 s: {slow}")
    c.outcome = "ok" if c.ok else "?"
    c.reason = f"{answered} of 35 probes answered within 1 s"


def case_newline(st, c, ctx):
    forged = "octopipe: error: FORGED by the client"
    port = free_port()
    start = len(st.log())
    src = (f'media location="rtsp://127.0.0.1:{port}/cam\n{forged}\x1b[2K" retry=0 '
           "! boxes format=synthetic")
    r = st.add(src, 6001)
    if r is not None and r.status == 201:
        e = st.until_over(6001, 30)
        listed = json.dumps(e)
        c.expect(e.get("state") == "failed", f"state {e.get('state')}")
        c.reason = e.get("error") or ""
    else:
        listed = r.body if r else ""
        c.reason = r.error() if r else "no answer"
    c.expect("FORGED" in listed, "the location not shown")
    c.expect("\\\\n" in listed and "\\\\u{1b}" in listed, f"not escaped in the list: {short(listed)}")
    log = st.log()[start:]
    c.expect(not any(l.startswith("octopipe: error: FORGED") for l in log.splitlines()), "a forged log line")
    c.expect("\x1b" not in log, "a terminal escape in the log")
    c.outcome = "failed" if r is not None and r.status == 201 else "refused"


def float_props(binary):
    out = subprocess.run([binary, "inspect"], capture_output=True, text=True, timeout=30).stdout
    stages = [(l.split()[0], l.split()[1]) for l in out.splitlines() if re.match(r"^[a-z]", l)]
    props = []
    for name, role in stages:
        text = subprocess.run([binary, "inspect", name], capture_output=True, text=True, timeout=30).stdout
        for line in text.splitlines():
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s+(float|3 floats)\b", line)
            if m:
                props.append((name, role, m.group(1), m.group(2) == "3 floats"))
    return props


def case_numbers(st, c, ctx):
    props = ctx["floats"]
    counts = {"400 naming": 0, "other 4xx": 0, "2xx": 0, "500": 0, "none": 0}
    t0 = time.monotonic()
    for name, role, prop, three in props:
        for v in ("nan", "inf", "1e300", "1e-300", "-1"):
            value = ",".join([v] * 3) if three else v
            stage = f"{name} {prop}={value}"
            src = stage if role == "source" else f"testsrc num-buffers=1 ! {stage}"
            r = st.add(src)
            if r is None:
                counts["none"] += 1
                c.fail(f"{stage}: no answer")
            elif r.status >= 500:
                counts["500"] += 1
                c.fail(f"{stage}: {r.status} {short(r.error())}")
            elif 200 <= r.status < 300:
                counts["2xx"] += 1
                if v != "-1":
                    c.fail(f"{stage}: taken ({r.status})")
                j = r.json()
                if isinstance(j, dict) and "id" in j:
                    st.delete(j["id"], "drop")
            elif f"{name}: {prop} must be" in r.error():
                counts["400 naming"] += 1
                c.reason = c.reason or r.error()
            else:
                counts["other 4xx"] += 1
            if time.monotonic() - t0 > 120:
                c.fail("over 120 s")
                break
    total = sum(counts.values())
    c.notes.append(f"{len(props)} float properties x 5 values = {total}: {counts}")
    c.expect(total >= 60, f"only {total} requests")
    c.outcome = "refused" if c.ok else "?"


def case_pem(st, c, ctx):
    d = os.path.join(ctx["workdir"], "pem")
    os.makedirs(d, exist_ok=True)
    ca, key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", ca,
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, timeout=30,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    garbage = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v"
    bad = os.path.join(d, "garbage.key")
    open(bad, "w").write(f"-----BEGIN PRIVATE KEY-----\n{garbage}\n-----END PRIVATE KEY-----\n")
    broker = socket.socket()
    broker.bind(("127.0.0.1", 0))
    broker.listen(8)
    broker.settimeout(0.1)
    port = broker.getsockname()[1]
    line = (f"testsrc num-buffers=30 width=64 height=48 ! boxes format=synthetic ! batch ! mqtt "
            f"host=127.0.0.1 port={port} topic=t tls=true ca-file={ca} cert-file={ca} key-file={bad}")
    t0 = time.monotonic()
    try:
        p = subprocess.run([ctx["binary"], "run", line, "--progress", "off"], capture_output=True,
                           text=True, timeout=30)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, "still running after 30 s"
    took = time.monotonic() - t0
    connected = 0
    try:
        while True:
            broker.accept()[0].close()
            connected += 1
    except OSError:
        pass
    broker.close()
    msg = next((l for l in err.splitlines() if "garbage.key" in l), short(err))
    c.notes.append(f"a second `octopipe run` with the key: exit {rc} in {took:.1f} s, "
                   f"{connected} connections to the broker")
    c.expect(rc not in (None, 0, 101), f"exit {rc}")
    c.expect("not a private key TLS can use" in err, f"message: {short(err)}")
    c.expect(connected == 0, "it connected to the broker")
    c.outcome = "refused" if c.ok else "?"
    c.reason = msg


def case_epoch(st, c, ctx):
    src = (f"testsrc live=true epoch={int(time.time()) + 365 * 86400} width=64 height=48 "
           "! boxes format=synthetic")
    t0 = time.monotonic()
    r = st.add(src, 6501)
    if r is not None and r.status == 201:
        e = st.until_over(6501, 30)
        err, c.outcome = e.get("error") or "", "failed"
        c.expect(e.get("state") == "failed", f"state {e.get('state')}")
    else:
        err, c.outcome = (r.error() if r else "no answer"), "refused"
        c.expect(r is not None and r.status == 400, f"{r and r.status}")
    c.notes.append(f"over in {time.monotonic() - t0:.2f} s")
    c.expect("the first frame is due in" in err and "start-timeout=20 s" in err, f"reason {short(err)}")
    c.reason = err


def case_pages(st, c, ctx):
    src = "testsrc num-buffers=1 width=16 height=16 ! boxes format=synthetic"
    n = 300
    for k in range(n):
        sid = 7000 + k
        t0 = time.monotonic()
        r = st.add(src, sid)
        while r is not None and r.status == 429 and time.monotonic() - t0 < 10:
            time.sleep(0.05)
            r = st.add(src, sid)
        if not c.expect(r is not None and r.status == 201, f"add {sid}: {r and r.status}"):
            break
        st.delete(sid, "drop")
    times = []
    for _ in range(5):
        t0 = time.monotonic()
        r = request(st.addr, "GET", "/streams?limit=1")
        times.append(time.monotonic() - t0)
    ids = [e.get("id") for e in (r.json() or [])] if r and r.status == 200 else None
    c.expect(ids == [HEALTHY_ID] and r.header("X-Next-After") == str(HEALTHY_ID),
             f"limit=1 gave {ids}, next {r and r.header('X-Next-After')}")
    r2 = request(st.addr, "GET", "/streams?after=7100&limit=5")
    ids2 = [e.get("id") for e in (r2.json() or [])] if r2 and r2.status == 200 else None
    c.expect(ids2 == [7101, 7102, 7103, 7104, 7105], f"after=7100&limit=5 gave {ids2}")
    best = min(times) * 1000
    c.expect(max(times) < 0.5, f"limit=1 took up to {max(times) * 1000:.0f} ms")
    c.outcome = "ok" if c.ok else "?"
    c.reason = f"{n} streams added and removed; limit=1 in {best:.1f}-{max(times) * 1000:.1f} ms, X-Next-After 1"


def case_long_name(st, c, ctx):
    seen = []
    for size in (60 * 1024, 1 << 20):
        name = "q" * size
        t0 = time.monotonic()
        r = st.add(f"testsrc ! {name}")
        took = time.monotonic() - t0
        ok = r is not None and 400 <= r.status < 500 and took < 2 and len(r.body) < 4096
        c.expect(ok, f"{size} B name: {r and r.status} in {took:.2f} s, {r and len(r.body)} B answer")
        seen.append(f"{size // 1024} KiB over HTTP: {r and r.status} in {took * 1000:.0f} ms")
        if size == 60 * 1024 and r is not None:
            c.reason = r.error()
    # The builder itself, through the command line (a file holding the description).
    path = os.path.join(ctx["workdir"], "long.pipe")
    open(path, "w").write(f"testsrc num-buffers=1 ! {'q' * (1 << 20)} ! batch ! jsonl location=/dev/null")
    t0 = time.monotonic()
    p = subprocess.run([ctx["binary"], "run", path], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    c.expect(p.returncode > 0 and p.returncode != 101 and took < 5 and len(p.stderr) < 4096,
             f"CLI: exit {p.returncode} in {took:.2f} s, {len(p.stderr)} B")
    seen.append(f"1 MiB by the CLI: exit {p.returncode} in {took * 1000:.0f} ms, {len(p.stderr)} B")
    c.notes.append("; ".join(seen))
    c.outcome = "refused" if c.ok else "?"


def case_redact(st, c, ctx):
    port = free_port()
    secrets = ["Jwt-S3cret-1", "Sess-S3cret-2", "Enc-S3cret-3", "Path-S3cret-4"]
    start = len(st.log())
    src = (f'media location="rtsp://127.0.0.1:{port}/admin:{secrets[3]}@cam?jwt={secrets[0]}'
           f'&session={secrets[1]}&pass%77ord={secrets[2]}&x=1" retry=0 ! boxes format=synthetic')
    r = st.add(src, 8001)
    c.expect(r is not None and r.status == 201, f"add: {r and r.status}")
    e = st.until_over(8001, 30)
    texts = [json.dumps(e), st.log()[start:]]
    for s in secrets:
        c.expect(all(s not in t for t in texts), f"{s} shown")
    c.expect("/***@cam?jwt=***&session=***&pass%77ord=***&x=1" in e.get("source", ""),
             f"source shown {short(e.get('source'))}")
    c.outcome = "failed" if e.get("state") == "failed" else "?"
    c.reason = e.get("source", "")


CASES = [
    ("1 RTSP DESCRIBE: Content-Length 1.5e9, endless m=; 1000 m=", case_rtsp_describe),
    ("2 JPEG, stray byte before SOF, 30000x30000, 4 POSTs", case_jpeg),
    ("3 ten testsrc 8192x8192", case_budget),
    ("4a RTSP dripping 1 B/s: 3 rounds up to the cap, removed", case_drip),
    ("4b boxes count=100000 ! track, added+DELETEd x24", case_track),
    ("5 srt bypass URIs (13 spellings)", case_srt),
    ("6a idle sockets from 127.0.0.2-5 vs /health", case_idle),
    ("6b newline + ESC inside a quoted location", case_newline),
    ("6c hostile numbers on every float property", case_numbers),
    ("6d PEM-armoured garbage MQTT key (CLI start)", case_pem),
    ("6e live testsrc, epoch a year ahead", case_epoch),
    ("6f GET /streams?limit=1 after 300 adds", case_pages),
    ("6g 60 KiB / 1 MiB stage name", case_long_name),
    ("6h secrets in a location (jwt, session, %77, path)", case_redact),
]
