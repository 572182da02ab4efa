#!/usr/bin/env python3
"""Summarize ONNX Runtime profiles (OCTOPIPE_ORT_PROFILE=PREFIX writes one JSON per session):
per run, the time in nodes (host-side: for CUDA's execution provider that is launching the
kernels, plus any copy or synchronization), nodes per execution provider, and the op types that
take the most.

    python3 scripts/ort_profile_summary.py PREFIX*.json
"""
import collections
import json
import sys

for path in sys.argv[1:]:
    events = json.load(open(path))
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    if not runs:
        continue
    # Skip the first runs (planning, warm-up): keep the last half.
    keep = runs[len(runs) // 2:]
    t0 = keep[0]["ts"]
    nodes = [e for e in nodes if e["ts"] >= t0]
    n = len(keep)
    run_ms = sum(e["dur"] for e in keep) / n / 1000
    node_ms = sum(e["dur"] for e in nodes) / n / 1000
    by_ep = collections.Counter()
    by_op = collections.defaultdict(float)
    count = collections.Counter()
    for e in nodes:
        a = e.get("args", {})
        by_ep[a.get("provider", "?")] += 1
        by_op[a.get("op_name", "?")] += e["dur"] / n / 1000
        count[a.get("op_name", "?")] += 1
    print(f"{path}: {n} runs kept, run {run_ms:.3f} ms, nodes {node_ms:.3f} ms, "
          f"{len(nodes) // n} node launches per run; by provider: "
          + ", ".join(f"{k} {v // n}" for k, v in by_ep.items()))
    for op, ms in sorted(by_op.items(), key=lambda x: -x[1])[:12]:
        print(f"    {op:<24} {ms:8.3f} ms  ({count[op] // n} per run)")
