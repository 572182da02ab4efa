#!/usr/bin/env python3
"""The application's own frames from NumPy: it draws a small aerial scene itself (coloured
vehicles and people moving over a noisy road), knows every object's box and class, and pushes
each frame with its boxes into a pipeline whose classifier labels them by colour.

    this program: NumPy frames + boxes --push()--> app name=cam framerate=30
      ! batch ! preprocess ! classify (a colour classifier, scripts/make_demo.py's) ! appsink
      --> Pipeline.results()

    python3 examples/python/app_frames_numpy.py [--frames 60] [--format rgb|bgr|nv12]

It needs numpy and onnx (to write the classifier, scripts/requirements.txt) and ONNX Runtime.
Frames are pushed as RGB, BGR or NV12 arrays (the NV12 ones converted here with BT.601 limited
range, which the pipeline's colorimetry for frames under 720 rows undoes); the program prints
the report and the share of objects labelled as drawn.
"""

import argparse
import pathlib
import sys
import tempfile

import numpy as np

import octopipe

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import make_demo  # noqa: E402  (the demo's colour families and classifier)

COLOURS = [make_demo.PERSON_BASE, make_demo.TWO_WHEELER_BASE, make_demo.CAR_BASE,
           make_demo.LARGE_BASE]
SIZES = [(10, 14), (14, 22), (26, 44), (34, 70)]  # (w, h) of each class, pixels


def classifier(path):
    """make_demo's nearest-colour classifier with its classes' colours as prototypes."""
    import onnx

    asphalt = np.array([86, 87, 92], np.float64)
    protos = [((0.75 * np.array(c) + 0.25 * asphalt) / 255 - make_demo.MEAN) / make_demo.STD
              for c in COLOURS]
    onnx.save(make_demo.build_model(protos), path)


def scene(frames, w=640, h=360, seed=1):
    """Yield (RGB frame, boxes, classes) per frame."""
    rng = np.random.default_rng(seed)
    road = np.full((h, w, 3), (86, 87, 92), np.int16)
    objs = []
    for _ in range(24):
        cls = int(rng.integers(0, 4))
        ow, oh = SIZES[cls]
        objs.append((cls, rng.uniform(0, w - ow), rng.uniform(0, h - oh),
                     rng.uniform(-3, 3), rng.uniform(-2, 2), ow, oh))
    for t in range(frames):
        img = road + rng.integers(-6, 7, (h, w, 3))
        boxes, classes = [], []
        for cls, x, y, vx, vy, ow, oh in objs:
            x, y = (x + vx * t) % (w - ow), (y + vy * t) % (h - oh)
            xi, yi = int(x), int(y)
            img[yi:yi + oh, xi:xi + ow] = COLOURS[cls]
            boxes.append([xi, yi, ow, oh])
            classes.append(cls)
        yield img.clip(0, 255).astype(np.uint8), boxes, classes


def to_nv12(rgb):
    """RGB to NV12, BT.601 limited range."""
    f = rgb.astype(np.float64)
    y = 16 + 0.257 * f[..., 0] + 0.504 * f[..., 1] + 0.098 * f[..., 2]
    u = 128 - 0.148 * f[..., 0] - 0.291 * f[..., 1] + 0.439 * f[..., 2]
    v = 128 + 0.439 * f[..., 0] - 0.368 * f[..., 1] - 0.071 * f[..., 2]
    h, w = y.shape
    uv = np.stack([u, v], -1).reshape(h // 2, 2, w // 2, 2, 2).mean(axis=(1, 3))
    return np.concatenate([y, uv.reshape(h // 2, w)]).round().clip(0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--format", choices=["rgb", "bgr", "nv12"], default="rgb")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = pathlib.Path(tmp) / "colours.onnx"
        classifier(model)
        description = ("app name=cam framerate=30 ! batch ! preprocess"
                       " ! classify model=${model} labels=person,two-wheeler,car,large-vehicle ! appsink")
        drawn = {}
        with octopipe.Pipeline(description, vars={"model": model}) as p:
            results = p.results()
            for t, (rgb, boxes, classes) in enumerate(scene(args.frames)):
                image = {"rgb": rgb, "bgr": rgb[..., ::-1].copy(), "nv12": to_nv12(rgb)}[args.format]
                fmt = args.format if args.format != "rgb" else None
                p.push("cam", image, boxes, pts_ms=t * 1000 / 30, format=fmt)
                drawn[t] = classes
            p.close()
            right = total = 0
            for frame in results:
                for o, cls in zip(frame.objects, drawn[frame.index]):
                    right += o.get("class_id") == cls
                    total += 1
    print(f"{p.report['processed']} frames pushed as {args.format}, {total} objects, "
          f"{right} ({100 * right / max(total, 1):.1f}%) labelled as drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
