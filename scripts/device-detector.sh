#!/usr/bin/env bash
# The detector on the device machine: the model alone per CUDA tuning (bench infer), ONNX
# Runtime's profile, and the detector pipelines, with ONNX Runtime's CUDA build and GStreamer
# carried in three back-to-back device calls (each at most 64 MiB):
#
#   cargo build --release --features bench && scripts/device-detector.sh stage
#   (device, carry [".device/p1"])   scripts/device-detector.sh part1
#   (device, carry [".device/p2"])   scripts/device-detector.sh part2
#   (device, carry [".device/run"])  scripts/device-detector.sh run      (or CMD="..." ... run)
#
# `stage` packs ONNX Runtime 1.31.1 with its CUDA execution provider (../shared/tools/pack-ort-cuda.py)
# and GStreamer (../shared/tools/pack-gst.sh), the stripped octopipe binary and the GPU test
# tests of tests/detect/shared_detect.rs (the `detect` test binary, built by `cargo test --release
# --features bench --no-run`; run on the device as `/tmp/shared_detect shared_detect::`),
# the shared clip and detector; the detector's variants are made on the device (its python3 has
# onnx, numpy and onnxruntime; onnxconverter-common travels as a wheel): the dynamic-batch
# end-to-end model (../shared/tools/centernet-dynamic-batch.py) and the heads models of
# scripts/make_centernet_heads.py, FP32, FP16, FP16 with its hard-swishes fused, and that with its
# biases out of cuDNN's cudnnAddTensor (with prefer-nhwc=true on an H100:
# /tmp/data/models/centernet-heads{,-fp16,-fp16-hardswish,-fp16-hardswish-foldall}.onnx), that
# with its score map as logits (-fp16-foldall-logits), and that with float16 input, heads and
# upsampling too (-f16io, $OCTOPIPE_CENTERNET_HEADS_F16); the fastest, for `detect
# fuse-conv-bias=true prefer-nhwc=true`: its biases left in the convolutions (-convbias), and that
# cut to the six classes of person,bicycle,car,motorcycle,bus,truck (-six: name them in `labels=`).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-run}" in
stage)
    [ -f .device/ort/part.c ] || python3 ../shared/tools/pack-ort-cuda.py .device/ort
    [ -f .device/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh .device/gst.tar.xz
    rm -rf .device/p1 .device/p2 .device/run
    mkdir -p .device/p1 .device/p2 .device/run/data/visdrone .device/run/data/models .device/run/whl
    cp .device/ort/part.a .device/gst.tar.xz .device/p1/
    strip -o .device/p1/octopipe "${CARGO_TARGET_DIR:-target}"/release/octopipe
    bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/detect-* | grep -v '\.d$' | head -1)
    strip -o .device/run/shared_detect "$bin"
    cp .device/ort/part.b .device/p2/
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" "$data/visdrone/val-frames" .device/p2/
    cp .device/ort/part.c ../shared/tools/pack-ort-cuda.py ../shared/tools/centernet-dynamic-batch.py \
        scripts/make_centernet_heads.py scripts/ort_profile_summary.py .device/run/
    cp "$data/models/coco-centernet-512.onnx" "$data/models/visdrone-crops-64.onnx" .device/run/data/models/
    python3 -m pip download -q --no-deps --only-binary=:all: -d .device/run/whl onnxconverter-common==1.16.0
    du -sh .device/p1 .device/p2 .device/run
    ;;
part1)
    mkdir -p /tmp/parts && cp .device/p1/part.* /tmp/parts/ && tar -C /tmp -xJf .device/p1/gst.tar.xz
    cp .device/p1/octopipe /tmp/octopipe
    ;;
part2)
    cp .device/p2/part.* /tmp/parts/ && mkdir -p /tmp/data/visdrone && cp -r .device/p2/clip-9999999 .device/p2/val-frames /tmp/data/visdrone/
    ;;
run)
    cp .device/run/part.* /tmp/parts/ && cp .device/run/shared_detect /tmp/shared_detect
    eval "$(python3 .device/run/pack-ort-cuda.py /tmp/ort --unpack /tmp/parts)"
    mkdir -p /tmp/data/models && cp .device/run/data/models/* /tmp/data/models/
    export OCTOPIPE_DATA=/tmp/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels
    export OCTOPIPE_CENTERNET_HEADS=/tmp/data/models/centernet-heads.onnx
    . /tmp/gst/env.sh
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/run/whl/*.whl
    M=/tmp/data/models
    if [ ! -f $M/centernet-heads.onnx ]; then
        python3 .device/run/centernet-dynamic-batch.py $M/coco-centernet-512.onnx $M/centernet-dyn.onnx
        python3 .device/run/make_centernet_heads.py $M/coco-centernet-512.onnx $M/centernet-heads.onnx
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 \
            $M/coco-centernet-512.onnx $M/centernet-heads-fp16.onnx 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --fuse hardswish \
            $M/coco-centernet-512.onnx $M/centernet-heads-fp16-hardswish.onnx 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --fuse hardswish --bias-fold \
            $M/coco-centernet-512.onnx $M/centernet-heads-fp16-hardswish-foldall.onnx --bias-sub all 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --fuse hardswish --bias-fold --bias-sub all \
            --logits $M/coco-centernet-512.onnx $M/centernet-heads-fp16-foldall-logits.onnx 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --io fp16 --resize-fp16 --fuse hardswish \
            --bias-fold --bias-sub all --logits $M/coco-centernet-512.onnx $M/centernet-heads-f16io.onnx 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --io fp16 --resize-fp16 --fuse hardswish \
            --logits $M/coco-centernet-512.onnx $M/centernet-heads-convbias.onnx 2>&1 | grep -v -i warn
        PYTHONPATH=/tmp/site python3 .device/run/make_centernet_heads.py --fp16 --io fp16 --resize-fp16 --fuse hardswish \
            --logits --keep-classes 0,1,2,3,5,7 --drop-reshapes $M/coco-centernet-512.onnx $M/centernet-heads-six.onnx 2>&1 | grep -v -i warn
    fi
    export OCTOPIPE_CENTERNET_HEADS_F16=$M/centernet-heads-f16io.onnx
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u
    eval "${CMD:-true}"
    ;;
esac
