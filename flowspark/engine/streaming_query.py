"""The flow's one streaming query: started, waited for until its input ends, a failure or a SIGTERM, then stopped.

The query is the flowspark source (inputs plus the stateless steps right
after them), one `transformWithState` per stateful layer (each also running
the stateless steps after its steps), and one `foreachBatch` writer.  A
failure is raised as the user's own error when it is theirs, else as
Spark's in one line (`TransientSparkFailure`, worth another attempt).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Optional

from flowspark.engine.attempt import Attempt
from flowspark.engine.plan.plan import Plan
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.checkpoint_check import looks_damaged
from flowspark.engine.recovery.storage import Location
from flowspark.engine.reports.failures import ReportedFailures, resolve
from flowspark.engine.reports.fault_report import spark_fault
from flowspark.engine.sinks.remote_writer import ForwardedBatches
from flowspark.engine.sources.data_source import FORMAT, SCHEMA
from flowspark.engine.sources.spark_source import encode_options
from flowspark.engine.state.stateful import LayerProcessor
from flowspark.engine.util import shutdown
from flowspark.errors import FlowsparkRuntimeError


class TransientSparkFailure(Exception):
    """The query failed inside Spark, not in user code: worth one more attempt; `summary` says what failed."""

    def __init__(self, error: BaseException, summary: str) -> None:
        super().__init__(summary)
        self.error = error


def run_failure(
    plan: Plan,
    checkpoint: Location,
    box: ReportedFailures,
    query_error: Optional[BaseException],
    *others: Optional[BaseException],
    resumable: bool = False,
) -> Optional[BaseException]:
    """The error to raise for a failed run: the user's as Bytewax would raise it, else Spark's in one line (`fault_report`)."""
    for err in (query_error, *others):
        if err is None:
            continue
        found = resolve(err, box)
        if found is not None:
            return found
    first = box.first()  # the query was stopped on it: Spark's errors are only the stop's
    if first is not None:
        return first
    for err in (*others, query_error):
        if err is None:
            continue
        if looks_damaged(str(err)):
            fault = spark_fault(err)
            summary = fault.line if fault is not None else str(err).strip().splitlines()[0]
            msg = (
                f"flow {plan.flow_id!r} can't resume: its checkpoint in {str(checkpoint)!r} is damaged ({summary}); "
                "restore the recovery directory from a backup, or start with an empty one"
            )
            return FlowsparkRuntimeError(msg)
        fault = spark_fault(err)
        if fault is not None:
            return TransientSparkFailure(
                fault.as_error(plan.flow_id, resumable), f"flow {plan.flow_id!r}: {fault.line}"
            )
        if err is not query_error:
            return err
    return None


def start_query(attempt: Attempt) -> Any:
    """Build and start the one streaming query of the flow, whose tasks get the attempt's shipped plan; a metered
    attempt has them count their steps' items.

    Through Spark Connect, Spark calls `foreachBatch` in its server, which
    hands each micro-batch to the writer over the driver link (`remote_writer`).
    """
    spark, plan, workers, link, groups = attempt.spark, attempt.plan, attempt.shipped, attempt.link, attempt.groups
    metered = attempt.metered
    options = encode_options(link, workers, groups, attempt.inputs, attempt.driver.hub.has_parts(), metered)
    session = spark.session
    if not spark.remote:
        session.conf.set("spark.sql.shuffle.partitions", str(spark.parallelism))
    frame = session.readStream.format(FORMAT).options(**options).load()
    for layer in range(1, plan.depth + 1):
        frame = frame.groupBy("grp").transformWithState(
            LayerProcessor(workers, layer, groups, link, metered), SCHEMA, "Append", "ProcessingTime"
        )
    location = attempt.checkpoint.join("query").hadoop_uri
    writing = (
        frame.writeStream.foreachBatch(ForwardedBatches(link) if spark.remote else attempt.writer)
        .queryName(f"flowspark-{plan.flow_id}-{uuid.uuid4().hex[:8]}")
        .option("checkpointLocation", location)
        .trigger(processingTime=f"{int(attempt.config.interval_seconds * 1000)} milliseconds")
    )
    try:
        return writing.start()
    except Exception as ex:
        if "S3AFileSystem not found" not in str(ex) or spark.remote:
            raise
        hadoop = spark.context._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
        msg = (
            f"Spark can't keep its checkpoint in {location!r}: its Hadoop {hadoop} has no s3a file system. Add "
            f"hadoop-aws of that version and its AWS SDK to Spark (--conf spark.jars.packages="
            f"org.apache.hadoop:hadoop-aws:{hadoop}), or use a path every node mounts"
        )
        raise FlowsparkRuntimeError(msg) from None


def await_commit(query: Any, checkpoint: Location, batch_id: int, timeout: float = 120.0) -> None:
    """Let Spark log the last batch as committed, so a resume does not replay it.

    Waits for the batch's entry in Spark's commit log itself: the query's
    progress can already show the batch while the entry is not yet
    written (a stop then left the ledger one batch ahead of the log).
    """
    entry = checkpoint.join("query", "commits", str(batch_id))
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        if storage.exists(entry):
            return
        time.sleep(0.02 if entry.is_local else 0.2)  # S3 and HDFS: a request or two per look


def wait_for_end(attempt: Attempt, query: Any) -> None:
    """Wait for the end of input, a failure (a user's stops the query at once) or a SIGTERM; stop the query; raise
    the failure, if any.

    This process reads Spark's commit log, except for a temporary
    checkpoint of a Spark Connect server elsewhere.
    """
    plan, checkpoint, writer, resumable = attempt.plan, attempt.checkpoint, attempt.writer, attempt.run.resumable
    server, box = attempt.driver.server, attempt.driver.box
    spark = attempt.spark
    sees_commits = spark.local or not spark.remote or resumable
    try:
        with shutdown.ctrl_c_between_calls() as ctrl_c:
            while not writer.finished.wait(0.05):
                ctrl_c()
                if (
                    server.failure is not None
                    or writer.failure is not None
                    or box.reported.is_set()
                    or not query.isActive
                ):
                    break
                if shutdown.stop_requested():
                    writer.hold(lambda: bool(query.isActive))
                    break
        if sees_commits and (writer.finished.is_set() or (shutdown.stop_requested() and writer.last_batch >= 0)):
            await_commit(query, checkpoint, writer.last_batch)
    finally:
        if query.isActive:
            query.stop()
    # A batch refused after the stop began (`SinkWriter.hold`) is no failure.
    called = None if isinstance(server.failure, shutdown.StopAtBoundary) else server.failure
    if writer.finished.is_set() and called is None and writer.failure is None:
        return  # the end of input is written and committed; a batch cut by the stop replays on resume
    if shutdown.stop_requested() and called is None and writer.failure is None and not box.reported.is_set():
        raise shutdown.stopped(plan.flow_id, writer.last_batch, resumable)
    error = run_failure(plan, checkpoint, box, query.exception(), called, writer.failure, resumable=resumable)
    if error is not None:
        raise error
