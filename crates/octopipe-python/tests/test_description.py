"""Descriptions: the language and the errors of `octopipe run`, and inspect()."""

import pathlib
import subprocess

import pytest

import octopipe

BAD = [
    # an unknown stage, with the closest name suggested
    "testsrc num-buffers=3 ! boxes format=synthetic ! clasify model=m.onnx ! appsink",
    # an unknown property
    "testsrc num-buffers=3 ! boxes format=synthetic cont=3 ! appsink",
    # a value not of its type
    "testsrc num-buffers=three ! boxes format=synthetic ! appsink",
    # a stage out of order
    "testsrc ! batch ! boxes format=synthetic ! appsink",
    # appinfer's own properties are checked like any stage's
    "app ! appinfer in-flight=0 ! appsink",
]


@pytest.mark.parametrize("text", BAD)
def test_bad_description_raises_the_cli_message(text, cli):
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline(text)
    run = subprocess.run([cli, "run", text], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    prefix = "octopipe: error: "
    assert run.stderr.startswith(prefix), run.stderr
    assert str(e.value) == run.stderr[len(prefix):].rstrip("\n")


def test_description_error_says_where_with_a_caret():
    text = "testsrc num-buffers=3\n  ! boxes format=synthetic\n  ! clasify model=m.onnx ! appsink"
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline(text)
    err = e.value
    assert isinstance(err, octopipe.Error)
    assert (err.origin, err.line, err.column) == ("<command line>", 3, 5)
    assert "unknown stage 'clasify'" in err.reason and "classify" in err.reason
    lines = err.excerpt.splitlines()
    assert lines[0].strip() == "! clasify model=m.onnx ! appsink"
    assert lines[1].index("^") == lines[0].index("clasify")
    assert lines[1].count("^") == len("clasify")
    assert str(err).startswith("<command line>:3:5: unknown stage 'clasify'")


def test_pipe_file_errors_name_the_file(tmp_path):
    pipe = tmp_path / "bad.pipe"
    pipe.write_text("# a comment\ntestsrc num-buffers=3 ! boxes format=synthetic ! jsonl locaton=x\n")
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline(str(pipe))
    assert e.value.origin == str(pipe)
    assert e.value.line == 2
    assert "locaton" in str(e.value) and "location" in str(e.value)


def test_missing_pipe_file_is_an_error(tmp_path):
    missing = tmp_path / "nowhere.pipe"
    with pytest.raises(octopipe.Error, match="cannot read pipeline file .*nowhere.pipe"):
        octopipe.Pipeline(str(missing))


def test_vars_fill_the_description(tmp_path):
    out = tmp_path / "objects.jsonl"
    report = octopipe.run(
        "testsrc num-buffers=${n} width=160 height=120 ! boxes format=synthetic count=${count}"
        " ! batch ! preprocess size=16x16 ! appinfer ! jsonl location=${out}",
        vars={"n": 5, "count": 2, "out": pathlib.Path(out)},
    )
    assert report["processed"] == 5
    lines = out.read_text().splitlines()
    assert len(lines) == 10
    with pytest.raises(octopipe.DescriptionError, match="variable .n. is not set"):
        octopipe.Pipeline("testsrc num-buffers=${n} ! boxes format=synthetic ! appsink")


def test_vars_must_be_a_dict_of_str_keys():
    with pytest.raises(TypeError, match="keys must be str"):
        octopipe.Pipeline("testsrc ! boxes format=synthetic ! appsink", vars={1: "x"})


def test_inspect_lists_stages_and_properties():
    all_stages = octopipe.inspect()
    for name in ("images", "app", "classify", "appinfer", "jsonl", "appsink"):
        assert any(line.split()[0] == name for line in all_stages.splitlines()), name
    appinfer = octopipe.inspect("appinfer")
    for prop in ("labels", "top-k", "in-flight", "timeout"):
        assert prop in appinfer
    with pytest.raises(ValueError, match="unknown stage 'apinfer' \\(did you mean 'appinfer'\\?\\)"):
        octopipe.inspect("apinfer")


def test_errors_say_their_kind(tmp_path):
    with pytest.raises(octopipe.DescriptionError) as e:
        octopipe.Pipeline("testsrc num-buffers=three ! boxes format=synthetic ! appsink")
    assert e.value.kind == "config"
    missing = tmp_path / "nowhere"
    with pytest.raises(octopipe.Error) as e:
        octopipe.run(f"images location={missing} ! boxes format=synthetic ! appsink")
    assert e.value.kind == "input", e.value
    assert str(missing) in str(e.value)
    # An error the library did not raise has no kind.
    assert octopipe.Error("made here").kind is None
