#!/usr/bin/env python3
"""An FP16 body for a float32 ONNX detector: every node before the output decode computes in
float16 (half the bytes, tensor cores), the inputs and outputs stay float32 and the decode after
the score heads (top-k, index arithmetic) stays float32, so boxes come out as before up to the
body's rounding (recall checked against FP32 in BENCHMARKS.md).

    python3 scripts/make_detector_fp16.py IN.onnx OUT.onnx [--keep-from NODE]

--keep-from names the first node kept in float32 (default: the shared CenterNet's score sigmoid,
tower_0/Sigmoid). Needs onnx and onnxconverter-common.
"""
import argparse

import onnx
from onnxconverter_common import float16

a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
a.add_argument("src")
a.add_argument("dst")
a.add_argument("--keep-from", default="tower_0/Sigmoid")
args = a.parse_args()
m = onnx.load(args.src)
names = [n.name for n in m.graph.node]
if args.keep_from not in names:
    raise SystemExit(f"{args.src}: no node named {args.keep_from} (--keep-from)")
keep = names[names.index(args.keep_from):]
m16 = float16.convert_float_to_float16(m, keep_io_types=True, node_block_list=keep)
onnx.save(m16, args.dst)
print(f"{args.dst}: float16 body, {len(keep)} decode nodes and the inputs/outputs in float32")
