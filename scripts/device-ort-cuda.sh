#!/usr/bin/env bash
# ONNX Runtime's CUDA execution provider on the device machine (which has no ONNX Runtime GPU
# build), in three back-to-back device calls (each carries at most 64 MiB; the machine keeps /tmp
# only 30 s after a call returns):
#
#   cargo test --release --features bench --no-run && scripts/device-ort-cuda.sh stage
#   (device, carry [".device/p1"])  scripts/device-ort-cuda.sh part1
#   (device, carry [".device/p2"])  scripts/device-ort-cuda.sh part2
#   (device, carry [".device/run"]) scripts/device-ort-cuda.sh run
#
# The first two calls also bring GStreamer (../shared/tools/pack-gst.sh, with NVDEC) and the
# stripped octopipe binary (build it with `cargo build --release --features bench` first), unpacked
# to /tmp/gst and /tmp/octopipe. `run` with CMD set runs that command instead of the tests, with
# ONNX Runtime's CUDA build, GStreamer and $OCTOPIPE_DATA set up.
#
# `stage` packs ONNX Runtime 1.31.1 with its CUDA execution provider (../shared/tools/pack-ort-cuda.py,
# device code for sm_90) into three parts, with the GPU test binaries (tests/preprocess/cuda/, tests/sources/nvdec.rs)
# and the shared clip and models; `run` unpacks it and runs the tests that need it, then
# compute-sanitizer on them.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-run}" in
stage)
    [ -f .device/ort/part.c ] || python3 ../shared/tools/pack-ort-cuda.py .device/ort
    rm -rf .device/p1 .device/p2 .device/run
    mkdir -p .device/p1 .device/p2 .device/run/data/visdrone .device/run/data/models
    cp .device/ort/part.a .device/p1/ && cp .device/ort/part.b .device/p2/
    [ -f .device/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh .device/gst.tar.xz
    cp .device/gst.tar.xz .device/p1/
    strip -o .device/p2/octopipe "${CARGO_TARGET_DIR:-target}"/release/octopipe
    cp .device/ort/part.c ../shared/tools/pack-ort-cuda.py .device/run/
    bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/preprocess-* | grep -v '\.d$' | head -1)
    strip -o .device/run/cuda "$bin"
    bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/sources-* | grep -v '\.d$' | head -1)
    strip -o .device/p1/nvdec "$bin"
    # The `sources` test binary links the RTSP server of tests/sources/live.rs, which the packed
    # GStreamer lacks.
    mkdir -p .device/p1/lib && for l in libgstrtspserver-1.0.so.0 libgstrtsp-1.0.so.0 libgstsdp-1.0.so.0; do cp -L /usr/lib/x86_64-linux-gnu/$l .device/p1/lib/; done
    data=${OCTOPIPE_DATA:-../shared/data}
    cp -r "$data/visdrone/clip-9999999" .device/run/data/visdrone/
    cp "$data/models/visdrone-crops-64.onnx" "$data/models/coco-centernet-512.onnx" .device/run/data/models/
    du -sh .device/p1 .device/p2 .device/run
    ;;
part1)
    mkdir -p /tmp/parts && cp .device/p1/part.* /tmp/parts/ && tar -C /tmp -xJf .device/p1/gst.tar.xz
    cp .device/p1/nvdec /tmp/nvdec && cp -r .device/p1/lib /tmp/nvdec-lib
    ;;
part2) cp .device/p2/part.* /tmp/parts/ && cp .device/p2/octopipe /tmp/octopipe ;;
run)
    cp .device/run/part.* /tmp/parts/
    eval "$(python3 .device/run/pack-ort-cuda.py /tmp/ort --unpack /tmp/parts)"
    export OCTOPIPE_DATA=$PWD/.device/run/data OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels
    . /tmp/gst/env.sh
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/tmp/nvdec-lib"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u
    if [ -n "${CMD:-}" ]; then
        eval "$CMD"
        exit
    fi
    tests="cuda::models::classifier_on_the_cuda_ep_reads_device_tensors_and_matches_the_cpu cuda::models::detector_on_the_cuda_ep_reads_device_tiles_and_matches_the_cpu"
    .device/run/cuda --nocapture --exact $tests
    pipeline=nvdec::nvdec_and_the_cuda_ep_label_the_clip_as_the_cpu_pipeline
    /tmp/nvdec --nocapture --exact $pipeline
    compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 .device/run/cuda --exact $tests 2>&1 | tail -3
    compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 /tmp/nvdec --exact $pipeline 2>&1 | tail -3
    ;;
esac
