"""What step functions log in Spark's workers reaches the user's logging handlers, with the user's levels and formats."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest
from support.oracle import ENGINES, Engine, run_on

from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.worker_logs import LogLevels
from flowspark.engine.reports.worker_prints import OUTPUT_CALL, deliver, prints_to_driver

LOGGER = "flowspark_tests.user_flow"
"""The user's logger: a name of their own, as `logging.getLogger(__name__)` gives."""


def _noisy(x: int) -> int:
    log = logging.getLogger(LOGGER)
    log.debug("dropped %s", x)
    print(f"print {x}")
    log.info("saw %s", x)
    if x == 2:
        try:
            msg = "two"
            raise ValueError(msg)
        except ValueError:
            log.exception("failed on %s", x)
    return x


def _build(e: Engine) -> Tuple[Any, Any]:
    flow = e.Dataflow("logs")
    out: List[Any] = []
    e.op.output(
        "out", e.op.map("noisy", e.op.input("inp", flow, e.TestingSource([1, 2, 3])), _noisy), e.TestingSink(out)
    )
    return flow, {"out": out}


class _ToStdout(logging.Handler):
    """A handler writing to whatever standard output is when a record comes (pytest swaps it between phases)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stdout.write(self.format(record) + "\n")


@pytest.fixture
def user_logging() -> Iterator[None]:
    """The user's configuration: INFO on their logger, a handler with a format of theirs on standard output."""
    logger = logging.getLogger(LOGGER)
    handler = _ToStdout()
    handler.setFormatter(logging.Formatter("LOG %(levelname)s %(name)s %(filename)s %(funcName)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


@pytest.mark.parametrize("engine", ENGINES)
def test_records_reach_the_users_handlers_with_their_level_and_format_in_order_with_prints(
    engine: str, user_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    run_on(engine, _build)
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(("LOG", "print", "Trace", "ValueError"))
    ]
    assert lines == [
        "print 1",
        "LOG INFO flowspark_tests.user_flow test_worker_logs.py _noisy: saw 1",
        "print 2",
        "LOG INFO flowspark_tests.user_flow test_worker_logs.py _noisy: saw 2",
        "LOG ERROR flowspark_tests.user_flow test_worker_logs.py _noisy: failed on 2",
        "Traceback (most recent call last):",
        "ValueError: two",
        "print 3",
        "LOG INFO flowspark_tests.user_flow test_worker_logs.py _noisy: saw 3",
    ]


def test_a_worker_applies_the_drivers_levels_and_sets_its_own_root_handlers_aside(
    server: DriverServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.register(OUTPUT_CALL, deliver)
    worker_root_handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.addHandler(worker_root_handler)
    link = server.link
    try:
        assert link.logging == LogLevels.of_this_process()
        with prints_to_driver(link):
            assert root.handlers != [worker_root_handler]
            logging.getLogger("flowspark_tests.other").info("below the driver's level")
            logging.getLogger("flowspark_tests.other").warning("kept %d", 1)
        assert worker_root_handler in root.handlers
    finally:
        root.removeHandler(worker_root_handler)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("flowspark_tests.other", "WARNING", "kept 1")
    ]


def test_a_warning_from_a_step_names_its_file_and_line_as_on_bytewax(tmp_path: Path) -> None:
    module = tmp_path / "warning_flow.py"
    module.write_text(
        textwrap.dedent(
            """
            import warnings

            import flowspark.operators as op
            from flowspark.connectors.stdio import StdOutSink
            from flowspark.dataflow import Dataflow
            from flowspark.testing import TestingSource


            def careful(x):
                warnings.warn("careful")
                return x


            flow = Dataflow("warns")
            op.output("out", op.map("m", op.input("inp", flow, TestingSource([1])), careful), StdOutSink())
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "warning_flow:flow", "-w", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    at = lines.index(f"{module}:11: UserWarning: careful")
    assert lines[at + 1].strip() == 'warnings.warn("careful")'
