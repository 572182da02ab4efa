#!/usr/bin/env bash
# Issue 53's measurements on the device machine, staged here in one folder (.device/c1):
#
# - `decode`: the decoders alone (`octopipe bench decode`: each stream's first frame apart from
#   the steady state, per way of starting the streams: one pipeline, one after another, from
#   threads sharing the device's primary context, each decoder with its own context);
# - `pipeline` (with ONNX Runtime's CUDA build in /tmp/ort, as scripts/device-gst-cuda.sh's
#   parts unpack it on a warm machine): the DeepStream-shaped live run at 128 H.264 streams, two
#   classifiers then one, with `nvidia-smi dmon` beside it: where the detector's third goes
#   inside the pipeline (its calls' time in ONNX Runtime and in the peaks, against the model
#   alone at the same batch);
# - `probe` (staged with PROBE=1): the fused-execution probe of the six-class detector
#   (scripts/engine_probe.py, PyTorch, which the device has).
#
#   cargo build --release --features bench && bash scripts/device-issue53.sh stage   # here
#   (device, carry [".device/c1"])  STEPS="decode pipeline" bash scripts/device-issue53.sh run
#
# `pipeline` takes CLASSIFIERS (default "2 1"), PIPE_STREAMS (128), PIPE_S (each run's bound, s),
# the CUDA stream priorities DET_PRIORITY (the detector's, default normal) and CLS_PRIORITY
# (the crops' and the classifiers', default high), and REINFER (default 1: every box classified
# on every frame; N > 1: a track's label reused for N frames unless its box's size changes, as
# DeepStream's secondary classifiers reuse theirs, with one classifier worker) and MOTION (still:
# the clip's images in turn, as every row so far; pan: each a one-second panning shot, so that
# tracks last as in real video).
#
# ENGINE=octopipe runs the pipeline's detector on octopipe's own engine (`detect
# engine=octopipe`) instead of ONNX Runtime. `engine-test` (staged with ENGINE_TEST=1: the
# `detect` test binary) runs the engine's GPU test: its boxes and recall on the clip against ONNX
# Runtime's CUDA provider (ONNX Runtime's parts as for `pipeline`).
#
# `stage` leaves GStreamer out when NO_GST=1 (a warm machine has /tmp/gst already). MORE=1 adds
# the H.265 decode row. ORT_C=1 adds ONNX Runtime's part c: then `pipeline` needs only
# scripts/device-gst-cuda.sh's `part1` before it on the same warm machine (two calls).
set -euo pipefail
cd "$(dirname "$0")/.."
C=.device/c1
case "${1:-run}" in
stage)
    data=${OCTOPIPE_DATA:-../shared/data}
    rm -rf $C && mkdir -p $C/data/visdrone $C/x265
    [ -f .device/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh .device/gst.tar.xz
    [ "${NO_GST:-0}" = 1 ] || cp .device/gst.tar.xz $C/
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
    [ "${PROBE:-0}" != 1 ] || python3 scripts/make_centernet_heads.py "$m" $C/b6-fp32.onnx $six
    cp scripts/engine_probe.py ../shared/tools/pack-ort-cuda.py $C/
    mkdir -p $C/data/models && cp "$data/models/visdrone-crops-64.onnx" $C/data/models/
    [ "${ORT_C:-0}" != 1 ] || cp "${ORT_PARTS:-.device/ort}/part.c" $C/
    if [ "${ENGINE_TEST:-0}" = 1 ]; then
        bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/detect-* | grep -v '\.d$' | head -1)
        strip -o /tmp/octopipe-detect-tests "$bin"
        xz -T2 -6 -c /tmp/octopipe-detect-tests > $C/detect-tests.xz
    fi
    [ "${NO_X265:-0}" != 1 ] || rm -rf $C/x265
    du -sh $C
    ;;
run)
    OUT=${OUT:-/tmp/octopipe-out} && mkdir -p "$OUT"
    [ -f /tmp/gst/env.sh ] || tar -C /tmp -xJf $C/gst.tar.xz
    if [ -d $C/x265 ] && [ ! -f /tmp/gst/plugins/libgstx265.so ]; then
        xz -dc $C/x265/libx265.so.199.xz > /tmp/gst/lib/libx265.so.199
        cp $C/x265/libnuma.so.1 /tmp/gst/lib/ && cp $C/x265/libgstx265.so /tmp/gst/plugins/
    fi
    xz -dc $C/octopipe.xz > /tmp/octopipe && chmod +x /tmp/octopipe
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
    clip=$PWD/$C/data/visdrone/clip-9999999
    lib=/tmp/ort/ort-cuda
    torch=$(sed -n 's/^TORCH_NVIDIA = "\(.*\)"$/\1/p' $C/pack-ort-cuda.py)
    # ONNX Runtime's CUDA build in /tmp/ort, unpacked from the parts when part.c came along.
    ort_lib() {
        if [ ! -f $lib/libonnxruntime.so.1.31.1 ] && [ -f $C/part.c ] && [ -f /tmp/parts/part.a ]; then
            cp $C/part.c /tmp/parts/ && python3 $C/pack-ort-cuda.py /tmp/ort --unpack /tmp/parts > /dev/null
        fi
        [ -f $lib/libonnxruntime.so.1.31.1 ] || { echo "NEED-PARTS: no ONNX Runtime CUDA build in /tmp/ort"; return 1; }
    }
    B="/tmp/octopipe bench decode --decoder nvdec --seconds 10 --bitrate 4000 --clip $clip"
    for step in ${STEPS:-decode}; do
        case $step in
        decode)
            (. /tmp/gst/env.sh
             timeout ${DECODE_S:-240} $B --codec h264 --streams ${DECODE_STREAMS:-1,96} \
                 --start ${DECODE_START:-one-pipeline,serial,threads,threads-own-context,threads-4-contexts} 2>&1 | tee $OUT/decode-h264.md
             [ "${MORE:-0}" != 1 ] || timeout 100 $B --codec h265 --streams 96 --start threads 2>&1 | tee $OUT/decode-h265.md) || true
            ;;
        engine-test)
            ort_lib || continue
            [ -f $C/detect-tests.xz ] || { echo "NEED: stage with ENGINE_TEST=1"; continue; }
            xz -dc $C/detect-tests.xz > /tmp/detect-tests && chmod +x /tmp/detect-tests
            (. /tmp/gst/env.sh
             export ORT_DYLIB_PATH=$lib/libonnxruntime.so.1.31.1 LD_LIBRARY_PATH=$lib:$torch/cu13/lib:$torch/cudnn/lib:${LD_LIBRARY_PATH:-}
             export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels OCTOPIPE_DATA=$PWD/$C/data OCTOPIPE_CENTERNET_HEADS_SIX=$PWD/$C/b6.onnx
             timeout ${TEST_S:-200} /tmp/detect-tests the_engine_gives --nocapture --test-threads 1 2>&1 | grep -v "^W1207" | tail -40 | tee $OUT/engine-test.log) || true
            ;;
        pipeline)
            ort_lib || continue
            reinfer=${REINFER:-1} workers=2 motion=${MOTION:-still}
            [ "$reinfer" = 1 ] || workers=1
            props="labels=person,bicycle,car,motorcycle,bus,truck batch-sizes=${DET_SIZES:-32,64} gpu-priority=${DET_PRIORITY:-normal}"
            engine=${ENGINE:-ort}
            case $engine in
            ort) props="$props prefer-nhwc=true fuse-conv-bias=true cuda-graph=true" ;;
            *) props="$props engine=$engine" ;;
            esac
            tag=r$reinfer-$motion-$engine
            for cls in ${CLASSIFIERS:-2 1}; do
                nvidia-smi dmon -s u -d 1 > $OUT/dmon-c$cls-$tag.log 2>&1 & dmon=$!
                (. /tmp/gst/env.sh
                 export ORT_DYLIB_PATH=$lib/libonnxruntime.so.1.31.1 LD_LIBRARY_PATH=$lib:$torch/cu13/lib:$torch/cudnn/lib:$LD_LIBRARY_PATH
                 export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels
                 timeout ${PIPE_S:-200} /tmp/octopipe bench pipeline --clip $clip --model $C/data/models/visdrone-crops-64.onnx \
                   --decoder nvdec --ep cuda --detector $C/b6.onnx --detector-props "$props" \
                   --preprocess-props gpu-priority=${CLS_PRIORITY:-high} --classify-props gpu-priority=${CLS_PRIORITY:-high} \
                   --p99-ms 100 --live --tiles 1920x1080 --classifiers $cls --bitrate 4000 --no-decode-only \
                   --devices 0 --batch-frames 32 --workers $workers --reinfer $reinfer --motion $motion --seconds ${PIPE_SECONDS:-10} --detector-batch ${DET_BATCH:-64} \
                   --codec h264 --live-streams ${PIPE_STREAMS:-128} 2>&1 >$OUT/pipeline-c$cls-$tag.md | grep -v "^W1207" | tail -40 | tee $OUT/pipeline-c$cls-$tag.log
                 cat $OUT/pipeline-c$cls-$tag.md) || true
                kill $dmon 2>/dev/null || true
                awk '!/^#/ {n++; for (i = 2; i <= 6; i++) s[i] += $i} END {if (n) printf "dmon mean over %d s: sm %.0f%% mem %.0f%% enc %.0f%% dec %.0f%% jpg %.0f%%\n", n, s[2]/n, s[3]/n, s[4]/n, s[5]/n, s[6]/n}' $OUT/dmon-c$cls-$tag.log
            done
            ;;
        probe)
            (cd $C && PYTHONUNBUFFERED=1 timeout ${PROBE_S:-270} python3 engine_probe.py b6.onnx --ref b6-fp32.onnx \
               --batches 8,32,64,128 --reps 30 2>&1 | grep -v "^W1207" | tee $OUT/probe.log) || true
            ;;
        esac
    done
    date -u
    ;;
*) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
