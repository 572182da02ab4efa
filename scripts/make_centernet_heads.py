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

With --fuse each hard-swish, written in the graph as four elementwise nodes (x * (1/6) times
Clip(x + 3, 0, 6)), becomes one node, and each squeeze-excite gate (Clip(x + 3, 0, 6) * (1/6)) one
HardSigmoid: `--fuse hardswish` uses ONNX's HardSwish (opset 14, slope 1/6), `--fuse hardsigmoid`
x * HardSigmoid(x) with the graph's own slope (0.16662598, a rounded 1/6). Both clip at 1 where
the graph clips at 6 * 0.16662598: a saturated value moves by 2.4e-4 of itself.

With --bias-sub each convolution's bias that ONNX Runtime's CUDA provider would add with cuDNN's
cudnnAddTensor (every convolution not fused with a following Relu; that kernel ran at ~15% of an
H100's memory bandwidth, BENCHMARKS.md) becomes a Sub of its negation after a convolution without
bias: the same sum, added by ONNX Runtime's own broadcasting kernel. `--bias-sub all` moves the
biases of the convolutions before a Relu too: with prefer_nhwc ONNX Runtime does not fuse Conv and
Relu, and adds those biases with cudnnAddTensor as well. A Sub, not an Add: ONNX
Runtime folds an Add of a constant back into the convolution's bias (ConvAddFusion).
Without --bias-fold and --bias-sub the biases stay in the convolutions: with `detect
fuse-conv-bias=true prefer-nhwc=true` cuDNN adds them inside the convolution's own call (runtime
fusion; faster than any of the rewrites above on an H100, BENCHMARKS.md).

With --bias-fold (before --bias-sub) the bias of each residual block's last convolution is not
added at all where it need not be: the sum after the block's Add is kept short of it, the next
residual Adds pass the shortfall on, and each 1x1 convolution reading such a sum (no padding, so
exactly) takes W times the shortfall into its own bias; any other reader gets the sum made whole by
one Sub.

With --logits the score map is the heads' logits (the sigmoid before it left out: one pass over
80 maps of 128 x 128 per tile less); the model says so in its metadata (`octopipe.scores` =
`logits`), and octopipe compares the logits with the score threshold's logit and takes the sigmoid
of the peaks alone. With --fp16 --io fp16 the input and both heads are float16 too (no Cast
nodes at the ends: octopipe preprocesses into float16 and reads float16 heads); with --fp16
--resize-fp16 the three bilinear upsamplings of the head run in float16 too (the converter keeps
them in float32 by default, with a Cast before and after each).
With --keep-classes 0,1,2,3,5,7 the score head gives only those COCO classes, in that order (its
last 1x1 convolution keeps their rows: each kept score as before); name them to `detect` in the
same order, `labels=person,bicycle,car,motorcycle,bus,truck`. With --drop-reshapes the
squeeze-excite blocks' identity Reshapes ([N, C, 1, 1] to [-1, C, 1, 1]) are left out: under
NHWC ONNX Runtime puts two transposes around each.
    python3 scripts/make_centernet_heads.py ../shared/data/models/coco-centernet-512.onnx OUT.onnx [--fp16 [--io fp16] [--resize-fp16]] [--fuse hardswish|hardsigmoid] [--bias-fold] [--bias-sub [all]] [--logits] [--keep-classes I,J,...] [--drop-reshapes]

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
a.add_argument("--fuse", choices=["hardswish", "hardsigmoid"])
a.add_argument("--bias-fold", action="store_true")
a.add_argument("--bias-sub", nargs="?", const="unfused", choices=["unfused", "all"])
a.add_argument("--logits", action="store_true")
a.add_argument("--io", choices=["fp32", "fp16"], default="fp32")
a.add_argument("--resize-fp16", action="store_true")
a.add_argument("--keep-classes")
a.add_argument("--drop-reshapes", action="store_true")
args = a.parse_args()


def readers(g):
    """Each tensor's name -> the nodes that read it."""
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    return users


def set_nodes(g, order):
    """Makes `order` the graph's nodes and drops the initializers no node reads any more."""
    del g.node[:]
    g.node.extend(order)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)


def fuse(m, how):
    """Replaces hard-swish and hard-sigmoid chains by single nodes; returns how many of each."""
    g = m.graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    users = readers(g)

    def const(name, want):
        return name in init and init[name].size == 1 and abs(float(init[name].ravel()[0]) - want) < 1e-3

    def other(n, name):
        return n.input[1] if n.input[0] == name else n.input[0]

    drop, replace, swish, gates = set(), {}, 0, 0
    for clip in [n for n in g.node if n.op_type == "Clip"]:
        add = prod.get(clip.input[0])
        if not (add is not None and add.op_type == "Add" and len(clip.input) == 3
                and const(clip.input[1], 0) and const(clip.input[2], 6)):
            continue
        x = next((i for i in add.input if not const(i, 3)), None)
        if x is None or not any(const(i, 3) for i in add.input) or len(users[clip.output[0]]) != 1:
            continue
        mul = users[clip.output[0]][0]
        if mul.op_type != "Mul":
            continue
        scale = other(mul, clip.output[0])
        sixth = prod.get(scale)
        y = mul.output[0]
        if const(scale, 1 / 6):
            # Squeeze-excite gate: HardSigmoid(x), with the graph's own 1/6.
            a = float(init[scale].ravel()[0])
            replace[y] = [helper.make_node("HardSigmoid", [x], [y], alpha=a, beta=3 * a)]
            drop |= {add.output[0], clip.output[0]}
            gates += 1
        elif (sixth is not None and sixth.op_type == "Mul" and x in sixth.input
              and const(other(sixth, x), 1 / 6) and len(users[sixth.output[0]]) == 1):
            # Hard-swish: x * HardSigmoid(x).
            a = float(init[other(sixth, x)].ravel()[0])
            if how == "hardswish":
                replace[y] = [helper.make_node("HardSwish", [x], [y])]
            else:
                replace[y] = [helper.make_node("HardSigmoid", [x], [y + "_gate"], alpha=a, beta=3 * a),
                              helper.make_node("Mul", [x, y + "_gate"], [y])]
            drop |= {add.output[0], clip.output[0], sixth.output[0]}
            swish += 1
    # The new nodes take the place of each chain's last node, which keeps the order topological.
    order = []
    for n in g.node:
        if n.output[0] in replace:
            for k, new in enumerate(replace[n.output[0]]):
                new.name = f"{n.name or n.output[0]}_fused{k}"
                order.append(new)
        elif n.output[0] not in drop:
            order.append(n)
    set_nodes(g, order)
    if how == "hardswish":
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = max(o.version, 14)
    return swish, gates


def keep_classes(m, heat, keep):
    """Makes the score head's last (1x1) convolution give only the classes `keep` (COCO indices,
    in that order): its weights' and bias's other rows dropped, each kept score unchanged."""
    g = m.graph
    conv = next(n for n in g.node if heat in n.output)
    if conv.op_type == "Sigmoid":
        conv = next(n for n in g.node if conv.input[0] in n.output)
    if conv.op_type != "Conv" or len(conv.input) != 3:
        raise SystemExit(f"--keep-classes: {heat} is made by {conv.op_type}, not a Conv with a bias")
    init = {i.name: i for i in g.initializer}
    for k, name in ((1, "weights"), (2, "bias")):
        t = numpy_helper.to_array(init[conv.input[k]])
        if min(keep) < 0 or max(keep) >= t.shape[0]:
            raise SystemExit(f"--keep-classes: class indices 0 to {t.shape[0] - 1} (the head has {t.shape[0]} classes)")
        kept = numpy_helper.from_array(np.ascontiguousarray(t[keep]), f"{conv.input[k]}_kept_{name}")
        g.initializer.append(kept)
        conv.input[k] = kept.name
    set_nodes(g, list(g.node))


def drop_reshapes(m):
    """Removes the squeeze-excite blocks' Reshapes of [N, C, 1, 1] to [-1, C, 1, 1] (the
    identity; under NHWC ONNX Runtime puts two transposes around each)."""
    from onnx import shape_inference

    g = m.graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in shape_inference.infer_shapes(m).graph.value_info}
    same = {}
    for n in g.node:
        s = init.get(n.input[1]) if n.op_type == "Reshape" else None
        if (s is not None and s.ndim == 1 and s.size == 4 and s[0] == -1 and s[2] == 1 and s[3] == 1
                and shapes.get(n.input[0], [])[1:] == [s[1], 1, 1]):
            same[n.output[0]] = n.input[0]
    outputs = {o.name for o in g.output}
    order = []
    for n in g.node:
        if n.output[0] in same and n.output[0] not in outputs:
            continue
        for k, i in enumerate(n.input):
            while i in same:
                i = same[i]
            n.input[k] = i
        order.append(n)
    set_nodes(g, order)
    return len(same)


def bias_sub(m, every):
    """Moves the bias of every convolution (`every`) or of those not followed by Relu alone into
    a Sub of its negation."""
    g = m.graph
    init = {i.name: i for i in g.initializer}
    users = readers(g)
    order, moved = [], 0
    for n in g.node:
        order.append(n)
        if n.op_type != "Conv" or len(n.input) < 3 or n.input[2] not in init:
            continue
        after = users.get(n.output[0], [])
        if not every and len(after) == 1 and after[0].op_type == "Relu":
            continue  # ONNX Runtime fuses Conv + bias + Relu into one cuDNN call already
        b = numpy_helper.to_array(init[n.input[2]])
        neg = numpy_helper.from_array((-b).reshape(1, -1, 1, 1).astype(b.dtype), n.input[2] + "_neg")
        g.initializer.append(neg)
        out = n.output[0]
        n.output[0] = out + "_nobias"
        del n.input[2]
        order.append(helper.make_node("Sub", [out + "_nobias", neg.name], [out], name=(n.name or out) + "_bias"))
        moved += 1
    set_nodes(g, order)
    return moved


def bias_fold(m):
    """Defers residual blocks' last biases into the 1x1 convolutions after them; returns (deferred, made whole)."""
    g = m.graph
    init = {i.name: i for i in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    users = readers(g)
    attr = lambda n, k, d: next((helper.get_attribute_value(a) for a in n.attribute if a.name == k), d)
    short, folded = {}, 0  # tensor -> what it is short of its true value (per channel)
    for n in g.node:
        if n.op_type != "Add":
            continue
        d = None
        for i in n.input:
            c = prod.get(i)
            if (c is not None and c.op_type == "Conv" and len(c.input) == 3 and c.input[2] in init
                    and len(users[i]) == 1 and i not in short):
                b = numpy_helper.to_array(init[c.input[2]])
                del c.input[2]
                short[i] = b
                folded += 1
            if i in short:
                d = short[i] if d is None else d + short[i]
        if d is not None:
            short[n.output[0]] = d
    outputs = {o.name for o in g.output}
    order, made = [], set()
    for n in g.node:
        for k, i in enumerate(n.input):
            if i not in short or (n.op_type == "Add" and n.output[0] in short):
                continue
            w = init.get(n.input[1]) if n.op_type == "Conv" and k == 0 else None
            w = numpy_helper.to_array(w) if w is not None else None
            if (w is not None and w.shape[2:] == (1, 1) and attr(n, "group", 1) == 1
                    and not any(attr(n, "pads", [0])) and attr(n, "auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")):
                extra = w[:, :, 0, 0].astype(np.float64) @ short[i].astype(np.float64)
                if len(n.input) == 3:
                    b = numpy_helper.to_array(init[n.input[2]]).astype(np.float64) + extra
                else:
                    n.input.append(n.output[0] + "_bias")
                    b = extra
                t = numpy_helper.from_array(b.astype(w.dtype), n.input[2] + "_folded")
                g.initializer.append(t)
                init[t.name] = t
                n.input[2] = t.name
                continue
            name = i + "_whole"
            if name not in made:
                t = numpy_helper.from_array((-short[i]).reshape(1, -1, 1, 1).astype(np.float32), i + "_short")
                g.initializer.append(t)
                made.add(name)
                order.append(helper.make_node("Sub", [i, t.name], [name], name=name))
            n.input[k] = name
        order.append(n)
    for o in g.output:
        if o.name in short:
            raise SystemExit(f"--bias-fold: output {o.name} would be short of its bias")
    # Each Sub goes right before its first reader, after its input's producer: still topological.
    set_nodes(g, order)
    return folded, len(made)


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
# The two heads, renamed, as the only outputs; the decode after them is left out. With --logits
# the score head is the sigmoid's input.
heat = "tower_0/Sigmoid:0"
if args.logits:
    sig = next(n for n in g.node if heat in n.output)
    if sig.op_type != "Sigmoid":
        raise SystemExit(f"{args.src}: {heat} is made by {sig.op_type}, not a Sigmoid")
    heat = sig.input[0]
for n in g.node:
    n.output[:] = [{heat: "heatmap", "tower_0/mul:0": "wh"}.get(o, o) for o in n.output]
    n.input[:] = [{heat: "heatmap", "tower_0/mul:0": "wh"}.get(i, i) for i in n.input]
del g.output[:]
g.output.extend([
    helper.make_tensor_value_info("heatmap", onnx.TensorProto.FLOAT, ["batch", 80, 128, 128]),
    helper.make_tensor_value_info("wh", onnx.TensorProto.FLOAT, ["batch", 4, 128, 128]),
])
del g.value_info[:]
onnx.save(m, args.dst)
utils.extract_model(args.dst, args.dst, [g.input[0].name], ["heatmap", "wh"])
m = onnx.load(args.dst)
fused = ""
if args.keep_classes:
    keep = [int(c) for c in args.keep_classes.split(",")]
    keep_classes(m, "heatmap", keep)
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = len(keep)
    fused += f", score head cut to classes {args.keep_classes}"
if args.drop_reshapes:
    fused += f", {drop_reshapes(m)} identity reshapes dropped"
if args.fuse:
    swish, gates = fuse(m, args.fuse)
    fused += f", {swish} hard-swish and {gates} hard-sigmoid chains fused ({args.fuse})"
if args.bias_fold:
    folded, whole = bias_fold(m)
    fused += f", {folded} residual biases deferred ({whole} sums made whole by a Sub)"
if args.bias_sub:
    fused += f", {bias_sub(m, args.bias_sub == 'all')} biases as Sub"
if (args.io == "fp16" or args.resize_fp16) and not args.fp16:
    raise SystemExit("--io fp16 and --resize-fp16 go with --fp16")
if args.fp16:
    from onnxconverter_common import float16

    block = [op for op in float16.DEFAULT_OP_BLOCK_LIST if not (args.resize_fp16 and op == "Resize")]
    m = float16.convert_float_to_float16(m, keep_io_types=args.io == "fp32", op_block_list=block)
    if args.resize_fp16:
        # Resize's roi and scales stay float32 whatever the data's type.
        resize_in = {i for n in m.graph.node if n.op_type == "Resize" for i in n.input[1:3]}
        for t in m.graph.initializer:
            if t.name in resize_in and t.data_type == onnx.TensorProto.FLOAT16:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
        fused += ", upsampling in float16"
    if args.io == "fp16":
        fused += ", float16 input and heads"
if args.logits:
    m.metadata_props.append(onnx.StringStringEntryProto(key="octopipe.scores", value="logits"))
    fused += ", scores as logits"
onnx.checker.check_model(m)
onnx.save(m, args.dst)
print(f"{args.dst}: {len(m.graph.node)} nodes, outputs heatmap and wh, free batch"
      + (", float16 body" if args.fp16 else "") + fused)
