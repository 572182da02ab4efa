#!/usr/bin/env bash
# octopipe's own detector engine on the device machine (issue 53), from binaries built here:
#
#   cargo test --release -p octopipe-engine --no-run && cargo build --release -p octopipe-engine --example engine_bench
#   bash scripts/device-engine.sh stage          # here: .device/eng2 (~20 MiB)
#   (device, carry [".device/eng2"]) bash scripts/device-engine.sh run
#
# Runs the engine's GPU test (its heads against the f32 reference interpreter, the CUDA graph's
# against the plain launches), compute-sanitizer on it (SANITIZE=1), the engine's throughput per
# batch, and, with PROBE=1, scripts/engine_probe.py (PyTorch: the graph node by node, in one CUDA
# graph, and Inductor-fused) on the same machine for comparison. With NCU=1, each kernel of one
# call at batch NCU_BATCH (64) under Nsight Compute (SpeedOfLight, DRAM bytes, the tensor pipe),
# into $OUT/ncu.csv beside the launch-order profile $OUT/layers.csv: `python3
# scripts/ncu_layers.py layers.csv ncu.csv` (here) gives each layer against the GPU's limits.
set -u -o pipefail
cd "$(dirname "$0")/.."
E=${ENGINE_DIR:-.device/eng2}
case "${1:-run}" in
stage)
    target=${CARGO_TARGET_DIR:-target}
    rm -rf $E && mkdir -p $E
    for t in execution octopipe_engine; do
        bin=$(ls -t "$target"/release/deps/$t-* | grep -v '\.d$' | head -1)
        strip -o $E/$t "$bin"
    done
    strip -o $E/engine_bench "$target"/release/examples/engine_bench
    data=${OCTOPIPE_DATA:-../shared/data}
    m="$data/models/coco-centernet-512.onnx"
    six="--fuse hardswish --logits --keep-classes 0,1,2,3,5,7 --drop-reshapes"
    if [ -f .device/c1/b6.onnx ]; then cp .device/c1/b6.onnx .device/c1/b6-fp32.onnx $E/; else
        python3 scripts/make_centernet_heads.py "$m" $E/b6.onnx --fp16 --io fp16 --resize-fp16 $six
        python3 scripts/make_centernet_heads.py "$m" $E/b6-fp32.onnx $six
    fi
    cp scripts/engine_probe.py $E/
    du -sh $E
    ;;
run)
    OUT=${OUT:-/tmp/octopipe-out}; mkdir -p "$OUT"
    export OCTOPIPE_KERNEL_CACHE=/tmp/octopipe-kernels RUST_BACKTRACE=1
    [ -n "${NVRTC_LIB_DIR:-}" ] || export NVRTC_LIB_DIR=$(dirname "$(find / -name 'libnvrtc.so*' 2>/dev/null | head -1)")
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; date -u
    echo "=== GPU test"
    OCTOPIPE_ENGINE_MODEL=$PWD/$E/b6.onnx timeout 240 $E/execution --nocapture --test-threads=1 2>&1 | tee $OUT/engine-test.log
    $E/octopipe_engine --nocapture 2>&1 | tail -4
    echo "=== engine throughput"
    ENGINE_BENCH_LAYERS=$OUT/layers.csv timeout ${BENCH_S:-180} $E/engine_bench $E/b6.onnx ${BATCHES:-8,32,64,128} ${RUNS:-30} ${KERNELS:-tuned,simple} ${PROFILE:-64} 2>&1 | tee $OUT/engine-bench.md
    if [ "${NCU:-0}" = 1 ]; then
        echo "=== Nsight Compute, batch ${NCU_BATCH:-64}"
        # The first call's launches (run_host): as many as the program has.
        n=$(awk -F'|' -v b="${NCU_BATCH:-64}" '$2 ~ /Tuned/ && $3+0 == b {print $4+0; exit}' $OUT/engine-bench.md)
        metrics="--section SpeedOfLight --metrics dram__bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
        for m in "$metrics" "--section SpeedOfLight"; do
            timeout ${NCU_S:-200} ncu --clock-control none --launch-count ${n:-110} $m --export /tmp/ncu --force-overwrite \
                $E/engine_bench $E/b6.onnx ${NCU_BATCH:-64} 1 tuned > $OUT/ncu.log 2>&1 &&
                ncu --import /tmp/ncu.ncu-rep --csv --page details > $OUT/ncu.csv && break
            tail -5 $OUT/ncu.log
        done
        wc -l $OUT/ncu.csv; tail -3 $OUT/ncu.log
    fi
    if [ "${SANITIZE:-0}" = 1 ]; then
        echo "=== compute-sanitizer memcheck"
        OCTOPIPE_ENGINE_MODEL=$PWD/$E/b6.onnx timeout 200 compute-sanitizer --tool memcheck $E/execution the_gpu --nocapture 2>&1 | tail -15
    fi
    if [ "${PROBE:-0}" = 1 ]; then
        echo "=== PyTorch probe"
        ref=""; [ -f $E/b6-fp32.onnx ] && ref="--ref b6-fp32.onnx"
    (cd $E && PYTHONUNBUFFERED=1 timeout ${PROBE_S:-270} python3 engine_probe.py b6.onnx $ref \
           --batches ${BATCHES:-8,32,64,128} --reps 30 2>&1 | grep -v "^W1207" | tee $OUT/probe.log) || true
    fi
    date -u
    ;;
*) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
