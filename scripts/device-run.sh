#!/usr/bin/env bash
# Run the GPU checks and benchmarks on the device machine, from binaries built here:
#
#   cargo test --release --features bench --no-run   # note the test binaries' paths
#   scripts/device-run.sh stage                      # copies stripped binaries + data into .device/
#   (device) scripts/device-run.sh run               # with carry: [".device"]; logs go to $OUT
#
# Stages: gpu info, NVRTC compile check, GPU vs CPU parity tests (host and device frames), probe, strategy C kernel variants
# (one process per variant: kernel defines via OCTOPIPE_NVRTC_DEFINES, persistent grid via
# OCTOPIPE_OCTOPUS_GRID_PER_SM), bench table, compute-sanitizer memcheck on a subset of the tests.
# Skip a stage with PARITY=0, PROBE=0, VARIANTS=0, DETECT=0, BENCH=0, SANITIZE=0.
set -u -o pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
if [ "$mode" = stage ]; then
    mkdir -p .device/data/visdrone
    target=${CARGO_TARGET_DIR:-target}
    # The facade's preprocess test binary (its cuda:: and device_frames:: tests) and the stages
    # crate's unit tests (the NVRTC compile check of every module it declares).
    for t in preprocess octopipe_stages; do
        bin=$(ls -t "$target"/release/deps/$t-* | grep -v '\.d$' | head -1)
        strip -o .device/$t "$bin"
    done
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" "$data/visdrone/det-val-annotations" .device/data/visdrone/
    mkdir -p .device/data/models && cp "$data/models/visdrone-crops-64.onnx" .device/data/models/
    du -sh .device
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT"
export OCTOPIPE_DATA=$PWD/.device/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
stage() { echo; echo "=== $* ($(date -u +%FT%TZ))"; }
{
stage gpu; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
stage nvrtc compile check; .device/octopipe_stages kernels --nocapture
if [ "${PARITY:-1}" = 1 ]; then
    stage parity tests; time .device/preprocess cuda:: --nocapture --test-threads=1
    stage device frames; time .device/preprocess device_frames:: --nocapture --test-threads=1
fi
if [ "${PROBE:-1}" = 1 ]; then stage probe; time .device/preprocess --ignored --nocapture --exact cuda::benches::probe_table; fi
if [ "${VARIANTS:-1}" = 1 ]; then
    stage strategy C variants
    while IFS='|' read -r defs grid; do
        OCTOPIPE_NVRTC_DEFINES="$defs" OCTOPIPE_OCTOPUS_GRID_PER_SM="$grid" \
            .device/preprocess --ignored --nocapture --exact cuda::benches::octopus_variants 2>&1 | grep -E " \| |panicked|FAILED"
    done <<'VARIANTS' | tee "$OUT/variants.txt"
|
-DOCTOPUS_STAGE4=0 -DSTAGE_FLOATS=2048|
-DOCTOPUS_STAGE4=0|
-DSTAGE_FLOATS=4096|
-DSTAGE_FLOATS=12288|
VARIANTS
    if [ "${BEST:-0}" = 1 ]; then
        # The fastest variant on crops1000 (tile 512 x 4) runs the bench and memcheck below.
        best=$(grep "crops1000 | tile 512 x 4" "$OUT/variants.txt" | sort -t'|' -k5,5g | head -1)
        export OCTOPIPE_NVRTC_DEFINES=$(echo "$best" | sed 's/.*defines \[\([^]]*\)\].*/\1/')
        export OCTOPIPE_OCTOPUS_GRID_PER_SM=$(echo "$best" | sed 's/.*grid\/SM \([0-9]*\).*/\1/')
        echo "best: $best"
        echo "bench and memcheck with OCTOPIPE_NVRTC_DEFINES='$OCTOPIPE_NVRTC_DEFINES' OCTOPIPE_OCTOPUS_GRID_PER_SM=$OCTOPIPE_OCTOPUS_GRID_PER_SM"
    fi
fi
if [ "${PROFILE:-0}" = 1 ] && command -v ncu >/dev/null; then
    stage ncu strategy C
    timeout 180 ncu --clock-control none --kernel-name regex:octopus --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        .device/preprocess --ignored --exact cuda::benches::profile_octopus 2>&1 | grep -v "^==PROF==" | tee "$OUT/ncu.txt" | tail -150
fi
[ "${DETECT:-1}" = 1 ] && stage detector tiles && .device/preprocess --ignored --nocapture --exact cuda::models::detect_tiles_table | tee "$OUT/detect-tiles.md"
[ "${BENCH:-1}" = 1 ] && stage bench && OCTOPIPE_CPU_SECONDS=${OCTOPIPE_CPU_SECONDS:-1} .device/preprocess --ignored --nocapture --exact cuda::benches::bench_table | tee "$OUT/bench.md"
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    stage compute-sanitizer memcheck
    timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        .device/preprocess --test-threads=1 zero_crops boxes_larger parity_bt709 parity_random parity_area f16_output \
        parity_octopus_separable submit_flush detector_tiles 2>&1 | tail -40
    echo "memcheck exit: $?"
    timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        .device/preprocess --test-threads=1 device_frames:: 2>&1 | tail -20
    echo "memcheck (device frames) exit: $?"
fi
} 2>&1 | tee "$OUT/device.log"
