"""Type stubs of the extension module `octopipe._octopipe` (re-exported by `octopipe`)."""

import os
from types import TracebackType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

__version__: str

class Error(Exception):
    """An octopipe error: a stage that failed, a pipeline that cannot be opened. `kind` says
    what kind of failure it is ('input', 'config', 'model', 'device', 'unavailable', 'network',
    'io', 'not-found', 'conflict', 'closed', 'busy', 'stage', 'internal'), on every error the
    module raises and on each subclass ('config', 'closed', 'busy'); None only on one made
    outside the library."""

    report: Optional[Dict[str, Any]]
    kind: Optional[str]

class DescriptionError(Error):
    """A description that does not parse or check: the message is `octopipe run`'s
    (origin:line:column: what is wrong, then the line with a caret under the place)."""

    origin: str
    line: int
    column: int
    reason: str
    excerpt: str

class ClosedError(Error):
    """The pipeline was closed or stopped, or has ended: it takes no more frames."""

class FullError(Error):
    """push(..., block=False): the pipeline is full and did not take the frame."""

_Vars = Mapping[str, Union[str, int, float, "os.PathLike[str]"]]

class Frame:
    """A frame that went through the pipeline, with its objects."""

    @property
    def stream(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def pts_ms(self) -> Optional[float]: ...
    @property
    def source(self) -> str:
        """The frame's source as a URI (`file:///...`, `octopipe:NAME` for a pushed frame)."""
    @property
    def timestamp(self) -> str:
        """RFC 3339, UTC, milliseconds: capture time (live) or when decoded or pushed."""
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def objects(self) -> List[Dict[str, Any]]:
        """One dict per object with exactly the fields of its JSONL line (with several
        classifiers on the boxes, `classifiers`: each one's answer by its name)."""
    def objects_array(self) -> Dict[str, Any]:
        """`boxes` (N x 4 int32), `class_ids` (int64, -1), `scores` (float32, NaN),
        `tracks` (int64, -1), `labels` (str, ''): NumPy arrays; with several classifiers on the
        boxes, `classifiers` too: a dict of each classifier's name to its own `class_ids`,
        `scores` and `labels` arrays."""
    def __len__(self) -> int: ...

class Results(Iterator[Frame]):
    """The finished frames, in the order they finish; ends when the pipeline has ended."""

    def __iter__(self) -> "Results": ...
    def __next__(self) -> Frame: ...

class Tensor:
    """A batch's preprocessed crops, shared without a copy (DLPack, array interfaces)."""

    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str:
        """'float32' or 'float16'."""
    @property
    def layout(self) -> str:
        """'nchw' or 'nhwc'."""
    @property
    def device(self) -> str:
        """'cpu' or 'cuda:N'."""
    @property
    def data_ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def __array_interface__(self) -> Dict[str, Any]:
        """Host memory only (AttributeError on a GPU)."""
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """GPU memory only (AttributeError on the host)."""
    def __len__(self) -> int: ...

class Row:
    """Which crop a row of a batch's tensor is."""

    @property
    def stream(self) -> int: ...
    @property
    def frame(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def box(self) -> int: ...
    @property
    def bbox(self) -> Tuple[int, int, int, int]: ...
    @property
    def offset(self) -> int: ...
    @property
    def size(self) -> Tuple[int, int]: ...

class Batch:
    """One batch of an `appinfer` stage: run the model on `tensor`, then `set_labels(...)`."""

    @property
    def tensor(self) -> Tensor: ...
    @property
    def rows(self) -> List[Row]: ...
    @property
    def index(self) -> int: ...
    @property
    def labelled(self) -> bool: ...
    def set_labels(
        self,
        labels: Union[Sequence[int], Sequence[str], npt.ArrayLike, Any],
        scores: Optional[Union[Sequence[float], npt.ArrayLike, Any]] = None,
        *,
        softmax: bool = True,
    ) -> None:
        """Class ids or names (one per row, optional scores), or a rows x classes float array
        (logits; `softmax=False` for probabilities). NumPy arrays and torch tensors."""
    def __len__(self) -> int: ...

class Batches(Iterator[Batch]):
    """The batches of the pipeline's `appinfer` stage; ends when the stage ended."""

    def __iter__(self) -> "Batches": ...
    def __next__(self) -> Batch: ...

class Pipeline:
    """A pipeline built from a description (`octopipe run`'s language), opened and ready."""

    def __init__(
        self, description: str, vars: Optional[_Vars] = None, force: bool = False
    ) -> None:
        """`vars` fill the description's `${name}`s; `force=True` lets every output replace
        earlier output (`octopipe run --force`)."""
    @staticmethod
    def from_stages(
        stages: Sequence[Union[str, Tuple[str, Optional[Mapping[str, Any]]]]],
        vars: Optional[_Vars] = None,
        force: bool = False,
    ) -> "Pipeline":
        """One chain of stages, each a `(kind, props)` pair (property names or keywords to
        Python values, checked as `stage()` checks them) or a stage's text, joined by ` ! `."""
    def results(self) -> Results: ...
    def batches(self) -> Batches: ...
    def push(
        self,
        stream: Union[str, int],
        image: Any,
        boxes: Optional[npt.ArrayLike] = None,
        pts_ms: Optional[float] = None,
        *,
        block: bool = True,
        name: Optional[str] = None,
        format: Optional[str] = None,
    ) -> None:
        """A NumPy uint8 HxWx3 (RGB/BGR) or HxWx4 array, a 2-D one only with format= (HxW
        'gray8', uint16 HxW 'gray16'; (H*3/2)xW 'nv12'/'i420'), or a CUDA tensor (`__dlpack__`, `__cuda_array_interface__`); boxes N x 4 (x, y, w, h)."""
    def close(self, wait: bool = True) -> None: ...
    def stop(self) -> None: ...
    @property
    def report(self) -> Optional[Dict[str, Any]]: ...
    @property
    def error(self) -> Optional[str]: ...
    @property
    def running(self) -> bool: ...
    @property
    def stages(self) -> List[str]: ...
    @property
    def labels(self) -> List[str]: ...
    @property
    def app_sources(self) -> List[Tuple[str, int]]: ...
    def __enter__(self) -> "Pipeline": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def run(
    description: str, vars: Optional[_Vars] = None, force: bool = False
) -> Dict[str, Any]:
    """Run a whole pipeline; its report (the fields of `octopipe run --report json`).
    `force=True` lets every output replace earlier output (`octopipe run --force`)."""

def inspect(stage: Optional[str] = None) -> str:
    """The stages a description may use, or one stage's properties (`octopipe inspect`)."""

def properties(stage: str) -> List[Dict[str, str]]:
    """One stage's property table as `inspect(stage)` shows it: a dict per property with
    `name`, `keyword` (`name` with `_` for `-`), `type`, `default` and `doc`."""

def stage(kind: str, /, **props: Any) -> str:
    """A stage's description text from keyword arguments (`max_batch=64` is `max-batch=64`;
    None leaves one out), each checked against the stage's properties: `DescriptionError`
    with `octopipe run`'s message for an unknown stage or property or a bad value."""
