"""Every public name a Bytewax 0.21.1 module holds (its own, not typing's or the standard library's) is in
flowspark's module of the same path."""

from __future__ import annotations

import importlib
import types
from typing import Any, List, TypeVar

import pytest

MODULES = [
    "dataflow",
    "operators",
    "operators.windowing",
    "inputs",
    "outputs",
    "testing",
    "run",
    "recovery",
    "visualize",
    "tracing",
    "errors",
    "connectors.files",
    "connectors.stdio",
    "connectors.demo",
    "connectors.kafka.serde",
]

NOT_KEPT = {
    # flowspark's `Operator` records its ports as dicts of stream ids.
    ("dataflow", "Port"),
    ("dataflow", "SinglePort"),
    ("dataflow", "MultiPort"),
    # A helper of Bytewax's private `_utils`, imported for its own use.
    ("operators.windowing", "partition"),
}


def _bytewax_own(module: Any) -> List[str]:
    names = []
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_") or isinstance(value, (types.ModuleType, TypeVar)):
            continue
        if str(getattr(value, "__module__", "")).startswith("bytewax"):
            names.append(name)
    return names


@pytest.mark.parametrize("path", MODULES)
def test_bytewax_module_names_are_kept(path: str) -> None:
    theirs = importlib.import_module(f"bytewax.{path}")
    ours = importlib.import_module(f"flowspark.{path}")
    missing = [name for name in _bytewax_own(theirs) if not hasattr(ours, name) and (path, name) not in NOT_KEPT]
    assert missing == []


PLUGINS_IMPORT = [
    # Bytewax's own plugins (bytewax-interval, bytewax-duckdb) and workshop code import these.
    ("operators", "_EMPTY"),
    ("operators", "_JoinState"),
    ("operators.windowing", "_EMPTY"),
    ("operators.windowing", "JoinEmitMode"),
    ("operators.windowing", "JoinInsertMode"),
    ("connectors.files", "_FileSourcePartition"),
    ("connectors.files", "_FileSinkPartition"),
    ("connectors.files", "_get_path_dev"),
]


@pytest.mark.parametrize("path", ["operators", "operators.windowing"])
def test_bytewax_type_variables_are_kept(path: str) -> None:
    theirs = importlib.import_module(f"bytewax.{path}")
    ours = importlib.import_module(f"flowspark.{path}")
    kept = [name for name in dir(theirs) if isinstance(getattr(theirs, name), TypeVar)]
    assert kept
    assert [name for name in kept if not isinstance(getattr(ours, name, None), TypeVar)] == []


@pytest.mark.parametrize(("path", "name"), PLUGINS_IMPORT)
def test_the_private_names_bytewax_plugins_import_are_kept(path: str, name: str) -> None:
    theirs = importlib.import_module(f"bytewax.{path}")
    ours = importlib.import_module(f"flowspark.{path}")
    assert hasattr(theirs, name)
    assert hasattr(ours, name)
