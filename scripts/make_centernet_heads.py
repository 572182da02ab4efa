#!/usr/bin/env python3
"""The shared COCO CenterNet (batch 1, top-100 decode inside the graph) made into a detector whose
graph ends at its two heads, with a free batch dimension, for `detect decoder=centernet`:

    heatmap  float32 [N, 80, 128, 128]  class scores after the sigmoid (NCHW)
    wh       float32 [N, 4, 128, 128]   distances from the cell to the box's left, top, right
                                        and bottom edge, in input pixels (stride 4)

octopipe then finds the peaks (a score that is the maximum of its 3x3 neighbourhood), keeps the
top 100 per image over `score` and makes the boxes itself, on the GPU when the model runs there.
The graph's own decode (a top-k over all 1,310,720 scores of an image) costs ~7 ms on an H100
whatever the batch (BENCHMARKS.md). With --fp16 every node computes in float16 (inputs and
outputs stay float32).

    python3 scripts/make_centernet_heads.py ../shared/data/models/coco-centernet-512.onnx OUT.onnx [--fp16]

Needs onnx and numpy (and onnxconverter-common for --fp16).
"""
import argparse

import numpy as np
import onnx
from onnx import helper, numpy_helper, utils

a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
a.add_argument("src")
a.add_argument("dst")
a.add_argument("--fp16", action="store_true")
args = a.parse_args()

m = onnx.load(args.src)
g = m.graph
init = {i.name: i for i in g.initializer}
produced = {o for n in g.node for o in n.output}
for want in ("tower_0/Sigmoid:0", "tower_0/mul:0"):
    if want not in produced:
        raise SystemExit(f"{args.src}: no tensor {want}: not the shared CenterNet")
# A free batch: the squeeze-excite reshapes [1, C, 1, 1] take the batch from their input.
g.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
for n in g.node:
    if n.op_type == "Reshape" and n.input[1] in init:
        s = numpy_helper.to_array(init[n.input[1]])
        if s.ndim == 1 and s.size == 4 and s[0] == 1 and s[2] == 1 and s[3] == 1:
            name = n.input[1] + "_batch"
            if name not in init:
                t = numpy_helper.from_array(np.array([-1, s[1], 1, 1], dtype=np.int64), name)
                g.initializer.append(t)
                init[name] = t
            n.input[1] = name
# The two heads, renamed, as the only outputs; the decode after them is left out.
for n in g.node:
    n.output[:] = [{"tower_0/Sigmoid:0": "heatmap", "tower_0/mul:0": "wh"}.get(o, o) for o in n.output]
    n.input[:] = [{"tower_0/Sigmoid:0": "heatmap", "tower_0/mul:0": "wh"}.get(i, i) for i in n.input]
del g.output[:]
g.output.extend([
    helper.make_tensor_value_info("heatmap", onnx.TensorProto.FLOAT, ["batch", 80, 128, 128]),
    helper.make_tensor_value_info("wh", onnx.TensorProto.FLOAT, ["batch", 4, 128, 128]),
])
del g.value_info[:]
onnx.save(m, args.dst)
utils.extract_model(args.dst, args.dst, [g.input[0].name], ["heatmap", "wh"])
m = onnx.load(args.dst)
if args.fp16:
    from onnxconverter_common import float16

    m = float16.convert_float_to_float16(m, keep_io_types=True)
onnx.checker.check_model(m)
onnx.save(m, args.dst)
print(f"{args.dst}: {len(m.graph.node)} nodes, outputs heatmap and wh, free batch"
      + (", float16 body" if args.fp16 else ""))
