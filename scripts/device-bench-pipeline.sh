#!/usr/bin/env bash
# `octopipe bench pipeline` on the device machine (no GStreamer, no cargo, no ONNX Runtime there),
# from what is built here:
#
#   cargo build --release --features bench && scripts/device-bench-pipeline.sh stage   # fills .device/bench
#   (device, carry [".device/bench"]) BENCH_ARGS="--streams 1,8,16,32,64" scripts/device-bench-pipeline.sh run
#
# Image streams (--images): `run --images .device/bench/data/visdrone/clip-9999999 --decoders
# cpu,nvjpeg`; nvJPEG comes with the CUDA build of ONNX Runtime's libraries (/tmp/ort, below).
# H.265 (--codec h265) needs x265enc packed: GST_EXTRA=x265 at `stage`.
#
# The bench's arguments come from $BENCH_ARGS and/or follow `run` (`run --ep cuda --decoder cpu,nvdec`);
# --clip and --model are set to the staged copies. Its progress (a line per run, as it ends) goes
# to the call's output and $OUT/bench-pipeline.log, the table to $OUT/bench-pipeline.md and then to
# the output. Keep a call under the
# device's 10 minutes: 64 streams x 10 s of 1080p is about 19,200 frames per row.
#
# `stage` packs this machine's GStreamer (../shared/tools/pack-gst.sh: x264enc, decodebin, NVDEC),
# the pip ONNX Runtime library (CPU execution provider), the stripped octopipe binary, the clip's
# images and the classifier. With ONNX Runtime's CUDA execution provider (--ep cuda), three calls
# back to back (the machine keeps /tmp 30 s after a call), after scripts/device-ort-cuda.sh stage:
#
#   (device, carry [".device/p1"])    scripts/device-ort-cuda.sh part1
#   (device, carry [".device/p2"])    scripts/device-ort-cuda.sh part2
#   (device, carry [".device/bench"]) BENCH_ARGS="--ep cpu,cuda" scripts/device-bench-pipeline.sh run
#
# `run` unpacks the CUDA build into /tmp/ort when parts a and b wait in /tmp/parts and `stage`
# found part c (.device/ort/part.c, staged alongside); it also takes /tmp/ort as it is when
# scripts/device-ort-cuda.sh run has unpacked it already; otherwise it uses the CPU library.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.device/bench
ORT_VERSION=1.31.1
case "${1:-run}" in
stage)
    mkdir -p $D/data/models $D/data/visdrone/clip-9999999
    # GST_EXTRA: more plugins to pack (x265 for --codec h265; delete $D/gst.tar.xz to repack).
    # shellcheck disable=SC2086 # GST_EXTRA is a list of plugin names
    [ -f $D/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh $D/gst.tar.xz ${GST_EXTRA:-}
    ort=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')/capi/libonnxruntime.so.$ORT_VERSION
    [ -f $D/libonnxruntime.so.$ORT_VERSION.xz ] || xz -T0 -c "$ort" > $D/libonnxruntime.so.$ORT_VERSION.xz
    strip -o $D/octopipe "${CARGO_TARGET_DIR:-target}"/release/octopipe
    cp ../shared/tools/pack-ort-cuda.py $D/
    if [ -f .device/ort/part.c ]; then cp .device/ort/part.c $D/; else rm -f $D/part.c; fi
    data=${OCTOPIPE_DATA:-../shared/data}
    # The images are the video's frames; the annotations are the boxes of --images.
    rm -rf $D/data/visdrone/clip-9999999/images $D/data/visdrone/clip-9999999/annotations
    cp -r "$data/visdrone/clip-9999999/images" "$data/visdrone/clip-9999999/annotations" $D/data/visdrone/clip-9999999/
    cp "$data/models/visdrone-crops-64.onnx" $D/data/models/
    du -sh $D
    [ "$(du -sm $D | cut -f1)" -lt 64 ] || { echo "$D is over the 64 MiB a call carries" >&2; exit 1; }
    exit 0
    ;;
run) shift || true ;;
*) echo "usage: $0 stage | run [bench arguments]" >&2; exit 2 ;;
esac

OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT" /tmp/octo
tar -C /tmp -xJf $D/gst.tar.xz
. /tmp/gst/env.sh
# Where the device's CUDA 13 libraries are (pack-ort-cuda.py's TORCH_NVIDIA).
torch=$(sed -n 's/^TORCH_NVIDIA = "\(.*\)"$/\1/p' $D/pack-ort-cuda.py)
lib=/tmp/ort/ort-cuda
if [ ! -f $lib/libonnxruntime.so.$ORT_VERSION ] && [ -f $D/part.c ] \
    && [ -f /tmp/parts/part.a ] && [ -f /tmp/parts/part.b ]; then
    cp $D/part.c /tmp/parts/
    python3 $D/pack-ort-cuda.py /tmp/ort --unpack /tmp/parts > /dev/null
fi
if [ -f $lib/libonnxruntime.so.$ORT_VERSION ]; then
    export ORT_DYLIB_PATH=$lib/libonnxruntime.so.$ORT_VERSION
    export LD_LIBRARY_PATH=$lib:$torch/cu13/lib:$torch/cudnn/lib:${LD_LIBRARY_PATH:-}
    echo "ONNX Runtime: the CUDA build in $lib"
else
    xz -dc $D/libonnxruntime.so.$ORT_VERSION.xz > /tmp/octo/libonnxruntime.so.$ORT_VERSION
    export ORT_DYLIB_PATH=/tmp/octo/libonnxruntime.so.$ORT_VERSION
    echo "ONNX Runtime: the CPU build (no /tmp/ort: ep=cuda rows will say so)"
fi
export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "$(nproc) CPU cores; $(date -u +%FT%TZ); octopipe bench pipeline ${BENCH_ARGS:-} $*"
# shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
$D/octopipe bench pipeline --clip $D/data/visdrone/clip-9999999 \
    --model $D/data/models/visdrone-crops-64.onnx ${BENCH_ARGS:-} "$@" \
    2>&1 >"$OUT/bench-pipeline.md" | tee "$OUT/bench-pipeline.log"
cat "$OUT/bench-pipeline.md"
