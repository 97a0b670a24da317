"""User code is type-checked against flowspark's API the way Bytewax's is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BAD = '''
import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("typed")
nums = op.input("inp", flow, TestingSource([1, 2, 3]))
words = op.map("upper", nums, lambda x: x.upper())
'''


def _mypy(*targets: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", *targets], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def test_package_and_examples_pass_strict_mypy() -> None:
    done = _mypy("flowspark", "examples")
    assert done.returncode == 0, done.stdout


def test_mapper_misuse_is_a_type_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad_flow.py"
    bad.write_text(BAD)
    done = _mypy(str(bad))
    assert done.returncode == 1
    assert '"int" has no attribute "upper"' in done.stdout
