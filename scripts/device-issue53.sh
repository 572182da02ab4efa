#!/usr/bin/env bash
# Issue 53's measurements on the device machine in one call: the decoders alone (`octopipe bench
# decode`: each stream's first frame apart from the steady state, per way of starting the
# streams) and the fused-execution probe of the six-class detector (scripts/engine_probe.py,
# PyTorch, which the device has: per-node kernels as ONNX Runtime runs them, the same in one CUDA
# graph, and Inductor's fused kernels).
#
#   cargo build --release --features bench && bash scripts/device-issue53.sh stage   # here (~42 MiB)
#   (device, carry [".device/c1"])  bash scripts/device-issue53.sh run             # MORE=1: H.265 and
#                                                                                  # own-context rows too
#
# ONNX Runtime's CUDA provider on the same model (side by side, for the >= 1.5x question) needs
# its three parts: scripts/device-ort-cuda.sh with CMD="/tmp/octopipe bench infer --model
# b6.onnx --ep cuda --batch 8,32,64,128 --runs 20 --fixed-only --cuda graph+nhwc+fusebias".
set -euo pipefail
cd "$(dirname "$0")/.."
C=.device/c1
case "${1:-run}" in
stage)
    data=${OCTOPIPE_DATA:-../shared/data}
    rm -rf $C && mkdir -p $C/data/visdrone $C/x265
    [ -f .device/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh .device/gst.tar.xz
    cp .device/gst.tar.xz $C/
    # The packed GStreamer 1.22 has x264enc only: x265enc and its library for the H.265 video.
    cp /usr/lib/x86_64-linux-gnu/gstreamer-1.0/libgstx265.so $C/x265/
    cp -L /usr/lib/x86_64-linux-gnu/libnuma.so.1 $C/x265/
    xz -T2 -6 -c /usr/lib/x86_64-linux-gnu/libx265.so.199 > $C/x265/libx265.so.199.xz
    strip -o /tmp/octopipe-stripped "${CARGO_TARGET_DIR:-target}"/release/octopipe
    xz -T2 -6 -c /tmp/octopipe-stripped > $C/octopipe.xz
    cp -r "$data/visdrone/clip-9999999" $C/data/visdrone/
    m="$data/models/coco-centernet-512.onnx"
    six="--fuse hardswish --logits --keep-classes 0,1,2,3,5,7 --drop-reshapes"
    python3 scripts/make_centernet_heads.py "$m" $C/b6.onnx --fp16 --io fp16 --resize-fp16 $six
    python3 scripts/make_centernet_heads.py "$m" $C/b6-fp32.onnx $six
    cp scripts/engine_probe.py $C/
    du -sh $C
    ;;
run)
    tar -C /tmp -xJf $C/gst.tar.xz
    xz -dc $C/x265/libx265.so.199.xz > /tmp/gst/lib/libx265.so.199
    cp $C/x265/libnuma.so.1 /tmp/gst/lib/ && cp $C/x265/libgstx265.so /tmp/gst/plugins/
    xz -dc $C/octopipe.xz > /tmp/octopipe && chmod +x /tmp/octopipe
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
    B="/tmp/octopipe bench decode --decoder nvdec --seconds 10 --bitrate 4000 --clip $PWD/$C/data/visdrone/clip-9999999"
    (. /tmp/gst/env.sh
     timeout 150 $B --codec h264 --streams 1,96 --start one-pipeline,serial,threads 2>&1 | tee $OUT/decode-h264.md) || true
    (cd $C && PYTHONUNBUFFERED=1 timeout ${PROBE_S:-270} python3 engine_probe.py b6.onnx --ref b6-fp32.onnx \
       --batches 8,32,64,128 --reps 30 2>&1 | grep -v "^W1207" | tee $OUT/probe.log) || true
    if [ "${MORE:-0}" = 1 ]; then
        (. /tmp/gst/env.sh
         timeout 100 $B --codec h265 --streams 96 --start ${H265_START:-one-pipeline,threads} 2>&1 | tee $OUT/decode-h265.md
         [ -n "${NO_OWN:-}" ] || timeout 60 $B --codec h264 --streams 96 --start threads-own-context 2>&1 | tee $OUT/decode-own.md) || true
    fi
    date -u
    ;;
*) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
