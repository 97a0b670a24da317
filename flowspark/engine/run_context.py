"""What a running flow lends its connectors: the Spark session and the run's state directory.

Sources and sinks are built by Bytewax's signatures, which carry no engine
handles; the connectors that drive Spark themselves (`SparkSource`,
`SparkSink`) find the run they are part of here.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

__all__ = ["RunContext", "current_run", "running"]


@dataclass(frozen=True)
class RunContext:
    """The session a flow runs on and the directory its recovery state lives in."""

    spark: Any
    state_dir: str
    """The recovery directory, or the run's temporary checkpoint without recovery."""


_current: Optional[RunContext] = None


@contextmanager
def running(context: RunContext) -> Iterator[None]:
    """Make `context` the current run for the duration of the block."""
    global _current
    previous, _current = _current, context
    try:
        yield
    finally:
        _current = previous


def current_run(step_id: str) -> RunContext:
    """The run in progress; a connector used outside a flowspark run is refused."""
    if _current is None:
        msg = f"step {step_id!r}: this connector only works inside a flowspark run"
        raise RuntimeError(msg)
    return _current
