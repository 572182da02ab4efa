#!/usr/bin/env bash
# Run whole pipelines on the device machine (no GStreamer, no ONNX Runtime there) from what is
# built here:
#
#   cargo build --release && scripts/device-pipeline.sh stage   # fills .device/pipe (~45 MiB)
#   (device, carry [".device/pipe"]) scripts/device-pipeline.sh run
#
# `stage` packs this machine's GStreamer (../shared/tools/pack-gst.sh), the pip ONNX Runtime
# library (CPU execution provider), the stripped octopipe binary, the shared clip and models.
# `run` runs pipelines/visdrone-detect.pipe with the detector's tiles preprocessed by the CUDA
# backend and by the CPU backend, and prints both reports; logs go to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.device/pipe
if [ "${1:-run}" = stage ]; then
    mkdir -p $D/data/models $D/data/visdrone
    [ -f $D/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh $D/gst.tar.xz
    ort=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')/capi/libonnxruntime.so.1.31.1
    [ -f $D/libonnxruntime.so.1.31.1.xz ] || xz -T0 -c "$ort" > $D/libonnxruntime.so.1.31.1.xz
    strip -o $D/octopipe target/release/octopipe
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" $D/data/visdrone/
    cp "$data/models/coco-centernet-512.onnx" "$data/models/visdrone-crops-64.onnx" $D/data/models/
    du -sh $D
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT" /tmp/octo
tar -C /tmp -xJf $D/gst.tar.xz
. /tmp/gst/env.sh
xz -dc $D/libonnxruntime.so.1.31.1.xz > /tmp/octo/libonnxruntime.so.1.31.1
export ORT_DYLIB_PATH=/tmp/octo/libonnxruntime.so.1.31.1 OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for backend in cuda cpu; do
    echo "=== visdrone-detect.pipe, detect backend=$backend ($(date -u +%FT%TZ))"
    sed "s/^  ! detect /  ! detect backend=$backend /; s/^  ! preprocess /  ! preprocess backend=$backend /" \
        pipelines/visdrone-detect.pipe > /tmp/octo/detect-$backend.pipe
    $D/octopipe run /tmp/octo/detect-$backend.pipe --set root=$D/data/visdrone/clip-9999999 \
        --set detector=$D/data/models/coco-centernet-512.onnx \
        --set model=$D/data/models/visdrone-crops-64.onnx --set out="$OUT/objects-$backend.jsonl"
done 2>&1 | tee "$OUT/pipeline.log"
