"""The examples under examples/python run and say what they should."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

EXAMPLES = REPO / "examples" / "python"


def run(*args, timeout=300):
    r = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("fmt", ["rgb", "bgr", "nv12"])
def test_app_frames_from_numpy(fmt, ort):
    pytest.importorskip("onnx")
    out = run(EXAMPLES / "app_frames_numpy.py", "--frames", "20", "--format", fmt)
    m = re.search(r"20 frames pushed as \w+, (\d+) objects, (\d+) \(([\d.]+)%\) labelled as drawn", out)
    assert m, out
    assert int(m.group(1)) == 20 * 24
    assert float(m.group(3)) >= 90.0, out


def test_visdrone_classifier(data, model):
    out = run(EXAMPLES / "visdrone_classify.py", data)
    assert "34 frames, 2012 objects" in out
    m = re.search(r"labelled as annotated: (\d+) of 2012 \(([\d.]+)%\)", out)
    assert m and float(m.group(2)) >= 98.0, out


def test_torch_model_fed_by_batches(data):
    out = run(EXAMPLES / "torch_batches.py", data)
    try:
        import torch  # noqa: F401
    except ImportError:
        assert out.strip() == "skipped: torch is not installed (pip install torch)"
        return
    assert re.search(r"34 frames, 2012 crops through torch on cpu, 2012 lines written", out), out
