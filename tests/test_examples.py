"""Every example runs with `python -m flowspark.run` and prints what Bytewax prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(engine: str, module: str, cwd: Path) -> List[str]:
    done = subprocess.run(
        [sys.executable, "-m", f"{engine}.run", f"{module}:flow"],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("name", ["wordcount", "user_sessions"])
def test_example_output_matches_bytewax(name: str, tmp_path: Path) -> None:
    source = (ROOT / "examples" / f"{name}.py").read_text()
    (tmp_path / "sample_data").symlink_to(ROOT / "examples" / "sample_data")
    (tmp_path / f"bw_{name}.py").write_text(source.replace("flowspark", "bytewax"))
    expected = _run("bytewax", f"bw_{name}", tmp_path)
    got = _run("flowspark", f"examples.{name}", ROOT)
    assert expected
    assert sorted(got) == sorted(expected)
