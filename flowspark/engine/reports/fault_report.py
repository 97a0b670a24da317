"""Spark's own failures told in one line: what failed, where, and what to do.

When a failure is not the user's (their code's failures travel through
`failures`), Spark's error is a py4j error or a streaming query's
exception whose text is a Java stack, often a hundred lines, with the one
useful sentence inside ("Job aborted due to stage failure: Task 1 in stage
2.0 failed 4 times, most recent failure: Lost task 1.3 ... ExecutorLostFailure
(executor 0 exited ...) Reason: Command exited with code 137").  This module
reads that sentence and says it plainly: "executor 0 on 127.0.0.1 was lost
(exit 137: SIGKILL) and Spark gave up after 4 attempts of task 1 in stage
2.0; see the executor's log at ...".  The log's address comes from Spark's
own record of its executors, which keeps lost ones too.  With
`FLOWSPARK_FULL_TRACEBACK=1` the whole Spark error stays attached.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Any, Optional

from flowspark import _settings as settings

__all__ = ["SparkFault", "is_spark_error", "spark_fault"]

_STAGE_FAILURE = re.compile(
    r"Job aborted due to stage failure: Task (?P<task>\d+) in stage (?P<stage>[\d.]+) failed (?P<attempts>\d+) times?, "
    r"most recent failure: Lost task [\d.]+ in stage [\d.]+ \(TID \d+\) \((?P<host>[^ )]+) executor (?P<executor>[^ )]+)\): "
    r"(?P<reason>[^\n]*)"
)
_STAGE_GAVE_UP = re.compile(
    r"(?P<stage>\w*Stage \d+) \([^\n]*?\) has failed the maximum allowable number of times: (?P<attempts>\d+)\. "
    r"Most recent failure reason:\s*(?P<reason>[^\n]*)"
)
_EXECUTOR_LOST = re.compile(r"ExecutorLostFailure \(executor (?P<executor>\S+) exited [^)]*\) Reason: (?P<why>.*)")
_EXIT_CODE = re.compile(r"exited with code (\d+)")
_FETCH_FROM = re.compile(r"BlockManagerId\((?P<executor>[^,]+), (?P<host>[^,]+),")


@dataclass(frozen=True)
class SparkFault:
    """A failure inside Spark, as one line, and the error Spark raised for it."""

    line: str
    error: BaseException

    def as_error(self, flow_id: str, resumable: bool) -> Exception:
        """The run's error: the line, what to do, and Spark's own error attached only with `FLOWSPARK_FULL_TRACEBACK=1`."""
        from flowspark.errors import FlowsparkRuntimeError

        todo = (
            "start it again with the same recovery directory to resume after the last completed micro-batch"
            if resumable
            else "run it again (with -r/--recovery-directory a run resumes instead of starting over)"
        )
        error = FlowsparkRuntimeError(f"flow {flow_id!r} stopped: {self.line}; {todo}")
        if settings.full_traceback():
            error.__cause__ = self.error
        else:
            error.__suppress_context__ = True
        return error


def is_spark_error(error: BaseException) -> bool:
    """Whether `error` is one Spark raised (through py4j, or as PySpark's captured Java exception)."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors.exceptions.base import PySparkException

    return isinstance(error, (Py4JError, PySparkException))


def _signal_name(code: int) -> str:
    """`exit 137: SIGKILL` for an exit code past 128, else `exit N`."""
    if code > 128:
        try:
            return f"exit {code}: {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exit {code}"


def _loss(why: str) -> str:
    """How an executor was lost, from Spark's reason for it."""
    code = _EXIT_CODE.search(why)
    if code is not None:
        return f"was lost ({_signal_name(int(code.group(1)))})"
    lowered = why.lower()
    if "worker lost" in lowered or "worker decommissioned" in lowered:
        return "was lost with its worker"
    if "disassociated" in lowered:
        return "was lost (its connection to the driver dropped)"
    if "heartbeat" in lowered:
        return "stopped answering (its heartbeats timed out)"
    return f"was lost ({why.strip().rstrip('.')})"


def _python_error(text: str) -> Optional[str]:
    """The exception line (`Type: message`) of the last Python traceback in Spark's text, if it holds one.

    A Python worker's failure reaches the driver as the worker's whole
    traceback, whose first line says only that a Python worker raised.
    """
    _, found, tail = text.rpartition("Traceback (most recent call last):")
    if not found:
        return None
    for line in tail.splitlines()[1:]:
        if line.strip() and not line[0].isspace():
            return line.strip()
    return None


def _what_failed(reason: str, executor: str, host: str, raised: Optional[str]) -> str:
    """The failure of the last attempt, said plainly, from Spark's text of it (`raised`: a Python worker's exception)."""
    lost = _EXECUTOR_LOST.search(reason)
    if lost is not None:
        return f"executor {executor} on {host} {_loss(lost.group('why'))}"
    if "Python worker exited unexpectedly" in reason:
        return f"a Python worker of executor {executor} on {host} crashed"
    if raised is not None:
        return f"a Python worker of executor {executor} on {host} raised {raised[:300]}"
    if "FetchFailed" in reason:
        source = _FETCH_FROM.search(reason)
        where = f" from executor {source.group('executor')} on {source.group('host')}" if source else ""
        return f"executor {executor} on {host} could not fetch shuffle data{where}"
    first = reason.split(" Reason: ")[0].strip() or "an unknown error"
    return f"a task failed on executor {executor} on {host}: {first[:300]}"


def _log_url(executor: str) -> Optional[str]:
    """Where executor `executor`'s stderr log can be read, as this process's Spark records it (lost executors included)."""
    from pyspark import SparkContext

    context: Any = SparkContext._active_spark_context
    if context is None:
        return None
    try:
        summaries = context._jsc.sc().statusStore().executorList(False).iterator()
        while summaries.hasNext():
            summary = summaries.next()
            logs = summary.executorLogs()
            if summary.id() == executor and logs.contains("stderr"):
                return str(logs.apply("stderr"))
    except Exception:
        return None
    return None


def spark_fault(error: BaseException) -> Optional[SparkFault]:
    """`error` as a `SparkFault`, if Spark raised it."""
    if not is_spark_error(error) and "Job aborted due to stage failure" not in str(error):
        return None
    text = str(error)
    failed = _STAGE_FAILURE.search(text)
    if failed is not None:
        executor, host = failed.group("executor"), failed.group("host")
        attempts = int(failed.group("attempts"))
        tried = "after 1 attempt" if attempts == 1 else f"after {attempts} attempts"
        line = (
            f"{_what_failed(failed.group('reason'), executor, host, _python_error(text[failed.start('reason') :]))}, "
            f"and Spark gave up {tried} of task "
            f"{failed.group('task')} in stage {failed.group('stage')}"
        )
        url = _log_url(executor)
        line += f"; see the executor's log at {url}" if url else f"; see executor {executor}'s log on {host}"
        return SparkFault(line, error)
    gave_up = _STAGE_GAVE_UP.search(text)
    if gave_up is not None:
        reason = gave_up.group("reason").strip()
        source = _FETCH_FROM.search(reason)
        what = (
            f"shuffle data of executor {source.group('executor')} on {source.group('host')} could not be fetched"
            if "FetchFailed" in reason and source
            else reason[:300]
        )
        return SparkFault(
            f"{what}, and Spark gave up after {gave_up.group('attempts')} attempts of {gave_up.group('stage')}", error
        )
    raised = _python_error(text)
    if raised is not None:
        return SparkFault(f"Spark failed: a Python worker raised {raised[:500]}", error)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and not line.lstrip().startswith("at ")]
    causes = [line for line in lines if line.startswith("Caused by:")]
    summary = causes[-1][len("Caused by:") :].strip() if causes else (lines[0] if lines else repr(error))
    return SparkFault(f"Spark failed: {summary[:500]}", error)
