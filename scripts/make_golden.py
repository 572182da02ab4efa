#!/usr/bin/env python3
"""Make golden values for octopipe's CPU crop+resize tests, with OpenCV as the reference.

Writes tests/data/golden/resize.json (INTER_LINEAR) and tests/data/golden/resize_area.json
(INTER_AREA: same image and format, `values` = cv2.resize(float32 crop, (ow, oh), INTER_AREA)
rounded to 3 decimals, no values_u8) (paths relative to the repository root; pass another path
for resize.json as the only argument to write it elsewhere; resize_area.json goes beside it). Made with OpenCV 5.0.0 (opencv-python-headless) and
numpy 2.4; the JSON records the OpenCV version that made it in `opencv_version`.

Contents:
  - `image`: a deterministic 67x45 RGB uint8 test image (numpy seed 20240607): smooth gradients
    and waves plus sharp-edged blocks, a diagonal edge, saturated 0/255 pixels and mild noise,
    stored inline as a flat row-major HWC list (`data`, length height*width*3).
  - `cases`: crop boxes [x, y, w, h] (integer, inside the image) with an output size [ow, oh] and
    `values` = the flat row-major HWC result of
        cv2.resize(img[y:y+h, x:x+w].astype(np.float32), (ow, oh), interpolation=cv2.INTER_LINEAR)
    rounded to 3 decimals (length oh*ow*3). Some cases also carry `values_u8`, the result of
    cv2.resize on the uint8 crop itself (OpenCV's fixed-point path: it may differ from rounding the
    float result by 1, and its last bits depend on the CPU's SIMD width, so compare with +-1).

Usage:  python3 scripts/make_golden.py [OUT_JSON]
Needs numpy and opencv-python-headless (an optional extra, not a requirement of the project).
"""

import json
import os
import sys

import cv2
import numpy as np

WIDTH, HEIGHT = 67, 45
SEED = 20240607


def make_image():
    rng = np.random.default_rng(SEED)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    r = 40 + 170 * xx / (WIDTH - 1) + 25 * np.sin(yy / 5.0)
    g = 60 + 120 * yy / (HEIGHT - 1) + 30 * np.cos(xx / 7.0 + yy / 9.0)
    b = 128 + 90 * np.sin((xx + 2 * yy) / 11.0)
    img = np.stack([r, g, b], axis=-1)
    img += rng.normal(0.0, 4.0, size=img.shape)
    # sharp edges: a diagonal edge, solid blocks, one-pixel lines, saturated pixels
    img[(xx + 0.9 * yy) > 80] = (230, 220, 40)
    img[5:14, 8:21] = (250, 20, 30)
    img[20:33, 40:52] = (10, 200, 240)
    img[30:45, 0:9] = (255, 255, 255)
    img[0:4, 58:67] = (0, 0, 0)
    img[:, 33] = (0, 255, 0)
    img[17, :] = (255, 0, 255)
    checker = ((xx // 2 + yy // 2) % 2 == 0) & (xx >= 22) & (xx < 30) & (yy >= 36) & (yy < 44)
    img[checker] = (255, 255, 255)
    img[~checker & (xx >= 22) & (xx < 30) & (yy >= 36) & (yy < 44)] = (0, 0, 0)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


# (name, box [x, y, w, h], out [ow, oh], with values_u8)
CASES = [
    ("upscale 5x7 -> 16x16", [3, 4, 5, 7], [16, 16], True),
    ("downscale 60x40 -> 8x8", [2, 3, 60, 40], [8, 8], False),
    ("downscale 33x17 -> 7x5 (non-integer factors)", [20, 10, 33, 17], [7, 5], True),
    ("exact 2x downscale 32x16 -> 16x8", [30, 22, 32, 16], [16, 8], False),
    ("same size 9x6 -> 9x6", [12, 30, 9, 6], [9, 6], False),
    ("1-pixel-wide box 1x12 -> 4x8", [33, 10, 1, 12], [4, 8], False),
    ("1-pixel-high box 10x1 -> 6x3", [28, 18, 10, 1], [6, 3], False),
    ("whole image (touches all edges) 67x45 -> 16x11", [0, 0, 67, 45], [16, 11], False),
    ("bottom-right corner box 17x15 -> 12x12", [50, 30, 17, 15], [12, 12], False),
    ("top-left corner box 6x9 -> 11x13", [0, 0, 6, 9], [11, 13], False),
    ("non-square aspect 20x6 -> 6x14", [40, 2, 20, 6], [6, 14], False),
    ("mixed: upscale x, downscale y 7x30 -> 15x9", [55, 8, 7, 30], [15, 9], False),
    # 2x2 -> 64x64 would be 12,288 values (~90 KB alone); 64x32 keeps the file near 100 KB
    # while still sampling one axis at the model's 64 px (heavy edge clamping on both axes)
    ("small box to model width 2x2 -> 64x32", [20, 13, 2, 2], [64, 32], False),
]


def r3(a):
    return [float(v) for v in np.round(a.astype(np.float64), 3).ravel()]


# INTER_AREA: integer and non-integer downscales (OpenCV's area tables), exact identity, and the
# upscale fallback (INTER_AREA's 2-tap linear filter) on one or both axes.
AREA_CASES = [
    ("area exact 2x downscale 32x16 -> 16x8", [30, 22, 32, 16], [16, 8]),
    ("area exact 3x4 downscale 60x40 -> 20x10", [2, 3, 60, 40], [20, 10]),
    ("area non-integer downscale 33x17 -> 7x5", [20, 10, 33, 17], [7, 5]),
    ("area non-integer downscale 67x45 -> 16x11 (whole image)", [0, 0, 67, 45], [16, 11]),
    ("area slight downscale 17x15 -> 12x12", [50, 30, 17, 15], [12, 12]),
    ("area downscale to 1x1 13x9 -> 1x1", [5, 6, 13, 9], [1, 1]),
    ("area same size 9x6 -> 9x6", [12, 30, 9, 6], [9, 6]),
    ("area mixed: upscale x, downscale y 7x30 -> 15x9", [55, 8, 7, 30], [15, 9]),
    ("area mixed: downscale x, upscale y 20x6 -> 6x14", [40, 2, 20, 6], [6, 14]),
    ("area integer upscale 5x7 -> 10x14", [3, 4, 5, 7], [10, 14]),
    ("area non-integer upscale 5x7 -> 16x16", [3, 4, 5, 7], [16, 16]),
    ("area 1-pixel box 1x1 -> 4x3", [33, 17, 1, 1], [4, 3]),
    ("area 1-pixel-wide box 1x12 -> 4x5", [33, 10, 1, 12], [4, 5]),
]


def write_doc(out, doc, cases):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # one case per line: small diffs when regenerated
    with open(out, "w") as f:
        f.write("{\n")
        for k in ("description", "opencv_version", "numpy_version", "seed", "interpolation",
                  "image"):
            f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(doc[k], separators=(",", ":"))))
        f.write('  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n  ]\n}\n")
    json.load(open(out))  # sanity: valid JSON
    n_vals = sum(len(c["values"]) for c in cases)
    print("wrote %s: %d cases, %d values, %d bytes (OpenCV %s)"
          % (out, len(cases), n_vals, os.path.getsize(out), cv2.__version__))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "golden",
                                                             "resize.json")
    img = make_image()
    cases = []
    for name, (x, y, w, h), (ow, oh), with_u8 in CASES:
        assert 0 <= x and 0 <= y and x + w <= WIDTH and y + h <= HEIGHT, name
        crop = np.ascontiguousarray(img[y:y + h, x:x + w])
        res = cv2.resize(crop.astype(np.float32), (ow, oh), interpolation=cv2.INTER_LINEAR)
        res = res.reshape(oh, ow, 3)
        case = {"name": name, "box": [x, y, w, h], "out": [ow, oh], "values": r3(res)}
        if with_u8:
            res8 = cv2.resize(crop, (ow, oh), interpolation=cv2.INTER_LINEAR).reshape(oh, ow, 3)
            case["values_u8"] = [int(v) for v in res8.ravel()]
        cases.append(case)
    doc = {
        "description": "Golden values for crop + bilinear resize: values = cv2.resize("
                       "img[y:y+h, x:x+w].astype(float32), (ow, oh), INTER_LINEAR) rounded to 3 "
                       "decimals, flat row-major HWC; values_u8 = cv2.resize on the uint8 crop. "
                       "Made by scripts/make_golden.py.",
        "opencv_version": cv2.__version__,
        "numpy_version": np.__version__,
        "seed": SEED,
        "interpolation": "INTER_LINEAR",
        "image": {"width": WIDTH, "height": HEIGHT, "channels": 3, "layout": "HWC RGB uint8",
                  "data": [int(v) for v in img.ravel()]},
        "cases": cases,
    }
    write_doc(out, doc, cases)

    area = []
    for name, (x, y, w, h), (ow, oh) in AREA_CASES:
        assert 0 <= x and 0 <= y and x + w <= WIDTH and y + h <= HEIGHT, name
        crop = np.ascontiguousarray(img[y:y + h, x:x + w])
        res = cv2.resize(crop.astype(np.float32), (ow, oh), interpolation=cv2.INTER_AREA)
        area.append({"name": name, "box": [x, y, w, h], "out": [ow, oh],
                     "values": r3(res.reshape(oh, ow, 3))})
    adoc = dict(doc)
    adoc["description"] = ("Golden values for crop + area resize: values = cv2.resize("
                           "img[y:y+h, x:x+w].astype(float32), (ow, oh), INTER_AREA) rounded to "
                           "3 decimals, flat row-major HWC. Made by scripts/make_golden.py.")
    adoc["interpolation"] = "INTER_AREA"
    write_doc(os.path.join(os.path.dirname(os.path.abspath(out)), "resize_area.json"), adoc, area)


if __name__ == "__main__":
    main()
