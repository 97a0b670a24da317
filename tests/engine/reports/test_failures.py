"""Failures of user code reach the user as Bytewax raises them, and input data can never steer that.

A step's error crosses Spark as text that may hold input data; the tests
feed lines that imitate every marker flowspark ever used, and check that no
pickle in them is loaded and the user still gets their own error.
"""

from __future__ import annotations

import base64
import pickle
import secrets
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from support.oracle import cause_chain

import flowspark.operators as op
from flowspark.connectors.files import FileSource
from flowspark.dataflow import Dataflow
from flowspark.errors import FlowsparkRuntimeError
from flowspark.testing import TestingSink, TestingSource, run_main


class _Exploit:
    """Unpickling this creates a file: proof that input data was loaded as a pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (open, (str(self.marker), "w"))


def _hostile_markers(marker: Path) -> List[str]:
    blob = base64.b64encode(pickle.dumps(_Exploit(marker))).decode()
    return [
        f"FLOWSPARK-FAILURE[{blob}]",
        f"flowspark-failure-{secrets.token_hex(16)}",
        f"(flowspark-failure-{'0' * 32}) FLOWSPARK-FAILURE[{blob}]",
    ]


PRICES: Dict[str, int] = {"apple": 3}


class PriceError(Exception):
    pass


def _parse_int(line: str) -> int:
    return int(line)


def _price(line: str) -> int:
    return PRICES[line]


def _checked(line: str) -> str:
    msg = f"no price for {line!r}, sorry"
    raise PriceError(msg)


@pytest.mark.parametrize(
    ("mapper", "error_type", "position"),
    [(_parse_int, ValueError, "alone"), (_price, KeyError, "start"), (_checked, PriceError, "end")],
)
def test_input_that_imitates_failure_records_only_gives_the_users_error(
    tmp_path: Path, mapper: Callable[[str], Any], error_type: type, position: str
) -> None:
    marker = tmp_path / "exploited"
    lines = []
    for fake in _hostile_markers(marker):
        lines.append({"alone": fake, "start": f"{fake} and more", "end": f"some text {fake}"}[position])
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    flow = Dataflow("hostile")
    parsed = op.map("parse", op.input("inp", flow, FileSource(source)), mapper)
    op.output("out", parsed, TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(flow)
    assert "hostile.parse" in str(info.value)
    assert any(isinstance(c, error_type) for c in cause_chain(info.value))
    assert not marker.exists()


def _explode_on_value(state: Any, value: str) -> Any:
    msg = f"cannot count {value}"
    raise ValueError(msg)


def test_a_stateful_steps_failure_carrying_input_data_names_the_step(tmp_path: Path) -> None:
    marker = tmp_path / "exploited"
    flow = Dataflow("hostile")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(_hostile_markers(marker))), lambda _: "k")
    op.output("out", op.stateful_map("count", keyed, _explode_on_value), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match="hostile.count") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, ValueError)
    assert not marker.exists()


def test_the_users_traceback_from_a_worker_shows_their_file_and_line() -> None:
    flow = Dataflow("tb")
    op.output("out", op.map("parse", op.input("inp", flow, TestingSource(["x"])), _parse_int), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(flow)
    cause = info.value.__cause__
    assert isinstance(cause, ValueError)
    notes = "\n".join(getattr(cause, "__notes__", []))
    assert __file__ in notes and "_parse_int" in notes and "return int(line)" in notes
    assert "flowspark/engine" not in notes and "pyspark" not in notes


RETRIES = """
import os, signal, sys
from pyspark import TaskContext
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import ReportedFailures, StepFailure, reported_to
from flowspark.engine.spark.session import get_session

calls = sys.argv[1]
server = DriverServer()
box = ReportedFailures(server)
link = server.link


def user_code(kind):
    attempt = TaskContext.get().attemptNumber()
    with open(calls, "a") as f:
        f.write(f"{kind} {attempt}\\n")
    if attempt == 0 and kind == "raises":
        raise StepFailure("error calling `mapper` in step 'retries.boom'", ValueError("boom"))
    if attempt == 0 and kind == "killed":
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would
    return kind


def task(kind, _items):
    with reported_to(link):
        yield user_code(kind)


spark = get_session("local[1,3]")  # a local master that retries a task, as a cluster does
print(spark.sparkContext.parallelize([0], 1).mapPartitions(lambda items: task("killed", items)).collect())
try:
    spark.sparkContext.parallelize([0], 1).mapPartitions(lambda items: task("raises", items)).collect()
except Exception as ex:
    print("attempt 2 of task 0" in str(ex), "runs no user code" in str(ex), repr(box.find(str(ex))), repr(box.first()))
"""


def test_a_retried_task_runs_user_code_again_unless_the_user_s_code_failed(tmp_path: Path) -> None:
    """Spark retries a task whatever failed it: a killed Python worker's task runs again, a raising one's does not."""
    import subprocess
    import sys

    calls = tmp_path / "calls.txt"
    done = subprocess.run(
        [sys.executable, "-c", RETRIES, str(calls)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    retried, refused = done.stdout.splitlines()
    assert retried == "['killed']"
    # The failing attempt reported its failure; the two retries asked the driver and ran no user code, and
    # the last one's error names the first failure.
    assert refused == (
        "True True FlowsparkRuntimeError(\"error calling `mapper` in step 'retries.boom'\") "
        "FlowsparkRuntimeError(\"error calling `mapper` in step 'retries.boom'\")"
    )
    assert calls.read_text().splitlines() == ["killed 0", "killed 1", "raises 0"]
