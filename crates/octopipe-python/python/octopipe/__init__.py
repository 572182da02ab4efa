"""octopipe for Python: real-time drone-video preprocessing with ragged crop batches.

    import octopipe

    with octopipe.Pipeline("images location=clip/images ! boxes format=det location=clip/annotations"
                           " ! classify model=m.onnx ! jsonl location=objects.jsonl") as p:
        for frame in p.results():
            print(frame.index, [o["label"] for o in frame.objects])

`Pipeline` takes the description language of `octopipe run`; `push()` feeds an `app` source
with NumPy arrays or CUDA tensors; `batches()` hands an `appinfer` stage's tensors to your own
model (zero-copy through DLPack) and `Batch.set_labels()` sends its answer to the sinks;
`run()` runs a whole pipeline and returns its report; `inspect()` lists the stages.

Stages can also be written from Python values, checked against each stage's declared
properties (the table `inspect()` prints; `properties()` gives it as data):

    octopipe.Pipeline.from_stages([
        ("testsrc", {"num-buffers": 30, "width": 320, "height": 240}),
        ("boxes", dict(format="synthetic", count=4)),
        octopipe.stage("batch", max_frames=2),
        ("appsink", {}),
    ])
"""

import os as _os


def _find_onnxruntime() -> None:
    # The library loads ONNX Runtime at run time from ORT_DYLIB_PATH: point it at the
    # onnxruntime wheel's library when the environment does not say (scripts/env.sh does).
    if _os.environ.get("ORT_DYLIB_PATH"):
        return
    try:
        import importlib.util

        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        return
    if spec is None or not spec.submodule_search_locations:
        return
    capi = _os.path.join(list(spec.submodule_search_locations)[0], "capi")
    try:
        names = sorted(n for n in _os.listdir(capi) if n.startswith("libonnxruntime.so"))
    except OSError:
        return
    if names:
        # The most specific name (libonnxruntime.so.1.31.1) comes last.
        _os.environ["ORT_DYLIB_PATH"] = _os.path.join(capi, names[-1])


_find_onnxruntime()

from ._octopipe import (  # noqa: E402
    Batch,
    Batches,
    ClosedError,
    DescriptionError,
    Error,
    Frame,
    FullError,
    Pipeline,
    Results,
    Row,
    Tensor,
    __version__,
    inspect,
    properties,
    run,
    stage,
)

__all__ = [
    "Batch",
    "Batches",
    "ClosedError",
    "DescriptionError",
    "Error",
    "Frame",
    "FullError",
    "Pipeline",
    "Results",
    "Row",
    "Tensor",
    "__version__",
    "inspect",
    "properties",
    "run",
    "stage",
]
