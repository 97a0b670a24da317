"""Carry a user's exception from a Spark worker back to the driver.

Spark reports a failed Python task to the driver only as text.  So the
worker raises a `StepFailure` whose message embeds the pickled original
exception between markers; the driver finds it in the query's error text and
re-raises it as Bytewax would: a `FlowsparkRuntimeError` naming the step and
key, caused by the user's exception (or, for routing errors Bytewax raises
bare, the bare exception).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Callable, Optional, TypeVar

import cloudpickle

from flowspark.errors import FlowsparkRuntimeError

_MARK = re.compile(r"FLOWSPARK-FAILURE\[([A-Za-z0-9+/=]+)\]")

T = TypeVar("T")


class StepFailure(Exception):
    """Raised in a worker when user code fails; its text carries the original exception."""

    def __init__(self, message: str, cause: BaseException, bare: bool = False) -> None:
        try:
            blob = cloudpickle.dumps((message, cause, bare))
        except Exception:  # an unpicklable exception still gets its text across
            blob = cloudpickle.dumps((message, RuntimeError(repr(cause)), bare))
        encoded = base64.b64encode(blob).decode()
        super().__init__(f"{message}: {cause!r} FLOWSPARK-FAILURE[{encoded}]")


def guarded(step_id: str, what: str, func: Callable[..., T], *args: Any, key: Optional[str] = None) -> T:
    """Call user code; on failure raise a `StepFailure` naming the step (and key)."""
    try:
        return func(*args)
    except StepFailure:
        raise
    except Exception as ex:
        where = f" for key {key!r}" if key is not None else ""
        raise StepFailure(f"error calling `{what}` in step {step_id!r}{where}", ex) from ex


def recover(text: str) -> Optional[BaseException]:
    """The exception to raise on the driver for a Spark error's text, if it came from a step."""
    found = _MARK.search(text)
    if found is None:
        return None
    message, cause, bare = cloudpickle.loads(base64.b64decode(found.group(1)))
    if bare:
        return cause  # type: ignore[no-any-return]
    err = FlowsparkRuntimeError(message)
    err.__cause__ = cause
    return err
