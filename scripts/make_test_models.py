#!/usr/bin/env python3
"""Tiny ONNX models for the bad-input tests (tests/describe/bad_input/), written to tests/data/models/.

    python3 scripts/make_test_models.py [OUT_DIR]

Each model averages its input over the spatial axes and maps the 3 channel means to 4 logits
(person, two-wheeler, car, large-vehicle), so it is a few hundred bytes:

    valid-64.onnx        float32 [batch, 3, 64, 64] -> [batch, 4]   (what the demo model takes)
    rank3.onnx           float32 [batch, 64, 64]                    (wrong rank)
    int64.onnx           int64   [batch, 3, 64, 64]                 (wrong dtype)
    gray-64.onnx         float32 [batch, 1, 64, 64]                 (1 channel)
    size-32.onnx         float32 [batch, 3, 32, 32]                 (another crop size)
    batch-reshape.onnx   float32 [batch, 3, 64, 64] -> [1, 3*batch]
        passes the start-up check and the one-crop warm-up run, then fails on the first batch of
        more than one crop (its output is not [batch, classes]): a classify stage failing mid-run.
    nan-logits.onnx      as valid-64, but the logit of class 2 (car) is NaN for every input
    inf-logits.onnx      as valid-64, but the logit of class 1 (two-wheeler) is +Inf for every input
        non-finite model outputs: an error by default, flagged objects with non-finite=flag.
    size-50000.onnx      float32 [batch, 3, 50000, 50000]: an input past the largest a model may
        take (4096 a side), refused when the model is opened, before any tensor is made.

Dependencies: numpy and onnx (scripts/requirements.txt).
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(name, input_type, input_shape, nodes, outputs, initializers):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", input_type, input_shape)],
        outputs, initializer=initializers)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                          producer_name="octopipe-make_test_models")
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    return m


def mean_classifier(name, input_type=TensorProto.FLOAT, channels=3, size=64, rank=4,
                    weight_row=None, bias=None):
    """input -> (Cast) -> ReduceMean over the spatial axes -> Gemm to 4 logits.

    weight_row=(class, value) sets one class's weights (NaN makes its logit NaN for any input);
    bias=[4 values] replaces the zero bias (inf makes a logit infinite)."""
    axes = [2, 3] if rank == 4 else [1, 2]
    shape = ["batch", channels, size, size] if rank == 4 else ["batch", size, size]
    width = channels if rank == 4 else 1
    weight = np.arange(4 * width, dtype=np.float32).reshape(4, width) / 10
    if weight_row is not None:
        weight[weight_row[0], :] = weight_row[1]
    inits = [
        numpy_helper.from_array(np.array(axes, dtype=np.int64), "axes"),
        numpy_helper.from_array(weight, "weight"),
        numpy_helper.from_array(np.array(bias if bias is not None else np.zeros(4),
                                         dtype=np.float32), "bias"),
    ]
    nodes = []
    x = "input"
    if input_type != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", [x], ["as_float"], to=TensorProto.FLOAT))
        x = "as_float"
    keep = 0 if rank == 4 else 1  # rank 3: [batch, 1, 1] -> flatten to [batch, 1]
    nodes.append(helper.make_node("ReduceMean", [x, "axes"], ["mean"], keepdims=keep))
    if rank != 4:
        nodes.append(helper.make_node("Flatten", ["mean"], ["mean2"], axis=1))
        nodes.append(helper.make_node("Gemm", ["mean2", "weight", "bias"], ["logits"], transB=1))
    else:
        nodes.append(helper.make_node("Gemm", ["mean", "weight", "bias"], ["logits"], transB=1))
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])]
    return model(name, input_type, shape, nodes, out, inits)


def batch_reshape():
    inits = [
        numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["input", "axes"], ["mean"], keepdims=0),
        helper.make_node("Reshape", ["mean", "flat"], ["logits"]),
    ]
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "n"])]
    return model("batch_reshape", TensorProto.FLOAT, ["batch", 3, 64, 64], nodes, out, inits)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")
    os.makedirs(out_dir, exist_ok=True)
    models = {
        "valid-64.onnx": mean_classifier("valid_64"),
        "rank3.onnx": mean_classifier("rank3", rank=3),
        "int64.onnx": mean_classifier("int64", input_type=TensorProto.INT64),
        "gray-64.onnx": mean_classifier("gray_64", channels=1),
        "size-32.onnx": mean_classifier("size_32", size=32),
        "batch-reshape.onnx": batch_reshape(),
        "nan-logits.onnx": mean_classifier("nan_logits", weight_row=(2, np.nan)),
        "inf-logits.onnx": mean_classifier("inf_logits", bias=[0, np.inf, 0, 0]),
        "size-50000.onnx": mean_classifier("size_50000", size=50000),
    }
    for name, m in models.items():
        path = os.path.join(out_dir, name)
        onnx.save(m, path)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
