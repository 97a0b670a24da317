"""Run a flow as one Spark Structured Streaming query and wait for its end.

The query is: the flowspark source (inputs plus the stateless steps right
after them), one `transformWithState` per stateful layer (each also running
the stateless steps after its steps), and one `foreachBatch` writer on the
driver, which writes the outputs that live there and starts one job per
micro-batch for those written in Spark's tasks (`sink_tasks`).  A bounded run ends once the end-of-input micro-batch has been
written; the query is then stopped between batches' writes.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from flowspark.dataflow import Dataflow
from flowspark.dataflow_api import serving_api
from flowspark.engine.checkpoint_check import check_checkpoint, looks_damaged
from flowspark.engine.cluster import check_recovery_dir_visible, is_local_master
from flowspark.engine.failures import FailureBox, StepFailure, resolve
from flowspark.engine.fault_report import spark_fault
from flowspark.engine.metrics import FlowMetrics, QueryWatch
from flowspark.engine.groups import Groups
from flowspark.engine.progress import BatchReport, Progress, state_rows
from flowspark.engine.proxy_log import quiet_proxy_failures
from flowspark.engine.plan import Plan, build_plan, for_workers, placed_for_machines
from flowspark.engine.recovery_dir import check_recovery_dir
from flowspark.engine.resume_check import check_or_record
from flowspark.engine.run_context import RunContext, running
from flowspark.engine.session import get_session
from flowspark.engine.shipping import ship_by_value, user_packages
from flowspark.engine.sink_writer import OutputStash, SinkWriter
from flowspark.engine import driver_fence, shutdown, snapshot_store
from flowspark.engine.executor_source import ExecutorInputs, list_executor_inputs
from flowspark.engine.source_hub import SourceHub
from flowspark.engine.driver_link import DriverLink, DriverServer
from flowspark.engine.spark_format import FORMAT, SCHEMA_DDL
from flowspark.engine.spark_source import encode_options
from flowspark.engine.stateful import LayerProcessor
from flowspark.engine import storage
from flowspark.engine.storage import Location, Scheme, parse_location
from flowspark.engine.warm_up import warm_python_workers
from flowspark.engine.worker_prints import PRINT_CALL, write_prints
from flowspark.errors import FlowsparkRuntimeError
from flowspark.tracing import traced_run

_log = logging.getLogger(__name__)


@dataclass
class RunConfig:
    """How to run: parallelism, micro-batch interval, recovery directory, Spark settings."""

    parallelism: Optional[int] = None
    interval_seconds: float = 0.2
    recovery_dir: Optional[str] = None
    master: Optional[str] = None
    conf: Dict[str, str] = field(default_factory=dict)
    max_items_per_batch: int = 1_000_000
    max_seconds_per_poll: float = 5.0
    progress: Optional[Progress] = None
    driver_link_port: int = 0
    """The driver link's port on a cluster (for firewalls); 0 picks a free one."""
    ordered: bool = False
    """Keep one Bytewax worker's output order (`run_main`, `-w 1`), whatever Spark's parallelism."""
    epoch_per_round: bool = False
    """Each source round is an epoch, as with Bytewax's zero epoch interval; else each micro-batch is."""

    @property
    def workers(self) -> int:
        """Bytewax's worker count: `-w` (times the processes of a Bytewax launch), else 1 as in Bytewax.

        Dynamic sources and sinks get one partition per worker; Spark's
        parallelism defaults to the cores when it is not given.
        """
        return self.parallelism or 1


class _SparkHiccup(Exception):
    """The query failed inside Spark, not in user code: worth one more attempt; `summary` says what failed."""

    def __init__(self, error: BaseException, summary: str) -> None:
        super().__init__(summary)
        self.error = error


def _failure(plan: Plan, checkpoint: Location, box: FailureBox, query_error: Optional[BaseException], *others: Optional[BaseException],
             resumable: bool = False) -> Optional[BaseException]:
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
            msg = (f"flow {plan.flow_id!r} can't resume: its checkpoint in {str(checkpoint)!r} is damaged ({summary}); "
                   "restore the recovery directory from a backup, or start with an empty one")
            return FlowsparkRuntimeError(msg)
        fault = spark_fault(err)
        if fault is not None:
            return _SparkHiccup(fault.as_error(plan.flow_id, resumable), f"flow {plan.flow_id!r}: {fault.line}")
        if err is not query_error:
            return err
    return None


def _start_query(spark: Any, plan: Plan, link: DriverLink, writer: SinkWriter, checkpoint: Location, groups: Groups, parallelism: int, interval: float,
                 inputs: ExecutorInputs, hub: bool, metered: bool = False) -> Any:
    """Build and start the one streaming query of the flow; `metered` has its tasks count their steps' items."""
    workers = for_workers(plan)
    spark.conf.set("spark.sql.shuffle.partitions", str(parallelism))
    frame = spark.readStream.format(FORMAT).options(**encode_options(link, workers, groups, inputs, hub, metered)).load()
    for layer in range(1, plan.depth + 1):
        frame = frame.groupBy("grp").transformWithState(
            LayerProcessor(workers, layer, groups, link, metered), SCHEMA_DDL, "Append", "ProcessingTime"
        )
    location = checkpoint.join("query").hadoop_uri
    writing = (
        frame.writeStream.foreachBatch(writer)
        .queryName(f"flowspark-{plan.flow_id}-{uuid.uuid4().hex[:8]}")
        .option("checkpointLocation", location)
        .trigger(processingTime=f"{int(interval * 1000)} milliseconds")
    )
    try:
        return writing.start()
    except Exception as ex:
        if "S3AFileSystem not found" not in str(ex):
            raise
        hadoop = spark.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
        msg = (
            f"Spark can't keep its checkpoint in {location!r}: its Hadoop {hadoop} has no s3a file system. Add "
            f"hadoop-aws of that version and its AWS SDK to Spark (--conf spark.jars.packages="
            f"org.apache.hadoop:hadoop-aws:{hadoop}), or use a path every node mounts"
        )
        raise FlowsparkRuntimeError(msg) from None


def _reporter(progress: Optional[Progress], hub: SourceHub, queries: List[Any]) -> Optional[Callable[[int, int], None]]:
    """The writer's per-batch callback that feeds `progress`, if there is one."""
    if progress is None:
        return None
    written = [0]
    last = [time.monotonic()]

    def report(batch_id: int, items_out: int) -> None:
        now = time.monotonic()
        written[0] += items_out
        last_progress = queries[0].lastProgress if queries else None
        progress.batch(BatchReport(batch_id + 1, hub.items_read, written[0], now - last[0], state_rows(last_progress), hub.fraction_done()))
        last[0] = now

    return report


def _await_commit(query: Any, checkpoint: Location, batch_id: int, timeout: float = 120.0) -> None:
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


def _wait(plan: Plan, query: Any, checkpoint: Location, server: DriverServer, box: FailureBox, writer: SinkWriter,
          resumable: bool = False) -> None:
    """Wait for the end of input or a failure (a user's stops the query at once); stop the query; raise the failure, if any."""
    try:
        while not writer.finished.wait(0.05):
            if server.failure is not None or writer.failure is not None or box.reported.is_set() or not query.isActive:
                break
            if shutdown.stop_requested():
                writer.hold()
                break
        if writer.finished.is_set() or (shutdown.stop_requested() and writer.last_batch >= 0):
            _await_commit(query, checkpoint, writer.last_batch)
    finally:
        if query.isActive:
            query.stop()
    if writer.finished.is_set() and server.failure is None and writer.failure is None:
        return  # the end of input is written and committed; a batch cut by the stop replays on resume
    if shutdown.stop_requested() and server.failure is None and writer.failure is None and not box.reported.is_set():
        raise shutdown.stopped(plan.flow_id, writer.last_batch, resumable)
    error = _failure(plan, checkpoint, box, query.exception(), server.failure, writer.failure, resumable=resumable)
    if error is not None:
        raise error


RESTARTS = 2
"""How many times a run restarts from its checkpoint after a failure inside Spark itself."""


def run_flow(flow: Dataflow, config: RunConfig) -> None:
    """Run `flow` until its inputs end (or forever, for unbounded inputs).

    A failure inside Spark that no user code caused (a lost executor, an
    RPC timeout on an overloaded machine) restarts the query from its
    checkpoint, as a resumed run would, at most `RESTARTS` times; user
    errors end the run at once, as in Bytewax.  A SIGTERM stops it at a
    micro-batch boundary (`shutdown`).  The environment may ask for the
    dataflow API (`flowspark.dataflow_api`) for the run's duration.
    """
    plan = build_plan(flow, ordered=config.ordered, workers=config.workers)
    with serving_api(flow) as metrics, shutdown.stop_on_sigterm():
        _run_plan(plan, config, metrics)


def _run_plan(plan: Plan, config: RunConfig, metrics: Optional[FlowMetrics]) -> None:
    ship_by_value(user_packages())
    spark = get_session(config.master, config.conf)
    quiet_proxy_failures()
    plan = placed_for_machines(plan, one_machine=is_local_master(spark.sparkContext.master))
    warm_python_workers(spark, stateful=plan.depth > 0)
    if config.recovery_dir:
        checkpoint = parse_location(config.recovery_dir, dict(spark.sparkContext.getConf().getAll()))
    else:
        checkpoint = Location(Scheme.LOCAL, tempfile.mkdtemp(prefix="flowspark-"))
    try:
        check_recovery_dir(checkpoint)
        storage.private_dir(checkpoint)
        storage.private_dir(checkpoint.join("query"), "checkpoint directory")
        check_checkpoint(checkpoint.join("query"))
        # On a cluster, also waits for the executors, so that the default
        # parallelism below counts their cores (it is 2 until they register).
        check_recovery_dir_visible(spark, str(checkpoint), temporary=config.recovery_dir is None)
        parallelism = config.parallelism or spark.sparkContext.defaultParallelism
        with driver_fence.owning(checkpoint):
            for attempt in range(RESTARTS + 1):
                try:
                    with running(RunContext(spark, str(checkpoint))), traced_run(plan.flow_id):
                        _attempt(spark, plan, config, checkpoint, parallelism, metrics)
                    return
                except _SparkHiccup as hiccup:
                    if attempt == RESTARTS:
                        raise hiccup.error from hiccup.error.__cause__  # Spark's own error only with FLOWSPARK_FULL_TRACEBACK=1
                    _log.warning("%s; restarting from the last completed micro-batch (restart %d of %d)", hiccup, attempt + 1, RESTARTS)
    finally:
        if config.recovery_dir is None:
            shutil.rmtree(checkpoint.path, ignore_errors=True)


def _driver_server(spark: Any, port: int) -> DriverServer:
    """The driver link's server: on loopback for a local master, where Spark's driver listens otherwise."""
    conf = spark.sparkContext.getConf()
    if is_local_master(spark.sparkContext.master):
        return DriverServer("127.0.0.1", port=port)
    host = conf.get("spark.driver.host")
    return DriverServer(conf.get("spark.driver.bindAddress", host), advertised_host=host, port=port)


def _attempt(spark: Any, plan: Plan, config: RunConfig, checkpoint: Location, parallelism: int, metrics: Optional[FlowMetrics] = None) -> None:
    """Run the flow's query once, from wherever its checkpoint stands; feed `metrics`, if given."""
    server = _driver_server(spark, config.driver_link_port)
    if metrics is not None:
        server.register("metrics", metrics.add)
    server.register(PRINT_CALL, write_prints)
    box = FailureBox(server)
    hub = SourceHub(plan, server, config.max_items_per_batch, config.max_seconds_per_poll, pieces=parallelism,
                    workers=config.workers, meter=None if metrics is None else metrics.driver_meter())
    writer: Optional[SinkWriter] = None
    try:
        store = checkpoint.join("query", snapshot_store.FOLDER)
        inputs = list_executor_inputs(plan, store, config.max_items_per_batch, config.max_seconds_per_poll,
                                      report=metrics is not None or config.progress is not None)
        hub.expect_remote([(part.step_id, part.name) for part in inputs.parts])
        names = [here + there for here, there in zip(hub.partition_names(), inputs.partition_names(len(plan.inputs)))]
        groups = check_or_record(checkpoint, plan, names)
        queries: List[Any] = []
        writer = SinkWriter(plan, checkpoint, OutputStash(server), _reporter(config.progress, hub, queries),
                            None if metrics is None else metrics.driver_meter(), workers=config.workers,
                            epoch_per_round=config.epoch_per_round, link=server.link, parallelism=parallelism,
                            write_behind=config.recovery_dir is None)
        if config.progress is not None and spark.sparkContext.uiWebUrl:
            config.progress.announce(f"Spark UI at {spark.sparkContext.uiWebUrl}")
        query = _start_query(spark, plan, server.link, writer, checkpoint, groups, parallelism, config.interval_seconds,
                             inputs, hub.has_parts(), metered=metrics is not None)
        queries.append(query)
        if metrics is not None:
            metrics.watch(QueryWatch(lambda: query.lastProgress, hub.fraction_done, hub.lags))
        _wait(plan, query, checkpoint, server, box, writer, resumable=config.recovery_dir is not None)
        if config.progress is not None:
            config.progress.finish()
    except BaseException as ex:
        # The run's own error is what the user needs: one that closing the
        # sources and sinks raises after it (a sink whose write failed
        # often fails to close too) is only noted on it.
        found = resolve(ex, box) if isinstance(ex, StepFailure) else None
        error = ex if found is None else found
        for close in (server.close, hub.close) + ((writer.close,) if writer is not None else ()):
            try:
                close()
            except Exception as also:
                error.add_note(f"closing the flow's connectors afterwards also failed: {also} ({also.__cause__!r})")
        if found is None:
            raise
        raise found from found.__cause__
    server.close()
    hub.close()
    if writer is not None:
        writer.close()
