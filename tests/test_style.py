"""The code passes the linter and is formatted as `pyproject.toml`'s ruff settings say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("flowspark", "tests", "benchmarks", "examples", "docs/_hooks")


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *CHECKED], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
