"""The PySpark releases flowspark runs on: 4.1 and later; an older one is refused at import, saying what to install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from flowspark.engine.spark.spark_version import OLDEST, OLDEST_TEXT, check_spark, installed_pyspark, unsupported
from flowspark.errors import FlowsparkRuntimeError

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.quick
@pytest.mark.parametrize(
    "version", ["4.1.0", "4.1.4", "4.2.0-preview1", "4.3.0", "4.3.0.dev0", "5.0.0", "not a version"]
)
def test_releases_from_the_oldest_on_are_supported(version: str) -> None:
    assert unsupported(version, "PySpark") is None
    check_spark(version, "Spark")


@pytest.mark.quick
@pytest.mark.parametrize("version", ["4.0.5", "3.5.1", "4.0.0-preview2"])
def test_older_releases_are_refused_with_what_to_install(version: str) -> None:
    problem = unsupported(version, "PySpark")
    assert problem is not None
    assert problem.startswith(f"flowspark needs PySpark >= {OLDEST_TEXT}, found {version}: ")
    assert "transformWithState" in problem and f"pip install 'pyspark>={OLDEST_TEXT}'" in problem
    with pytest.raises(
        FlowsparkRuntimeError, match=rf"flowspark needs Spark \(a server\) >= {OLDEST_TEXT}, found {version}"
    ):
        check_spark(version, "Spark (a server)")


@pytest.mark.quick
def test_the_installed_version_is_read_without_importing_pyspark() -> None:
    assert installed_pyspark() == pyspark.__version__


@pytest.mark.quick
def test_a_flow_run_with_an_older_pyspark_on_the_path_stops_at_import_with_the_error(tmp_path: Path) -> None:
    # A PySpark of a platform, put on the path ahead of the installed one.
    old = tmp_path / "platform" / "pyspark"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("raise AssertionError('flowspark imported the old PySpark before checking it')\n")
    (old / "version.py").write_text('__version__: str = "4.0.1"\n')
    (tmp_path / "my_flow.py").write_text(
        "from flowspark.dataflow import Dataflow\nimport flowspark.operators as op\n"
        "from flowspark.testing import TestingSource\nfrom flowspark.connectors.stdio import StdOutSink\n"
        "flow = Dataflow('f')\nop.output('out', op.input('inp', flow, TestingSource([1])), StdOutSink())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "platform"))
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "my_flow:flow"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: flowspark needs PySpark >= {OLDEST_TEXT}, found 4.0.1: "), done.stderr


@pytest.mark.quick
def test_ci_runs_the_quick_subset_on_every_supported_minor_but_the_newest() -> None:
    pin = re.search(r'"pyspark>=(\d+)\.(\d+),<(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pin is not None
    assert (int(pin[1]), int(pin[2])) == OLDEST
    newest_minor = int(pin[4]) - 1
    older = re.search(r'^OLDER_MINORS="([^"]*)"$', (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    assert older is not None
    assert older[1].split() == [f"{OLDEST[0]}.{minor}" for minor in range(OLDEST[1], newest_minor)]
