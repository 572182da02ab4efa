#!/usr/bin/env bash
# The GStreamer plugin with frames in CUDA memory on the device machine (no GStreamer, no cargo,
# no ONNX Runtime GPU build there), in three back-to-back device calls (the machine keeps /tmp
# 30 s after a call), from what is built here:
#
#   cargo build --release -p octopipe-gst && cargo test -p octopipe-gst --no-run
#   scripts/device-gst-cuda.sh stage            # fills $DEV/g1 g2 g3 (DEV: .device by default)
#   (device, carry [".device/g1"])  bash .device/g1/device-gst-cuda.sh part1
#   (device, carry [".device/g2"])  bash .device/g2/device-gst-cuda.sh part2
#   (device, carry [".device/g3"])  bash .device/g3/device-gst-cuda.sh run
#
# The folders carry 27, 38 and 25 MiB beside the repository's tree (64 MiB a call in all).
# With TWO_CALLS=1 at `stage`, g1 carries parts a and b with GStreamer (46 MiB) and g3 part c
# (44 MiB): `part1` then `run`, two calls.
#
# `stage-lite` then (device, carry [".device/o1"]) `bash .device/o1/device-gst-cuda.sh lite`: one
# call without ONNX Runtime (32 MiB): the CUDA tests that need no model (octooverlay's kernel
# against system memory on the clip's annotations, the pad templates) and issue 53's
# `octopipe bench decode` (96 NVDEC H.264 streams per way of starting; DECODE_START, DECODE_S).
# `diag` (carry g3, after `run`, on the same warm machine) runs the gst-launch-1.0 pipeline with a queue
# before and after each octodetect, and again with GST_DEBUG=octopipe-shared:5, and prints the
# frames per call of the shared detector's and classifier's engines.
#
# `run` alone (one call) is enough on a warm machine where /tmp/ort and /tmp/gst are unpacked
# already (scripts/device-ort-cuda.sh unpacks the same); it says NEED-PARTS otherwise.
#
# `run` runs the plugin's CUDA-memory tests (tests/plugin/cuda.rs: nvh264dec ! octodetect !
# octotrack ! octoclassify in CUDA memory against the same frames copied to the host), then the
# benchmark: 16 x 1080p H.264 streams (the clip's frames scaled and looped, encoded here) through
# `octopipe run` (media decoder=nvdec, one shared detect, track, batch, preprocess backend=cuda
# memory=device, classify; file mode) and through one gst-launch-1.0 with 16 branches sharing one
# octodetect and one octoclassify, with the same models and properties (the dynamic-batch
# CenterNet, made there by ../shared/tools/centernet-dynamic-batch.py; the crop classifier;
# ep=cuda), and compares frames per wall-clock second. Logs go to $OUT.
set -uo pipefail
# The repository root: this file is in scripts/ here and in .device/gN there.
case "$(basename "$(dirname "$0")")" in
scripts) cd "$(dirname "$0")/.." ;;
*) cd "$(dirname "$0")/../.." ;;
esac
# Issue 53's decoders alone (`octopipe bench decode`, 96 NVDEC H.264 streams of the staged clip
# frames per way of starting; DECODE_START, DECODE_STREAMS, DECODE_S), into $OUT/decode.md.
bench_decode() {
    echo "=== bench decode $(date -u +%T)"
    timeout ${DECODE_S:-170} /tmp/t/octopipe bench decode --decoder nvdec --codec h264 --seconds 10 --bitrate 4000 \
        --clip /tmp/data/visdrone/clip-9999999 --streams ${DECODE_STREAMS:-96} \
        --start ${DECODE_START:-one-pipeline,threads,threads-own-context,threads-4-contexts} 2>&1 | tee "$OUT/decode.md"
}
case "${1:-run}" in
stage)
    # Run from the worktree; DEV is the repository whose .device the device calls carry.
    DEV=${DEV:-.device}
    data=${OCTOPIPE_DATA:-../shared/data}
    root=$PWD
    ort=${ORT_PARTS:-$DEV/ort}
    gst=${GST_ARCHIVE:-$DEV/p1/gst.tar.xz}
    rm -rf "$DEV/g1" "$DEV/g2" "$DEV/g3"
    mkdir -p "$DEV/g1" "$DEV/g2" "$DEV/g3/data/models" "$DEV/g3/data/visdrone/clip-9999999/images"
    # g1: ONNX Runtime's part a and GStreamer; g2: parts b and c; g3: the rest, and the run.
    # TWO_CALLS=1: g1 carries parts a and b with GStreamer, g3 part c (two calls, no g2).
    if [ "${TWO_CALLS:-0}" = 1 ]; then
        for f in "$ort/part.a" "$ort/part.b" "$gst"; do ln "$f" "$DEV/g1/" 2>/dev/null || cp "$f" "$DEV/g1/"; done
        ln "$ort/part.c" "$DEV/g3/" 2>/dev/null || cp "$ort/part.c" "$DEV/g3/"
    else
        for f in "$ort/part.a" "$gst"; do ln "$f" "$DEV/g1/" 2>/dev/null || cp "$f" "$DEV/g1/"; done
        for f in "$ort/part.b" "$ort/part.c"; do ln "$f" "$DEV/g2/" 2>/dev/null || cp "$f" "$DEV/g2/"; done
    fi
    cp "${OCTOPIPE_BIN_XZ:-$DEV/p2/octopipe.xz}" "$DEV/g3/octopipe.xz"
    strip -o /tmp/libgstoctopipe.so "$root/target/release/libgstoctopipe.so"
    xz -c /tmp/libgstoctopipe.so > "$DEV/g3/libgstoctopipe.so.xz"
    bin=$(ls -t "$root"/target/debug/deps/plugin-* | grep -v '\.d$' | head -1)
    strip -o /tmp/plugin-test "$bin" && xz -c /tmp/plugin-test > "$DEV/g3/plugin-test.xz"
    cp "$data/models/visdrone-crops-64.onnx" "$data/models/coco-centernet-512.onnx" "$DEV/g3/data/models/"
    # The test's clip: its first 8 frames (it encodes them to H.264 there), and its annotations
    # (octooverlay's test replays them).
    ls "$data/visdrone/clip-9999999/images"/*.jpg | sort | head -8 |
        xargs -I{} cp {} "$DEV/g3/data/visdrone/clip-9999999/images/"
    cp -r "$data/visdrone/clip-9999999/annotations" "$DEV/g3/data/visdrone/clip-9999999/"
    # The benchmark's stream: 300 frames (10 s) of 1080p H.264 from the clip's frames, looped.
    if [ ! -f "${BENCH_MP4:-/tmp/clip1080.mp4}" ]; then
        tmp=$(mktemp -d) && i=0
        for f in $(ls "$data/visdrone/clip-9999999/images"/*.jpg | sort); do
            ln -s "$(realpath "$f")" "$tmp/$(printf %05d $i).jpg"; i=$((i + 1))
        done
        gst-launch-1.0 -q multifilesrc location="$tmp/%05d.jpg" index=0 stop-index=$((i - 1)) loop=true \
            num-buffers=300 caps=image/jpeg,framerate=30/1 ! jpegdec ! videoscale ! videoconvert \
            ! video/x-raw,format=I420,width=1920,height=1080,pixel-aspect-ratio=1/1 \
            ! x264enc speed-preset=fast key-int-max=90 bitrate=4000 ! video/x-h264,profile=high \
            ! h264parse ! mp4mux ! filesink location="${BENCH_MP4:-/tmp/clip1080.mp4}"
    fi
    cp "${BENCH_MP4:-/tmp/clip1080.mp4}" "$DEV/g3/clip1080.mp4"
    cp "$data/../tools/pack-ort-cuda.py" "$data/../tools/centernet-dynamic-batch.py" "$DEV/g3/"
    for g in g1 g2 g3; do cp "$0" "$DEV/$g/device-gst-cuda.sh"; done
    du -sh "$DEV/g1" "$DEV/g2" "$DEV/g3"
    exit 0
    ;;
stage-lite)
    DEV=${DEV:-.device}
    data=${OCTOPIPE_DATA:-../shared/data}
    O=$DEV/o1
    rm -rf "$O" && mkdir -p "$O/data/visdrone/clip-9999999"
    cp "${GST_ARCHIVE:-$DEV/gst.tar.xz}" "$O/gst.tar.xz"
    cp -r "$data/visdrone/clip-9999999/images" "$data/visdrone/clip-9999999/annotations" "$O/data/visdrone/clip-9999999/"
    bin=$(ls -t target/debug/deps/plugin-* | grep -v '\.d$' | head -1)
    strip -o /tmp/plugin-test "$bin" && xz -c /tmp/plugin-test > "$O/plugin-test.xz"
    strip -o /tmp/libgstoctopipe.so target/release/libgstoctopipe.so
    xz -c /tmp/libgstoctopipe.so > "$O/libgstoctopipe.so.xz"
    strip -o /tmp/octopipe-stripped "${CARGO_TARGET_DIR:-target}"/release/octopipe
    xz -c /tmp/octopipe-stripped > "$O/octopipe.xz"
    cp "$0" "$O/device-gst-cuda.sh"
    du -sh "$O"
    exit 0
    ;;
lite)
    O=.device/o1
    OUT=${OUT:-/tmp/octopipe-out}
    mkdir -p "$OUT" /tmp/t /tmp/data
    [ -f /tmp/gst/env.sh ] || tar -C /tmp -xJf $O/gst.tar.xz
    . /tmp/gst/env.sh
    cp -r $O/data/* /tmp/data/
    for f in plugin-test libgstoctopipe.so octopipe; do xz -dc $O/$f.xz > /tmp/t/$f; done
    chmod +x /tmp/t/plugin-test /tmp/t/octopipe
    export OCTOPIPE_DATA=/tmp/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels GST_PLUGIN_PATH=/tmp/t
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "$(nproc) CPU cores; $(date -u +%FT%TZ)"
    echo "=== plugin tests"
    timeout ${TEST_S:-150} /tmp/t/plugin-test --test-threads 1 --nocapture cuda::octooverlay cuda::octodetect_and cuda::the_decoders 2>&1 |
        tee "$OUT/tests.log" | grep -v "^$" | tail -30
    bench_decode
    date -u +%T
    exit 0
    ;;
part1)
    mkdir -p /tmp/parts && cp .device/g1/part.* /tmp/parts/ && tar -C /tmp -xJf .device/g1/gst.tar.xz
    exit 0
    ;;
part2)
    cp .device/g2/part.b .device/g2/part.c /tmp/parts/
    exit 0
    ;;
run | diag) ;;
*) echo "usage: $0 stage | stage-lite | part1 | part2 | run | diag | lite" >&2; exit 2 ;;
esac

D=.device/g3
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT" /tmp/data /tmp/t
# ONNX Runtime's CUDA build and GStreamer: unpacked by parts 1 and 2, or still there from an
# earlier run on this machine.
[ ! -f $D/part.c ] || cp $D/part.c /tmp/parts/ 2>/dev/null || true
if [ -f /tmp/ort/ort-cuda/libonnxruntime.so.1.31.1 ]; then
    torch=$(sed -n 's/^TORCH_NVIDIA = "\(.*\)"$/\1/p' $D/pack-ort-cuda.py)
    lib=/tmp/ort/ort-cuda
    echo "export ORT_DYLIB_PATH=$lib/libonnxruntime.so.1.31.1 LD_LIBRARY_PATH=$lib:$torch/cu13/lib:$torch/cudnn/lib:\${LD_LIBRARY_PATH:-}" > /tmp/ort-env
elif [ -f /tmp/parts/part.a ] && [ -f /tmp/parts/part.b ] && [ -f /tmp/parts/part.c ]; then
    python3 $D/pack-ort-cuda.py /tmp/ort --unpack /tmp/parts > /tmp/ort-env
else
    echo "NEED-PARTS: no ONNX Runtime CUDA build on this machine: run part1 and part2 first"; exit 3
fi
[ -f /tmp/gst/env.sh ] || { echo "NEED-PARTS: no /tmp/gst: run part1 first"; exit 3; }
eval "$(cat /tmp/ort-env)"
. /tmp/gst/env.sh
cp -r $D/data/* /tmp/data/
xz -dc $D/octopipe.xz > /tmp/t/octopipe
xz -dc $D/libgstoctopipe.so.xz > /tmp/t/libgstoctopipe.so
xz -dc $D/plugin-test.xz > /tmp/t/plugin-test
chmod +x /tmp/t/octopipe /tmp/t/plugin-test
export OCTOPIPE_DATA=/tmp/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels GST_PLUGIN_PATH=/tmp/t
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "$(nproc) CPU cores; $(date -u +%FT%TZ)"
gst-inspect-1.0 octodetect | grep -A3 "SINK template" | tee "$OUT/inspect.txt"

if [ "$1" = diag ]; then
    M=/tmp/data/models
    DET="model=$M/coco-centernet-512-dynamic.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 ep=cuda backend=cuda"
    CLS="model=$M/visdrone-crops-64.onnx labels=person,two-wheeler,car,large-vehicle ep=cuda backend=cuda memory=device"
    launch() {
        local l=""
        for i in $(seq 0 15); do
            l+=" filesrc location=/tmp/v/s$i.mp4 ! qtdemux ! h264parse ! nvh264dec $1 ! octodetect shared=det $DET $2"
            l+=" ! octotrack high=0.3 ! octoclassify shared=cls $CLS ! fakesink"
        done
        echo "$l"
    }
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046 # the launch line is words
    gst-launch-1.0 $(launch "! queue max-size-buffers=4" "! queue max-size-buffers=4") > "$OUT/q2.log" 2>&1
    t1=$(date +%s.%N)
    echo "queues before and after octodetect: $(python3 -c "print(round(4800/($t1-$t0),1), 'fps over', round($t1-$t0,2), 's')")"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    GST_DEBUG=octopipe-shared:5 GST_DEBUG_NO_COLOR=1 gst-launch-1.0 $(launch "" "") > "$OUT/dbg.log" 2>&1
    t1=$(date +%s.%N)
    echo "with debug: $(python3 -c "print(round(4800/($t1-$t0),1), 'fps over', round($t1-$t0,2), 's')")"
    python3 - "$OUT/dbg.log" <<'PY'
import re, sys, collections
calls = collections.defaultdict(list)
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"(0x[0-9a-f]+) .*?(\d+) frames back from one call, (\d+) held", line)
    if m:
        calls[m.group(1)].append(int(m.group(2)))
for t, c in calls.items():
    print(f"engine thread {t}: {len(c)} calls, {sum(c)} frames, {sum(c) / len(c):.2f} frames a call")
PY
    xz -9 "$OUT/dbg.log"
    exit 0
fi

echo "=== tests/plugin/cuda.rs"
/tmp/t/plugin-test --test-threads 1 --nocapture cuda:: 2>&1 | tee "$OUT/tests.log" | grep -v "^$"

echo "=== the benchmark"
M=/tmp/data/models
python3 $D/centernet-dynamic-batch.py $M/coco-centernet-512.onnx $M/coco-centernet-512-dynamic.onnx 2>&1 | tail -2
mkdir -p /tmp/v && for i in $(seq 0 15); do ln -sf "$PWD/$D/clip1080.mp4" /tmp/v/s$i.mp4; done
N=${STREAMS:-16}
DET="model=$M/coco-centernet-512-dynamic.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 ep=cuda backend=cuda"
CLS="model=$M/visdrone-crops-64.onnx labels=person,two-wheeler,car,large-vehicle ep=cuda backend=cuda memory=device"
frames=$((N * 300))
desc=""
for i in $(seq 0 $((N - 2))); do desc+="media location=/tmp/v/s$i.mp4 decoder=nvdec ! det. "; done
desc+="media location=/tmp/v/s$((N - 1)).mp4 decoder=nvdec ! detect name=det $DET ! track high=0.3"
desc+=" ! batch ! preprocess $(echo "$CLS" | grep -o 'backend=cuda memory=device')"
desc+=" ! classify $(echo "$CLS" | sed 's/ backend=cuda memory=device//') ! jsonl location=/dev/null"
calc() { python3 -c "print($1)"; }
t0=$(date +%s.%N)
timeout 300 /tmp/t/octopipe run "$desc" > "$OUT/octopipe-run.log" 2>&1
rc=$?; t1=$(date +%s.%N)
grep -E "^(frames|throughput|objects)|detect|rror" "$OUT/octopipe-run.log" | head -12
run_fps=$(calc "$frames / ($t1 - $t0)")
echo "octopipe run: rc $rc, $frames frames in $(calc "round($t1 - $t0, 2)") s: $(calc "round($run_fps, 1)") fps"

gst() { # $1: what goes between octodetect and octotrack in each branch
    local launch=""
    for i in $(seq 0 $((N - 1))); do
        launch+=" filesrc location=/tmp/v/s$i.mp4 ! qtdemux ! h264parse ! nvh264dec"
        launch+=" ! octodetect shared=det $DET $1 ! octotrack high=0.3 ! octoclassify shared=cls $CLS ! fakesink"
    done
    echo "$launch"
}
for variant in ${VARIANTS:-plain queue}; do
    extra=""; [ $variant = queue ] && extra="! queue max-size-buffers=4"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046 # the launch line is words
    timeout 300 gst-launch-1.0 -v $(gst "$extra") > "$OUT/gst-$variant.log" 2>&1
    rc=$?; t1=$(date +%s.%N)
    fps=$(calc "$frames / ($t1 - $t0)")
    echo "gst-launch-1.0 ($variant): rc $rc, $frames frames in $(calc "round($t1 - $t0, 2)") s:" \
        "$(calc "round($fps, 1)") fps = $(calc "round(100 * $fps / $run_fps, 1)") % of octopipe run"
    grep -m2 "octodetect[0-9]*.GstPad:sink: caps" "$OUT/gst-$variant.log"
    grep -E "ERROR|Execution ended" "$OUT/gst-$variant.log" | head -3
done

# DECODE=1: issue 53's decoders alone on the same machine (`octopipe bench decode`, 96 NVDEC
# H.264 streams of the test's clip frames per way of starting; docs/benchmarking.md).
if [ "${DECODE:-0}" = 1 ]; then
    DECODE_S=${DECODE_S:-150} bench_decode
fi
