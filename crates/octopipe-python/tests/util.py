"""Helpers of the tests: a small app pipeline and a thread that labels its batches."""

import threading

import numpy as np

import octopipe

# An app source, one frame per batch, 16x16 crops, the application's model: no model file and
# no ONNX Runtime needed.
APP = ("app name=cam ! batch max-frames=1 ! preprocess size=16x16 "
       "! appinfer labels=even,odd ! appsink")


def image(w=64, h=48, seed=0):
    """A reproducible RGB test image."""
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


class Labeller(threading.Thread):
    """Takes every batch of `pipeline` and labels each row by the parity of its box index."""

    def __init__(self, pipeline):
        super().__init__(daemon=True)
        self.batches = pipeline.batches()
        self.seen = []
        self.error = None

    def run(self):
        try:
            for b in self.batches:
                self.seen.append((b.index, len(b), b.tensor.shape))
                b.set_labels([r.box % 2 for r in b.rows])
        except Exception as e:  # noqa: BLE001 - handed to the test
            self.error = e


def labelled_run(frames, description=APP):
    """Push `frames` ((image, boxes, kwargs) each) into `description`, label them, close;
    the Frame results and the pipeline."""
    p = octopipe.Pipeline(description)
    results = p.results()
    labeller = Labeller(p)
    labeller.start()
    for img, boxes, kw in frames:
        p.push("cam", img, boxes, **kw)
    p.close()
    labeller.join(timeout=60)
    assert labeller.error is None, labeller.error
    return list(results), p
