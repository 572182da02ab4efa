"""Shared fixtures: the repository, the shared data, ONNX Runtime, the command line.

Tests that need the shared data ($OCTOPIPE_DATA, ../shared/data by default), ONNX Runtime or
the `octopipe` binary skip with the reason when it is absent; under CI=true a missing
prerequisite fails instead, as the Rust tests do.
"""

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
MODELS = REPO / "tests" / "data" / "models"


def missing(reason):
    """Skip for `reason`, or fail under CI=true."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"missing prerequisite under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def data():
    """The shared data folder."""
    path = pathlib.Path(os.environ.get("OCTOPIPE_DATA", REPO.parent / "shared" / "data"))
    if not (path / "visdrone" / "clip-9999999" / "images").is_dir():
        missing(f"shared data not found at {path} (set OCTOPIPE_DATA)")
    return path


@pytest.fixture(scope="session")
def clip(data):
    return data / "visdrone" / "clip-9999999"


@pytest.fixture(scope="session")
def ort():
    """ONNX Runtime's library, as the module finds it."""
    import octopipe  # noqa: F401  (sets ORT_DYLIB_PATH from the onnxruntime wheel)

    path = os.environ.get("ORT_DYLIB_PATH")
    if not path or not os.path.exists(path):
        missing("ONNX Runtime not found (pip install onnxruntime==1.31.1, or set ORT_DYLIB_PATH)")
    return path


@pytest.fixture(scope="session")
def model(data, ort):
    """The shared VisDrone crop classifier."""
    path = data / "models" / "visdrone-crops-64.onnx"
    if not path.exists():
        missing(f"{path} not found")
    return path


@pytest.fixture(scope="session")
def tiny_model(ort):
    """A committed test classifier: [batch, 3, 64, 64] -> 4 logits (scripts/make_test_models.py)."""
    return MODELS / "valid-64.onnx"


@pytest.fixture(scope="session")
def cli():
    """The `octopipe` command line: $OCTOPIPE_CLI, else the build's binary."""
    given = os.environ.get("OCTOPIPE_CLI")
    candidates = [given] if given else [
        REPO / "target" / "debug" / "octopipe",
        REPO / "target" / "release" / "octopipe",
        shutil.which("octopipe"),
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return str(c)
    missing("the octopipe binary was not found (cargo build, or set OCTOPIPE_CLI)")
