#!/usr/bin/env python3
"""Generate octopipe's self-contained demo input: a synthetic drone-like video.

Usage:
    python3 scripts/make_demo.py OUT_DIR [--frames 90] [--width 1280] [--height 720]
                                         [--seed 7] [--verify]

Writes (deterministically for a given seed and size):
    OUT_DIR/images/frame_00001.png ...      8-bit RGB PNG frames of an aerial scene: roads with
                                            lane marks, grass/soil patches, pixel noise, and
                                            moving people, two-wheelers, cars, large vehicles
    OUT_DIR/annotations/frame_00001.txt ... VisDrone-DET ground truth, one object per line:
                                            bbox_left,bbox_top,bbox_width,bbox_height,score,
                                            object_category,truncation,occlusion
                                            (score 0 / category 0 marks an ignored region)
    OUT_DIR/model.onnx                      a tiny nearest-prototype colour classifier with the
                                            same interface and preprocessing contract as the
                                            shared VisDrone model (input `input` float32
                                            [batch,3,64,64], output `logits` float32 [batch,4])
    OUT_DIR/labels.txt                      class names, one a line, in logit order

Classes (logit order) and the VisDrone categories used for them:
    0 person         1 (pedestrian)
    1 two-wheeler    10 (motor), 3 (bicycle)
    2 car            4 (car)
    3 large-vehicle  6 (truck), 9 (bus)

Preprocessing contract (same as the shared model): integer box clipped to the frame (boxes under
2 px wide or high are skipped); crop the RGB frame; resize the crop to 64x64 like OpenCV's
cv2.resize(..., INTER_LINEAR) (half-pixel centres, sampling clamped to the crop's own edge);
value = (v/255 - mean)/std with ImageNet mean/std, RGB channel order, NCHW layout.

Dependencies: numpy and onnx (plus onnxruntime for --verify). PNGs are written with zlib+struct.
"""

import argparse
import os
import sys
import time

import numpy as np

from demo_image import resize_linear, write_png  # noqa: F401 (docs_images.sh imports write_png from here)

CLASSES = ["person", "two-wheeler", "car", "large-vehicle"]
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float64)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float64)
INPUT_SIZE = 64

LANE_W = 68  # px; a large vehicle is at most 60 px wide
SIDEWALK_W = 14
SHOULDER = 6

# Colour families (RGB). The mean colour of a tight crop identifies the class.
PERSON_BASE = (205, 45, 60)       # red
TWO_WHEELER_BASE = (235, 190, 35)  # yellow / amber
CAR_BASE = (45, 85, 205)          # blue
LARGE_BASE = (232, 232, 236)      # white / light grey


def preprocess(frame, box):
    """Contract: crop, resize to 64x64 (uint8 result, like cv2 on a uint8 crop), normalize, CHW."""
    x, y, w, h = box
    crop = frame[y:y + h, x:x + w]
    r = resize_linear(crop, INPUT_SIZE, INPUT_SIZE)
    r = np.clip(np.floor(r + 0.5), 0, 255)                      # uint8 output of cv2.resize
    norm = (r / 255.0 - MEAN) / STD
    return norm.transpose(2, 0, 1).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Scene
# ----------------------------------------------------------------------------------------------

def smooth_field(rng, h, w, cell):
    """Low-frequency noise in [0, 1]: a random grid upsampled bilinearly."""
    gh, gw = h // cell + 3, w // cell + 3
    grid = rng.random((gh, gw, 1))
    big = resize_linear(grid, (gw - 1) * cell, (gh - 1) * cell)[:, :, 0]
    oy, ox = cell // 2, cell // 2
    return big[oy:oy + h, ox:ox + w]


def road_layout(width, height):
    """Centre positions of horizontal and vertical roads (two lanes each)."""
    n_h = max(1, height // 360)
    n_v = max(1, width // 500)
    hy = [int(round(height * (i + 0.5) / n_h + (0.06 * height if i % 2 else -0.06 * height)))
          for i in range(n_h)]
    vx = [int(round(width * (i + 0.5) / n_v + (0.05 * width if i % 2 else -0.07 * width)))
          for i in range(n_v)]
    return hy, vx


def make_background(rng, width, height, hy, vx):
    h, w = height, width
    grass = np.array([78, 112, 52], dtype=np.float64)
    grass2 = np.array([96, 128, 60], dtype=np.float64)
    soil = np.array([128, 102, 70], dtype=np.float64)
    f1 = smooth_field(rng, h, w, 96)
    f2 = smooth_field(rng, h, w, 24)
    t_soil = np.clip((f1 - 0.58) * 6.0, 0.0, 1.0)[:, :, None]
    t_g2 = f2[:, :, None]
    bg = grass * (1 - t_g2) + grass2 * t_g2
    bg = bg * (1 - t_soil) + soil * t_soil
    bg *= (0.9 + 0.2 * smooth_field(rng, h, w, 8))[:, :, None]

    half = LANE_W + SHOULDER              # road half width (one lane + shoulder per side)
    road_mask = np.zeros((h, w), dtype=bool)
    walk_mask = np.zeros((h, w), dtype=bool)
    for y in hy:
        walk_mask[max(0, y - half - SIDEWALK_W):max(0, y + half + SIDEWALK_W), :] = True
        road_mask[max(0, y - half):max(0, y + half), :] = True
    for x in vx:
        walk_mask[:, max(0, x - half - SIDEWALK_W):max(0, x + half + SIDEWALK_W)] = True
        road_mask[:, max(0, x - half):max(0, x + half)] = True
    walk = np.array([168, 162, 150], dtype=np.float64)
    asphalt = np.array([86, 87, 92], dtype=np.float64)
    bg[walk_mask & ~road_mask] = walk
    bg[road_mask] = asphalt
    bg[road_mask] *= (0.94 + 0.12 * smooth_field(rng, h, w, 4))[road_mask][:, None]

    # Lane marks: solid white edge lines, dashed yellow centre line; none inside intersections.
    white = np.array([225, 225, 220], dtype=np.float64)
    yellow = np.array([220, 190, 60], dtype=np.float64)
    inter_x = np.zeros(w, dtype=bool)
    for x in vx:
        inter_x[max(0, x - half):max(0, x + half)] = True
    inter_y = np.zeros(h, dtype=bool)
    for y in hy:
        inter_y[max(0, y - half):max(0, y + half)] = True
    xs = np.arange(w)
    ys = np.arange(h)
    dash_x = ((xs // 24) % 2 == 0) & ~inter_x
    dash_y = ((ys // 24) % 2 == 0) & ~inter_y
    for y in hy:
        for yy in (y - half + 2, y - half + 3, y + half - 4, y + half - 3):
            if 0 <= yy < h:
                bg[yy, ~inter_x] = white
        for yy in (y - 1, y):
            if 0 <= yy < h:
                bg[yy, dash_x] = yellow
    for x in vx:
        for xx in (x - half + 2, x - half + 3, x + half - 4, x + half - 3):
            if 0 <= xx < w:
                bg[~inter_y, xx] = white
        for xx in (x - 1, x):
            if 0 <= xx < w:
                bg[dash_y, xx] = yellow

    bg += rng.normal(0.0, 3.0, size=bg.shape)
    return np.clip(np.round(bg), 0, 255).astype(np.uint8), road_mask | walk_mask


def free_intervals(occupied):
    """Maximal runs of False in a 1-D bool array, as (start, end) pairs."""
    runs, start = [], None
    for i, v in enumerate(list(occupied) + [True]):
        if not v and start is None:
            start = i
        elif v and start is not None:
            runs.append((start, i))
            start = None
    return runs


def ignored_region(width, height, hy, vx):
    """A fixed box away from the roads (a 'parking lot' drawn into the background)."""
    half = LANE_W + SHOULDER + SIDEWALK_W
    occ_x = np.zeros(width, dtype=bool)
    for x in vx:
        occ_x[max(0, x - half):max(0, x + half)] = True
    occ_y = np.zeros(height, dtype=bool)
    for y in hy:
        occ_y[max(0, y - half):max(0, y + half)] = True
    fx = max(free_intervals(occ_x), key=lambda r: r[1] - r[0], default=(0, width))
    fy = max(free_intervals(occ_y), key=lambda r: r[1] - r[0], default=(0, height))
    rw = max(8, min(220, int((fx[1] - fx[0]) * 0.6)))
    rh = max(8, min(110, int((fy[1] - fy[0]) * 0.6)))
    x = (fx[0] + fx[1] - rw) // 2
    y = (fy[0] + fy[1] - rh) // 2
    return max(0, x), max(0, y), min(rw, width), min(rh, height)


def draw_parking_lot(rng, bg, box):
    x, y, w, h = box
    lot = bg[y:y + h, x:x + w].astype(np.float64)
    lot[:] = (128, 126, 122)
    # rows of dull, muddy parked blobs: not in any class colour family
    for _ in range(max(1, (w * h) // 900)):
        bw, bh = rng.integers(10, 22), rng.integers(8, 16)
        px, py = rng.integers(0, max(1, w - bw)), rng.integers(0, max(1, h - bh))
        lot[py:py + bh, px:px + bw] = rng.integers(60, 110) * np.array([1.0, 0.97, 0.9])
    lot += rng.normal(0.0, 3.0, size=lot.shape)
    bg[y:y + h, x:x + w] = np.clip(np.round(lot), 0, 255).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# Object sprites (drawn pointing "up"; rotated for other headings)
# ----------------------------------------------------------------------------------------------

def _vary(rng, base, spread):
    c = np.array(base, dtype=np.float64) + rng.uniform(-spread, spread, size=3)
    return np.clip(c, 0, 255)


def _outline(mask):
    inner = mask.copy()
    inner[1:, :] &= mask[:-1, :]
    inner[:-1, :] &= mask[1:, :]
    inner[:, 1:] &= mask[:, :-1]
    inner[:, :-1] &= mask[:, 1:]
    inner[0, :] = inner[-1, :] = False
    inner[:, 0] = inner[:, -1] = False
    return mask & ~inner


def _rounded_rect(h, w, r):
    yy, xx = np.mgrid[0:h, 0:w]
    dy = np.maximum(0, np.maximum(r - yy, yy - (h - 1 - r)))
    dx = np.maximum(0, np.maximum(r - xx, xx - (w - 1 - r)))
    return dx * dx + dy * dy <= r * r + 0.5


def _ellipse(h, w):
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = (h - 1) / 2.0, (w - 1) / 2.0
    return ((yy - cy) / (h / 2.0)) ** 2 + ((xx - cx) / (w / 2.0)) ** 2 <= 1.0


def _cross_shade(h, w, lo=0.8, amp=0.3):
    u = (np.arange(w) + 0.5) / w
    return np.broadcast_to(lo + amp * np.sin(np.pi * u), (h, w))


def sprite_person(rng):
    w = int(rng.integers(6, 13))
    h = int(rng.integers(max(12, w + 4), 23))
    col = _vary(rng, PERSON_BASE, 25)
    r = max(2.0, w * 0.36)                 # head radius; the head overlaps the shoulders
    yy, xx = np.mgrid[0:h, 0:w]
    head = (yy - (r - 0.5)) ** 2 + (xx - (w - 1) / 2.0) ** 2 <= r * r
    body = np.zeros((h, w), dtype=bool)
    top = min(int(round(h * 0.28)), int(1.6 * r))
    body[top:] = _ellipse(h - top, w)
    mask = body | head
    rgb = np.empty((h, w, 3))
    rgb[:] = col * _cross_shade(h, w, 0.78, 0.35)[:, :, None]
    rgb[head & ~body] = col * 0.8 + np.array([40, 25, 10])
    rgb[_outline(mask)] = col * 0.6
    return rgb, mask


def sprite_two_wheeler(rng):
    w = int(rng.integers(10, 17))
    h = int(rng.integers(max(18, w + 6), 29))
    col = _vary(rng, TWO_WHEELER_BASE, 20)
    mask = _ellipse(h, w)
    rgb = np.empty((h, w, 3))
    rgb[:] = col * _cross_shade(h, w, 0.8, 0.3)[:, :, None]
    yy, xx = np.mgrid[0:h, 0:w]
    r = max(2.0, w * 0.3)
    helmet = (yy - h * 0.45) ** 2 + (xx - (w - 1) / 2.0) ** 2 <= r * r
    rgb[helmet] = col * 0.7
    rgb[_outline(mask)] = col * 0.6
    return rgb, mask


def sprite_car(rng):
    w = int(rng.integers(22, 35))
    h = int(rng.integers(max(40, w + 12), 61))
    col = _vary(rng, CAR_BASE, 25)
    mask = _rounded_rect(h, w, 4)
    rgb = np.empty((h, w, 3))
    rgb[:] = col * _cross_shade(h, w, 0.78, 0.32)[:, :, None]
    a, b = int(h * 0.22), int(h * 0.36)       # windshield
    rgb[a:b, 3:w - 3] = col * 0.45
    rgb[b:int(h * 0.74), 4:w - 4] *= 1.12      # roof
    c, d = int(h * 0.74), int(h * 0.84)       # rear window
    rgb[c:d, 3:w - 3] = col * 0.5
    rgb[_outline(mask)] = col * 0.55
    return np.clip(rgb, 0, 255), mask


def sprite_large(rng, bus):
    w = int(rng.integers(40, 61))
    h = int(rng.integers(90, 141))
    col = _vary(rng, LARGE_BASE, 14)
    mask = _rounded_rect(h, w, 3)
    rgb = np.empty((h, w, 3))
    rgb[:] = col * _cross_shade(h, w, 0.86, 0.16)[:, :, None]
    if bus:
        a = int(h * 0.35)
        rgb[a:a + int(h * 0.18), w // 4:w - w // 4] = col * 0.78   # roof AC unit
        rgb[2:5, 3:w - 3] = col * 0.7                                # front window edge
    else:
        cab = int(h * 0.2)
        rgb[:cab] = col * 0.9 * _cross_shade(cab, w, 0.86, 0.16)[:, :, None]
        rgb[int(cab * 0.35):int(cab * 0.6), 3:w - 3] = col * 0.62   # cab windshield
        rgb[cab:cab + 2] = col * 0.66                                 # cab / box gap
        for r in range(cab + 14, h - 6, 14):
            rgb[r, 3:w - 3] = col * 0.9                                 # roof ribs
    rgb[_outline(mask)] = col * 0.66
    return np.clip(rgb, 0, 255), mask


def orient(rgb, mask, heading):
    """Sprites are drawn pointing up; heading in {'up','down','left','right'}."""
    if heading == "down":
        rgb, mask = rgb[::-1, ::-1], mask[::-1, ::-1]
    elif heading == "left":
        rgb, mask = np.rot90(rgb, 1), np.rot90(mask, 1)
    elif heading == "right":
        rgb, mask = np.rot90(rgb, -1), np.rot90(mask, -1)
    # trim to the mask's bounding box so that annotation boxes are tight
    rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
    sl = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    rgb = np.clip(np.round(rgb[sl]), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(rgb), np.ascontiguousarray(mask[sl])


class Obj:
    __slots__ = ("cls", "category", "rgb", "mask", "x0", "y0", "vx", "vy")

    def __init__(self, cls, category, rgb, mask, x0, y0, vx, vy):
        self.cls, self.category = cls, category
        self.rgb, self.mask = rgb, mask
        self.x0, self.y0, self.vx, self.vy = x0, y0, vx, vy

    def pos(self, t):
        return int(round(self.x0 + self.vx * t)), int(round(self.y0 + self.vy * t))


def make_vehicle(rng):
    u = rng.random()
    if u < 0.55:
        rgb, mask = sprite_car(rng)
        return 2, 4, rgb, mask
    if u < 0.78:
        rgb, mask = sprite_two_wheeler(rng)
        return 1, (10 if rng.random() < 0.7 else 3), rgb, mask
    bus = rng.random() < 0.4
    rgb, mask = sprite_large(rng, bus)
    return 3, (9 if bus else 6), rgb, mask


def make_objects(rng, width, height, frames, hy, vx):
    objs = []
    lanes = []  # (axis, centre, direction); axis 'h': moves along x
    for y in hy:
        lanes.append(("h", y - LANE_W // 2 - 1, -1))   # upper lane drives left
        lanes.append(("h", y + LANE_W // 2 + 1, +1))
    for x in vx:
        lanes.append(("v", x - LANE_W // 2 - 1, +1))   # left lane drives down
        lanes.append(("v", x + LANE_W // 2 + 1, -1))
    for axis, centre, direction in lanes:
        speed = rng.uniform(2.0, 5.5)
        span = width if axis == "h" else height
        travel = speed * frames
        # Lay vehicles nose to tail (with gaps) along the lane in "lane coordinates" s, where s
        # increases in the driving direction; at t the vehicle's rear is at s + travel*t/frames.
        s = -travel - 150.0 - rng.uniform(0, 300)
        while s < span + 150:
            cls, cat, rgb, mask = make_vehicle(rng)
            heading = {("h", 1): "right", ("h", -1): "left",
                       ("v", 1): "down", ("v", -1): "up"}[(axis, direction)]
            rgb, mask = orient(rgb, mask, heading)
            length = mask.shape[1] if axis == "h" else mask.shape[0]
            breadth = mask.shape[0] if axis == "h" else mask.shape[1]
            lateral = centre - breadth / 2.0
            if cls == 1:
                lateral += rng.uniform(-(LANE_W - breadth) / 3.0, (LANE_W - breadth) / 3.0)
            else:
                lateral += rng.uniform(-3, 3)
            # convert lane coordinate (rear at s) to the top-left pixel position at t = 0
            along = s if direction > 0 else span - s - length
            v = speed * direction
            if axis == "h":
                objs.append(Obj(cls, cat, rgb, mask, along, lateral, v, 0.0))
            else:
                objs.append(Obj(cls, cat, rgb, mask, lateral, along, 0.0, v))
            s += length + rng.uniform(90, 420)
    # People: slow walkers in any direction, starting anywhere (some outside, walking in).
    n_people = max(4, int(width * height / 90000))
    for _ in range(n_people):
        rgb, mask = sprite_person(rng)
        rgb, mask = orient(rgb, mask, "up")
        ang = rng.uniform(0, 2 * np.pi)
        sp = rng.uniform(0.4, 1.4)
        x0 = rng.uniform(-40, width + 20)
        y0 = rng.uniform(-40, height + 20)
        objs.append(Obj(0, 1, rgb, mask, x0, y0, sp * np.cos(ang), sp * np.sin(ang)))
    # Draw order: large vehicles first, then cars, two-wheelers, people (smaller on top).
    order = {3: 0, 2: 1, 1: 2, 0: 3}
    objs.sort(key=lambda o: order[o.cls])
    return objs


def render(bg, objs, t, noise, noise_off):
    """Returns the RGB frame and annotation rows for the objects (without ignored regions)."""
    h, w = bg.shape[:2]
    frame = bg.copy()
    ids = np.full((h, w), -1, dtype=np.int32)
    placed = []
    for i, o in enumerate(objs):
        x, y = o.pos(t)
        oh, ow = o.mask.shape
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + ow, w), min(y + oh, h)
        if x1 <= x0 or y1 <= y0:
            continue
        m = o.mask[y0 - y:y1 - y, x0 - x:x1 - x]
        region = frame[y0:y1, x0:x1]
        region[m] = o.rgb[y0 - y:y1 - y, x0 - x:x1 - x][m]
        ids[y0:y1, x0:x1][m] = i
        placed.append((i, o, x0, y0, x1, y1, m, (x0, y0, x1, y1) != (x, y, x + ow, y + oh)))
    rows = []
    for i, o, x0, y0, x1, y1, m, truncated in placed:
        total = int(m.sum())
        visible = int((ids[y0:y1, x0:x1][m] == i).sum())
        if visible == 0:
            continue
        hidden = 1.0 - visible / total
        occl = 0 if hidden < 0.01 else (1 if hidden <= 0.5 else 2)
        rows.append((x0, y0, x1 - x0, y1 - y0, 1, o.category, int(truncated), occl, o.cls))
    oy, ox = noise_off
    frame = (frame.astype(np.int16) + noise[oy:oy + h, ox:ox + w]).clip(0, 255).astype(np.uint8)
    return frame, rows


# ----------------------------------------------------------------------------------------------
# Classifier
# ----------------------------------------------------------------------------------------------

def build_model(protos):
    """ReduceMean over H,W -> [N,3]; Gemm -> logits_k = 2 c.p_k - |p_k|^2 (nearest prototype)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    p = np.asarray(protos, dtype=np.float32)
    weight = numpy_helper.from_array((2.0 * p).astype(np.float32), "proto_weight")       # [4,3]
    bias = numpy_helper.from_array((-(p * p).sum(axis=1)).astype(np.float32), "proto_bias")
    axes = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "hw_axes")
    nodes = [
        helper.make_node("ReduceMean", ["input", "hw_axes"], ["channel_mean"], keepdims=0,
                         name="channel_mean"),
        helper.make_node("Gemm", ["channel_mean", "proto_weight", "proto_bias"], ["logits"],
                         transB=1, name="nearest_prototype"),
    ]
    graph = helper.make_graph(
        nodes, "octopipe_demo_colour_classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
        initializer=[weight, bias, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="octopipe-make_demo")
    model.ir_version = 10
    model.doc_string = ("Demo nearest-prototype colour classifier. Classes: "
                        + ", ".join(CLASSES) + ". Input RGB NCHW 64x64, (v/255-mean)/std "
                        "with ImageNet mean/std.")
    onnx.checker.check_model(model, full_check=True)
    return model


def classifiable(row, w, h):
    x, y, bw, bh = row[:4]
    return bw >= 2 and bh >= 2


# ----------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verify", action="store_true",
                    help="run the model with onnxruntime on contract-made crops of every object")
    args = ap.parse_args(argv)
    if args.frames < 1 or args.width < 64 or args.height < 64:
        ap.error("need --frames >= 1 and a frame of at least 64x64")

    t_start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    W, H, F = args.width, args.height, args.frames
    img_dir = os.path.join(args.out_dir, "images")
    ann_dir = os.path.join(args.out_dir, "annotations")
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(ann_dir, exist_ok=True)

    hy, vx = road_layout(W, H)
    bg, _ = make_background(rng, W, H, hy, vx)
    ign = ignored_region(W, H, hy, vx)
    draw_parking_lot(rng, bg, ign)
    objs = make_objects(rng, W, H, F, hy, vx)
    noise = rng.integers(-2, 3, size=(H + 61, W + 61, 3)).astype(np.int16)
    offsets = [(int(rng.integers(0, 62)), int(rng.integers(0, 62))) for _ in range(F)]

    proto_frames = min(F, 12)
    proto_sum = np.zeros((4, 3))
    proto_n = np.zeros(4)
    n_objects = 0
    verify_frames = []  # (frame, rows) kept only with --verify
    for t in range(F):
        frame, rows = render(bg, objs, t, noise, offsets[t])
        name = "frame_%05d" % (t + 1)
        write_png(os.path.join(img_dir, name + ".png"), frame)
        lines = ["%d,%d,%d,%d,%d,%d,%d,%d" % r[:8] for r in rows]
        if t % 3 == 0:  # the ignored region is listed in every third frame
            lines.append("%d,%d,%d,%d,0,0,0,0" % ign)
        with open(os.path.join(ann_dir, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        n_objects += len(rows)
        if t < proto_frames:
            for r in rows:
                if r[6] == 0 and r[7] == 0 and classifiable(r, W, H):
                    x, y, bw, bh = r[:4]
                    proto_sum[r[8]] += preprocess(frame, (x, y, bw, bh)).mean(axis=(1, 2))
                    proto_n[r[8]] += 1
        if args.verify:
            verify_frames.append((frame, rows))

    protos = proto_sum / np.maximum(proto_n, 1)[:, None]
    for c in np.nonzero(proto_n == 0)[0]:
        # no clean object of this class in the first frames (tiny frame): use its colour family
        # mixed with asphalt, roughly what a tight crop of it looks like
        base = {0: PERSON_BASE, 1: TWO_WHEELER_BASE, 2: CAR_BASE, 3: LARGE_BASE}[c]
        mix = 0.75 * np.array(base, dtype=np.float64) + 0.25 * np.array([86, 87, 92])
        protos[c] = (mix / 255.0 - MEAN) / STD
    import onnx
    model = build_model(protos)
    model_path = os.path.join(args.out_dir, "model.onnx")
    onnx.save(model, model_path)
    with open(os.path.join(args.out_dir, "labels.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    gen_s = time.perf_counter() - t_start

    acc_txt = ""
    if args.verify:
        import onnxruntime as ort
        sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        right = total = 0
        per_cls = np.zeros((4, 2), dtype=np.int64)
        for frame, rows in verify_frames:
            rows = [r for r in rows if classifiable(r, W, H)]
            if not rows:
                continue
            batch = np.stack([preprocess(frame, r[:4]) for r in rows])
            logits = sess.run(["logits"], {"input": batch})[0]
            pred = logits.argmax(axis=1)
            truth = np.array([r[8] for r in rows])
            right += int((pred == truth).sum())
            total += len(rows)
            for c in range(4):
                per_cls[c, 0] += int(((pred == truth) & (truth == c)).sum())
                per_cls[c, 1] += int((truth == c).sum())
        acc = right / max(1, total)
        detail = ", ".join("%s %d/%d" % (CLASSES[c], per_cls[c, 0], per_cls[c, 1])
                           for c in range(4))
        print("verify: %d/%d classifiable objects labelled right (%s)" % (right, total, detail))
        acc_txt = ", accuracy %.1f%% (%d/%d)" % (100.0 * acc, right, total)
        if acc < 0.97:
            print("WARNING: accuracy below 97%", file=sys.stderr)
    print("demo: %d frames %dx%d, %d objects (%.1f/frame)%s, generated in %.1f s -> %s"
          % (F, W, H, n_objects, n_objects / F, acc_txt, gen_s, os.path.abspath(args.out_dir)))
    return 0 if (not args.verify or acc >= 0.97) else 1


if __name__ == "__main__":
    sys.exit(main())
