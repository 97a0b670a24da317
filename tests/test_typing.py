"""User code is type-checked against flowspark's API the way Bytewax's is."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

BAD = """
import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("typed")
nums = op.input("inp", flow, TestingSource([1, 2, 3]))
words = op.map("upper", nums, lambda x: x.upper())
"""


def _mypy(*targets: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_package_and_examples_pass_strict_mypy() -> None:
    done = _mypy("flowspark", "examples")
    assert done.returncode == 0, done.stdout


def test_mapper_misuse_is_a_type_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad_flow.py"
    bad.write_text(BAD)
    done = _mypy(str(bad))
    assert done.returncode == 1
    assert '"int" has no attribute "upper"' in done.stdout


GENERIC_MODULES = [
    "inputs",
    "outputs",
    "testing",
    "dataflow",
    "operators",
    "operators.windowing",
    "connectors.files",
    "connectors.stdio",
    "connectors.demo",
    "connectors.kafka",
    "connectors.kafka.operators",
]
"""Modules of both packages whose generic classes must take the same type arguments."""


def _subscriptable_counts(cls: Any) -> List[int]:
    """How many type arguments (1 to 4) `cls[...]` accepts."""
    counts = []
    for n in range(1, 5):
        try:
            cls[(int,) * n] if n > 1 else cls[int]
        except TypeError:
            continue
        counts.append(n)
    return counts


def _generic_classes() -> List[Tuple[str, str]]:
    found = []
    for module in GENERIC_MODULES:
        bytewax_module = importlib.import_module(f"bytewax.{module}")
        for name, obj in vars(bytewax_module).items():
            public = not name.startswith("_") and inspect.isclass(obj) and obj.__module__ == bytewax_module.__name__
            if public and getattr(obj, "__parameters__", ()):
                found.append((module, name))
    return found


@pytest.mark.parametrize(("module", "name"), _generic_classes())
def test_generic_classes_take_bytewax_type_arguments(module: str, name: str) -> None:
    bytewax_cls = getattr(importlib.import_module(f"bytewax.{module}"), name)
    flowspark_module = importlib.import_module(f"flowspark.{module}")
    if name == "MultiPort":
        pytest.skip("Bytewax's port bookkeeping type; flowspark's operators keep stream ids instead")
    flowspark_cls = getattr(flowspark_module, name)
    assert _subscriptable_counts(flowspark_cls) == _subscriptable_counts(bytewax_cls)


SAMPLE = ROOT / "tests" / "typing_samples" / "generic_user_flow.py"


def test_user_flow_subscripting_generics_passes_strict_mypy(tmp_path: Path) -> None:
    as_bytewax = tmp_path / "bytewax_generic_user_flow.py"
    as_bytewax.write_text(SAMPLE.read_text().replace("flowspark", "bytewax"))
    bytewax_done = _mypy(str(as_bytewax))
    assert bytewax_done.returncode == 0, bytewax_done.stdout
    done = _mypy(str(SAMPLE))
    assert done.returncode == 0, done.stdout
