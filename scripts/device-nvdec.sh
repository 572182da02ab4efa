#!/usr/bin/env bash
# NVDEC zero copy on the device machine (tests/sources/nvdec.rs), from the test binary built here:
#
#   cargo test --release --test sources --no-run && scripts/device-nvdec.sh stage   # fills .device/nvdec
#   (device, carry [".device/nvdec"]) scripts/device-nvdec.sh run                 # logs go to $OUT
#
# `stage` packs this machine's GStreamer with its NVDEC decoders, libgstcuda-1.0 and x264enc
# (../shared/tools/pack-gst.sh) and the stripped test binary. `run` checks that nvcodec registered
# its decoders, runs the GPU tests (media decoder=nvdec against decoder=cpu through preprocess
# backend=cuda: equal tensors; device frames; the decoder's pool not growing), then the same
# under compute-sanitizer memcheck (SANITIZE=0 skips it).
set -u -o pipefail
cd "$(dirname "$0")/.."
D=.device/nvdec
if [ "${1:-run}" = stage ]; then
    mkdir -p $D
    [ -f $D/gst.tar.xz ] || bash ../shared/tools/pack-gst.sh $D/gst.tar.xz
    target=${CARGO_TARGET_DIR:-target}
    bin=$(ls -t "$target"/release/deps/sources-* | grep -v '\.d$' | head -1)
    strip -o $D/nvdec "$bin"
    # The `sources` test binary links the RTSP server of tests/sources/live.rs, which the packed
    # GStreamer lacks.
    mkdir -p $D/lib && for l in libgstrtspserver-1.0.so.0 libgstrtsp-1.0.so.0 libgstsdp-1.0.so.0; do cp -L /usr/lib/x86_64-linux-gnu/$l $D/lib/; done
    du -sh $D
    exit 0
fi
OUT=${OUT:-/tmp/octopipe-out}
mkdir -p "$OUT"
tar -C /tmp -xJf $D/gst.tar.xz
. /tmp/gst/env.sh
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/$D/lib"
export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
tests="nvdec::nvdec_tensors_equal_cpu_decoding_through_the_cuda_kernel nvdec::nvdec_frames_are_device_frames_and_the_pool_does_not_grow nvdec::cpu_decoded_frames_are_page_locked_and_the_gpu_gathers_their_crops"
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    gst-inspect-1.0 nvh264dec | grep -E "Long-name|Rank" || echo "nvh264dec is not registered"
    echo "=== tests/nvdec ($(date -u +%FT%TZ))"
    timeout 300 $D/nvdec nvdec:: --test-threads 1 --nocapture
    rc=$?
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
        echo "=== compute-sanitizer memcheck"
        timeout 420 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
            $D/nvdec --exact $tests --test-threads 1 --nocapture 2>&1 | tail -15
        rc=$((rc | ${PIPESTATUS[0]}))
    fi
    exit $rc
} 2>&1 | tee "$OUT/nvdec.log"
exit "${PIPESTATUS[0]}"
