"""The type stubs (_octopipe.pyi) describe the module as it is."""

import ast
import pathlib

import octopipe
from octopipe import _octopipe

STUB = pathlib.Path(octopipe.__file__).with_name("_octopipe.pyi")


def stub_tree():
    assert STUB.exists(), f"{STUB} is not installed with the package"
    return ast.parse(STUB.read_text())


def test_the_stubs_name_every_public_class_and_function():
    tree = stub_tree()
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(_octopipe) if not n.startswith("_")}
    assert stubbed == public
    assert set(octopipe.__all__) == public | {"__version__"}


def test_the_stubs_name_every_method_and_attribute():
    for cls in (n for n in stub_tree().body if isinstance(n, ast.ClassDef)):
        real = getattr(_octopipe, cls.name)
        if issubclass(real, BaseException):
            continue
        stubbed = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
        public = {n for n in vars(real) if not n.startswith("_") or n in (
            "__dlpack__", "__dlpack_device__", "__array_interface__", "__cuda_array_interface__",
            "__enter__", "__exit__", "__iter__", "__next__", "__len__")}
        assert stubbed - {"__init__"} == public, cls.name
