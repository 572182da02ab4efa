#!/usr/bin/env python3
"""The third review (issue 50) replayed against one station under a 6 GiB memory cap.

Starts the release `octopipe run --streams` station on 127.0.0.1 with one healthy live stream,
under a cgroup v2 memory limit (`memory.max` of a child group, where one can be made here) or,
failing that, an address-space cap (`prlimit --as`: RLIMIT_AS, set in the child before exec).
An address-space cap counts every mapping reserved (thread stacks, malloc arenas, pools), not
the RSS a cgroup counts; the station's default `--memory-budget` takes at most half of what it
leaves (crates/octopipe-pipeline/src/pipeline/memory.rs). Then replays each case of the review in turn (scripts/review_cases.py:
the attack shapes of tests/control/hostile_peers.rs, hostile_inputs.rs, starve.rs,
mqtt_tls.rs), with small hostile servers of its own on 127.0.0.1 in threads
(scripts/review_net.py), every loop bounded in count and time. After each case it checks: the
station is alive, its RSS (VmRSS sampled every 200 ms, VmHWM) under the cap, the attacked
stream failed or was refused with its reason, the healthy stream still delivering frames, and
`/health` answered 200 within 1 s by a thread polling every 200 ms. One row per case; exit 1 if
any case fails its checks. A station that dies is noted and started again for the cases after.

    . scripts/env.sh && python3 scripts/review-under-cap.py [--cap 6GiB] [--memory-budget SIZE]
        [--as-cap] [--only 1,3,6f]

Python 3 standard library only; loopback only; about a minute on 2 cores.
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from review_cases import CASES, giant_jpeg, float_props
from review_net import HEALTHY, HEALTHY_ID, Case, free_port, proc_status, request, short

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE = "batch max-frames=8 max-wait-ms=50 ! jsonl location=/dev/null"
GIB = 1 << 30


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(|KiB|MiB|GiB|K|M|G)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected bytes, or a number with KiB, MiB, GiB")
    scale = {"": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": GIB, "GiB": GIB}
    return int(float(m.group(1)) * scale[m.group(2)])


# ---------------------------------------------------------------- the station

class Cap:
    """The memory cap the station runs under: a cgroup of its own, else RLIMIT_AS."""

    def __init__(self, limit, force_as):
        self.limit, self.kind, self.path, self.why = limit, None, None, ""
        if force_as:
            self.why = "--as-cap"
        else:
            self._cgroup()
        if self.kind is None:
            self.kind = "prlimit --as"
            self.why += (
                ": an address-space cap (RLIMIT_AS, as `prlimit --as`) counts every mapping "
                "reserved, touched or not (thread stacks, malloc arenas, GStreamer's pools), "
                "so the process fails an allocation (GLib aborts) long before its RSS "
                "reaches the cap; RSS is what a cgroup limit counts"
            )

    def _cgroup(self):
        own = open("/proc/self/cgroup").read().splitlines()
        v2 = next((l[3:] for l in own if l.startswith("0::")), None)
        base = f"/sys/fs/cgroup{v2.rstrip('/')}" if v2 is not None else None
        tried = []
        if base and os.path.exists(os.path.join(base, "cgroup.controllers")):
            ctl = open(os.path.join(base, "cgroup.controllers")).read().split()
            if "memory" in ctl:
                path = os.path.join(base, f"octopipe-review-{os.getpid()}")
                try:
                    os.mkdir(path)
                    open(os.path.join(path, "memory.max"), "w").write(str(self.limit))
                    try:
                        open(os.path.join(path, "memory.swap.max"), "w").write("0")
                    except OSError:
                        pass
                    self.kind, self.path, self.file = "cgroup v2 memory.max", path, "memory.max"
                    return
                except OSError as e:
                    tried.append(f"cgroup v2 {path}: {e.strerror}")
                    self._rmdir(path)
            else:
                tried.append(f"cgroup v2 {base}: no memory controller")
        # A cgroup v1 memory group is not made: under v1 the groups above belong to whatever
        # runs this machine (a container's runtime), not to the review.
        if any(l.split(":")[1:2] == ["memory"] for l in own):
            tried.append("cgroup v1 memory only (its groups are the machine's runtime's, left alone)")
        self.why = "; ".join(tried) or "no cgroup memory controller found"

    @staticmethod
    def _rmdir(path):
        try:
            os.rmdir(path)
        except OSError:
            pass

    def preexec(self):
        """Run in the child before exec: join the cgroup, or set RLIMIT_AS."""
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        else:
            resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))
        os.setsid()

    def reset_peak(self):
        if self.path and self.kind.startswith("cgroup v1"):
            try:
                open(os.path.join(self.path, "memory.max_usage_in_bytes"), "w").write("0")
            except OSError:
                pass

    def peak(self):
        """The group's peak usage (bytes, page cache included) since the last reset."""
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            try:
                return int(open(os.path.join(self.path or "/nonexistent", name)).read())
            except (OSError, ValueError):
                pass
        return None

    def oom_kills(self):
        try:
            text = open(os.path.join(self.path, "memory.oom_control")).read()
        except (OSError, TypeError):
            try:
                text = open(os.path.join(self.path, "memory.events")).read()
            except (OSError, TypeError):
                return None
        m = re.search(r"oom_kill (\d+)", text)
        return int(m.group(1)) if m else None

    def close(self):
        if self.path:
            self._rmdir(self.path)


def station_default_budget():
    """About the station's default --memory-budget as octopipe computes it
    (crates/octopipe-pipeline/src/pipeline/memory.rs `memory_budget`): 3/4 of the smaller of
    MemTotal and the first cgroup limit it finds among /sys/fs/cgroup{v2 path}/memory.max,
    /sys/fs/cgroup/memory.max, /sys/fs/cgroup/memory/memory.limit_in_bytes, and at most half of
    what the address-space limit (RLIMIT_AS) leaves above the address space mapped (this
    process's VmSize here: the station's own, mapped with its libraries, is larger, so its
    budget is a little smaller)."""
    total = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    own = open("/proc/self/cgroup").read().splitlines()
    v2 = next((l[3:] for l in own if l.startswith("0::")), None)
    paths = ([f"/sys/fs/cgroup{v2.rstrip('/')}/memory.max"] if v2 is not None else [])
    paths += ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
    found = None
    for p in paths:
        try:
            v = int(open(p).read().strip())
        except (OSError, ValueError):
            continue
        if v < 1 << 60:
            found = (p, v)
            break
    limit = min(total, found[1]) if found else total
    budget = limit // 4 * 3
    row = next((l for l in open("/proc/self/limits") if l.startswith("Max address space")), "")
    soft = row.split()[3] if len(row.split()) > 3 else "unlimited"
    if soft != "unlimited":
        vm = next((int(l.split()[1]) * 1024 for l in open("/proc/self/status")
                   if l.startswith("VmSize:")), 0)
        budget = min(budget, max(int(soft) - vm, 0) // 2)
    return budget, found


class Station:
    def __init__(self, binary, cap, workdir, extra):
        self.binary, self.cap, self.workdir, self.extra = binary, cap, workdir, extra
        self.proc, self.generation = None, 0

    def start(self):
        self.generation += 1
        port = free_port()
        self.addr = ("127.0.0.1", port)
        self.log_path = os.path.join(self.workdir, f"station-{self.generation}.log")
        self.report_path = os.path.join(self.workdir, f"station-{self.generation}.json")
        args = [self.binary, "run", PIPELINE, "--streams", "--progress", "off"]
        args += ["--metrics-addr", f"127.0.0.1:{port}", "--report", "json"]
        args += ["--report-file", self.report_path] + self.extra
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        if not self.cap.path:
            env["MALLOC_ARENA_MAX"] = "2"  # as the tests under `ulimit -v`
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log_file,
            env=env, preexec_fn=self.cap.preexec)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = request(self.addr, "GET", "/health", limit=1.0)
            if r and r.status == 200:
                break
            if self.proc.poll() is not None:
                raise SystemExit(f"the station exited ({self.proc.returncode}):\n{self.log()}")
            time.sleep(0.1)
        else:
            raise SystemExit(f"the station never answered /health:\n{self.log()}")
        r = self.add(HEALTHY, HEALTHY_ID)
        if not r or r.status != 201:
            raise SystemExit(f"the healthy stream was not taken: {r and r.status} {r and r.body}")
        self.wait(lambda: self.frames(HEALTHY_ID) >= 10, 20)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            return open(self.log_path, errors="replace").read()
        except OSError:
            return ""

    def add(self, source, sid=None, limit=10.0):
        body = {"source": source}
        if sid is not None:
            body["id"] = sid
        return request(self.addr, "POST", "/streams", json.dumps(body), limit)

    def delete(self, sid, mode=None):
        path = f"/streams/{sid}" + (f"?mode={mode}" if mode else "")
        return request(self.addr, "DELETE", path)

    def streams(self):
        out, after = {}, None
        for _ in range(100):
            path = "/streams?limit=1000" + (f"&after={after}" if after is not None else "")
            r = request(self.addr, "GET", path)
            if not r or r.status != 200 or not isinstance(r.json(), list):
                return out
            for e in r.json():
                out[e["id"]] = e
            after = r.header("X-Next-After")
            if after is None:
                return out
        return out

    def stream(self, sid):
        r = request(self.addr, "GET", f"/streams?after={sid - 1}&limit=1")
        if r and r.status == 200 and isinstance(r.json(), list) and r.json():
            e = r.json()[0]
            if e.get("id") == sid:
                return e
        return {}

    def frames(self, sid):
        return self.stream(sid).get("frames_in") or 0

    def wait(self, cond, limit, step=0.1):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            if cond():
                return True
            time.sleep(step)
        return cond()

    def until_over(self, sid, limit):
        """Wait until stream `sid` no longer runs (or is opening); its entry."""
        self.wait(lambda: self.stream(sid).get("state") not in ("running", "opening", None), limit)
        return self.stream(sid)

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        return self.proc.returncode


class Monitor(threading.Thread):
    """Polls /health every 200 ms (1 s to answer) and samples the station's RSS."""

    def __init__(self, station):
        super().__init__(daemon=True)
        self.station, self.stop_flag = station, threading.Event()
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.asked = self.answered = 0
            self.peak_rss = 0
            self.slow = []

    def run(self):
        while not self.stop_flag.is_set():
            start = time.monotonic()
            st = self.station
            r = request(st.addr, "GET", "/health", limit=1.0) if st.alive() else None
            took = time.monotonic() - start
            rss = proc_status(st.proc.pid).get("VmRSS", 0) if st.alive() else 0
            with self.lock:
                self.asked += 1
                if r is not None and r.status == 200 and took <= 1.0:
                    self.answered += 1
                elif len(self.slow) < 5:
                    self.slow.append(f"{r.status if r else 'none'} in {took:.2f}s")
                self.peak_rss = max(self.peak_rss, rss)
            self.stop_flag.wait(max(0.0, 0.2 - (time.monotonic() - start)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/octopipe"))
    ap.add_argument("--cap", type=parse_size, default=6 * GIB, help="memory cap (default 6GiB)")
    ap.add_argument("--as-cap", action="store_true", help="an address-space cap even where a cgroup can be made")
    ap.add_argument("--memory-budget", help="passed to the station (default: none, its own default)")
    ap.add_argument("--only", help="comma-separated case numbers (1,2,3,4a,...)")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"{args.binary}: no octopipe binary: cargo build --release --features bench")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

    workdir = tempfile.mkdtemp(prefix="octopipe-review-")
    cap = Cap(args.cap, args.as_cap)
    extra = ["--allow-dir", workdir, "--max-stream-memory", "8GiB"]
    if args.memory_budget:
        extra += ["--memory-budget", args.memory_budget]
    ctx = {"workdir": workdir, "binary": args.binary, "jpeg": giant_jpeg(workdir),
           "floats": float_props(args.binary)}
    head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %ct"], capture_output=True,
                          text=True).stdout.split()
    built = os.path.getmtime(args.binary)
    stale = " (OLDER than HEAD's commit)" if len(head) == 2 and built < int(head[1]) else ""
    head = f"HEAD {head[0] if head else '?'}, binary built {time.strftime('%H:%M UTC', time.gmtime(built))}{stale}"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores ({cpu}), "
          f"{int(mem) // (1 << 20)} GiB; octopipe {head}")
    print(f"# cap {args.cap / GIB:.1f} GiB by {cap.kind}" + (f" ({cap.why})" if cap.why else ""))
    print(f"# station: octopipe run '{PIPELINE}' --streams {' '.join(extra[2:])} "
          f"(+ --allow-dir TMP); healthy stream: {HEALTHY}")

    if not args.memory_budget:
        # Read from a child in the cap, as the station reads it.
        probe = subprocess.run([sys.executable, "-c", "import os,runpy,sys; "
                                "sys.path.insert(0, os.path.dirname(sys.argv[1])); "
                                "m = runpy.run_path(sys.argv[1]); print(m['station_default_budget']())",
                                __file__],
                               capture_output=True, text=True, preexec_fn=cap.preexec, timeout=30)
        print(f"# the station's default --memory-budget, read in the cap as it reads it: "
              f"{probe.stdout.strip() or probe.stderr.strip()[-200:]} (bytes, (cgroup file, limit) or None)")
    st = Station(args.binary, cap, workdir, extra)
    st.start()
    mon = Monitor(st)
    mon.start()
    idle = proc_status(st.proc.pid)
    print(f"# station up: RSS {idle.get('VmRSS', 0) // 1024} MB, {idle.get('Threads')} threads, "
          f"{idle.get('fds')} fds", flush=True)
    only = set(args.only.split(",")) if args.only else None
    rows, deaths = [], []
    for name, fn in CASES:
        if only and name.split()[0] not in only and name.split()[0][0] not in only:
            continue
        if not st.alive():
            st.start()
        c = Case(name)
        mon.reset()
        cap.reset_peak()
        entry = st.stream(HEALTHY_ID)
        before, dropped0 = entry.get("frames_in") or 0, entry.get("dropped") or 0
        t0 = time.monotonic()
        try:
            fn(st, c, ctx)
        except Exception as e:  # a case's own error is a failed check, named
            c.fail(f"{type(e).__name__}: {e}")
        time.sleep(1)
        took = time.monotonic() - t0
        alive = st.alive()
        entry = st.stream(HEALTHY_ID) if alive else {}
        after, healthy = entry.get("frames_in") or 0, entry.get("state")
        dropped = (entry.get("dropped") or 0) - dropped0 if alive else None
        status = proc_status(st.proc.pid) if alive else {}
        with mon.lock:
            asked, answered, peak, slow = mon.asked, mon.answered, mon.peak_rss, list(mon.slow)
        hwm = status.get("VmHWM", 0)
        cg = cap.peak()
        if not alive:
            rc = st.proc.returncode
            tail = [l for l in st.log().splitlines() if l.strip()][-3:]
            c.fail(f"the station died (exit {rc}; oom_kill {cap.oom_kills()}): {short(' | '.join(tail), 300)}")
            deaths.append(name)
            st.log_file.close()
        c.expect(peak * 1024 < args.cap and hwm * 1024 < args.cap, f"RSS peak {peak} kB, VmHWM {hwm} kB")
        c.expect(asked > 0 and answered == asked, f"/health {answered} of {asked} ({', '.join(slow)})")
        c.expect(alive and after > before and healthy == "running",
                 f"healthy stream {healthy}: frames {before} -> {after}")
        rows.append((c, peak, hwm, cg, answered, asked, before, after, dropped, took))
        mark = "ok" if c.ok else "FAIL"
        print(f"{mark:4} | {name} | {c.outcome} | {short(c.reason, 110)} | RSS peak {peak // 1024} MB "
              f"(VmHWM {hwm // 1024} MB" + (f", cgroup peak {cg >> 20} MB" if cg else "") +
              f") | /health {answered}/{asked} | healthy {before}->{after} (+{dropped} dropped) | "
              f"{took:.0f} s", flush=True)
        for n in c.notes:
            print(f"     - {n}", flush=True)

    mon.stop_flag.set()
    mon.join(5)
    rc = st.stop() if st.alive() else None
    cap.close()
    print()
    print("| case | outcome | reason seen | peak RSS (VmHWM) | /health 200 | healthy stream frames before -> after | checks |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c, peak, hwm, cg, answered, asked, before, after, dropped, took in rows:
        reason = short(c.reason, 120).replace("|", "\\|")
        checks = "hold" if c.ok else "**FAIL**: " + short("; ".join(n for n in c.notes), 400).replace("|", "\\|")
        print(f"| {c.name} | {c.outcome} | `{reason}` | {peak // 1024} MB ({hwm // 1024} MB) | "
              f"{answered} of {asked} | {before} -> {after} (+{dropped} dropped) | {checks} |")
    failed = [c.name for c, *_ in rows if not c.ok]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} cases hold; station exit at the end: {rc}"
          + (f"; the station died in: {', '.join(deaths)}" if deaths else ""))
    shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
