"""Every public operator and connector shows a runnable example in its docstring, as Bytewax's do, and each runs:
the fenced `python` blocks are executed (their `assert`s check the output), and `>>>` examples run as doctests."""

from __future__ import annotations

import doctest
import importlib
import inspect
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "flowspark"

OPERATOR_MODULES = ("flowspark.operators", "flowspark.operators.windowing")

CONNECTOR_MODULES = (
    "flowspark.connectors.files",
    "flowspark.connectors.stdio",
    "flowspark.connectors.demo",
    "flowspark.connectors.kafka",
    "flowspark.connectors.kafka.operators",
    "flowspark.connectors.spark",
    "flowspark.connectors.postgres",
)

CONNECTORS = {
    "flowspark.connectors.files": ("FileSource", "DirSource", "CSVSource", "FileSink", "DirSink"),
    "flowspark.connectors.stdio": ("StdInSource", "StdOutSink"),
    "flowspark.connectors.demo": ("RandomMetricSource",),
    "flowspark.connectors.kafka": ("KafkaSource", "KafkaSink"),
    "flowspark.connectors.kafka.operators": ("input", "output", "deserialize_value", "serialize_value"),
    "flowspark.connectors.spark": ("SparkSource", "SparkSink"),
    "flowspark.connectors.postgres": ("PostgresSink",),
}
"""The sources, sinks and Kafka steps a user writes a flow with."""

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _operators() -> List[Tuple[str, str]]:
    found = []
    for module in OPERATOR_MODULES:
        namespace = importlib.import_module(module)
        found += [(module, name) for name in namespace.__all__ if inspect.isfunction(getattr(namespace, name))]
    return found


def _public() -> List[Tuple[str, str]]:
    return _operators() + [(module, name) for module, names in CONNECTORS.items() for name in names]


def _examples(module: str, name: str) -> List[str]:
    doc = inspect.getdoc(getattr(importlib.import_module(module), name)) or ""
    return _BLOCK.findall(doc)


@pytest.mark.parametrize(("module", "name"), _public(), ids=lambda part: part)
def test_its_docstring_example_runs(module: str, name: str) -> None:
    examples = _examples(module, name)
    assert examples, f"{module}.{name} has no ```python example in its docstring"
    for code in examples:
        namespace: Dict[str, Any] = {"__name__": f"example_{name}"}
        exec(compile(code, f"<example of {module}.{name}>", "exec"), namespace)


def _modules_with_doctests() -> List[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text():
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


@pytest.mark.parametrize("module", _modules_with_doctests())
def test_its_doctests_pass(module: str) -> None:
    failed, tried = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert tried > 0
    assert failed == 0
