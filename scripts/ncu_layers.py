#!/usr/bin/env python3
"""Each layer of the engine against the H100's limits (issue 53 item 2): Nsight Compute's
per-kernel counters joined, launch by launch, with the engine's own profile.

    ENGINE_BENCH_LAYERS=layers.csv engine_bench b6.onnx 64 30 tuned 64       # CUDA events
    ncu --csv --page details ... engine_bench b6.onnx 64 1 tuned > ncu.csv   # first call's kernels
    python3 scripts/ncu_layers.py layers.csv ncu.csv [--kernels Tuned]

`layers.csv` is engine_bench's launch-order profile (kernels,index,label,ms,bytes,flops); `ncu.csv` is
`ncu --csv --page details` with the SpeedOfLight section (and, where the GPU knows them,
`dram__bytes.sum` and the tensor pipe's share). The n-th kernel ncu profiled is the n-th launch of
the engine's first call (engine_bench's `run_host`), so the two join by index. Prints one table a
layer in launch order, then the layers by kind, with what bounds each: memory when DRAM is at
least 60% of its peak, compute when the SM or the tensor pipe is, else neither (latency: a small
grid, a tail, too few bytes in flight).

Nsight Compute flushes the caches before each kernel, so a small layer whose input would still be
in L2 after the layer before it shows slower than it runs in the engine: the CUDA-event column is
the engine's own time.
"""

import argparse
import csv
import re
import sys
from collections import OrderedDict, defaultdict


def read_layers(path, kernels):
    with open(path, newline="") as f:
        return [
            {"label": r["label"], "ms": float(r["ms"]), "bytes": float(r["bytes"]), "flops": float(r["flops"])}
            for r in csv.DictReader(f)
            if r["kernels"] == kernels
        ]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read_ncu(path):
    """Kernels in profile order: {name, metrics: {metric name: (unit, value)}}."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    kernels = OrderedDict()
    for r in csv.DictReader(lines):
        k = kernels.setdefault(r["ID"], {"name": r["Kernel Name"], "metrics": {}})
        k["metrics"][r["Metric Name"]] = (r["Metric Unit"], number(r["Metric Value"]))
    return list(kernels.values())


def ms_of(metrics):
    unit, value = metrics.get("Duration", ("", None))
    if value is None:
        return None
    return value * {"nsecond": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3}.get(unit, 1e-3)


def pct(metrics, *names):
    for n in names:
        if n in metrics and metrics[n][1] is not None:
            return metrics[n][1]
    return None


def kind(label):
    name = label.split(" ")[0]
    return re.sub(r"(_tc)\d+", r"\1", name)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("layers")
    p.add_argument("ncu")
    p.add_argument("--kernels", default="Tuned", help="the kernel set ncu profiled (engine_bench's Tuned or Simple)")
    a = p.parse_args()
    layers = read_layers(a.layers, a.kernels)
    kernels = read_ncu(a.ncu)
    if len(kernels) < len(layers):
        sys.exit(f"{a.ncu}: {len(kernels)} kernels profiled, the engine launches {len(layers)}")
    rows = []
    for i, (l, k) in enumerate(zip(layers, kernels)):
        m = k["metrics"]
        dram = pct(m, "DRAM Throughput")
        sm = pct(m, "Compute (SM) Throughput")
        tensor = pct(m, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
        moved = m.get("dram__bytes.sum", (None, None))
        moved_mb = None
        if moved[1] is not None:
            moved_mb = moved[1] * {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3}.get(moved[0], 1e-6)
        if dram is not None and dram >= 60:
            bound = "memory"
        elif max(sm or 0, tensor or 0) >= 60:
            bound = "compute"
        else:
            bound = "latency"
        rows.append(dict(i=i, label=l["label"], ev=l["ms"], ncu=ms_of(m), dram=dram, sm=sm, tensor=tensor,
                         moved=moved_mb, plan_mb=l["bytes"] / 1e6, bound=bound, kernel=k["name"]))
    total = sum(r["ev"] for r in rows)
    f = lambda v, d=1: "" if v is None else f"{v:.{d}f}"
    print(f"{len(rows)} kernels; {total:.3f} ms by CUDA events")
    print()
    print("| # | layer | ms (events) | ms (ncu) | DRAM % | MB moved (ncu) | MB (plan) | SM % | tensor % | bound |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['i']} | {r['label']} | {r['ev']:.3f} | {f(r['ncu'], 3)} | {f(r['dram'])} | {f(r['moved'])} "
              f"| {r['plan_mb']:.1f} | {f(r['sm'])} | {f(r['tensor'])} | {r['bound']} |")
    print()
    print("| kind | layers | ms (events) | share | DRAM % (time-weighted) | memory / compute / latency-bound ms |")
    print("|---|---:|---:|---:|---:|---|")
    by = defaultdict(list)
    for r in rows:
        by[kind(r["label"])].append(r)
    for k, rs in sorted(by.items(), key=lambda kv: -sum(r["ev"] for r in kv[1])):
        ms = sum(r["ev"] for r in rs)
        weighted = [(r["dram"], r["ev"]) for r in rs if r["dram"] is not None]
        dram = sum(d * t for d, t in weighted) / max(sum(t for _, t in weighted), 1e-12) if weighted else None
        split = " / ".join(f"{sum(r['ev'] for r in rs if r['bound'] == b):.3f}" for b in ("memory", "compute", "latency"))
        print(f"| {k} | {len(rs)} | {ms:.3f} | {100 * ms / total:.1f}% | {f(dram)} | {split} |")


if __name__ == "__main__":
    main()
