#!/usr/bin/env bash
# The satellite tile filter on the device machine (tests/detect/tilestats.rs, `octopipe bench tiles`,
# pipelines/satellite-filter.pipe), from binaries built here:
#
#   cargo test --release --features bench --test detect --no-run
#   cargo build --release --features bench
#   scripts/device-tiles.sh stage                      # fills .device/tiles (about 40 MiB)
#   (device, carry [".device/tiles"]) scripts/device-tiles.sh run      # logs go to $OUT
#
# `stage` copies the stripped test binary and octopipe, and packs this machine's GStreamer
# (../shared/tools/pack-gst.sh; octopipe links it, the test binary does not). `run`:
#   1. the GPU tests (CUDA sums equal the CPU's on the 8192x8192 scene's 727 random tiles and on
#      random grids of every frame kind and block size; the stage keeps the same tiles on both)
#      and the library-level CPU tests (the ones that start the octopipe command need this
#      machine's build path and run here);
#   2. the GPU tests again under compute-sanitizer memcheck (SANITIZE=0 skips it);
#   3. `octopipe bench tiles`: CPU, and on the GPU one launch vs one launch per tile vs padded
#      (table in $OUT/bench-tiles.md; BENCH=0 skips it);
#   4. pipelines/satellite-filter.pipe on the scene, tilestats on CUDA (auto) and on the CPU: the
#      two report lines must name the same tiles kept (PIPE=0 skips it).
set -u -o pipefail
cd "$(dirname "$0")/.."
D=.device/tiles
if [ "${1:-run}" = stage ]; then
    mkdir -p $D
    [ -f $D/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh $D/gst.tar.xz
    target=${CARGO_TARGET_DIR:-target}
    bin=$(ls -t "$target"/release/deps/detect-* | grep -v '\.d$' | head -1)
    strip -o $D/tilestats "$bin"
    strip -o $D/octopipe "$target"/release/octopipe
    du -sh $D
    [ "$(du -sm $D | cut -f1)" -lt 60 ] || { echo "$D is 60 MiB or more: too large to carry"; exit 1; }
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT"
tar -C /tmp -xJf $D/gst.tar.xz
. /tmp/gst/env.sh
export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
stage() { echo; echo "=== $* ($(date -u +%FT%TZ))"; }
# The tests that start the octopipe command (its path is this machine's build folder).
cli="--skip the_scene_pipeline --skip zero_kept_and_all_kept_through --skip colour_frames --skip bad_rules"
{
    rc=0
    stage gpu; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
    stage "tests/tilestats (GPU and library CPU tests)"
    timeout 300 $D/tilestats tilestats:: $cli --test-threads 1 --nocapture || rc=1
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
        stage compute-sanitizer memcheck
        timeout 420 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
            $D/tilestats tilestats::gpu_ --test-threads 1 --nocapture 2>&1 | tail -25
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    fi
    if [ "${BENCH:-1}" = 1 ]; then
        stage octopipe bench tiles
        timeout 300 $D/octopipe bench tiles | tee "$OUT/bench-tiles.md"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    fi
    if [ "${PIPE:-1}" = 1 ]; then
        stage pipelines/satellite-filter.pipe
        S=/tmp/octopipe-sat; rm -rf $S; mkdir -p $S/scene
        $D/octopipe scene --out $S/scene/scene.png || rc=1
        $D/octopipe run pipelines/satellite-filter.pipe --set scene=$S/scene --set out=$S/kept-gpu 2>&1 |
            tee $S/gpu.log | grep -E "^tilestats|^tilestats +[0-9]|error" || rc=1
        $D/octopipe run "images location=$S/scene ! tiles min=128 max=512 seed=22 \
            ! tilestats keep=\"mean > 0.535\" backend=cpu ! tilesink location=$S/kept-cpu" 2>&1 |
            tee $S/cpu.log | grep -E "^tilestats|^tilestats +[0-9]|error" || rc=1
        if cmp -s <(grep -v '^$' $S/kept-gpu/index.jsonl) <(grep -v '^$' $S/kept-cpu/index.jsonl); then
            echo "index.jsonl: CUDA and CPU pipelines wrote the same $(wc -l < $S/kept-cpu/index.jsonl) lines (stats and kept)"
        else
            echo "index.jsonl: CUDA and CPU pipelines DIFFER"; rc=1
        fi
    fi
    echo "exit: $rc"
    exit $rc
} 2>&1 | tee "$OUT/device-tiles.log"
exit "${PIPESTATUS[0]}"
