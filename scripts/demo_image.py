"""The demo's image helpers, imported by scripts/make_demo.py (and through it by
scripts/docs_images.sh): PNG writing with the standard library alone, and the OpenCV-compatible
bilinear resize (INTER_LINEAR: half-pixel centres, sampling clamped to the source) of the demo
classifier's preprocessing contract."""

import struct
import zlib

import numpy as np


# ----------------------------------------------------------------------------------------------
# PNG writing (stdlib only)
# ----------------------------------------------------------------------------------------------

def _png_chunk(tag, data):
    return (struct.pack(">I", len(data)) + tag + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))


def write_png(path, rgb, level=1):
    """Write an HxWx3 uint8 array as an 8-bit RGB PNG (filter 'Sub' on every row)."""
    h, w, _ = rgb.shape
    flat = rgb.reshape(h, w * 3)
    rows = np.empty((h, w * 3 + 1), dtype=np.uint8)
    rows[:, 0] = 1  # filter type Sub: byte minus the same channel of the pixel to its left
    rows[:, 1:4] = flat[:, :3]
    np.subtract(flat[:, 3:], flat[:, :-3], out=rows[:, 4:], casting="unsafe")
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
            + _png_chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


# ----------------------------------------------------------------------------------------------
# OpenCV-compatible bilinear resize (INTER_LINEAR), numpy only
# ----------------------------------------------------------------------------------------------

def _linear_coeffs(src, dst):
    """Source indices and weights for one axis, like OpenCV's INTER_LINEAR: half-pixel centres,
    coordinates clamped to [0, src-1] (sampling never leaves the source)."""
    scale = src / dst
    f = (np.arange(dst, dtype=np.float64) + 0.5) * scale - 0.5
    f = f.astype(np.float32).astype(np.float64)  # OpenCV computes the coordinate in float
    i0 = np.floor(f).astype(np.int64)
    frac = f - i0
    low = i0 < 0
    i0[low] = 0
    frac[low] = 0.0
    high = i0 >= src - 1
    i0[high] = src - 1
    frac[high] = 0.0
    i1 = np.minimum(i0 + 1, src - 1)
    return i0, i1, frac


def resize_linear(img, out_w, out_h):
    """cv2.resize(img.astype(float32), (out_w, out_h), interpolation=INTER_LINEAR), HxWxC."""
    h, w = img.shape[:2]
    src = img.astype(np.float64)
    x0, x1, fx = _linear_coeffs(w, out_w)
    y0, y1, fy = _linear_coeffs(h, out_h)
    fx = fx[None, :, None]
    rows = src[:, x0] * (1.0 - fx) + src[:, x1] * fx          # horizontal pass: h x out_w
    fy = fy[:, None, None]
    return rows[y0] * (1.0 - fy) + rows[y1] * fy               # vertical pass: out_h x out_w
