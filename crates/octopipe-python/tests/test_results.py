"""Results of a whole pipeline: the same objects as the CLI's JSONL, the report, errors."""

import datetime
import json
import subprocess

import numpy as np
import pytest

import octopipe

CLASSIFY = "{repo}/pipelines/visdrone-classify.pipe"


def untimed(o):
    """An object without its frame's wall-clock `timestamp` (each run's own)."""
    return {k: v for k, v in o.items() if k != "timestamp"}


def classify_vars(clip, model, out):
    return {"root": str(clip), "model": str(model), "out": str(out)}


def test_results_equal_the_cli_jsonl_line_for_line(clip, model, cli, tmp_path):
    from conftest import REPO

    pipe = CLASSIFY.format(repo=REPO)
    cli_out = tmp_path / "cli.jsonl"
    run = subprocess.run(
        [cli, "run", pipe, "--set", f"root={clip}", "--set", f"model={model}",
         "--set", f"out={cli_out}"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    cli_lines = cli_out.read_text().splitlines()
    assert len(cli_lines) == 2012

    py_out = tmp_path / "python.jsonl"
    p = octopipe.Pipeline(pipe, vars=classify_vars(clip, model, py_out))
    frames = list(p.results())
    objects = [o for f in frames for o in f.objects]
    assert len(frames) == 34
    assert [f.index for f in frames] == list(range(34))
    # Line for line: the same dicts as json.loads of each CLI line, in the same order (but for
    # the wall-clock time each run decoded its frames at).
    assert [untimed(o) for o in objects] == [untimed(json.loads(line)) for line in cli_lines]
    # The pipeline's own sink wrote the same file as the CLI, and its objects are its lines.
    py_lines = [json.loads(line) for line in py_out.read_text().splitlines()]
    assert objects == py_lines
    assert [untimed(o) for o in py_lines] == [untimed(json.loads(line)) for line in cli_lines]
    assert p.report["objects"] == 2012
    assert p.error is None and not p.running


def test_frame_fields_and_objects_array(clip, model, tmp_path):
    from conftest import REPO

    p = octopipe.Pipeline(CLASSIFY.format(repo=REPO),
                          vars=classify_vars(clip, model, tmp_path / "o.jsonl"))
    frames = p.results()
    first = next(frames)
    assert (first.stream, first.index, first.pts_ms) == (0, 0, 0.0)
    assert first.source == (clip / "images" / "9999999_00023_d_0000001.jpg").resolve().as_uri()
    assert (first.width, first.height) == (2000, 1500)
    stamp = datetime.datetime.fromisoformat(first.timestamp.replace("Z", "+00:00"))
    assert first.timestamp.endswith("Z") and len(first.timestamp) == 24
    assert abs(datetime.datetime.now(datetime.timezone.utc) - stamp) < datetime.timedelta(minutes=5)
    second = next(frames)
    assert second.pts_ms == pytest.approx(1000 / 30)
    arrays = first.objects_array()
    n = len(first)
    assert n == len(first.objects) > 0
    assert arrays["boxes"].shape == (n, 4) and arrays["boxes"].dtype == np.int32
    assert arrays["boxes"].tolist() == [o["bbox"] for o in first.objects]
    assert arrays["class_ids"].tolist() == [o["class_id"] for o in first.objects]
    assert arrays["labels"].tolist() == [o["label"] for o in first.objects]
    assert np.allclose(arrays["scores"], [o["score"] for o in first.objects])
    assert (arrays["tracks"] == -1).all()
    p.stop()
    assert not p.running


def test_run_returns_the_report_the_cli_writes(clip, model, cli, tmp_path):
    from conftest import REPO

    pipe = CLASSIFY.format(repo=REPO)
    report = octopipe.run(pipe, vars=classify_vars(clip, model, tmp_path / "py.jsonl"))
    run = subprocess.run(
        [cli, "run", pipe, "--set", f"root={clip}", "--set", f"model={model}",
         "--set", f"out={tmp_path / 'cli.jsonl'}", "--report", "json"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    cli_report = json.loads(run.stdout)
    assert set(report) == set(cli_report)
    for key in ("frames_in", "processed", "objects", "skipped", "dropped", "non_finite"):
        assert report[key] == cli_report[key], key
    assert report["frames_in"] == 34


def test_results_must_be_asked_for_before_the_start(tiny_model):
    p = octopipe.Pipeline(
        f"app name=cam ! classify model={tiny_model} ! appsink")
    p.push("cam", np.zeros((32, 32, 3), np.uint8), boxes=[[0, 0, 8, 8]])
    with pytest.raises(octopipe.Error, match="results\\(\\) must be called before the pipeline starts"):
        p.results()
    p.close()
    assert p.report["processed"] == 1


def test_a_failing_stage_raises_with_the_report(ort):
    from conftest import MODELS

    p = octopipe.Pipeline(
        f"testsrc num-buffers=20 width=160 height=120 ! boxes format=synthetic count=3"
        f" ! classify model={MODELS / 'nan-logits.onnx'} ! appsink")
    frames = p.results()
    with pytest.raises(octopipe.Error, match="NaN") as e:
        for _ in frames:
            pass
    assert isinstance(e.value.report, dict)
    assert e.value.report["frames_in"] >= 1
    assert "NaN" in p.error
    with pytest.raises(octopipe.Error, match="NaN"):
        octopipe.run(
            f"testsrc num-buffers=5 width=160 height=120 ! boxes format=synthetic count=3"
            f" ! classify model={MODELS / 'nan-logits.onnx'} ! appsink")


def test_opening_errors_raise_before_anything_runs(tmp_path):
    with pytest.raises(octopipe.Error, match="nowhere.onnx"):
        octopipe.Pipeline(
            f"testsrc num-buffers=3 ! boxes format=synthetic ! classify model={tmp_path}/nowhere.onnx ! appsink")


def test_two_classifiers_keep_both_answers_by_name(clip, model, tmp_path):
    """Two classifiers in a chain: each object has both answers under `classifiers`, and its
    main result is the one classifier's of the same pipeline without the second."""
    from conftest import REPO

    pipe = (REPO / "pipelines" / "visdrone-classify.pipe").read_text()
    first = "classify model=${model} labels=person,two-wheeler,car,large-vehicle"
    assert first in pipe
    chained = pipe.replace(first, first + " ! classify name=color model=${model} labels=p,t,c,l")
    one = octopipe.Pipeline(pipe, vars=classify_vars(clip, model, tmp_path / "one.jsonl"))
    one_frames = list(one.results())
    alone = [o for f in one_frames for o in f.objects]
    two = octopipe.Pipeline(chained, vars=classify_vars(clip, model, tmp_path / "two.jsonl"))
    frames = list(two.results())
    objects = [o for f in frames for o in f.objects]
    assert len(objects) == len(alone) == 2012
    assert all("classifiers" not in o for o in alone)
    for a, o in zip(alone, objects):
        by_name = o.pop("classifiers")
        assert untimed(o) == untimed(a)
        assert list(by_name) == ["classify", "color"]
        assert by_name["classify"] == {k: a[k] for k in ("label", "class_id", "score")}
        assert by_name["color"]["label"] == a["label"][0]
    arrays = frames[0].objects_array()
    first_objects = frames[0].objects
    assert arrays["labels"].tolist() == [o["label"] for o in first_objects]
    color = arrays["classifiers"]["color"]
    assert color["labels"].tolist() == [o["classifiers"]["color"]["label"] for o in first_objects]
    assert color["class_ids"].tolist() == [o["class_id"] for o in first_objects]
    assert "classifiers" not in one_frames[0].objects_array()
