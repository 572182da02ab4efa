#!/usr/bin/env bash
# Run the GPU checks and benchmarks on the device machine, from binaries built here:
#
#   cargo test --release --no-run          # note the test binaries' paths
#   scripts/device-run.sh stage            # copies stripped binaries + data into .device/
#   (device) scripts/device-run.sh run     # with carry: [".device"]; logs go to $OUT
#
# Stages: gpu info, NVRTC compile check, GPU vs CPU parity tests, bench table, probe,
# compute-sanitizer memcheck on a subset of the tests.
set -u -o pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
if [ "$mode" = stage ]; then
    mkdir -p .device/data/visdrone
    target=${CARGO_TARGET_DIR:-target}
    for t in cuda kernels_compile; do
        bin=$(ls -t "$target"/release/deps/$t-* | grep -v '\.d$' | head -1)
        strip -o .device/$t "$bin"
    done
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" "$data/visdrone/det-val-annotations" .device/data/visdrone/
    du -sh .device
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT"
export OCTOPIPE_DATA=$PWD/.device/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
stage() { echo; echo "=== $* ($(date -u +%FT%TZ))"; }
{
stage gpu; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
stage nvrtc compile check; .device/kernels_compile --nocapture
stage parity tests; time .device/cuda --nocapture --test-threads=1
stage probe; time .device/cuda --ignored --nocapture --exact probe_table
if [ "${PROFILE:-0}" = 1 ] && command -v ncu >/dev/null; then
    stage ncu strategy C
    timeout 180 ncu --clock-control none --kernel-name regex:octopus --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        .device/cuda --ignored --exact profile_octopus 2>&1 | grep -v "^==PROF==" | tee "$OUT/ncu.txt" | tail -150
fi
stage bench; OCTOPIPE_CPU_SECONDS=${OCTOPIPE_CPU_SECONDS:-1} .device/cuda --ignored --nocapture --exact bench_table | tee "$OUT/bench.md"
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    stage compute-sanitizer memcheck
    timeout 240 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        .device/cuda --test-threads=1 zero_crops boxes_larger parity_bt709 parity_random parity_area f16_output 2>&1 | tail -40
    echo "memcheck exit: $?"
fi
} 2>&1 | tee "$OUT/device.log"
