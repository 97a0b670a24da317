"""Run a flow as one Spark Structured Streaming query (`streaming_query`) and wait for its end.

The driver side of a run: its Spark, the driver link, the recovery
directory's checks, and the attempts: each is one `attempt.Attempt`, made
by the prelude the streaming and the batch query share (`open_attempt`:
the inputs, the recovery directory's shape, the `foreachBatch` writer on
the driver, which writes the outputs that live there and starts one job
per micro-batch for those written in Spark's tasks, `sink_tasks`).  A
failure in Spark rather than in user code gets another attempt, from the
last committed micro-batch.  A bounded run ends once the end-of-input
micro-batch has been written; the query is then stopped between batches'
writes.  A run whose input ends at once runs as one batch query
(`batch_query`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Callable, ContextManager, Iterator, Optional

from flowspark.dataflow import Dataflow
from flowspark.engine.attempt import Attempt, DriverSide, SparkRun, close_after, driver_side, open_attempt
from flowspark.engine.batch_query import BatchProgress, run_batch
from flowspark.engine.connect.connect_client import check_reachable
from flowspark.engine.plan.plan import Plan, build_plan, placed_for_machines
from flowspark.engine.recovery import driver_fence, storage
from flowspark.engine.recovery.checkpoint_check import check_checkpoint
from flowspark.engine.recovery.recovery_dir import check_recovery_dir
from flowspark.engine.recovery.storage import Location, Scheme, parse_location
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.reports.metrics import FlowMetrics, QueryWatch
from flowspark.engine.reports.proxy_log import quiet_proxy_failures
from flowspark.engine.run_config import RunConfig
from flowspark.engine.run_spark import RunSpark, link_host_for, local_parallelism, spark_for, uses_spark_session
from flowspark.engine.sinks.remote_writer import serve_writer
from flowspark.engine.sources.executor_source import reads_in_executors
from flowspark.engine.spark.cluster import check_recovery_dir_visible
from flowspark.engine.spark.shipping import ship_by_value, user_packages
from flowspark.engine.streaming_query import (
    TransientSparkFailure,
    run_failure,
    start_query,
    wait_for_end,
)
from flowspark.engine.util import shutdown
from flowspark.engine.warm_up import warm_python_workers
from flowspark.errors import FlowsparkRuntimeError

_log = logging.getLogger(__name__)


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
    for the run's duration (the launcher hands it `flowspark._dataflow_api`'s).
    """
    plan = build_plan(flow, ordered=config.ordered, workers=config.workers)
    with serve_api(flow) as metrics, shutdown.stop_on_sigterm():
        _run_plan(plan, config, metrics)


def _run_plan(plan: Plan, config: RunConfig, metrics: Optional[FlowMetrics]) -> None:
    """Read the first micro-batch if the run may end with it, pick the Spark, then run the batch query, or the
    streaming query's attempts on the checkpoint."""
    ship_by_value(user_packages())
    driver = _read_first(plan, config, metrics)
    spark = _spark(plan, config, driver)
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
        spark = _check_checkpoint(spark, config, checkpoint)
        run = SparkRun(spark, plan, config, checkpoint, metrics)
        with driver_fence.owning(checkpoint):
            for attempt in range(RESTARTS + 1):
                try:
                    with run.running():
                        # The driver side that read the first micro-batch serves the first attempt only.
                        side = driver if attempt == 0 and driver is not None else _new_driver(run)
                        _stream(open_attempt(run, side, streaming=True))
                    return
                except TransientSparkFailure as hiccup:
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


def _spark(plan: Plan, config: RunConfig, driver: Optional[DriverSide]) -> RunSpark:
    """The run's Spark (`spark_for`), checked against the run's needs; lent to `driver`, if the first micro-batch was
    read before it started (which is closed if the Spark can't serve the run)."""
    try:
        spark = spark_for(plan, config, streaming=driver is None or not driver.ends_at_once)
        _check_shared_recovery(spark, config)
        if driver is not None:
            _reachable(spark, config, driver.server)
            if spark.lent is not None:
                driver.server.lend(spark.lent)
    except BaseException as ex:
        if driver is not None:
            close_after(ex, driver, None)
        raise
    if not spark.remote:
        quiet_proxy_failures()
    return spark


def _check_checkpoint(spark: RunSpark, config: RunConfig, checkpoint: Location) -> RunSpark:
    """Check the recovery directory (or the temporary checkpoint) before the query starts, and make both private; the
    Spark, with the parallelism of a cluster's executors once they registered."""
    check_recovery_dir(checkpoint)
    storage.private_dir(checkpoint)
    storage.private_dir(checkpoint.join("query"), "checkpoint directory")
    check_checkpoint(checkpoint.join("query"))
    if spark.local:
        return spark
    # Also waits for the executors, so that the default parallelism
    # counts their cores (it is 2 until they register).
    check_recovery_dir_visible(spark.session, str(checkpoint), temporary=config.recovery_dir is None)
    return replace(spark, parallelism=config.parallelism or spark.context.defaultParallelism)


def _read_first(plan: Plan, config: RunConfig, metrics: Optional[FlowMetrics]) -> Optional[DriverSide]:
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
    driver = driver_side(DriverServer(host, port=config.driver_link_port), plan, config, parallelism, metrics)
    try:
        driver.first_read = driver.hub.prime()
    except BaseException as ex:
        close_after(ex, driver, None)
    return driver


def _run_as_batch(
    plan: Plan, config: RunConfig, spark: RunSpark, driver: DriverSide, metrics: Optional[FlowMetrics]
) -> None:
    """Run a flow whose input ended within the first read as one batch query (`batch_query`)."""
    plan = placed_for_machines(plan, one_machine=True)
    if metrics is None and config.progress is not None and config.progress.shown:
        metrics = FlowMetrics()  # the progress line reads the steps' counters (`BatchProgress`)
        driver.server.register("metrics", metrics.add)
    run = SparkRun(spark, plan, config, Location(Scheme.LOCAL, tempfile.mkdtemp(prefix="flowspark-")), metrics)
    try:
        with run.running():
            attempt = open_attempt(run, driver, streaming=False)
            with attempt.closing():
                with _batch_progress(attempt):
                    try:
                        run_batch(attempt)
                    except (FlowsparkRuntimeError, StepFailure):
                        raise  # flowspark's own, already naming the step
                    except Exception as ex:
                        error = run_failure(
                            plan, run.checkpoint, driver.box, ex, driver.server.failure, attempt.writer.failure
                        )
                        if error is None:
                            raise
                        if isinstance(error, TransientSparkFailure):
                            error = error.error
                        raise error from error.__cause__
                attempt.finish_progress()
    finally:
        shutil.rmtree(run.checkpoint.path, ignore_errors=True)


def _batch_progress(attempt: Attempt) -> ContextManager[object]:
    """The progress line of a batch run while it runs, if the run shows progress."""
    progress, metrics = attempt.config.progress, attempt.metrics
    if progress is None or not progress.shown or metrics is None:
        return nullcontext()
    return BatchProgress(progress, attempt.plan, attempt.driver.hub.items_read, metrics)


def _stream(attempt: Attempt) -> None:
    """Run the flow's streaming query once, from wherever its checkpoint stands, until it ends."""
    with attempt.closing():
        spark, config, metrics = attempt.spark, attempt.config, attempt.metrics
        if spark.remote:
            serve_writer(attempt.driver.server, attempt.writer)
        if config.progress is not None and spark.ui_url:
            config.progress.announce(f"Spark UI at {spark.ui_url}")
        query = start_query(attempt)
        attempt.queries.append(query)
        if metrics is not None:
            hub = attempt.driver.hub
            metrics.watch(QueryWatch(lambda: query.lastProgress, hub.fraction_done, hub.lags))
        wait_for_end(attempt, query)
        attempt.finish_progress()


def _new_driver(run: SparkRun) -> DriverSide:
    """A driver side for an attempt whose first micro-batch was not read before Spark started."""
    spark, config = run.spark, run.config
    driver = driver_side(
        _driver_server(spark, config.driver_link_port), run.plan, config, spark.parallelism, run.metrics
    )
    _reachable(spark, config, driver.server)
    if spark.lent is not None:
        driver.server.lend(spark.lent)
    return driver


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
