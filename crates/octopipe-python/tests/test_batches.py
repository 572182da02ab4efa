"""Batches for the application's own model: zero-copy tensors (DLPack, NumPy) and labels back."""

import numpy as np
import pytest

import octopipe
from util import APP, image

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def one_batch(img, boxes, description=APP, **push):
    """Push one frame and take its batch (the pipeline stays open)."""
    p = octopipe.Pipeline(description)
    batches = p.batches()
    p.push("cam", img, boxes, **push)
    return p, next(batches)


def test_the_tensor_is_shared_with_numpy_without_a_copy():
    p, b = one_batch(image(), [[0, 0, 16, 16], [8, 8, 32, 24]])
    t = b.tensor
    assert (t.shape, t.dtype, t.layout, t.device) == ([2, 3, 16, 16], "float32", "nchw", "cpu")
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    c = np.asarray(t)
    assert a.shape == c.shape == (2, 3, 16, 16) and a.dtype == np.float32
    # Same memory: one data pointer, writes through one view seen by the other.
    assert a.ctypes.data == c.ctypes.data == t.data_ptr
    assert a.flags.writeable and c.flags.writeable
    a[1, 2, 3, 4] = 123.0
    assert c[1, 2, 3, 4] == 123.0
    assert np.from_dlpack(t)[1, 2, 3, 4] == 123.0
    # The views keep the memory alive after the batch, the tensor and the pipeline are gone.
    b.set_labels([0, 1])
    p.close()
    del b, t, p
    assert a[1, 2, 3, 4] == 123.0 and np.isfinite(c).all()


def test_the_tensor_holds_the_preprocessed_pixels():
    img = np.zeros((48, 64, 3), np.uint8)
    img[..., 0], img[..., 1], img[..., 2] = 255, 128, 0
    p, b = one_batch(img, [[4, 4, 20, 30]])
    rgb = np.from_dlpack(b.tensor)[0]
    want = (np.array([255, 128, 0], np.float32) / 255 - MEAN) / STD
    assert np.allclose(rgb, want[:, None, None], atol=1e-5)
    b.set_labels([0])
    p.close()
    # The same bytes pushed as BGR: the channels swap.
    q, c = one_batch(img, [[4, 4, 20, 30]], format="bgr")
    bgr = np.from_dlpack(c.tensor)[0]
    want = (np.array([0, 128, 255], np.float32) / 255 - MEAN) / STD
    assert np.allclose(bgr, want[:, None, None], atol=1e-5)
    c.set_labels([0])
    q.close()


def test_nv12_frames_are_converted():
    h, w = 48, 64
    nv12 = np.empty((h * 3 // 2, w), np.uint8)
    nv12[:h], nv12[h:] = 126, 128  # grey: Y 126 (limited range), no chroma
    p, b = one_batch(nv12, [[0, 0, 32, 32]], format="nv12")
    t = np.from_dlpack(b.tensor)[0]
    grey = (126 - 16) * 255 / 219 / 255
    assert np.allclose(t, ((grey - MEAN) / STD)[:, None, None], atol=2e-3)
    b.set_labels([1])
    p.close()


def test_grey_frames_give_every_channel_their_value():
    # A thermal camera's 8-bit frame: HxW (or HxWx1) with format="gray8", never guessed.
    grey = np.zeros((48, 64), np.uint8)
    grey[:, :32], grey[:, 32:] = 40, 200
    for frame in (grey, grey[..., None]):
        p, b = one_batch(frame, [[0, 0, 32, 48], [32, 0, 32, 48]], format="gray8")
        t = np.from_dlpack(b.tensor)
        for crop, v in zip(t, (40, 200)):
            assert np.allclose(crop, ((v / 255 - MEAN) / STD)[:, None, None], atol=1e-5)
        b.set_labels([0, 1])
        p.close()


def test_16_bit_grey_frames_are_brought_onto_0_to_255():
    # A radiometric thermal frame: uint16 HxW with format="gray16"; the CPU preprocess gives each
    # channel value / 257 (0..65535 onto 0..255) before the usual scale and mean/std.
    grey = np.zeros((48, 64), np.uint16)
    grey[:, :32], grey[:, 32:] = 257 * 40, 65535
    p, b = one_batch(grey, [[0, 0, 32, 48], [32, 0, 32, 48]], format="gray16")
    t = np.from_dlpack(b.tensor)
    for crop, v in zip(t, (40, 255)):
        assert np.allclose(crop, ((v / 255 - MEAN) / STD)[:, None, None], atol=1e-5)
    b.set_labels([0, 1])
    p.close()
    q = octopipe.Pipeline(APP)
    with pytest.raises(TypeError, match="format gray16 takes a little-endian uint16 array, found uint8"):
        q.push("cam", np.zeros((48, 64), np.uint8), format="gray16")
    q.stop()


class DlpackOnly:
    """A host image that offers only the DLPack protocol (like a torch CPU tensor)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_round_trip_with_numpy():
    img = image(seed=3)
    boxes = [[1, 2, 30, 20], [10, 10, 40, 30]]
    # NumPy -> octopipe through __dlpack__ gives what the array itself gives.
    p, direct = one_batch(img, boxes)
    q, through = one_batch(DlpackOnly(img), boxes)
    assert np.array_equal(np.from_dlpack(direct.tensor), np.from_dlpack(through.tensor))
    # octopipe -> NumPy -> NumPy's own export: still the same memory.
    a = np.from_dlpack(through.tensor)
    again = np.from_dlpack(a)
    assert again.ctypes.data == a.ctypes.data == through.tensor.data_ptr
    # And the versioned and legacy capsules both work.
    legacy = through.tensor.__dlpack__()
    versioned = through.tensor.__dlpack__(max_version=(1, 0))
    assert type(legacy).__name__ == type(versioned).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="only supports zero-copy"):
        through.tensor.__dlpack__(copy=True)
    for b, pipeline in ((direct, p), (through, q)):
        b.set_labels([0, 1])
        pipeline.close()


def test_rows_say_which_crop_each_row_is():
    p = octopipe.Pipeline(APP.replace("max-frames=1", "max-frames=2"))
    batches = p.batches()
    p.push("cam", image(), [[0, 0, 8, 8], [10, 10, 20, 20]], name="a")
    p.push("cam", image(), [[5, 5, 10, 12]], name="b")
    b = next(batches)
    rows = b.rows
    assert [(r.stream, r.frame, r.box, r.bbox, r.source) for r in rows] == [
        (0, 0, 0, (0, 0, 8, 8), "a"), (0, 0, 1, (10, 10, 20, 20), "a"), (0, 1, 0, (5, 5, 10, 12), "b")]
    assert [r.offset for r in rows] == [0, 768, 1536] and all(r.size == (16, 16) for r in rows)
    assert len(b) == 3 and b.tensor.shape == [3, 3, 16, 16]
    b.set_labels([0, 0, 0])
    p.close()


def test_labels_reach_the_results_and_the_sinks(tmp_path):
    out = tmp_path / "objects.jsonl"
    p = octopipe.Pipeline(APP.replace("appsink", f"jsonl location={out}"))
    results = p.results()
    batches = p.batches()
    p.push("cam", image(), [[0, 0, 8, 8], [10, 10, 20, 20], [30, 5, 9, 9]])
    next(batches).set_labels(np.array([1, 0, 1]), scores=[0.9, 0.5, 0.25])
    p.push("cam", image(), [[0, 0, 8, 8], [10, 10, 20, 20]])
    next(batches).set_labels(["odd", "even"])
    p.push("cam", image(), [[0, 0, 8, 8]])
    logits = np.array([[1.0, 3.0]], np.float32)
    next(batches).set_labels(logits)
    p.close()
    frames = list(results)
    got = [[(o["label"], o["class_id"], o["score"]) for o in f.objects] for f in frames]
    e = np.exp([1.0, 3.0])
    assert got[0] == [("odd", 1, 0.9), ("even", 0, 0.5), ("odd", 1, 0.25)]
    assert got[1] == [("odd", 1, 1.0), ("even", 0, 1.0)]
    assert got[2][0][:2] == ("odd", 1) and got[2][0][2] == pytest.approx(e[1] / e.sum(), rel=1e-6)
    import json
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [o for f in frames for o in f.objects]


def test_probabilities_and_top_k():
    p, b = one_batch(image(), [[0, 0, 8, 8]], description=APP.replace("labels=even,odd", "labels=a,b,c top-k=2"))
    b.set_labels(np.array([[0.2, 0.5, 0.3]]), softmax=False)
    p.close()
    assert p.report["objects"] == 1


@pytest.mark.parametrize("labels, kw, error, words", [
    ([0], {}, ValueError, "batch 0 has 2 rows, but 1 labels were given"),
    ([0, 2], {}, ValueError, "row 1: class id 2 is not one of the 2 classes of labels=even,odd"),
    (["even", "cat"], {}, ValueError, "row 1: label 'cat' is not one of labels=even,odd"),
    ([0, -1], {}, ValueError, "row 1: class id -1 is negative"),
    ([0.5, 0.5], {}, TypeError, "1-D array of dtype kind 'f'"),
    (np.zeros((2, 3), np.float32), {}, ValueError, "3 scores per row, but labels= names 2 classes"),
    (np.array([[0.0, np.nan], [0, 0]]), {}, ValueError, "row 0: score NaN is not finite"),
    ([0, 1], {"scores": [1.0]}, ValueError, "but 1 scores were given"),
    ([0, 1], {"scores": [[1.0, 2.0]]}, ValueError, "one number per row"),
])
def test_bad_labels_raise_and_can_be_given_again(labels, kw, error, words):
    p, b = one_batch(image(), [[0, 0, 8, 8], [10, 10, 8, 8]])
    with pytest.raises(error, match=words):
        b.set_labels(labels, **kw)
    assert not b.labelled
    b.set_labels([1, 0])
    assert b.labelled
    with pytest.raises(octopipe.Error, match="batch 0: labels were given already"):
        b.set_labels([1, 0])
    p.close()


def test_a_dropped_batch_goes_on_unlabelled():
    p = octopipe.Pipeline(APP)
    results = p.results()
    batches = p.batches()
    p.push("cam", image(), [[0, 0, 8, 8]])
    b = next(batches)
    assert b.index == 0
    del b  # no labels: the batch goes on without them
    frame = next(results)
    assert frame.objects[0]["bbox"] == [0, 0, 8, 8] and "label" not in frame.objects[0]
    p.close()
    assert any("1 passed on without labels" in line for line in p.report["extra"])


def test_batches_need_an_appinfer_stage():
    p = octopipe.Pipeline("testsrc num-buffers=2 ! boxes format=synthetic ! batch ! preprocess size=16x16 ! appsink")
    with pytest.raises(octopipe.Error, match="no appinfer stage"):
        p.batches()
    p.close()


def test_batches_never_taken_go_on_unlabelled_at_close():
    p = octopipe.Pipeline(APP)
    results = p.results()
    for i in range(5):
        p.push("cam", image(seed=i), [[0, 0, 8, 8]])
    p.close()
    frames = list(results)
    assert len(frames) == 5 and all("label" not in f.objects[0] for f in frames)
