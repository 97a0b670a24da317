"""Keep py4j from logging, as an error of its own, a failure that the run raises anyway.

flowspark's `foreachBatch` writer is a Python object the JVM calls through
py4j.  When a micro-batch fails (a step raised, say), the writer's call
raises, py4j logs the whole exception at ERROR under `py4j.clientserver`,
and then the query fails with it, which the run turns into the step's
error.  A program that sets up logging would print Spark's and py4j's
frames first.  Bytewax prints nothing of the kind.  The filter drops
only those records whose exception went through flowspark's own code;
py4j's other records pass.
"""

from __future__ import annotations

import logging
import os
from types import TracebackType
from typing import Optional

import flowspark

_PACKAGE = os.path.dirname(os.path.abspath(flowspark.__file__)) + os.sep
_PROXY_FAILED = "There was an exception while executing the Python Proxy"
_LOGGER = "py4j.clientserver"


def _through_flowspark(tb: Optional[TracebackType]) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            return True
        tb = tb.tb_next
    return False


class ProxyFailureFilter(logging.Filter):
    """Drops py4j's report of an exception raised by one of flowspark's Python objects that the JVM called."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(_PROXY_FAILED) or not record.exc_info:
            return True
        return not _through_flowspark(record.exc_info[2])


def quiet_proxy_failures() -> None:
    """Install the filter on py4j's logger, once per process."""
    logger = logging.getLogger(_LOGGER)
    if not any(isinstance(f, ProxyFailureFilter) for f in logger.filters):
        logger.addFilter(ProxyFailureFilter())
