#!/usr/bin/env python3
"""What a fused execution of the shared CenterNet could give over ONNX Runtime, measured before an
engine is written (issue 53, item 2's "measured decision"). Device-only (PyTorch, CUDA).

    python3 scripts/engine_probe.py MODEL_FP16.onnx [--ref MODEL_FP32.onnx] [--batches 8,32,64,128]

The ONNX graph is executed node by node by a small interpreter over PyTorch operators (the op set
of `make_centernet_heads.py`'s output: Conv, Relu, HardSwish, HardSigmoid, Add, Mul,
GlobalAveragePool, Resize, Concat, Transpose, Sigmoid), FP16, channels-last (NHWC), with cuDNN's
convolutions. Variants, each timed with CUDA events (median of the replays):

    eager    one kernel per node: the way ONNX Runtime's CUDA provider executes this graph
    graph    the same kernels captured in one CUDA graph (as `detect cuda-graph=true`)
    fused    torch.compile (Inductor): each chain of elementwise nodes after a convolution becomes
             one kernel (bias, activation, residual add, gate multiply read and written once),
             captured in a CUDA graph
    ort      ONNX Runtime's CUDA provider on the same file, where the onnxruntime here has it

and, with --ref, the converter checked against ONNX Runtime's CPU provider on the FP32 model (max
abs diff of both heads), and the FP16 heads against the FP32 ones. Prints one table; writes JSON
to $OUT/engine_probe.json when $OUT is set.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

import torch
import torch.nn.functional as F


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class Graph:
    """An ONNX graph of the supported op set as a PyTorch callable (NCHW logically; tensors carry
    channels-last strides)."""

    SUPPORTED = {"Conv", "Relu", "HardSwish", "HardSigmoid", "Add", "Mul", "GlobalAveragePool",
                 "Resize", "Concat", "Transpose", "Sigmoid"}

    def __init__(self, path, dtype, device):
        m = onnx.load(path)
        self.nodes = list(m.graph.node)
        bad = sorted({n.op_type for n in self.nodes} - self.SUPPORTED)
        if bad:
            raise SystemExit(f"{path}: operators outside the set: {', '.join(bad)}")
        self.inputs = [i.name for i in m.graph.input]
        self.outputs = [o.name for o in m.graph.output]
        self.consts = {}
        for init in m.graph.initializer:
            a = numpy_helper.to_array(init)
            t = torch.from_numpy(np.array(a))
            if t.is_floating_point():
                t = t.to(dtype)
            t = t.to(device)
            if t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
            self.consts[init.name] = t
        self.attrs = [attrs(n) for n in self.nodes]

    def __call__(self, x):
        env = dict(self.consts)
        env[self.inputs[0]] = x
        for n, a in zip(self.nodes, self.attrs):
            i = [env[k] if k else None for k in n.input]
            op = n.op_type
            if op == "Conv":
                pads = a.get("pads", [0, 0, 0, 0])
                x0 = i[0]
                t, l, b, r = pads[0], pads[1], pads[2], pads[3]
                if t == b and l == r:
                    pad = (t, l)
                else:
                    x0 = F.pad(x0, (l, r, t, b))
                    pad = (0, 0)
                y = F.conv2d(x0, i[1], i[2] if len(i) > 2 else None, stride=tuple(a.get("strides", [1, 1])),
                             padding=pad, dilation=tuple(a.get("dilations", [1, 1])), groups=a.get("group", 1))
            elif op == "Relu":
                y = torch.relu(i[0])
            elif op == "HardSwish":
                y = F.hardswish(i[0])
            elif op == "HardSigmoid":
                y = torch.clamp(i[0] * a.get("alpha", 0.2) + a.get("beta", 0.5), 0, 1)
            elif op == "Add":
                y = i[0] + i[1]
            elif op == "Mul":
                y = i[0] * i[1]
            elif op == "GlobalAveragePool":
                y = i[0].mean(dim=(2, 3), keepdim=True)
            elif op == "Sigmoid":
                y = torch.sigmoid(i[0])
            elif op == "Concat":
                y = torch.cat(i, dim=a.get("axis", 1))
            elif op == "Transpose":
                y = i[0].permute(*a["perm"])
                if y.dim() == 4:
                    y = y.contiguous(memory_format=torch.channels_last)
            elif op == "Resize":
                scales = i[2] if len(i) > 2 and i[2] is not None and i[2].numel() else None
                mode = a.get("mode", b"nearest").decode()
                ctm = a.get("coordinate_transformation_mode", b"half_pixel").decode()
                sf = tuple(float(s) for s in scales.float().cpu()[2:])
                if mode == "linear" and ctm == "asymmetric" and all(s == 2.0 for s in sf):
                    y = upsample2x_asymmetric(i[0])
                elif mode == "linear":
                    y = F.interpolate(i[0], scale_factor=sf, mode="bilinear",
                                      align_corners=(ctm == "align_corners"))
                else:
                    y = F.interpolate(i[0], scale_factor=sf, mode="nearest")
            for k, v in zip(n.output, [y]):
                env[k] = v
        return [env[o] for o in self.outputs]


def upsample2x_asymmetric(x):
    """ONNX Resize linear, asymmetric, scale 2: out[2k] = in[k], out[2k+1] = (in[k] + in[k+1]) / 2
    (the last row/column repeats the edge)."""
    nxt_h = torch.cat([x[:, :, 1:, :], x[:, :, -1:, :]], dim=2)
    rows = torch.stack([x, (x + nxt_h) * 0.5], dim=3).flatten(2, 3)
    nxt_w = torch.cat([rows[:, :, :, 1:], rows[:, :, :, -1:]], dim=3)
    y = torch.stack([rows, (rows + nxt_w) * 0.5], dim=4).flatten(3, 4)
    return y.contiguous(memory_format=torch.channels_last)


def time_fn(fn, reps=50, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def top_kernels(fn, n=14):
    """The kernels of one call of fn by GPU time: (name, calls, ms), and the total ms."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = []
    total = 0.0
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0)
        if t <= 0 or e.key.startswith("cudaGraph"):
            continue
        rows.append((e.key[:90], e.count, t / 1e3))
    rows.sort(key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    return {"total_ms": total, "kernels": rows[:n], "count": sum(r[1] for r in rows)}


def graphed(fn, x):
    """fn(x) captured in a CUDA graph over the static input x; returns the replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(x)
    return g.replay, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--ref", help="the same model in FP32, to check the converter on ORT's CPU provider")
    p.add_argument("--batches", default="8,32,64,128")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--profile-batch", type=int, default=64)
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}",
          flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": [], "checks": {}}
    g16 = Graph(a.model, torch.float16, dev)
    shape_in = onnx.load(a.model).graph.input[0].type.tensor_type.shape
    hw = [d.dim_value for d in shape_in.dim][1:]

    # Correctness: the interpreter against ORT's CPU provider on the FP32 model, and FP16 against FP32.
    if a.ref:
      try:
        import onnxruntime as ort
        g32 = Graph(a.ref, torch.float32, dev)
        rng = np.random.default_rng(7)
        xin = rng.uniform(0, 1, size=[2] + hw).astype(np.float32)
        sess = ort.InferenceSession(a.ref, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {sess.get_inputs()[0].name: xin})
        with torch.no_grad():
            t32 = [o.float().cpu().numpy() for o in g32(torch.from_numpy(xin).to(dev))]
            t16 = [o.float().cpu().numpy() for o in g16(torch.from_numpy(xin).to(dev).half())]
        for name, r, o32, o16 in zip(g32.outputs, ref, t32, t16):
            d32 = float(np.abs(r - o32).max())
            d16 = float(np.abs(r - o16).max())
            scale = float(np.abs(r).max())
            result["checks"][name] = {"fp32_vs_ort_cpu": d32, "fp16_vs_ort_cpu": d16, "max_abs_ref": scale}
            print(f"check {name}: interpreter FP32 vs ORT CPU max abs {d32:.3g}; FP16 vs ORT CPU {d16:.3g} "
                  f"(|ref| max {scale:.3g})", flush=True)
      except Exception as e:  # noqa: BLE001
        result["checks"]["error"] = repr(e)[:400]
        print(f"check failed: {e!r}", flush=True)
        import traceback
        traceback.print_exc()

    ort_cuda = None
    try:
        import onnxruntime as ort
        if "CUDAExecutionProvider" in ort.get_available_providers():
            ort_cuda = ort
    except Exception as e:  # noqa: BLE001
        print(f"onnxruntime: {e}")
    print(f"ORT CUDA provider here: {'yes' if ort_cuda else 'no'}", flush=True)

    batches = [int(b) for b in a.batches.split(",")]
    for b in batches:
        x = torch.rand([b] + hw, device=dev).half()
        row = {"batch": b}
        with torch.no_grad():
            row["eager_ms"] = time_fn(lambda: g16(x), a.reps)
            replay, _ = graphed(g16, x)
            row["graph_ms"] = time_fn(replay, a.reps)
            if b == a.profile_batch:
                row["eager_top"] = top_kernels(lambda: g16(x))
            if not a.no_compile:
                try:
                    t0 = time.time()
                    comp = torch.compile(g16, dynamic=False)
                    comp(x)
                    torch.cuda.synchronize()
                    row["compile_s"] = time.time() - t0
                    creplay, cout = graphed(comp, x)
                    row["fused_ms"] = time_fn(creplay, a.reps)
                    ref = g16(x)
                    row["fused_max_abs_vs_eager"] = max(float((c.float() - r.float()).abs().max())
                                                        for c, r in zip(cout, ref))
                    if b == a.profile_batch:
                        row["fused_top"] = top_kernels(creplay)
                except Exception as e:  # noqa: BLE001
                    row["fused_error"] = repr(e)[:400]
        if ort_cuda:
            so = ort_cuda.SessionOptions()
            sess = ort_cuda.InferenceSession(a.model, so, providers=[(
                "CUDAExecutionProvider", {"prefer_nhwc": "1", "cudnn_conv_algo_search": "EXHAUSTIVE"})])
            xin = x.cpu().numpy()
            io = sess.io_binding()
            xo = ort_cuda.OrtValue.ortvalue_from_numpy(xin, "cuda", 0)
            io.bind_ortvalue_input(sess.get_inputs()[0].name, xo)
            for o in sess.get_outputs():
                io.bind_output(o.name, "cuda")
            for _ in range(5):
                sess.run_with_iobinding(io)
            ts = []
            for _ in range(a.reps):
                t0 = time.perf_counter()
                sess.run_with_iobinding(io)
                ts.append((time.perf_counter() - t0) * 1e3)
            row["ort_ms"] = statistics.median(ts)
        for k in ("eager_ms", "graph_ms", "fused_ms", "ort_ms"):
            if k in row:
                row[k.replace("_ms", "_ips")] = b / row[k] * 1e3
        result["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_top")}), flush=True)
        for k in ("eager_top", "fused_top"):
            if k in row:
                print(f"{k} (batch {b}): {row[k]['count']} kernels, {row[k]['total_ms']:.3f} ms")
                for name, calls, ms in row[k]["kernels"]:
                    print(f"    {ms:8.3f} ms {calls:4d}x {name}")
        torch.cuda.empty_cache()

    print("\n| batch | eager ms (img/s) | CUDA graph ms (img/s) | fused+graph ms (img/s) | fused / graph | ORT CUDA ms |")
    print("|---:|---|---|---|---:|---|")
    for r in result["rows"]:
        def cell(k):
            return f"{r[k + '_ms']:.3f} ({r[k + '_ips']:.0f})" if k + "_ms" in r else "-"
        ratio = f"{r['graph_ms'] / r['fused_ms']:.2f}x" if "fused_ms" in r else "-"
        print(f"| {r['batch']} | {cell('eager')} | {cell('graph')} | {cell('fused')} | {ratio} | {cell('ort')} |")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "engine_probe.json"), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
