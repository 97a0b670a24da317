"""Run a flow as one Spark Structured Streaming query (`streaming_query`) and wait for its end.

The driver side of a run: its Spark, the driver link, the recovery
directory's checks, the `foreachBatch` writer on the driver (which writes
the outputs that live there and starts one job per micro-batch for those
written in Spark's tasks, `sink_tasks`), and the attempts: a failure in
Spark rather than in user code gets another, from the last committed
micro-batch.  A bounded run ends once the end-of-input micro-batch has
been written; the query is then stopped between batches' writes.  A run
whose input ends at once runs as one batch query (`batch_query`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Callable, ContextManager, Iterator, List, NoReturn, Optional, Tuple

from flowspark.dataflow import Dataflow
from flowspark.engine.batch_query import BatchProgress, run_batch
from flowspark.engine.connect.connect_client import check_reachable
from flowspark.engine.plan.plan import Plan, build_plan, for_workers, placed_for_machines
from flowspark.engine.plan.shipped_plan import ChangedSteps, KeptSteps, ShippedPlan
from flowspark.engine.recovery import driver_fence, storage
from flowspark.engine.recovery.checkpoint_check import check_checkpoint
from flowspark.engine.recovery.recovery_dir import check_recovery_dir
from flowspark.engine.recovery.resume_check import check_or_record
from flowspark.engine.recovery.storage import Location, Scheme, parse_location
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import FailureBox, StepFailure, resolve
from flowspark.engine.reports.metrics import FlowMetrics, QueryWatch
from flowspark.engine.reports.proxy_log import quiet_proxy_failures
from flowspark.engine.reports.worker_prints import ERROR_PRINT_CALL, OUTPUT_CALL, deliver, write_error_prints
from flowspark.engine.run_config import RunConfig
from flowspark.engine.run_context import RunContext, running
from flowspark.engine.run_spark import RunSpark, link_host_for, local_parallelism, spark_for, uses_spark_session
from flowspark.engine.sinks.remote_writer import serve_writer
from flowspark.engine.sinks.sink_writer import OutputStash, SinkWriter
from flowspark.engine.sources import snapshot_store
from flowspark.engine.sources.driver_inputs import Offset, SourceHub
from flowspark.engine.sources.executor_source import list_executor_inputs, reads_in_executors
from flowspark.engine.sources.input_end import InputEnd, recorded_end
from flowspark.engine.sources.wake_ups import DUE_CALL, WakeUps
from flowspark.engine.spark.cluster import check_recovery_dir_visible
from flowspark.engine.spark.shipping import ship_by_value, user_packages
from flowspark.engine.streaming_query import (
    SparkHiccup,
    batch_reporter,
    run_failure,
    start_query,
    wait_for_end,
)
from flowspark.engine.util import shutdown
from flowspark.engine.warm_up import warm_python_workers
from flowspark.errors import FlowsparkRuntimeError
from flowspark.tracing import traced_run

_log = logging.getLogger(__name__)


INPUT_LOG = "flowspark-input"
"""The folder of the recovery directory where the driver-resident sources' input waits for its micro-batch's commit."""

RESTARTS = 2
"""How many times a run restarts from its checkpoint after a failure inside Spark itself."""


ApiServer = Callable[[Dataflow], ContextManager[Optional[FlowMetrics]]]
"""Serves a flow's dataflow API while its block runs, if asked to; yields the run's metrics to feed (None if not)."""


@contextmanager
def _no_api(flow: Dataflow) -> Iterator[Optional[FlowMetrics]]:
    yield None


def run_flow(flow: Dataflow, config: RunConfig, serve_api: ApiServer = _no_api) -> None:
    """Run `flow` until its inputs end (or forever, for unbounded inputs).

    A failure inside Spark that no user code caused (a lost executor, an
    RPC timeout on an overloaded machine) restarts the query from its
    checkpoint, as a resumed run would, at most `RESTARTS` times; user
    errors end the run at once, as in Bytewax.  A SIGTERM stops it at a
    micro-batch boundary (`shutdown`).  `serve_api` serves the dataflow API
    for the run's duration (the launcher hands it `flowspark.dataflow_api`'s).
    """
    plan = build_plan(flow, ordered=config.ordered, workers=config.workers)
    with serve_api(flow) as metrics, shutdown.stop_on_sigterm():
        _run_plan(plan, config, metrics)


def _run_plan(plan: Plan, config: RunConfig, metrics: Optional[FlowMetrics]) -> None:
    ship_by_value(user_packages())
    driver = _read_first(plan, config, metrics)
    try:
        spark = spark_for(
            plan,
            config.parallelism,
            config.master,
            config.session_conf(),
            bool(config.conf),
            config.recovery_dir,
            streaming=driver is None or not driver.ends_at_once,
            remote=config.remote,
            single_run=config.single_run,
        )
        _check_shared_recovery(spark, config)
        if driver is not None:
            _reachable(spark, config, driver.server)
            if spark.lent is not None:
                driver.server.lend(spark.lent)
    except BaseException as ex:
        if driver is not None:
            _close_after(ex, driver, None)
        raise
    if not spark.remote:
        quiet_proxy_failures()
    if driver is not None and driver.ends_at_once:
        _run_as_batch(plan, config, spark, driver, metrics)
        return
    plan = placed_for_machines(plan, one_machine=spark.local)
    if not spark.remote:
        warm_python_workers(spark.session, stateful=plan.depth > 0)
    if config.recovery_dir:
        checkpoint = parse_location(config.recovery_dir, spark.settings)
    else:
        checkpoint = Location(Scheme.LOCAL, tempfile.mkdtemp(prefix="flowspark-"))
    try:
        check_recovery_dir(checkpoint)
        storage.private_dir(checkpoint)
        storage.private_dir(checkpoint.join("query"), "checkpoint directory")
        check_checkpoint(checkpoint.join("query"))
        if not spark.local:
            # Also waits for the executors, so that the default parallelism
            # counts their cores (it is 2 until they register).
            check_recovery_dir_visible(spark.session, str(checkpoint), temporary=config.recovery_dir is None)
            spark = replace(spark, parallelism=config.parallelism or spark.context.defaultParallelism)
        with driver_fence.owning(checkpoint):
            for attempt in range(RESTARTS + 1):
                try:
                    with running(RunContext(spark.session, str(checkpoint))), traced_run(plan.flow_id):
                        _attempt(spark, plan, config, checkpoint, metrics, driver if attempt == 0 else None)
                    return
                except SparkHiccup as hiccup:
                    if attempt == RESTARTS:
                        raise hiccup.error from hiccup.error.__cause__  # Spark's own error only with FLOWSPARK_FULL_TRACEBACK=1
                    _log.warning(
                        "%s; restarting from the last completed micro-batch (restart %d of %d)",
                        hiccup,
                        attempt + 1,
                        RESTARTS,
                    )
    finally:
        if config.recovery_dir is None:
            shutil.rmtree(checkpoint.path, ignore_errors=True)


@dataclass
class _DriverSide:
    """The driver's server, failure box and source hub of one attempt of a run."""

    server: DriverServer
    box: FailureBox
    hub: SourceHub
    wake_ups: WakeUps
    first_read: Optional[Tuple[Offset, Offset]] = None
    """The first micro-batch, read before Spark started (`SourceHub.prime`), if it was."""

    @property
    def ends_at_once(self) -> bool:
        """The input ended within the first read: the run is one micro-batch (`batch_query`)."""
        return self.first_read is not None and recorded_end(self.first_read[1]["end"]) is InputEnd.EOF

    def close(self) -> None:
        self.server.close()
        self.hub.close()


def _driver_side(
    server: DriverServer, plan: Plan, config: RunConfig, parallelism: int, metrics: Optional[FlowMetrics]
) -> _DriverSide:
    if metrics is not None:
        server.register("metrics", metrics.add)
    server.register(OUTPUT_CALL, deliver)
    server.register(ERROR_PRINT_CALL, write_error_prints)
    box = FailureBox(server)
    hub = SourceHub(
        plan,
        server,
        config.max_items_per_batch,
        config.max_seconds_per_poll,
        pieces=parallelism,
        workers=config.workers,
        meter=None if metrics is None else metrics.driver_meter(),
    )
    wake_ups = WakeUps()
    server.register(DUE_CALL, wake_ups.due)
    return _DriverSide(server, box, hub, wake_ups)


def _ship(plan: Plan, server: DriverServer) -> ShippedPlan:
    """The workers' plan of `plan` (placed for the machines), as every task gets it; the steps of a run that keeps
    one worker's order are kept by the driver between tasks (`shipped_plan`)."""
    shipped = ShippedPlan(for_workers(plan), kept_by_driver=plan.ordered)
    if shipped.kept_by_driver:
        KeptSteps(shipped).register(server)
    else:
        ChangedSteps().register(server)
    return shipped


def _read_first(plan: Plan, config: RunConfig, metrics: Optional[FlowMetrics]) -> Optional[_DriverSide]:
    """The driver side with the first micro-batch read, for a run on this machine without recovery whose inputs all live here.

    If that read ends the input, the run can be one batch query
    (`batch_query`); else the streaming query starts from it.  A flow whose
    connectors drive Spark themselves is not read before Spark starts.
    """
    parallelism: Optional[int]
    if config.remote is not None:
        host, parallelism = link_host_for(config.remote), config.parallelism or 2
    else:
        host, parallelism = "127.0.0.1", local_parallelism(config.parallelism, config.master)
    if parallelism is None or config.recovery_dir is not None or uses_spark_session(plan):
        return None
    if any(reads_in_executors(step.config.source) for step in plan.inputs):
        return None
    driver = _driver_side(DriverServer(host, port=config.driver_link_port), plan, config, parallelism, metrics)
    try:
        driver.first_read = driver.hub.prime()
    except BaseException as ex:
        _close_after(ex, driver, None)
    return driver


def _run_as_batch(
    plan: Plan, config: RunConfig, spark: RunSpark, driver: _DriverSide, metrics: Optional[FlowMetrics]
) -> None:
    """Run a flow whose input ended within the first read as one batch query (`batch_query`)."""
    assert driver.first_read is not None
    plan = placed_for_machines(plan, one_machine=True)
    if metrics is None and config.progress is not None and config.progress.shown:
        metrics = FlowMetrics()  # the progress line reads the steps' counters (`BatchProgress`)
        driver.server.register("metrics", metrics.add)
    checkpoint = Location(Scheme.LOCAL, tempfile.mkdtemp(prefix="flowspark-"))
    writer: Optional[SinkWriter] = None
    try:
        inputs = list_executor_inputs(
            plan,
            checkpoint.join("query", snapshot_store.FOLDER),
            config.max_items_per_batch,
            config.max_seconds_per_poll,
            report=False,
        )
        groups = check_or_record(checkpoint, plan, driver.hub.partition_names())
        writer = _writer(plan, config, checkpoint, driver, spark.parallelism, metrics, [], write_behind=False)
        with (
            running(RunContext(spark.session, str(checkpoint))),
            traced_run(plan.flow_id),
            _batch_progress(config, plan, driver.hub, metrics),
        ):
            try:
                run_batch(
                    spark.session,
                    plan,
                    _ship(plan, driver.server),
                    driver.server.link,
                    driver.hub,
                    driver.first_read,
                    writer,
                    groups,
                    inputs,
                    spark.parallelism,
                    metered=metrics is not None,
                )
            except (FlowsparkRuntimeError, StepFailure):
                raise  # flowspark's own, already naming the step
            except Exception as ex:
                error = run_failure(plan, checkpoint, driver.box, ex, driver.server.failure, writer.failure)
                if error is None:
                    raise
                if isinstance(error, SparkHiccup):
                    error = error.error
                raise error from error.__cause__
        if config.progress is not None:
            config.progress.finish()
    except BaseException as ex:
        _close_after(ex, driver, writer)
    finally:
        shutil.rmtree(checkpoint.path, ignore_errors=True)
    _close(driver, writer)


def _batch_progress(
    config: RunConfig, plan: Plan, hub: SourceHub, metrics: Optional[FlowMetrics]
) -> ContextManager[object]:
    """The progress line of a batch run while it runs, if the run shows progress."""
    if config.progress is None or not config.progress.shown or metrics is None:
        return nullcontext()
    return BatchProgress(config.progress, plan, hub.items_read, metrics)


def _writer(
    plan: Plan,
    config: RunConfig,
    checkpoint: Location,
    driver: _DriverSide,
    parallelism: int,
    metrics: Optional[FlowMetrics],
    queries: List[Any],
    write_behind: bool,
) -> SinkWriter:
    """The run's writer; `write_behind` writes each micro-batch while Spark computes the next (`write_behind`)."""
    return SinkWriter(
        plan,
        checkpoint,
        OutputStash(driver.server),
        batch_reporter(config.progress, driver.hub, queries),
        None if metrics is None else metrics.driver_meter(),
        workers=config.workers,
        epoch_per_round=config.epoch_per_round,
        link=driver.server.link,
        parallelism=parallelism,
        write_behind=write_behind,
        wake_ups=driver.wake_ups,
        resumable=config.recovery_dir is not None,
    )


def _driver_server(spark: RunSpark, port: int) -> DriverServer:
    """The driver link's server: on loopback when Spark runs on this machine, where a Spark Connect server reaches
    this machine, or where Spark's driver listens."""
    if spark.local:
        return DriverServer("127.0.0.1", port=port)
    if spark.remote:
        return DriverServer(spark.link_host, port=port)
    conf = spark.context.getConf()
    host = conf.get("spark.driver.host")
    return DriverServer(conf.get("spark.driver.bindAddress", host), advertised_host=host, port=port)


def _check_shared_recovery(spark: RunSpark, config: RunConfig) -> None:
    """Refuse a recovery directory on this machine's disk for a run on a Spark Connect server elsewhere.

    Both sides write there: the server its checkpoint, this process the
    sinks' ledger, so it must be storage both see.
    """
    if not spark.remote or spark.local or config.recovery_dir is None:
        return
    if parse_location(config.recovery_dir).scheme is Scheme.LOCAL:
        msg = (
            f"recovery directory {config.recovery_dir!r} is on this machine, but the Spark Connect server at "
            f"{(config.remote or '').split(';')[0]} runs elsewhere and keeps the flow's state there: give -r an "
            "s3:// or hdfs:// URI both reach"
        )
        raise FlowsparkRuntimeError(msg)


def _reachable(spark: RunSpark, config: RunConfig, server: DriverServer) -> None:
    """Refuse a run on a Spark Connect server elsewhere whose tasks can't reach the driver link (`check_reachable`)."""
    if spark.remote and not spark.local and config.remote is not None:
        check_reachable(spark.session, server.link.host, server.link.port, config.remote)


def _attempt(
    spark: RunSpark,
    plan: Plan,
    config: RunConfig,
    checkpoint: Location,
    metrics: Optional[FlowMetrics] = None,
    driver: Optional[_DriverSide] = None,
) -> None:
    """Run the flow's query once, from wherever its checkpoint stands; feed `metrics`, if given.

    `driver` is the driver side with the first micro-batch already read
    (`_read_first`), if it was.
    """
    if driver is None:
        driver = _driver_side(_driver_server(spark, config.driver_link_port), plan, config, spark.parallelism, metrics)
        _reachable(spark, config, driver.server)
        if spark.lent is not None:
            driver.server.lend(spark.lent)
    hub = driver.hub
    writer: Optional[SinkWriter] = None
    try:
        store = checkpoint.join("query", snapshot_store.FOLDER)
        inputs = list_executor_inputs(
            plan,
            store,
            config.max_items_per_batch,
            config.max_seconds_per_poll,
            report=metrics is not None or config.progress is not None,
        )
        hub.expect_remote([(part.step_id, part.name) for part in inputs.parts])
        if config.recovery_dir is not None:
            hub.keep_input_in(checkpoint.join(INPUT_LOG))
        names = [here + there for here, there in zip(hub.partition_names(), inputs.partition_names(len(plan.inputs)))]
        groups = check_or_record(checkpoint, plan, names)
        queries: List[Any] = []
        # Without a recovery directory nothing can resume a killed run, so
        # nothing is lost by writing a micro-batch while Spark computes the next.
        writer = _writer(
            plan,
            config,
            checkpoint,
            driver,
            spark.parallelism,
            metrics,
            queries,
            write_behind=config.recovery_dir is None,
        )
        if spark.remote:
            serve_writer(driver.server, writer)
        if config.progress is not None and spark.ui_url:
            config.progress.announce(f"Spark UI at {spark.ui_url}")
        query = start_query(
            spark,
            plan,
            _ship(plan, driver.server),
            driver.server.link,
            writer,
            checkpoint,
            groups,
            config.interval_seconds,
            inputs,
            hub.has_parts(),
            metered=metrics is not None,
        )
        queries.append(query)
        if metrics is not None:
            metrics.watch(QueryWatch(lambda: query.lastProgress, hub.fraction_done, hub.lags))
        wait_for_end(
            plan,
            query,
            checkpoint,
            driver.server,
            driver.box,
            writer,
            sees_commits=spark.local or not spark.remote or config.recovery_dir is not None,
            resumable=config.recovery_dir is not None,
        )
        if config.progress is not None:
            config.progress.finish()
    except BaseException as ex:
        _close_after(ex, driver, writer)
    _close(driver, writer)


def _close(driver: _DriverSide, writer: Optional[SinkWriter]) -> None:
    driver.close()
    if writer is not None:
        writer.close()


def _close_after(ex: BaseException, driver: _DriverSide, writer: Optional[SinkWriter]) -> NoReturn:
    """Close the run's connectors after it failed with `ex`, and raise the error the user needs.

    That is the run's own error: one that closing the sources and sinks
    raises after it (a sink whose write failed often fails to close too)
    is only noted on it.
    """
    found = resolve(ex, driver.box) if isinstance(ex, StepFailure) else None
    error = ex if found is None else found
    for close in (driver.server.close, driver.hub.close) + ((writer.close,) if writer is not None else ()):
        try:
            close()
        except Exception as also:
            error.add_note(f"closing the flow's connectors afterwards also failed: {also} ({also.__cause__!r})")
    if found is None:
        raise ex
    raise found from found.__cause__
