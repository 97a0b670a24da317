"""The wheel holds what an installed flowspark needs: the README's first command runs from it.

The wheel is built from a copy of the sources (so no build output lands in
the checkout), installed with its dependencies into a fresh virtualenv, and
the README's first `python -m flowspark.run` command runs there from an
empty directory, where the checkout is out of reach.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import List

import pytest

from flowspark.examples.wordcount import TEXT, tokenize

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.wheel


def _readme_first_run_command() -> List[str]:
    """The first `python -m flowspark.run ...` command in the README, without what precedes it on its line."""
    for line in (ROOT / "README.md").read_text().splitlines():
        _, found, rest = line.partition("python -m flowspark.run ")
        if found and line.startswith("    "):
            return ["python", "-m", "flowspark.run", *shlex.split(rest)]
    msg = "the README has no `python -m flowspark.run` command"
    raise AssertionError(msg)


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    shutil.copytree(ROOT / "flowspark", source / "flowspark", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = dist.glob("flowspark-*.whl")
    return wheel


def test_wheel_installs_and_runs_the_readme_first_command(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "flowspark/examples/sample_data/wordcount.txt" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr

    command = _readme_first_run_command()
    assert command[-1] == "flowspark.examples.wordcount:flow"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    # Spark's files and flowspark's caches go under this test's home, and no
    # class archive is written for a virtualenv that is deleted afterwards.
    env.update(HOME=str(tmp_path / "home"), FLOWSPARK_CLASS_ARCHIVE="0")
    done = subprocess.run(
        [python, *command[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    words = Counter(w for line in TEXT.read_text().splitlines() for w in tokenize(line.lower()))
    got = {ast.literal_eval(line) for line in done.stdout.splitlines()}
    assert got == set(words.items())
