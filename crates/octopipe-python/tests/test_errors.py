"""Errors in Python's words: `vars=` and `force=` named as a Python caller passes them, a `kind`
on every `octopipe.Error`, one set of boolean spellings."""

import subprocess
import sys

import pytest

import octopipe

SYNTHETIC = ("testsrc num-buffers=3 width=160 height=120 ! boxes format=synthetic count=2"
             " ! batch ! preprocess size=16x16 ! appinfer ! jsonl location={out}")

SPELLINGS = "true/false, yes/no, on/off, 1/0 (any case)"


def test_an_unset_variable_is_asked_for_as_vars():
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline("testsrc num-buffers=${n} ! boxes format=synthetic ! appsink")
    assert "variable 'n' is not set (give it with vars={'n': ...})" in str(e.value)
    assert "--set" not in str(e.value)
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.run("testsrc num-buffers=${n} ! boxes format=synthetic count=${count} ! appsink")
    assert "give them with vars={'n': ..., 'count': ...}" in str(e.value), e.value


def test_force_replaces_earlier_output(tmp_path):
    out = tmp_path / "objects.jsonl"
    text = SYNTHETIC.format(out=out)
    octopipe.run(text)
    first = out.read_text()
    with pytest.raises(octopipe.Error) as e:
        octopipe.run(text)
    assert "exists already: give a new name, or overwrite=true on the sink (force=True) " \
           "replaces it (nothing was written)" in str(e.value), e.value
    assert "--force" not in str(e.value)
    assert e.value.kind == "io"
    assert out.read_text() == first
    report = octopipe.run(text, force=True)
    assert report["processed"] == 3
    with octopipe.Pipeline(text, force=True) as p:
        p.close()


def test_every_error_the_module_raises_has_a_kind(tmp_path):
    assert octopipe.DescriptionError.kind == "config"
    assert octopipe.ClosedError.kind == "closed"
    assert octopipe.FullError.kind == "busy"
    p = octopipe.Pipeline("testsrc num-buffers=2 ! boxes format=synthetic ! appsink")
    with pytest.raises(octopipe.Error) as e:
        p.batches()
    assert e.value.kind == "config", e.value
    with pytest.raises(octopipe.Error) as e:
        p.push("cam", None)
    assert e.value.kind == "config", e.value
    p.close()
    with pytest.raises(octopipe.Error) as e:
        p.results()
    assert e.value.kind == "conflict", e.value
    with pytest.raises(octopipe.Error) as e:
        octopipe.Pipeline(str(tmp_path / "a-folder.pipe"))
    assert e.value.kind == "io", e.value


def test_booleans_take_one_set_of_spellings():
    for live in ("yes", "On", "1", "TRUE", False):
        assert octopipe.stage("testsrc", live=live).startswith("testsrc live=")
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage("testsrc", live="maybe")
    assert f"testsrc: live must be a boolean: {SPELLINGS}, found 'maybe'" in str(e.value)
    report = octopipe.run("testsrc live=off num-buffers=2 ! boxes format=synthetic ! appsink")
    assert report["frames_in"] == 2


def fails_inside_onnx_runtime(path):
    """A classifier that ONNX Runtime fails to run on more than one crop (a Reshape to [1, 4]),
    after the one-crop warm-up: ONNX Runtime logs the failure at its error level."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
             numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
             numpy_helper.from_array(np.array([1, 4], np.int64), "one")]
    nodes = [helper.make_node("ReduceMean", ["input", "axes"], ["mean"], keepdims=0),
             helper.make_node("MatMul", ["mean", "w"], ["logits4"]),
             helper.make_node("Reshape", ["logits4", "one"], ["logits"])]
    graph = helper.make_graph(
        nodes, "fails_inside_ort",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    onnx.save(m, path)


def test_onnx_runtime_never_writes_to_stderr_itself(tmp_path):
    model = tmp_path / "fails.onnx"
    fails_inside_onnx_runtime(model)
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, octopipe\n"
        "try:\n"
        "    octopipe.run('testsrc num-buffers=2 width=160 height=120 ! boxes format=synthetic"
        f" count=3 ! batch ! classify model={model} labels=a,b,c,d ! appsink')\n"
        "except octopipe.Error as e:\n"
        "    print(e.kind, flush=True)\n"
        "    sys.exit(0)\n"
        "sys.exit(3)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "model", run.stdout
    assert "onnxruntime" not in run.stderr, run.stderr
