"""Carry a user's exception from a Spark worker back to the driver.

Spark reports a failed Python task to the driver only as text, and that
text can hold input data (`int(line)` puts the line in its message).  So
nothing is ever read back out of the text: a worker hands the exception
itself to the driver's `ReportedFailures` over the authenticated driver link,
under a random token, and its error text names only that token.  The driver
looks the tokens it finds in Spark's text up in its box; text that imitates
a token finds nothing (tokens are random) or a failure a worker really
reported.  The driver then raises it as Bytewax would: a
`FlowsparkRuntimeError` naming the step and key, caused by the user's
exception (or, for routing errors Bytewax raises bare, the bare exception),
with the user's own traceback attached as a note.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import cloudpickle

from flowspark import _notices as notices
from flowspark import _settings as settings
from flowspark.engine.reports.worker_prints import ERROR_PRINT_CALL, errors_to_driver, prints_to_driver
from flowspark.errors import FlowsparkRuntimeError
from flowspark.inputs import AbortExecution

if TYPE_CHECKING:
    from flowspark.engine.reports.driver_link import DriverLink, DriverServer

_TOKEN = re.compile(r"flowspark-failure-([0-9a-f]{32})")


WORKER_TRACEBACK = "Traceback in a Spark worker (most recent call last):\n"
"""How the note with the user's frames from a worker begins."""

T = TypeVar("T")


def _internal_dirs() -> List[str]:
    import pyspark

    import flowspark

    dirs = [os.path.dirname(os.path.abspath(m.__file__ or "")) for m in (flowspark, pyspark, cloudpickle)]
    return [d + os.sep for d in dirs]


Frame = Tuple[str, int, str]
"""Where a frame of a traceback stood: file name, line number, function name."""


def user_frames(tb: Optional[TracebackType]) -> List[Frame]:
    """The frames of `tb` in the user's code: flowspark's, PySpark's and cloudpickle's left out.

    A function shipped by value runs from code whose file name is a
    placeholder; the module's `__file__` it carries names the user's file.
    With `FLOWSPARK_FULL_TRACEBACK=1`, every frame is kept.
    """
    frames: List[Frame] = []
    for frame, line in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if name.startswith("<"):
            name = frame.f_globals.get("__file__") or name
        frames.append((name, line, frame.f_code.co_name))
    if settings.full_traceback():
        return frames
    internal = tuple(_internal_dirs())
    return [f for f in frames if not os.path.abspath(f[0]).startswith(internal)]


def format_frames(frames: List[Frame]) -> str:
    """Frames as Python prints them, with their source lines read where this process sees the file."""
    return "".join(traceback.StackSummary.from_list([(name, line, func, None) for name, line, func in frames]).format())


def user_traceback(error: BaseException) -> str:
    """`error`'s traceback as Python prints it, its causes first, with only the user's frames."""
    parts: List[str] = []
    seen = set()
    chain: List[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    for position, ex in enumerate(reversed(chain)):
        if position:
            parts.append("\nThe above exception was the direct cause of the following exception:\n\n")
        notes = list(getattr(ex, "__notes__", None) or ())
        frames = user_frames(ex.__traceback__)
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts.append(format_frames(frames))
        for note in notes:  # the worker's frames, printed where Python prints a traceback
            if note.startswith(WORKER_TRACEBACK):
                parts.append(
                    "Traceback (most recent call last, in a Spark worker):\n" + note[len(WORKER_TRACEBACK) :] + "\n"
                )
        summary = traceback.TracebackException(type(ex), ex, None)
        summary.__notes__ = [n for n in notes if not n.startswith(WORKER_TRACEBACK)] or None
        parts.extend(summary.format_exception_only())
    return "".join(parts)


@dataclass(frozen=True)
class FailureRecord:
    """What a worker reports of a failure: the message naming the step, the user's exception, its traceback."""

    message: str
    cause: BaseException
    bare: bool
    frames: List[Frame]


class StepFailure(Exception):
    """Raised where user code fails; names the step, holds the user's exception.

    Its text, which is what Spark carries to the driver, names the failure
    by a random token and never holds anything the driver reads back.
    """

    def __init__(self, message: str, cause: BaseException, bare: bool = False) -> None:
        self.message = message
        self.cause = cause
        self.bare = bare
        self.token = secrets.token_hex(16)
        super().__init__(f"{message}: {cause!r} (flowspark-failure-{self.token})")

    def record(self) -> FailureRecord:
        """This failure as the driver should raise it, with the user's frames."""
        return FailureRecord(self.message, self.cause, self.bare, user_frames(self.cause.__traceback__))

    def record_bytes(self) -> bytes:
        """`record()` pickled; an exception that won't pickle travels as its type name and text."""
        record = self.record()
        try:
            blob: bytes = cloudpickle.dumps(record)
            cloudpickle.loads(blob)  # an exception whose `__init__` wants other arguments pickles but won't load
        except Exception:
            stand_in = RuntimeError(f"{type(self.cause).__name__}: {self.cause}")
            blob = cloudpickle.dumps(FailureRecord(record.message, stand_in, record.bare, record.frames))
        return blob


def built(build: Callable[..., T], *args: Any) -> T:
    """Call a source's or sink's `build` or `build_part`, which must return a partition."""
    partition = build(*args)
    if partition is None:
        msg = f"`{build.__name__}` returned `None`; it must return a partition"
        raise TypeError(msg)
    return partition


def partition_call(step_id: str, partition: str, what: str, func: Callable[..., T], *args: Any) -> T:
    """Call method `what` of a source partition; a failure is a `StepFailure` naming the step and the partition.

    The end of input (`StopIteration`), `AbortExecution` and failures
    already named pass through as they are.
    """
    try:
        return func(*args)
    except (StopIteration, AbortExecution, StepFailure):
        raise
    except Exception as ex:
        msg = f"error calling `{what}` in step {step_id!r} for partition {partition!r}"
        raise StepFailure(msg, ex) from ex


def aware_or_none(moment: Any) -> Optional[datetime]:
    """A wake-up time user code returned (`next_awake`, `notify_at`): a timezone-aware `datetime` or `None`, as
    Bytewax requires."""
    if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
        msg = f"expected a datetime with non-None tzinfo or None; got {moment!r}"
        raise TypeError(msg)
    return moment


def unloadable_items(message: str, error: Exception) -> StepFailure:
    """The failure for items that pickled in one Spark worker but won't load in the next."""
    error.add_note(
        "items cross Spark's workers pickled: their class must load again from its pickle "
        "(a `__reduce__` or `__setstate__` that raises can't)"
    )
    return StepFailure(message, error)


def guarded(step_id: str, what: str, func: Callable[..., T], *args: Any, key: Optional[str] = None) -> T:
    """Call user code; on failure raise a `StepFailure` naming the step (and key)."""
    try:
        return func(*args)
    except StepFailure:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as ex:  # `sys.exit()` in a step fails the step, as in Bytewax
        where = f" for key {key!r}" if key is not None else ""
        msg = f"error calling `{what}` in step {step_id!r}{where}"
        raise StepFailure(msg, ex) from ex


RUN_FAILED_CALL = "run_failed"
"""The driver call a retried task attempt makes before it runs user code: the token of the run's first failure, or `None`."""


class RunAlreadyFailed(Exception):
    """Raised by a retried task attempt in place of user code: the run already failed there.

    Its text names the first failure's token, so the driver raises that
    failure whichever attempt's error Spark reports last.
    """


@dataclass
class _Cleared:
    """The task attempt (`taskAttemptId`) of this process that the driver last cleared to run user code."""

    attempt: Optional[int] = None


_CLEARED = _Cleared()


def refuse_after_failure(link: DriverLink) -> None:
    """In a retried task attempt, raise `RunAlreadyFailed` if the driver already has a user failure.

    Spark retries a failed task (`spark.task.maxFailures`, 4 on a
    cluster) whatever failed it, and a lost executor or worker must get
    those retries.  A user failure must not: its first raise ends the run,
    as in Bytewax.  The failing attempt reports it (`reported_to`) before
    it raises, so the driver has it before Spark can schedule the retry,
    which asks the driver once before it calls any user code.  First
    attempts never ask: the driver stops the query as soon as a report
    arrives, and they are the ones that run user code in parallel anyway.
    A retry that can't reach the driver fails too, without user code.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.attemptNumber() == 0:
        return
    attempt = context.taskAttemptId()
    if _CLEARED.attempt == attempt:
        return
    token = link.call(RUN_FAILED_CALL)
    if token is not None:
        msg = (
            f"the run already failed; attempt {context.attemptNumber()} of task {context.partitionId()} "
            f"in stage {context.stageId()} runs no user code (flowspark-failure-{token})"
        )
        raise RunAlreadyFailed(msg)
    _CLEARED.attempt = attempt


@contextmanager
def reported_to(link: DriverLink) -> Iterator[None]:
    """In a Spark worker, while user code runs: its prints go to the driver, and so does any `StepFailure`, before
    Spark turns it into text.

    flowspark's own notices (`flowspark._notices`) go to the driver's
    standard error.  On a Spark the run did not start, the code also runs
    with the run's directory and variables, and its standard error goes to
    the driver too (`DriverLink.lent`).  A retried task attempt first asks
    the driver whether the run already failed (`refuse_after_failure`).
    """
    refuse_after_failure(link)
    try:
        with prints_to_driver(link), lent_by_driver(link), notices.forwarded_to(partial(link.call, ERROR_PRINT_CALL)):
            yield
    except StepFailure as failure:
        try:
            link.call("failure", failure.token, failure.record_bytes())
        except Exception:  # the driver is gone: Spark's text still names the step
            pass
        raise


@contextmanager
def lent_by_driver(link: DriverLink) -> Iterator[None]:
    """In a Spark that the run did not start (the warm one, a Connect server): the run's directory and variables,
    and standard error written to the run's own (`client_environment`, `worker_prints`)."""
    if link.lent is None:
        yield
        return
    with link.lent.lent(), errors_to_driver(link):
        yield


def _home_class(cls: type) -> type:
    """The driver's own class for an exception class a worker rebuilt from a by-value pickle.

    The user's modules travel by value, so an exception of their own class
    comes back as an instance of a copy of it; `except TheirError` on the
    driver must still catch it.
    """
    found: Any = sys.modules.get(cls.__module__)
    for name in cls.__qualname__.split("."):
        found = getattr(found, name, None)
    if (
        isinstance(found, type)
        and found is not cls
        and found.__name__ == cls.__name__
        and issubclass(found, BaseException)
    ):
        return found
    return cls


def _at_home(error: BaseException) -> BaseException:
    """`error` as an instance of the driver's own class (see `_home_class`)."""
    home = _home_class(type(error))
    if home is type(error):
        return error
    moved: BaseException = home.__new__(home, *error.args)
    moved.args = error.args
    moved.__dict__.update(error.__dict__)
    moved.__cause__ = error.__cause__
    return moved


def as_user_error(record: FailureRecord) -> BaseException:
    """The exception the run raises for a reported failure, as Bytewax would raise it."""
    cause = _at_home(record.cause)
    if record.frames:
        cause.add_note(WORKER_TRACEBACK + format_frames(record.frames).rstrip())
    if record.bare:
        return cause
    err = FlowsparkRuntimeError(record.message)
    err.__cause__ = cause
    return err


class ReportedFailures:
    """The driver's store of failures workers reported, by token, in the order they came.

    `reported` is set by the first report: the run stops on it at once,
    whatever Spark does with the failed task.
    """

    def __init__(self, server: DriverServer) -> None:
        self._records: Dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.reported = threading.Event()
        server.register("failure", self.put)
        server.register(RUN_FAILED_CALL, self.first_token)

    def put(self, token: str, record: bytes) -> None:
        if _TOKEN.fullmatch(f"flowspark-failure-{token}") is None:
            return
        with self._lock:
            self._records.setdefault(token, record)
        self.reported.set()

    def first_token(self) -> Optional[str]:
        """The token of the first failure reported, if any."""
        with self._lock:
            return next(iter(self._records), None)

    def _error(self, token: str) -> Optional[BaseException]:
        with self._lock:
            blob = self._records.get(token)
        if blob is None:
            return None
        record: FailureRecord = cloudpickle.loads(blob)
        return as_user_error(record)

    def find(self, text: str) -> Optional[BaseException]:
        """The user error for the first reported failure that `text` names, if any."""
        for token in _TOKEN.findall(text):
            found = self._error(token)
            if found is not None:
                return found
        return None

    def first(self) -> Optional[BaseException]:
        """The user error for the first failure reported, if any."""
        token = self.first_token()
        return None if token is None else self._error(token)


def resolve(error: BaseException, box: Optional[ReportedFailures]) -> Optional[BaseException]:
    """The user error behind `error`: a `StepFailure` raised in this process, or one a worker reported."""
    if isinstance(error, StepFailure):  # its cause still has its own traceback
        return as_user_error(FailureRecord(error.message, error.cause, error.bare, []))
    if box is None:
        return None
    return box.find(str(error))
