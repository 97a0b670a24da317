"""After `pip install -e .` (the README's command) or a regular install, mypy checks user flows anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USER_FLOW = """
import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("typed")
nums = op.input("inp", flow, TestingSource([1, 2, 3]))
words = op.map("upper", nums, lambda x: x.upper())
"""


def _run(*args: object, cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def _mypy_user_flow(python: Path, user_dir: Path) -> str:
    done = _run(
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--python-executable",
        python,
        "flow.py",
        cwd=user_dir,
    )
    return done.stdout


def test_editable_and_regular_installs_type_check_user_flows(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    shutil.copytree(ROOT / "flowspark", checkout / "flowspark", ignore=shutil.ignore_patterns("__pycache__"))
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    (user_dir / "flow.py").write_text(USER_FLOW)
    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"

    editable = _run(python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", checkout, cwd=tmp_path)
    assert editable.returncode == 0, editable.stderr
    checked = _mypy_user_flow(python, user_dir)
    assert "Cannot find implementation" not in checked, checked
    assert 'flow.py:8: error: "int" has no attribute "upper"' in checked, checked

    _run(python, "-m", "pip", "uninstall", "--yes", "flowspark", cwd=tmp_path)
    regular = _run(python, "-m", "pip", "install", "--quiet", "--no-deps", checkout, cwd=tmp_path)
    assert regular.returncode == 0, regular.stderr
    checked = _mypy_user_flow(python, user_dir)
    assert "Cannot find implementation" not in checked, checked
    assert 'flow.py:8: error: "int" has no attribute "upper"' in checked, checked
