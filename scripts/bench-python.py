#!/usr/bin/env python3
"""Overhead of the Python module against the command line on the same description: the shared
clip through pipelines/visdrone-classify.pipe (images, DET boxes, the shared classifier, a JSONL
sink), run by `octopipe run` and by `octopipe.Pipeline(...)` reading every frame of
`results()`, alternately, each as a whole process (start-up included). Prints a table.

    cargo build --release && bash scripts/setup.sh --wheel release
    . scripts/env.sh && python3 scripts/bench-python.py [--runs 7] [--loop 10] [--cli target/release/octopipe]

`--loop N` plays the clip N times (`images loop=N`), so that the run, not the start-up of
either process, is what is measured.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

PY = """
import sys, octopipe
desc, root, model, out = sys.argv[1:5]
p = octopipe.Pipeline(desc, vars={"root": root, "model": model, "out": out})
frames = objects = 0
for f in p.results():
    frames += 1
    objects += len(f.objects)
p.close()
print(frames, objects)
"""


def timed(cmd, out):
    out.unlink(missing_ok=True)  # each run writes the file anew (outputs are never overwritten)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"bench: {cmd[0]} failed ({r.returncode}):\n{r.stderr}")
    return wall, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--loop", type=int, default=10)
    ap.add_argument("--cli", default=str(REPO / "target" / "release" / "octopipe"))
    ap.add_argument("--data", default=os.environ.get("OCTOPIPE_DATA", REPO.parent / "shared" / "data"))
    args = ap.parse_args()
    data = pathlib.Path(args.data)
    root = data / "visdrone" / "clip-9999999"
    model = data / "models" / "visdrone-crops-64.onnx"
    import octopipe

    text = (REPO / "pipelines" / "visdrone-classify.pipe").read_text()
    desc = text.replace("images location=${root}/images framerate=30",
                        f"images location=${{root}}/images framerate=30 loop={args.loop}")
    assert desc != text, "pipelines/visdrone-classify.pipe changed: update the benchmark"
    with tempfile.TemporaryDirectory() as tmp:
        pipe = pathlib.Path(tmp, "bench.pipe")
        pipe.write_text(desc)
        out = pathlib.Path(tmp, "objects.jsonl")
        cli = [args.cli, "run", str(pipe), "--set", f"root={root}", "--set", f"model={model}",
               "--set", f"out={out}"]
        py = [sys.executable, "-c", PY, desc, str(root), str(model), str(out)]
        times = {"cli": [], "python": []}
        timed(cli, out), timed(py, out)  # warm the page cache and the kernel cache
        for _ in range(args.runs):
            times["cli"].append(timed(cli, out)[0])
            wall, said = timed(py, out)
            times["python"].append(wall)
        frames, objects = said.split()
    print(f"clip x{args.loop} ({frames} frames, {objects} objects) through visdrone-classify.pipe, "
          f"{args.runs} runs each, alternating; CLI {args.cli}, module {octopipe.__file__}")
    print(f"{'':10}{'median s':>10}{'min s':>10}{'max s':>10}")
    for k, v in times.items():
        print(f"{k:10}{statistics.median(v):>10.3f}{min(v):>10.3f}{max(v):>10.3f}")
    over = statistics.median(times["python"]) / statistics.median(times["cli"]) - 1
    over_min = min(times["python"]) / min(times["cli"]) - 1
    print(f"python overhead: {100 * over:+.1f}% (medians), {100 * over_min:+.1f}% (minima)")


if __name__ == "__main__":
    main()
