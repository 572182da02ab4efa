#!/usr/bin/env python3
"""Tiny ONNX detectors with outputs known exactly, for the detect stage's tests (tests/detect/detect.rs),
written to tests/data/models/.

    python3 scripts/make_detector_models.py [OUT_DIR]

Every model takes a 320x320 image and answers the same boxes whatever the image (in the model
input's pixels, corners x1, y1, x2, y2):

    A  [40, 40, 120, 80]    class 2, score 0.9
    B  [44, 40, 124, 80]    class 2, score 0.8    IoU 0.905 with A: suppressed by NMS
    C  [44, 40, 124, 80]    class 0, score 0.7    another class: kept
    D  [200, 200, 260, 300] class 1, score 0.2    under the default score 0.3
    and padding rows of score 0 where the format has them.

    det-e2e.onnx      float32 [1, 3, 320, 320] -> 'heads' [1, 4, 4, 4] (not detections: the
                      stage must pick the next output) and 'dets' [1, 5, 6] (end2end)
    det-e2e-2d.onnx   float32 [1, 320, 320, 3] (NHWC) -> [5, 6] (end2end, rank 2)
    det-e2e-f16.onnx  float16 [1, 3, 320, 320] -> float16 [1, 5, 6]
    det-yolov8.onnx   float32 [batch, 3, 320, 320] (dynamic batch) -> [batch, 4 + 3, 8] (yolov8)
    det-batch1-only.onnx  as det-yolov8, but its graph reshapes the input to one image: it
                      passes the start-up check and the one-image warm-up run, then fails in
                      ONNX Runtime on the first call of more than one image (a call that fails
                      mid-run).
    det-yolov5.onnx   float32 [1, 3, 320, 320] -> [1, 12, 5 + 3] (yolov5; D's objectness 0.4
                      times class score 0.5 = 0.2)
    det-probe.onnx    float32 [1, 3, 320, 320] -> [1, 1, 6]: one box A of class 0 whose score is
                      the mean of input channel 0: a check of what the stage feeds the model
                      (channel order, scale, letterbox padding).

Dependencies: numpy and onnx (scripts/requirements.txt).
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROWS = np.array([
    [40, 40, 120, 80, 0.9, 2],
    [44, 40, 124, 80, 0.8, 2],
    [44, 40, 124, 80, 0.7, 0],
    [200, 200, 260, 300, 0.2, 1],
    [0, 0, 0, 0, 0, 0],
], dtype=np.float32)


def save(out, name, inputs, outputs, nodes, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                          producer_name="octopipe-make_detector_models")
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(out, name))


def image(dtype, shape):
    return helper.make_tensor_value_info("images", dtype, shape)


def constant_of(name, value, dtype=TensorProto.FLOAT):
    """Nodes giving `value` as output `name`, tied to the input so that it is a real graph."""
    inits = [numpy_helper.from_array(value, name + "_value")]
    nodes = [
        helper.make_node("ReduceMean", ["images"], [name + "_mean"], keepdims=0),
        helper.make_node("Mul", [name + "_mean", "zero"], [name + "_zero"]),
    ]
    if dtype == TensorProto.FLOAT16:
        nodes.append(helper.make_node("Cast", [name + "_zero"], [name + "_zero32"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Add", [name + "_value", name + "_zero32"], [name + "_32"]))
        nodes.append(helper.make_node("Cast", [name + "_32"], [name], to=TensorProto.FLOAT16))
    else:
        nodes.append(helper.make_node("Add", [name + "_value", name + "_zero"], [name]))
    return nodes, inits


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "models")
    os.makedirs(out, exist_ok=True)
    zero32 = numpy_helper.from_array(np.array(0, dtype=np.float32), "zero")
    zero16 = numpy_helper.from_array(np.array(0, dtype=np.float16), "zero")

    # end2end with a decoy output first.
    n1, i1 = constant_of("heads", np.zeros((1, 4, 4, 4), np.float32))
    n2, i2 = constant_of("dets", ROWS[None])
    save(out, "det-e2e.onnx", [image(TensorProto.FLOAT, [1, 3, 320, 320])],
         [helper.make_tensor_value_info("heads", TensorProto.FLOAT, [1, 4, 4, 4]),
          helper.make_tensor_value_info("dets", TensorProto.FLOAT, [1, 5, 6])],
         n1 + n2, i1 + i2 + [zero32])

    n, i = constant_of("dets", ROWS)
    save(out, "det-e2e-2d.onnx", [image(TensorProto.FLOAT, [1, 320, 320, 3])],
         [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [5, 6])], n, i + [zero32])

    n, i = constant_of("dets", ROWS[None], TensorProto.FLOAT16)
    save(out, "det-e2e-f16.onnx", [image(TensorProto.FLOAT16, [1, 3, 320, 320])],
         [helper.make_tensor_value_info("dets", TensorProto.FLOAT16, [1, 5, 6])], n, i + [zero16])

    # YOLOv8: [batch, 4 + 3, 8] (cx, cy, w, h, then one score per class), the same for every
    # image of the batch.
    v8 = np.zeros((1, 7, 8), np.float32)
    for a, (x1, y1, x2, y2, score, cls) in enumerate(ROWS[:4]):
        v8[0, :4, a] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        v8[0, 4 + int(cls), a] = score
    nodes = [
        helper.make_node("Shape", ["images"], ["shape"], start=0, end=1),
        helper.make_node("Concat", ["shape", "rest"], ["out_shape"], axis=0),
        helper.make_node("Expand", ["v8_value", "out_shape"], ["v8"]),
    ]
    save(out, "det-yolov8.onnx", [image(TensorProto.FLOAT, ["batch", 3, 320, 320])],
         [helper.make_tensor_value_info("v8", TensorProto.FLOAT, ["batch", 7, 8])], nodes,
         [numpy_helper.from_array(v8, "v8_value"),
          numpy_helper.from_array(np.array([7, 8], np.int64), "rest")])

    # The same answer, plus zero times the mean of the input reshaped to one image: a run of
    # more than one image fails in the Reshape.
    nodes = [
        helper.make_node("Reshape", ["images", "one_image"], ["first"]),
        helper.make_node("ReduceMean", ["first"], ["first_mean"], keepdims=1),
        helper.make_node("Mul", ["first_mean", "zero"], ["first_zero"]),
        helper.make_node("Reshape", ["first_zero", "one_one_one"], ["nothing"]),
        helper.make_node("Shape", ["images"], ["shape"], start=0, end=1),
        helper.make_node("Concat", ["shape", "rest"], ["out_shape"], axis=0),
        helper.make_node("Expand", ["v8_value", "out_shape"], ["v8_all"]),
        helper.make_node("Add", ["v8_all", "nothing"], ["v8"]),
    ]
    save(out, "det-batch1-only.onnx", [image(TensorProto.FLOAT, ["batch", 3, 320, 320])],
         [helper.make_tensor_value_info("v8", TensorProto.FLOAT, ["batch", 7, 8])], nodes,
         [numpy_helper.from_array(v8, "v8_value"),
          numpy_helper.from_array(np.array([7, 8], np.int64), "rest"),
          numpy_helper.from_array(np.array([1, 3, 320, 320], np.int64), "one_image"),
          numpy_helper.from_array(np.array([1, 1, 1], np.int64), "one_one_one"),
          zero32])

    # YOLOv5: [1, 12, 5 + 3] (cx, cy, w, h, objectness, class scores); score = objectness * class.
    v5 = np.zeros((1, 12, 8), np.float32)
    for a, (x1, y1, x2, y2, score, cls) in enumerate(ROWS[:4]):
        objectness = 0.4 if a == 3 else 1.0
        v5[0, a, :5] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, objectness]
        v5[0, a, 5 + int(cls)] = score / objectness
    n, i = constant_of("v5", v5)
    save(out, "det-yolov5.onnx", [image(TensorProto.FLOAT, [1, 3, 320, 320])],
         [helper.make_tensor_value_info("v5", TensorProto.FLOAT, [1, 12, 8])], n, i + [zero32])

    # The probe: box A, class 0, score = mean of channel 0.
    nodes = [
        helper.make_node("Slice", ["images", "c0", "c1", "ax1"], ["red"]),
        helper.make_node("ReduceMean", ["red"], ["mean"], keepdims=0),
        helper.make_node("Reshape", ["mean", "one"], ["score"]),
        helper.make_node("Concat", ["corners", "score", "cls"], ["row"], axis=0),
        helper.make_node("Reshape", ["row", "row_shape"], ["probe"]),
    ]
    save(out, "det-probe.onnx", [image(TensorProto.FLOAT, [1, 3, 320, 320])],
         [helper.make_tensor_value_info("probe", TensorProto.FLOAT, [1, 1, 6])], nodes,
         [numpy_helper.from_array(np.array([0], np.int64), "c0"),
          numpy_helper.from_array(np.array([1], np.int64), "c1"),
          numpy_helper.from_array(np.array([1], np.int64), "ax1"),
          numpy_helper.from_array(np.array([1], np.int64), "one"),
          numpy_helper.from_array(np.array([40, 40, 120, 80], np.float32), "corners"),
          numpy_helper.from_array(np.array([0], np.float32), "cls"),
          numpy_helper.from_array(np.array([1, 1, 6], np.int64), "row_shape")])


if __name__ == "__main__":
    main()
