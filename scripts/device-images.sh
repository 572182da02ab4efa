#!/usr/bin/env bash
# VisDrone's JPEG sequences decoded by nvJPEG against the CPU (issue 42), on the device machine,
# as the `run` step of scripts/device-ort-cuda.sh (which brings ONNX Runtime's CUDA execution
# provider, GStreamer, the octopipe binary at /tmp/octopipe and the `sources` test binary at
# /tmp/nvdec):
#
#   cargo build --release --features bench && cargo test --release --features bench --no-run
#   scripts/device-ort-cuda.sh stage
#   (device) part1, part2, then CMD="bash scripts/device-images.sh" scripts/device-ort-cuda.sh run
#
# Prints: the GPU tests of tests/sources/nvjpeg.rs; the labels of the clip and of the unseen
# val-frames with decoder=nvjpeg against decoder=cpu (both through preprocess backend=cuda and the
# classifier on CUDA); then STREAMS (default 16) image streams of the clip, `loop=LOOPS` (default
# 20), into one batch, preprocess on CUDA with device memory and the classifier on CUDA, with
# each decoder: frames per second and CPU cores busy (process CPU time / wall time). TESTS=0,
# LABELS=0 and DETECT=0 leave those parts out; CLASSIFY gives the classifier's extra properties
# (default `workers=2`: two classifiers overlap their calls, BENCHMARKS.md) and CUDA_WAIT octopipe's
# --cuda-wait (default `block`: threads waiting on the GPU sleep).
set -u -o pipefail
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT" /tmp/img
data=$OCTOPIPE_DATA
model=$data/models/visdrone-crops-64.onnx
bin="/tmp/octopipe --cuda-wait ${CUDA_WAIT:-block}"
if [ "${TESTS:-1}" = 1 ]; then
    echo "=== tests/sources/nvjpeg.rs ($(date -u +%FT%TZ))"
    /tmp/nvdec nvjpeg:: --test-threads 1 --nocapture 2>&1 | grep -v "^$"
fi

# Wall time and CPU time of a command, its stderr's report lines.
timed() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
p = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE, text=True)
wall = time.time() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r.ru_utime + r.ru_stime
lines = [l for l in p.stderr.splitlines() if any(w in l for w in ("throughput", "frames:", "objects:", "decoded on", "error", "Error", "nvJPEG", "cpu:"))]
print("\n".join(lines[-12:]))
print(f"exit {p.returncode}; wall {wall:.2f} s; CPU {cpu:.1f} s; cores busy {cpu / wall:.2f}")
PY
}

for set in $([ "${LABELS:-1}" = 1 ] && echo clip-9999999 val-frames); do
    for decoder in cpu nvjpeg; do
        $bin run --force "images location=$data/visdrone/$set/images decoder=$decoder \
            ! boxes format=det location=$data/visdrone/$set/annotations ! batch \
            ! preprocess backend=cuda memory=device ! classify model=$model ep=cuda \
            ! jsonl location=/tmp/img/$set-$decoder.jsonl" 2>/tmp/img/$set-$decoder.log \
            || { echo "$set decoder=$decoder failed:"; tail -5 /tmp/img/$set-$decoder.log; }
    done
    python3 - /tmp/img/$set-cpu.jsonl /tmp/img/$set-nvjpeg.jsonl "$set" <<'PY'
import json, sys
def load(p):
    out = {}
    for line in open(p):
        o = json.loads(line)
        if "label" in o:
            out[(o["source"].split("/")[-1], tuple(o["bbox"]))] = o["label"]
    return out
cpu, gpu = load(sys.argv[1]), load(sys.argv[2])
same = sum(1 for k, v in cpu.items() if gpu.get(k) == v)
print(f"{sys.argv[3]}: nvjpeg labels equal to the CPU decode's for {same} of {len(cpu)} objects ({100 * same / max(len(cpu), 1):.2f}%); {len(gpu)} objects from nvjpeg")
PY
done

streams=${STREAMS:-16}
loops=${LOOPS:-20}
clip=$data/visdrone/clip-9999999
for decoder in cpu nvjpeg; do
    d=""
    for i in $(seq 2 "$streams"); do
        d="$d images location=$clip/images loop=$loops decoder=$decoder ! boxes format=det location=$clip/annotations ! b. "
    done
    d="$d images location=$clip/images loop=$loops decoder=$decoder ! boxes format=det location=$clip/annotations \
        ! batch name=b max-frames=$streams ! preprocess backend=${BACKEND:-cuda} memory=${MEMORY:-device} \
        ! classify model=$model ep=${EP:-cuda} ${CLASSIFY-workers=2} ! jsonl location=/dev/null"
    echo "=== $streams image streams of the clip x $loops loops, decoder=$decoder ($(date -u +%FT%TZ))"
    nvidia-smi --query-gpu=utilization.gpu,utilization.jpeg --format=csv,noheader,nounits -lms 500 > /tmp/img/smi-$decoder.csv 2>/dev/null &
    smi=$!
    timed $bin run --force "$d"
    kill $smi 2>/dev/null
    python3 - /tmp/img/smi-$decoder.csv <<'PY'
import sys
rows = [l.split(",") for l in open(sys.argv[1]) if l.strip() and l.split(",")[0].strip().isdigit()]
if rows:
    g = sorted(int(r[0]) for r in rows)
    j = sorted(int(r[1]) for r in rows if len(r) > 1 and r[1].strip().isdigit())
    print(f"GPU utilization median {g[len(g)//2]}% (max {g[-1]}%)" + (f"; JPEG engines median {j[len(j)//2]}%" if j else ""))
PY
done

# The detector (the shared CenterNet, batch 1, 12 tiles of 640 a frame on the CUDA execution
# provider, its tiles cut on the GPU) on the clip: its recall with each decoder, then DSTREAMS
# (default 4) streams of the clip's frames decoded by nvJPEG against the same frames as 2000x1500
# H.264 through NVDEC.
detector=$data/models/coco-centernet-512.onnx
[ -f "$detector" ] && [ "${DETECT:-1}" = 1 ] || { echo "the detector runs are skipped (DETECT=0 or no $detector)"; exit 0; }
det="detect model=$detector labels=coco scale=1 tiles=640x640 overlap=0.15 score=0.3 iou=0.5 ios=0.85 classes=person,bicycle,car,motorcycle,bus,truck map=car:vehicle,bus:vehicle,truck:vehicle,bicycle:two-wheeler,motorcycle:two-wheeler ep=cuda backend=cuda"
for decoder in cpu nvjpeg; do
    $bin run --force "images location=$clip/images decoder=$decoder ! $det ! batch ! jsonl location=/tmp/img/det-$decoder.jsonl" 2>/tmp/img/det-$decoder.log \
        || { echo "detect decoder=$decoder failed:"; tail -5 /tmp/img/det-$decoder.log; continue; }
    echo "detect, decoder=$decoder, recall on the clip:"
    $bin eval detections --objects /tmp/img/det-$decoder.jsonl --truth $clip/annotations --images $clip/images 2>&1 | tail -6
done
mkdir -p /tmp/img/seq
i=0; for f in $(ls $clip/images/*.jpg | sort); do ln -sf "$f" /tmp/img/seq/$(printf %03d $i).jpg; i=$((i+1)); done
gst-launch-1.0 -q multifilesrc location=/tmp/img/seq/%03d.jpg loop=true num-buffers=340 caps=image/jpeg,framerate=30/1 \
    ! jpegdec ! videoconvert ! video/x-raw,format=I420 ! x264enc speed-preset=ultrafast key-int-max=30 bitrate=16000 \
    ! video/x-h264,profile=high ! mp4mux ! filesink location=/tmp/img/clip.mp4 || echo "encoding the clip failed"
dstreams=${DSTREAMS:-4}
for src in "images location=$clip/images loop=10 decoder=nvjpeg" "media location=/tmp/img/clip.mp4 decoder=nvdec"; do
    d=""
    for i in $(seq 2 "$dstreams"); do d="$d $src ! $det ! s. "; done
    d="$d $src ! $det ! batch name=s ! jsonl location=/dev/null"
    echo "=== $dstreams streams x 340 frames: $src ! detect ($(date -u +%FT%TZ))"
    timed $bin run --force "$d"
done
