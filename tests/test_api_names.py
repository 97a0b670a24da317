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
