"""The user's Spark settings from outside flowspark: `spark-defaults.conf`, `--properties-file`, spark-submit's.

Each run is a child process (a process has one session) that runs a flow
with `python -m flowspark.run`'s arguments, or under spark-submit, and then
prints what its session was started with: master, application name, the
log level Spark's root logger has, and settings flowspark also sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pyspark
import pytest
from support.failures import usage_error

from flowspark.engine.spark.spark_defaults import parse_properties
from flowspark.run import main

_FLOW = """
import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("probe")
op.output("out", op.input("inp", flow, TestingSource([1, 2])), StdOutSink())
"""

_SETTINGS_AFTER_RUN = """
import json, sys
from pyspark.sql import SparkSession
from flowspark.run import main

code = main(sys.argv[1:])
context = SparkSession.getActiveSession().sparkContext
conf = context.getConf()
root = context._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
print(json.dumps({"code": code, "master": context.master, "app": context.appName, "log": root.getLevel().toString(),
                  "memory": conf.get("spark.executor.memory", None), "failures": conf.get("spark.task.maxFailures")}))
"""


def _settings(tmp_path: Path, command: List[str], **env: str) -> Dict[str, Any]:
    """What the session of a run of `command` (run from `tmp_path`, which holds the flow and the script) was started with."""
    (tmp_path / "probe_flow.py").write_text(_FLOW)
    (tmp_path / "settings_after_run.py").write_text(_SETTINGS_AFTER_RUN)
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "1" in lines and "2" in lines, done.stdout  # the flow's output
    found: Dict[str, Any] = json.loads(lines[-1])
    return found


def _run(tmp_path: Path, *args: str, **env: str) -> Dict[str, Any]:
    """`python -m flowspark.run`'s run of the flow with `args`, on a session in its own process (not the warm server's)."""
    return _settings(
        tmp_path,
        [sys.executable, "settings_after_run.py", "probe_flow:flow", "--no-progress", *args],
        FLOWSPARK_WARM_SPARK="0",
        **env,
    )


@pytest.mark.quick
def test_a_properties_file_reads_as_spark_submit_reads_it() -> None:
    text = "\n".join(
        [
            "# a comment",
            "  ! another",
            "spark.executor.memory   4g",
            "spark.app.name=my app ",
            "spark.log.level : WARN",
            "spark.driver.extraJavaOptions -Da=1 \\",
            "    -Db=2",
            r"spark.key\ with\:odd\=chars = caf\u00e9\tand a backslash \\",
            "not.spark.setting 1",
            "spark.empty",
            "",
        ]
    )
    assert parse_properties(text) == {
        "spark.executor.memory": "4g",
        "spark.app.name": "my app",
        "spark.log.level": "WARN",
        "spark.driver.extraJavaOptions": "-Da=1 -Db=2",
        "spark.key with:odd=chars": "café\tand a backslash \\",
        "spark.empty": "",
    }


@pytest.mark.quick
def test_a_run_is_named_after_its_flow_and_keeps_sparks_log_off(tmp_path: Path) -> None:
    started = _run(tmp_path)
    assert started["app"] == "flowspark: probe"
    assert started["log"] == "OFF"
    assert started["master"].startswith("local[")
    assert started["failures"] is None  # Spark's own retries stay on


def test_spark_defaults_then_the_properties_file_then_conf_win_over_flowspark(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.executor.memory 5g\nspark.task.maxFailures 2\nspark.log.level WARN\nspark.app.name from-defaults\n"
    )
    (tmp_path / "run.properties").write_text("spark.executor.memory=4g\nspark.master=local[1]\n")
    started = _run(
        tmp_path,
        "--properties-file",
        "run.properties",
        "--conf",
        "spark.executor.memory=1g",
        SPARK_CONF_DIR=str(conf_dir),
    )
    assert started == {
        "code": 0,
        "master": "local[1]",
        "app": "from-defaults",
        "log": "WARN",
        "memory": "1g",
        "failures": "2",
    }


def test_a_driver_spark_submit_starts_keeps_its_master_and_settings(tmp_path: Path) -> None:
    (tmp_path / "submit.properties").write_text("spark.task.maxFailures 3\n")
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    started = _settings(
        tmp_path,
        [
            submit,
            "--master",
            "local[1]",
            "--conf",
            "spark.log.level=ERROR",
            "--properties-file",
            "submit.properties",
            "settings_after_run.py",
            "probe_flow:flow",
            "--no-progress",
        ],
    )
    assert started == {
        "code": 0,
        "master": "local[1]",
        "app": "flowspark: probe",
        "log": "ERROR",
        "memory": None,
        "failures": "3",
    }


@pytest.mark.quick
def test_a_properties_file_that_cant_be_read_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.properties"
    err = usage_error(capsys, main, ["some_flow:flow", "--properties-file", str(missing)])
    assert f"can't read the --properties-file {str(missing)!r}: No such file or directory" in err
