"""`SparkSource`: Spark's own streaming sources in a flow, on real files and real Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import flowspark.operators as op
from flowspark.connectors.spark import SparkSource
from flowspark.dataflow import Dataflow
from flowspark.errors import FlowsparkRuntimeError
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, run_main

SCHEMA = "user string, n long, at timestamp"


def _write_json(path: Path, rows: List[Dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _events(first: int, count: int) -> List[Dict[str, Any]]:
    return [{"user": f"u{i % 3}", "n": i, "at": f"2024-01-01T00:00:{i % 60:02d}Z"} for i in range(first, first + count)]


def _read_json_flow(inp: Path, out: List[Any], **kwargs: Any) -> Dataflow:
    flow = Dataflow("spark_in")
    rows = op.input("inp", flow, SparkSource("json", {"path": str(inp)}, SCHEMA, **kwargs))
    op.output("out", rows, TestingSink(out))
    return flow


def _run(flow: Dataflow, recovery: Optional[Path] = None) -> None:
    run_main(flow, recovery_config=RecoveryConfig(str(recovery)) if recovery else None)


def test_rows_arrive_as_dicts_with_typed_values_and_the_run_ends(tmp_path: Path) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    _write_json(inp / "a.json", _events(0, 5))
    _write_json(inp / "b.json", _events(5, 2500))
    out: List[Any] = []
    _run(_read_json_flow(inp, out, batch_size=100))
    assert len(out) == 2505
    assert sorted(row["n"] for row in out) == list(range(2505))
    first = next(row for row in out if row["n"] == 7)
    assert first == {"user": "u1", "n": 7, "at": datetime(2024, 1, 1, 0, 0, 7, tzinfo=timezone.utc)}
    assert first["at"].utcoffset() is not None


def test_a_resumed_run_reads_only_what_arrived_since(tmp_path: Path) -> None:
    inp, recovery = tmp_path / "in", tmp_path / "recovery"
    inp.mkdir()
    _write_json(inp / "a.json", _events(0, 10))
    first: List[Any] = []
    _run(_read_json_flow(inp, first), recovery)
    _write_json(inp / "b.json", _events(10, 4))
    second: List[Any] = []
    _run(_read_json_flow(inp, second), recovery)
    third: List[Any] = []
    _run(_read_json_flow(inp, third), recovery)
    assert sorted(row["n"] for row in first) == list(range(10))
    assert sorted(row["n"] for row in second) == list(range(10, 14))
    assert third == []
    spool = next((recovery / "spark-sources").iterdir()) / "spool"
    assert list(spool.iterdir()) == [], "committed spool files are removed"


def test_an_unknown_format_names_the_step(tmp_path: Path) -> None:
    flow = Dataflow("bad_format")
    op.output("out", op.input("inp", flow, SparkSource("no-such-format", {"path": str(tmp_path)})), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError) as raised:
        _run(flow)
    assert "bad_format.inp" in str(raised.value.__cause__ or raised.value)
    assert "no-such-format" in str(raised.value.__cause__ or raised.value)


def test_a_file_source_without_schema_is_refused_with_the_step_id(tmp_path: Path) -> None:
    flow = Dataflow("no_schema")
    op.output("out", op.input("inp", flow, SparkSource("json", {"path": str(tmp_path)})), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError) as raised:
        _run(flow)
    message = str(raised.value.__cause__ or raised.value)
    assert "no_schema.inp" in message
    assert "chema" in message


TAIL_FLOW = """
import os
import flowspark.operators as op
from flowspark.connectors.files import FileSink
from flowspark.connectors.spark import SparkSource
from flowspark.dataflow import Dataflow

flow = Dataflow("tail")
rows = op.input("inp", flow, SparkSource("json", {"path": os.environ["TAIL_IN"]}, "n long", tail=True,
                                         interval=__import__("datetime").timedelta(seconds=0.2)))
op.output("out", op.map("line", rows, lambda row: ("all", str(row["n"]))), FileSink(os.environ["TAIL_OUT"]))
"""


def test_tail_keeps_reading_files_that_arrive_while_running(tmp_path: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out.txt"
    inp.mkdir()
    (tmp_path / "tail_flow.py").write_text(TAIL_FLOW)
    _write_json(inp / "0.json", [{"n": 0}])
    env = dict(os.environ, TAIL_IN=str(inp), TAIL_OUT=str(out), PYTHONPATH=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", "tail_flow:flow", "-s", "0.2"],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for n in range(1, 4):
            deadline = time.monotonic() + 90
            while not (out.exists() and str(n - 1) in out.read_text().split()):
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the tailing source did not pick up a new file"
                time.sleep(0.2)
            _write_json(inp / f"{n}.json", [{"n": n}])
        assert proc.poll() is None, "a tailing source never ends by itself"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
