"""The GPU checks (cuda_check.py) where PyTorch with CUDA and a GPU are present; skipped here."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest


def test_cuda_frames_and_zero_copy_batches():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the device machine runs scripts/device-python.sh)")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (the device machine runs scripts/device-python.sh)")
    script = pathlib.Path(__file__).with_name("cuda_check.py")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all GPU checks passed" in r.stdout
