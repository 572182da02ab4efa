"""Stages from keyword arguments: stage(), properties(), Pipeline.from_stages(), checked against
each stage's declared properties with the description builder's own errors."""

import json
import pathlib

import pytest

import octopipe

SMALL = dict(num_buffers=5, width=160, height=120)


def reason_of(text):
    """The builder's message for the description `text`."""
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline(text)
    return e.value.reason


def test_properties_is_the_table_inspect_prints():
    for kind in ("testsrc", "detect", "queue", "mqtt"):
        rows = octopipe.properties(kind)
        text = octopipe.inspect(kind)
        # A row starts with its name; a long cell goes on over the next lines, inside its column.
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("  property ")) + 1
        shown = [line.split()[0] for line in lines[start:] if not line.startswith("   ")]
        assert [r["name"] for r in rows] == shown, kind
        for r in rows:
            assert set(r) == {"name", "keyword", "type", "default", "doc"}
            assert r["keyword"] == r["name"].replace("-", "_")
            assert set(r["doc"].split()) <= set(text.split()), r["doc"]
    buffers = next(r for r in octopipe.properties("testsrc") if r["name"] == "num-buffers")
    assert (buffers["keyword"], buffers["type"], buffers["default"]) == ("num_buffers", "int", "90")
    with pytest.raises(ValueError, match="unknown stage 'detct' \\(did you mean 'detect'\\?\\)"):
        octopipe.properties("detct")


def test_stage_writes_checked_text(tmp_path):
    assert octopipe.stage("testsrc", **SMALL) == "testsrc num-buffers=5 width=160 height=120"
    assert octopipe.stage("testsrc", **{"num-buffers": 5}) == "testsrc num-buffers=5"
    assert octopipe.stage("preprocess", size=(16, 16), mean=[0.5, 0.5, 0.5]) == (
        "preprocess size=16x16 mean=0.5,0.5,0.5")
    assert octopipe.stage("testsrc", live=True, epoch=None) == "testsrc live=true"
    out = tmp_path / "my objects.jsonl"
    assert octopipe.stage("jsonl", location=out) == f"jsonl location='{out}'"
    assert octopipe.stage("appsink") == "appsink"


def test_an_unknown_keyword_is_the_parsers_error():
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage("testsrc", num_bufers=5)
    expected = reason_of("testsrc num-bufers=5 ! boxes format=synthetic ! appsink")
    assert e.value.reason == expected
    assert expected == "stage 'testsrc' has no property 'num-bufers' (did you mean 'num-buffers'?)"
    assert e.value.kind == "config"
    # The caret is under the property in the text written.
    lines = e.value.excerpt.splitlines()
    assert lines[0].strip() == "testsrc num-bufers=5"
    assert lines[1].index("^") == lines[0].index("num-bufers")


def test_a_bad_value_is_the_parsers_error():
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage("testsrc", num_buffers=0)
    assert e.value.reason == reason_of("testsrc num-buffers=0 ! boxes format=synthetic ! appsink")
    assert e.value.reason == "testsrc: num-buffers must be an integer from 1 to 2147483647, found '0'"
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage("boxes", format="synthetc")
    assert e.value.reason == reason_of("testsrc ! boxes format=synthetc ! appsink")
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage("queue", policy="drop-newest")
    assert "block or drop-oldest" in e.value.reason
    with pytest.raises(octopipe.DescriptionError, match="unknown stage 'clasify'.*'classify'"):
        octopipe.stage("clasify", model="m.onnx")
    with pytest.raises(TypeError, match="stage 'testsrc': pattern: a dict"):
        octopipe.stage("testsrc", pattern={"a": 1})



@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, 1e-300, -1.0])
@pytest.mark.parametrize("kind, keyword, name", [("batch", "max_wait_ms", "max-wait-ms"),
                                                 ("testsrc", "framerate", "framerate")])
def test_a_hostile_duration_or_rate_from_python_is_refused_naming_it(kind, keyword, name, value):
    # Floats that become a Duration in the stage: refused by the builder before any Duration is
    # made (1e300 once panicked there), the property named.
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.stage(kind, **{keyword: value})
    assert e.value.reason.startswith(f"{kind}: {name} must be a"), e.value.reason
    assert "found '" in e.value.reason

def test_from_stages_runs_the_pipeline(tmp_path):
    out = tmp_path / "objects.jsonl"
    p = octopipe.Pipeline.from_stages([
        ("testsrc", SMALL),
        ("boxes", dict(format="synthetic", count=2)),
        octopipe.stage("batch", max_frames=1),
        ("preprocess", {"size": (16, 16)}),
        "appinfer labels=a,b",
        ("jsonl", dict(location=out)),
    ])
    p.close()
    assert p.report["processed"] == 5
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 10 and {o["frame"] for o in lines} == set(range(5))


def test_from_stages_is_the_same_pipeline_as_its_text(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    stages = [("testsrc", SMALL), ("boxes", dict(format="synthetic", count=3)), ("batch", None),
              ("preprocess", dict(size=(16, 16))), ("appinfer", None)]
    octopipe.Pipeline.from_stages(stages + [("jsonl", dict(location=a))]).close()
    text = " ! ".join(octopipe.stage(kind, **(props or {})) for kind, props in stages)
    octopipe.run(text + f" ! jsonl location={b}")

    def untimed(path):  # each run's own wall-clock times left out
        return [{k: v for k, v in json.loads(line).items() if k != "timestamp"}
                for line in path.read_text().splitlines()]
    assert a.read_text() and untimed(a) == untimed(b)


def test_from_stages_refuses_bad_entries():
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline.from_stages([("testsrc", SMALL), ("boxes", dict(format="synthetic", cont=3)),
                                       ("appsink", {})])
    assert e.value.reason == reason_of(
        "testsrc num-buffers=3 ! boxes format=synthetic cont=3 ! appsink")
    with pytest.raises(TypeError, match="stages\\[1\\]"):
        octopipe.Pipeline.from_stages([("testsrc", SMALL), 7])
    with pytest.raises(ValueError, match="no stages"):
        octopipe.Pipeline.from_stages([])
    # A file name in a value is a value, never a pipeline file to read.
    with pytest.raises(octopipe.DescriptionError, match="needs"):
        octopipe.Pipeline.from_stages([("testsrc", SMALL), ("boxes", dict(format="det")),
                                       ("jsonl", dict(location=pathlib.Path("x.pipe")))])
