#!/usr/bin/env bash
# The Python module's GPU checks on the device machine (PyTorch with CUDA at /opt/torch/.venv, no
# cargo, no GStreamer there), from what is built here:
#
#   scripts/device-python.sh stage                      # builds the release wheel, fills .device/python
#   (device, carry [".device/python"]) scripts/device-python.sh run
#
# `stage` builds the module (maturin, release profile) and unpacks it with its .so stripped, packs
# this machine's GStreamer (../shared/tools/pack-gst.sh) and the shared clip. `run` runs, with the
# device's python3 (3.12; the wheel is abi3 for >= 3.9):
#   1. crates/octopipe-python/tests/cuda_check.py: a torch CUDA tensor pushed (through __dlpack__
#      and through __cuda_array_interface__) and read in place by the CUDA preprocess stage; the
#      batch taken with torch.from_dlpack without a copy (the same data pointer), writable; the
#      tensors and a torch model's labels equal the CPU path's; 2,000 CUDA frames with flat memory.
#   2. examples/python/torch_batches.py on the clip, --device cpu and --device cuda: the same
#      number of crops and lines.
# Logs go to $OUT/python.log; the exit status is non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.device/python
if [ "${1:-run}" = stage ]; then
    rm -rf $D/site && mkdir -p $D/site $D/data/visdrone
    [ -f $D/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh $D/gst.tar.xz
    out=${CARGO_TARGET_DIR:-target}/wheels
    rm -f "$out"/octopipe-*.whl
    maturin build --quiet --release --auditwheel skip -m crates/octopipe-python/Cargo.toml --out "$out"
    python3 -m zipfile -e "$out"/octopipe-*.whl $D/site
    strip $D/site/octopipe/_octopipe*.so
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" $D/data/visdrone/
    du -sh $D
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT"
tar -C /tmp -xJf $D/gst.tar.xz
. /tmp/gst/env.sh
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
export PYTHONPATH=$PWD/$D/site OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    "$PY" -c 'import sys, torch, octopipe; print("python", sys.version.split()[0], "torch", torch.__version__, "octopipe", octopipe.__version__)'
    echo "=== cuda_check.py ($(date -u +%FT%TZ))"
    "$PY" crates/octopipe-python/tests/cuda_check.py
    for device in cpu cuda; do
        echo "=== torch_batches.py --device $device ($(date -u +%FT%TZ))"
        "$PY" examples/python/torch_batches.py $D/data --device $device --out "$OUT/torch-$device.jsonl"
    done
    "$PY" - "$OUT/torch-cpu.jsonl" "$OUT/torch-cuda.jsonl" <<'PY'
import json, sys
cpu, gpu = ([json.loads(line) for line in open(p)] for p in sys.argv[1:])
assert [o["bbox"] for o in cpu] == [o["bbox"] for o in gpu], "the crops differ"
same = sum(a.get("label") == b.get("label") for a, b in zip(cpu, gpu))
print(f"ok   torch_batches: {len(cpu)} objects, the same boxes; labels agree on {same} ({100 * same / len(cpu):.2f}%)")
assert same >= 0.99 * len(cpu)
PY
} 2>&1 | tee "$OUT/python.log"
