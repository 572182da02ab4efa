#!/usr/bin/env python3
"""Golden values for octopipe's JPEG fidelity tests (tests/sources/jpeg_fidelity.rs), with OpenCV's
libjpeg-turbo decoding and the shared classifier's reference preprocessing.

Reads the VisDrone images of the shared data folder (never copied into the repository) and writes
two small JSON files under tests/data/golden/:

  jpeg_rgb.json        RGB that cv2.imread (libjpeg-turbo: fancy upsampling, fixed-point YCbCr to
                       RGB) gives at sampled pixels of every image of `visdrone/clip-9999999/images`
                       and `visdrone/val-frames/images`: all pixels of the 3x3 blocks at the four
                       corners, points along the four edges (first/last two rows and columns, even
                       and odd positions), and pseudo-random interior points.
                       Per image: `x`, `y` (lists) and `rgb`, the bytes R, G, B of each point as
                       one hex string (6 characters a point).

  jpeg_reference.json  The reference labels of every classifiable object, made as the classifier's
                       contract in shared/data/README.md says: cv2.imread, RGB, the annotation box
                       clipped to the frame (boxes under 2 px, categories 0 and 11 and score-0
                       rows skipped), cv2.resize(crop, (64, 64), INTER_LINEAR) on the uint8 crop,
                       (v / 255 - mean) / std, NCHW, ONNX Runtime. Per image: `objects`, each
                       [x, y, w, h, category, class] (box clipped), in annotation order; and
                       `samples`: for every 8th object, [object index, ox, oy, r, g, b] at 8
                       pseudo-random output pixels of its 64x64 uint8 resized crop.

Both are deterministic (numpy seed below). Made with OpenCV 5.0.0 (opencv-python-headless, its own
libjpeg-turbo 3.1.2), onnxruntime 1.31.1, numpy 2.4.

Usage:  python3 scripts/make_jpeg_golden.py [DATA_DIR]
  DATA_DIR defaults to $OCTOPIPE_DATA, else ../shared/data beside the repository.
Needs numpy, onnxruntime (scripts/requirements.txt) and opencv-python-headless (an extra that only
this script needs: the tests read the committed JSON).
"""

import glob
import json
import os
import sys

import cv2
import numpy as np
import onnxruntime as ort

SEED = 20250613
# Pseudo-random interior points per image: the clip's 34 frames are one scene, the val-frames
# are nine different scenes and sizes.
INTERIOR = {"clip-9999999": 96, "val-frames": 320}
EDGE_POINTS = 12  # per edge line (each of the first/last two rows and columns)
SAMPLE_EVERY = 8  # objects with crop samples: every 8th
SAMPLES_PER_CROP = 8
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SIZE = 64
CLASS_OF = {1: 0, 2: 0, 3: 1, 7: 1, 8: 1, 10: 1, 4: 2, 5: 3, 6: 3, 9: 3}


def points(w, h, interior, rng):
    """Corner blocks, edge lines and interior points of a w x h image, without repeats."""
    pts = []
    for xs in (range(0, 3), range(w - 3, w)):
        for ys in (range(0, 3), range(h - 3, h)):
            pts += [(x, y) for y in ys for x in xs]
    for y in (0, 1, h - 2, h - 1):
        xs = rng.integers(3, w - 3, EDGE_POINTS)
        xs[: EDGE_POINTS // 2] |= 1  # odd and even columns both
        xs[EDGE_POINTS // 2:] &= ~1
        pts += [(int(x), y) for x in xs]
    for x in (0, 1, w - 2, w - 1):
        ys = rng.integers(3, h - 3, EDGE_POINTS)
        ys[: EDGE_POINTS // 2] |= 1
        ys[EDGE_POINTS // 2:] &= ~1
        pts += [(x, int(y)) for y in ys]
    pts += list(zip(rng.integers(0, w, interior).tolist(), rng.integers(0, h, interior).tolist()))
    seen, out = set(), []
    for p in pts:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def objects(path, w, h):
    """Classifiable objects of a DET annotation file: (clipped box, category), in file order."""
    out = []
    for line in open(path):
        v = [int(t) for t in line.strip().split(",")[:6] if t.strip() != ""]
        if len(v) < 6:
            continue
        x, y, bw, bh, score, cat = v
        if cat == 0 or score == 0 or cat not in CLASS_OF:
            continue
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + bw, w), min(y + bh, h)
        if x1 - x0 < 2 or y1 - y0 < 2:
            continue
        out.append(((x0, y0, x1 - x0, y1 - y0), cat))
    return out


def write(path, doc, per_image_key):
    """One image a line: small diffs when regenerated."""
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in doc.items():
            if k != per_image_key:
                f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(v)))
        f.write('  "%s": {\n' % per_image_key)
        items = doc[per_image_key].items()
        f.write(",\n".join("    %s: %s" % (json.dumps(k), json.dumps(v, separators=(",", ":")))
                           for k, v in items))
        f.write("\n  }\n}\n")
    json.load(open(path))
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = (sys.argv[1] if len(sys.argv) > 1
            else os.environ.get("OCTOPIPE_DATA", os.path.join(root, "..", "shared", "data")))
    model = ort.InferenceSession(os.path.join(data, "models", "visdrone-crops-64.onnx"),
                                 providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(SEED)
    rgb_images, ref_images = {}, {}
    counts = {}
    for folder in ("clip-9999999", "val-frames"):
        base = os.path.join(data, "visdrone", folder)
        for path in sorted(glob.glob(os.path.join(base, "images", "*.jpg"))):
            name = os.path.basename(path)
            key = "%s/%s" % (folder, name)
            img = cv2.imread(path, cv2.IMREAD_COLOR)[:, :, ::-1]  # RGB
            h, w = img.shape[:2]
            pts = points(w, h, INTERIOR[folder], rng)
            rgb_images[key] = {
                "width": w, "height": h,
                "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                "rgb": "".join("%02x%02x%02x" % tuple(int(c) for c in img[y, x]) for x, y in pts),
            }
            objs = objects(os.path.join(base, "annotations", name[:-4] + ".txt"), w, h)
            crops = [cv2.resize(np.ascontiguousarray(img[y:y + bh, x:x + bw]), (SIZE, SIZE),
                                interpolation=cv2.INTER_LINEAR) for (x, y, bw, bh), _ in objs]
            batch = ((np.stack(crops).astype(np.float32) / 255.0 - MEAN) / STD).transpose(0, 3, 1, 2)
            logits = model.run(None, {"input": np.ascontiguousarray(batch)})[0]
            labels = logits.argmax(1)
            samples = []
            for i in range(0, len(objs), SAMPLE_EVERY):
                for ox, oy in zip(rng.integers(0, SIZE, SAMPLES_PER_CROP).tolist(),
                                  rng.integers(0, SIZE, SAMPLES_PER_CROP).tolist()):
                    samples.append([i, ox, oy] + [int(c) for c in crops[i][oy, ox]])
            ref_images[key] = {
                "objects": [[*b, c, int(l)] for (b, c), l in zip(objs, labels)],
                "samples": samples,
            }
            right = sum(CLASS_OF[c] == int(l) for (_, c), l in zip(objs, labels))
            n, r = counts.get(folder, (0, 0))
            counts[folder] = (n + len(objs), r + right)
    for folder, (n, r) in counts.items():
        print("%s: %d objects, reference labels as annotated on %d (%.2f%%)"
              % (folder, n, r, 100.0 * r / n))
    versions = {"opencv": cv2.__version__, "onnxruntime": ort.__version__,
                "numpy": np.__version__, "seed": SEED}
    out = os.path.join(root, "tests", "data", "golden")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "jpeg_rgb.json"), {
        "description": "RGB bytes cv2.imread gives at sampled pixels of the shared VisDrone JPEGs "
                       "(libjpeg-turbo's own decoding). Made by scripts/make_jpeg_golden.py.",
        **versions, "images": rgb_images}, "images")
    write(os.path.join(out, "jpeg_reference.json"), {
        "description": "Reference labels (cv2.imread RGB, clipped box, cv2.resize INTER_LINEAR to "
                       "64x64 on uint8, ImageNet normalization, NCHW, ONNX Runtime) of every "
                       "classifiable object: [x, y, w, h, category, class]; samples: [object, ox, "
                       "oy, r, g, b] of the uint8 resized crop. Made by scripts/make_jpeg_golden.py.",
        **versions,
        "classes": ["person", "two-wheeler", "car", "large-vehicle"],
        "images": ref_images}, "images")


if __name__ == "__main__":
    main()
