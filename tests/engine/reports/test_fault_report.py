"""Spark's own failures in one line: what failed, where, what to do; Spark's error itself only on request.

The texts are Spark's own (the stage-failure sentence of a `SparkException`
as the driver receives it); `tests/test_spark_faults.py` sees one from a
real lost executor.
"""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException

from flowspark._settings import FULL_TRACEBACK
from flowspark.engine.reports.fault_report import spark_fault

_STACK = "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:3173)\n" * 40


def _aborted(reason: str, attempts: int = 4, executor: str = "0") -> Exception:
    """A job Spark aborted, as py4j hands it over: a Java stack around the one sentence that matters."""
    return Exception(
        "An error occurred while calling o386.getResult.\n: org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
        + _STACK
        + f"Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 2.0 failed {attempts} "
        f"times, most recent failure: Lost task 1.{attempts - 1} in stage 2.0 (TID 16) (10.0.0.7 executor {executor}): {reason}\n"
        "Driver stacktrace:\n" + _STACK
    )


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (
            "ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: Command exited with code 137",
            "executor 3 on 10.0.0.7 was lost (exit 137: SIGKILL)",
        ),
        (
            "ExecutorLostFailure (executor 3 exited unrelated to the running tasks) Reason: Worker lost",
            "executor 3 on 10.0.0.7 was lost with its worker",
        ),
        (
            "ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: Remote RPC client "
            "disassociated. Likely due to containers exceeding thresholds, or network issues.",
            "executor 3 on 10.0.0.7 was lost (its connection to the driver dropped)",
        ),
        (
            "ExecutorLostFailure (executor 3 exited unrelated to the running tasks) Reason: Executor heartbeat timed out "
            "after 120000 ms",
            "executor 3 on 10.0.0.7 stopped answering (its heartbeats timed out)",
        ),
        (
            "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)",
            "a Python worker of executor 3 on 10.0.0.7 crashed",
        ),
        (
            "FetchFailed(BlockManagerId(1, 10.0.0.9, 40123, None), shuffleId=0, mapIndex=0, mapId=3, reduceId=1, message=\n"
            "org.apache.spark.shuffle.FetchFailedException",
            "executor 3 on 10.0.0.7 could not fetch shuffle data from executor 1 on 10.0.0.9",
        ),
        (
            "java.io.IOException: No space left on device",
            "a task failed on executor 3 on 10.0.0.7: java.io.IOException: No space left on device",
        ),
    ],
)
def test_a_task_spark_gave_up_on_says_what_failed_and_where(reason: str, said: str) -> None:
    fault = spark_fault(_aborted(reason, executor="3"))
    assert fault is not None
    assert (
        fault.line
        == f"{said}, and Spark gave up after 4 attempts of task 1 in stage 2.0; see executor 3's log on 10.0.0.7"
    )


def test_one_attempt_is_counted_as_one() -> None:
    fault = spark_fault(
        _aborted(
            "ExecutorLostFailure (executor 0 exited caused by one of the running tasks) Reason: "
            "Command exited with code 143",
            attempts=1,
        )
    )
    assert fault is not None and "(exit 143: SIGTERM), and Spark gave up after 1 attempt of task 1" in fault.line


def test_a_stage_spark_gave_up_on_names_whose_shuffle_data_was_lost() -> None:
    error = Exception(
        "org.apache.spark.SparkException: Job aborted due to stage failure: ResultStage 7 (toArrow at NativeMethodAccessorImpl"
        ".java:0) has failed the maximum allowable number of times: 4. Most recent failure reason:\n"
        "org.apache.spark.shuffle.FetchFailedException: Failed to connect to /10.0.0.9:40123 FetchFailed(BlockManagerId(1, "
        "10.0.0.9, 40123, None), shuffleId=0)\n" + _STACK
    )
    fault = spark_fault(error)
    assert fault is not None
    assert fault.line == (
        "shuffle data of executor 1 on 10.0.0.9 could not be fetched, and Spark gave up after 4 attempts "
        "of ResultStage 7"
    )


def test_another_spark_error_is_its_deepest_cause_in_one_line() -> None:
    error = PySparkException(
        message="An error occurred while calling o12.start.\n"
        + _STACK
        + "Caused by: java.lang.IllegalStateException: outer\n"
        + _STACK
        + "Caused by: java.net.ConnectException: Connection refused\n"
        + _STACK
    )
    fault = spark_fault(error)
    assert fault is not None and fault.line == "Spark failed: java.net.ConnectException: Connection refused"


_WORKER_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 4327, in invoke_udf\n'
    "    run_process()\n"
    '  File "/venv/lib/python3.11/site-packages/flowspark/engine/state/keyed_state.py", line 243, in save\n'
    '    with open(path, "wb") as f:\n'
    "         ^^^^^^^^^^^^^^^^\n"
    "FileNotFoundError: [Errno 2] No such file or directory: '/scratch/slot'\n"
)


def test_a_python_worker_s_error_is_its_exception_line() -> None:
    error = PySparkException(message="An exception was thrown from the Python worker:\n" + _WORKER_TRACEBACK)
    fault = spark_fault(error)
    assert fault is not None and fault.line == (
        "Spark failed: a Python worker raised FileNotFoundError: [Errno 2] No such file or directory: '/scratch/slot'"
    )


def test_a_task_that_failed_in_a_python_worker_names_the_worker_s_exception() -> None:
    fault = spark_fault(_aborted("org.apache.spark.api.python.PythonException: " + _WORKER_TRACEBACK, attempts=1))
    assert fault is not None and fault.line.startswith(
        "a Python worker of executor 0 on 10.0.0.7 raised FileNotFoundError: [Errno 2] No such file or directory:"
        " '/scratch/slot', and Spark gave up after 1 attempt of task 1 in stage 2.0"
    )


def test_a_crashed_python_worker_is_a_crash_even_with_a_traceback_in_spark_s_text() -> None:
    reason = "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed): " + _WORKER_TRACEBACK
    fault = spark_fault(_aborted(reason, attempts=1))
    assert fault is not None and fault.line.startswith("a Python worker of executor 0 on 10.0.0.7 crashed, and Spark")


def test_an_error_spark_did_not_raise_is_not_a_spark_fault() -> None:
    assert spark_fault(ValueError("bad item 3")) is None


def test_the_run_s_error_says_what_to_do_and_keeps_spark_s_only_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    spark_error = _aborted(
        "ExecutorLostFailure (executor 0 exited caused by one of the running tasks) Reason: Command "
        "exited with code 137"
    )
    fault = spark_fault(spark_error)
    assert fault is not None
    error = fault.as_error("my_flow", resumable=True)
    assert str(error) == (
        f"flow 'my_flow' stopped: {fault.line}; start it again with the same recovery directory to "
        "resume after the last completed micro-batch"
    )
    assert len(str(error).splitlines()) == 1 and error.__cause__ is None and error.__suppress_context__
    assert "with -r/--recovery-directory a run resumes" in str(fault.as_error("my_flow", resumable=False))
    monkeypatch.setenv(FULL_TRACEBACK.name, "1")
    assert fault.as_error("my_flow", resumable=True).__cause__ is spark_error
