"""A step's failure reaches the user once, as the run's error, not also as py4j's logged traceback."""

from __future__ import annotations

import logging
import sys

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.proxy_log import ProxyFailureFilter
from flowspark.errors import FlowsparkRuntimeError
from flowspark.testing import TestingSink, TestingSource, run_main


def _explode(x: int) -> int:
    msg = f"bad item {x}"
    raise ValueError(msg)


def test_a_failing_step_is_not_logged_by_py4j(caplog: pytest.LogCaptureFixture) -> None:
    flow = Dataflow("noisy")
    op.output("out", op.map("explode", op.input("inp", flow, TestingSource([1])), _explode), TestingSink([]))
    with caplog.at_level(logging.WARNING), pytest.raises(FlowsparkRuntimeError, match="noisy.explode"):
        run_main(flow)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("py4j")] == []


def _record(message: str, error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        return logging.LogRecord("py4j.clientserver", logging.ERROR, __file__, 1, message, None, sys.exc_info())


def test_py4j_keeps_its_other_records() -> None:
    keep = ProxyFailureFilter()
    proxy = "There was an exception while executing the Python Proxy on the Python Side."
    # An exception raised outside flowspark's package (here, in the tests) is not flowspark's to hide.
    assert keep.filter(_record(proxy, ValueError("a user's own proxy failed")))
    assert keep.filter(
        logging.LogRecord("py4j.clientserver", logging.ERROR, __file__, 1, "Error while sending", None, None)
    )
