"""Frames pushed from NumPy: what comes back, and what is refused (never a crash or a hang)."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import octopipe
from util import APP, Labeller, image, labelled_run


def test_pushed_frames_come_back_in_order_with_their_boxes():
    boxes = [[[0, 0, 10, 10]], [[5, 5, 20, 10], [30, 20, 8.4, 8.6]], [], [[60, 40, 10, 10]]]
    frames = [(image(seed=i), b, {"pts_ms": 40.0 * i, "name": f"f{i}.png"})
              for i, b in enumerate(boxes)]
    results, p = labelled_run(frames)
    assert [(f.stream, f.index, f.source, f.pts_ms) for f in results] == [
        (0, i, f"octopipe:f{i}.png", 40.0 * i) for i in range(4)]
    assert [(f.width, f.height) for f in results] == [(64, 48)] * 4
    # Boxes are rounded to pixel edges and clipped to the 64x48 frame.
    assert [[o["bbox"] for o in f.objects] for f in results] == [
        [[0, 0, 10, 10]], [[5, 5, 20, 10], [30, 20, 8, 9]], [], [[60, 40, 4, 8]]]
    assert [[o["label"] for o in f.objects] for f in results] == [
        ["even"], ["even", "odd"], [], ["even"]]
    assert p.report["processed"] == 4 and p.report["objects"] == 4


def test_streams_by_name_or_id_and_unknown_ones():
    p = octopipe.Pipeline(
        "app name=a ! batch name=b ! preprocess size=16x16 ! appinfer ! appsink   app name=c ! b.")
    assert p.app_sources == [("a", 0), ("c", 1)]
    with pytest.raises(ValueError, match="no app source 'x' in this pipeline .*'a' \\(stream 0\\), 'c' \\(stream 1\\)"):
        p.push("x", image())
    with pytest.raises(ValueError, match="stream 7 is not an app source"):
        p.push(7, image())
    with pytest.raises(TypeError, match="stream must be an app source's name"):
        p.push(1.5, image())
    p.stop()
    with pytest.raises(octopipe.Error, match="no app source"):
        octopipe.Pipeline("testsrc num-buffers=1 ! boxes format=synthetic ! appsink").push("cam", image())


@pytest.mark.parametrize("array, error, words", [
    (np.zeros((48, 64, 3), np.float32), TypeError, "uint8, found float32"),
    (np.zeros((48, 64, 3), np.int16), TypeError, "uint8, found int16"),
    (np.zeros((48, 64, 2), np.uint8), ValueError, "found shape \\(48, 64, 2\\)"),
    (np.zeros((48 * 64 * 3,), np.uint8), ValueError, "found shape \\(9216,\\)"),
    (np.zeros((2, 48, 64, 3), np.uint8), ValueError, "found shape \\(2, 48, 64, 3\\)"),
    (np.zeros((0, 64, 3), np.uint8), ValueError, "no pixels"),
    (np.zeros((72, 64), np.uint8), ValueError,
     'a 2-D image \\(shape \\(72, 64\\)\\) is read only as format= says, never guessed: '
     'pass format="gray8" for a greyscale frame 64 wide and 72 high, or format="nv12" or "i420"'),
    (np.zeros((48, 128, 3), np.uint8)[:, ::2], ValueError, "not C-contiguous.*ascontiguousarray"),
    (np.zeros((64, 48, 3), np.uint8).transpose(1, 0, 2), ValueError, "not C-contiguous"),
    ([[1, 2, 3]], TypeError, "image must be .* found list"),
    ("image.png", TypeError, "found str"),
])
def test_bad_arrays_raise_clear_errors(array, error, words):
    p = octopipe.Pipeline(APP)
    with pytest.raises(error, match=words):
        p.push("cam", array)
    # Nothing was pushed: the pipeline still takes a good frame.
    labeller = Labeller(p)
    labeller.start()
    p.push("cam", image(), [[0, 0, 4, 4]])
    p.close()
    assert p.report["frames_in"] == 1


def test_format_must_fit_the_shape():
    p = octopipe.Pipeline(APP)
    with pytest.raises(ValueError, match="format 'yuv' is not one of"):
        p.push("cam", image(), format="yuv")
    with pytest.raises(ValueError, match="format Nv12"):
        p.push("cam", image(), format="nv12")
    with pytest.raises(ValueError, match="found shape \\(72, 64\\)"):
        p.push("cam", np.zeros((72, 64), np.uint8), format="rgb")
    with pytest.raises(ValueError, match="\\(H\\*3/2\\)xW uint8 array with H and W even"):
        p.push("cam", np.zeros((71, 64), np.uint8), format="nv12")
    with pytest.raises(ValueError, match="found shape \\(48, 64, 3\\)"):
        p.push("cam", image(), format="gray8")
    p.stop()


class FakeCuda:
    """Claims to be a CUDA array (nothing here may touch the pointer)."""

    def __init__(self, shape=(48, 64, 3)):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": "|u1", "data": (0xDEAD0000, False), "version": 3,
            "strides": None, "stream": None}


class FakeDlpack:
    def __init__(self, kind, device_id=0):
        self.device = (kind, device_id)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be imported")


def test_device_images_are_refused_where_they_cannot_go():
    p = octopipe.Pipeline(APP)
    gpu = "no usable GPU" if not os.path.exists("/dev/nvidia0") else "cuda"
    with pytest.raises(ValueError, match=f"image is on cuda:0, but .*{gpu}"):
        p.push("cam", FakeCuda())
    with pytest.raises(ValueError, match="image is on cuda:0, but"):
        p.push("cam", FakeDlpack(2))
    with pytest.raises(ValueError, match="ROCm device \\(DLPack device type 10\\)"):
        p.push("cam", FakeDlpack(10))
    p.stop()
    cpu = octopipe.Pipeline(APP.replace("preprocess", "preprocess backend=cpu"))
    with pytest.raises(ValueError, match="backend=cpu.*push host \\(NumPy\\) arrays"):
        cpu.push("cam", FakeCuda())
    cpu.stop()


@pytest.mark.parametrize("boxes, error, words", [
    ([[1, 2, 3]], ValueError, "Nx4 array of x, y, w, h, found shape \\(1, 3\\)"),
    ([1, 2, 3, 4], ValueError, "found shape \\(4,\\)"),
    ([["a", "b", "c", "d"]], TypeError, "boxes must be an Nx4 array"),
    ([[100, 100, 10, 10]], ValueError, "box 0 .*outside the 64x48 frame"),
    ([[0, 0, -4, 10]], ValueError, "width and height must be positive"),
    ([[0, 0, float("nan"), 10]], ValueError, "not a finite box"),
])
def test_bad_boxes_raise_clear_errors(boxes, error, words):
    p = octopipe.Pipeline(APP)
    with pytest.raises(error, match=words):
        p.push("cam", image(), boxes)
    with pytest.raises(ValueError, match="pts_ms must be a non-negative"):
        p.push("cam", image(), pts_ms=-1.0)
    p.stop()


@pytest.mark.parametrize("pts_ms", [float("nan"), float("inf"), float("-inf"), 1e300, 1e13,
                                    -1.0, -1e-300])
def test_a_hostile_pts_is_a_value_error_naming_it(pts_ms):
    # Each of these once reached Duration::from_secs_f64 (1e300: a Rust panic).
    p = octopipe.Pipeline(APP)
    with pytest.raises(ValueError, match="pts_ms must be a non-negative number of milliseconds"):
        p.push("cam", image(), pts_ms=pts_ms)
    p.stop()


def test_a_pts_below_a_nanosecond_is_zero():
    # 1e-300 ms is a time, below the clock's nanosecond: the frame comes back at 0.
    results, _ = labelled_run([(image(), [], {"pts_ms": 1e-300}),
                               (image(seed=1), [], {"pts_ms": 3.6e9})])
    assert [f.pts_ms for f in results] == [0.0, 3.6e9]


def test_a_closed_or_stopped_pipeline_refuses_pushes():
    p = octopipe.Pipeline(APP)
    Labeller(p).start()
    p.push("cam", image(), [[0, 0, 8, 8]])
    p.close()
    with pytest.raises(octopipe.ClosedError, match="pushed after close"):
        p.push("cam", image())
    q = octopipe.Pipeline(APP)
    q.stop()
    with pytest.raises(octopipe.ClosedError):
        q.push("cam", image())
    assert not q.running


def test_push_without_blocking_raises_when_full():
    # Nobody takes the batches: the appinfer stage waits, the edges fill, then the source.
    p = octopipe.Pipeline(APP)
    p.batches()
    p.push("cam", image(), [[0, 0, 8, 8]])  # waits until the source takes it: it runs
    with pytest.raises(octopipe.FullError, match="the pipeline is full"):
        for _ in range(100):
            p.push("cam", image(), [[0, 0, 8, 8]], block=False)
    p.stop()
    assert p.report is not None and not p.running
    with pytest.raises(octopipe.ClosedError):
        p.push("cam", image(), [[0, 0, 8, 8]], block=False)


def test_close_drains_and_keeps_the_results_not_read():
    # Fewer frames than the results channel holds (64): results not read hold the pipeline
    # back, so pushing more than that before reading any would wait for a reader.
    frames = [(image(seed=i), [[i % 50, 0, 8, 8]], {}) for i in range(60)]
    p = octopipe.Pipeline(APP)
    results = p.results()
    labeller = Labeller(p)
    labeller.start()
    for img, boxes, kw in frames:
        p.push("cam", img, boxes, **kw)
    p.close()  # every pushed frame reaches the end; close keeps what was not read yet
    assert not p.running and p.report["processed"] == 60
    got = list(results)
    assert [f.index for f in got] == list(range(60))
    assert [f.objects[0]["bbox"][0] for f in got] == [i % 50 for i in range(60)]


def test_context_manager_closes_or_stops():
    with octopipe.Pipeline(APP) as p:
        results = p.results()
        Labeller(p).start()
        p.push("cam", image(), [[0, 0, 8, 8]])
    assert not p.running and p.report["processed"] == 1
    assert len(list(results)) == 1
    with pytest.raises(RuntimeError, match="boom"):
        with octopipe.Pipeline(APP) as q:
            q.push("cam", image(), [[0, 0, 8, 8]])
            raise RuntimeError("boom")
    assert not q.running and q.report is not None


def test_the_gil_is_released_while_waiting():
    p = octopipe.Pipeline(APP)
    results = p.results()
    Labeller(p).start()
    counted = [0]

    def late_push():
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            counted[0] += 1
        p.push("cam", image(), [[0, 0, 8, 8]])

    t = threading.Thread(target=late_push)
    t.start()
    frame = next(results)  # blocks until the other thread pushed: it must be able to run
    t.join()
    assert frame.index == 0 and len(frame.objects) == 1
    assert counted[0] > 10_000
    p.close()


def test_keyboard_interrupt_stops_the_pipeline_cleanly(tmp_path):
    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent("""
        import sys, threading
        import octopipe
        # Ctrl-C may come while octopipe waits (it stops the pipeline and raises) or while
        # Python code runs (the with block's exit stops it): either way it stops cleanly.
        try:
            with octopipe.Pipeline(
                    "testsrc num-buffers=100000 width=160 height=120 live=true ! boxes format=synthetic count=2"
                    " ! batch ! preprocess size=16x16 ! appinfer ! appsink") as p:
                frames = p.results()
                batches = p.batches()
                def label():
                    for b in batches:
                        b.set_labels([0] * len(b))
                threading.Thread(target=label, daemon=True).start()
                for i, f in enumerate(frames):
                    if i == 3:
                        print("running", flush=True)
        except KeyboardInterrupt:
            print("interrupted", p.running, p.report["frames_in"] > 0, flush=True)
            sys.exit(0)
        print("not interrupted", flush=True)
        sys.exit(3)
    """))
    # The child gets Ctrl-C as a program started from a terminal does: a test runner started in
    # the background of a non-interactive shell has SIGINT ignored, its children inherit that,
    # and Python then installs no KeyboardInterrupt handler at all.
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert child.stdout.readline().strip() == "running"
        start = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out.strip() == "interrupted False True"
    assert took < 5, f"took {took:.1f} s to stop"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_push_pull_loop_over_10000_frames_keeps_rss_flat():
    p = octopipe.Pipeline(APP)
    results = p.results()
    batches = p.batches()
    img = image(w=96, h=64)
    boxes = np.array([[0, 0, 16, 16], [20, 10, 30, 20], [50, 30, 40, 30]], np.float64)
    samples = {}
    for i in range(10_000):
        p.push("cam", img, boxes, pts_ms=i * 33.3)
        b = next(batches)
        view = np.from_dlpack(b.tensor)
        assert view.shape == (3, 3, 16, 16)
        b.set_labels(np.arange(3) % 2, scores=view.mean(axis=(1, 2, 3)))
        f = next(results)
        assert f.index == i and len(f.objects) == 3
        del b, view, f
        if i + 1 in (2_000, 10_000):
            gc.collect()
            samples[i + 1] = rss_bytes()
    p.close()
    grown = samples[10_000] - samples[2_000]
    print(f"RSS after 2,000 frames {samples[2_000] / 2**20:.1f} MiB, after 10,000 "
          f"{samples[10_000] / 2**20:.1f} MiB ({grown / 2**20:+.2f} MiB)")
    # 8,000 more frames of 18 KiB with 3 boxes and a tensor each: a leak of any of them per
    # frame would be 24+ MiB.
    assert grown < 4 * 2**20
    assert p.report["processed"] == 10_000
