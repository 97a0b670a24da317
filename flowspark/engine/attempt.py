"""One attempt of a run, once it has a Spark: everything its query needs, built once and handed down.

A run (`runner`) picks its Spark and its checkpoint, then makes an
`Attempt` per try (a failure inside Spark gets another, `runner.RESTARTS`).
`open_attempt` is the prelude the streaming query (`streaming_query`) and
the batch query (`batch_query`) share: it lists the inputs read in Spark's
executors, checks the recovery directory's shape against the flow (or
records it), makes the `foreachBatch` writer and ships the workers' plan.
The two queries take the `Attempt` whole and differ only where they
differ; `Attempt.closing` closes the driver side and the writer after
either, raising the error the user needs.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Tuple

from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.plan import Plan, for_workers
from flowspark.engine.plan.shipped_plan import ChangedSteps, KeptSteps, ShippedPlan
from flowspark.engine.recovery.resume_check import check_or_record
from flowspark.engine.recovery.storage import Location
from flowspark.engine.reports.driver_link import DriverLink, DriverServer
from flowspark.engine.reports.failures import ReportedFailures, StepFailure, resolve
from flowspark.engine.reports.metrics import FlowMetrics
from flowspark.engine.reports.progress import BatchReport, Progress, state_rows
from flowspark.engine.reports.worker_prints import ERROR_PRINT_CALL, OUTPUT_CALL, deliver, write_error_prints
from flowspark.engine.run_config import RunConfig
from flowspark.engine.run_context import RunContext, running
from flowspark.engine.run_spark import RunSpark
from flowspark.engine.sinks.sink_writer import OutputStash, SinkWriter, WriterHooks, WriterSetup
from flowspark.engine.sources import snapshot_store
from flowspark.engine.sources.driver_inputs import DriverInputs, Offset, Polling
from flowspark.engine.sources.executor_source import ExecutorInputs, list_executor_inputs
from flowspark.engine.sources.input_end import InputEnd, recorded_end
from flowspark.engine.sources.wake_ups import DUE_CALL, WakeUps
from flowspark.tracing import traced_run

INPUT_LOG = "flowspark-input"
"""The folder of the recovery directory where the driver-resident sources' input waits for its micro-batch's commit."""


@dataclass(frozen=True)
class SparkRun:
    """A run once it has a Spark: the Spark, the plan placed for its machines, the run's configuration, its
    checkpoint (the recovery directory, or a temporary one) and the metrics to feed (None if not metered)."""

    spark: RunSpark
    plan: Plan
    config: RunConfig
    checkpoint: Location
    metrics: Optional[FlowMetrics] = None

    @property
    def resumable(self) -> bool:
        """The run has a recovery directory: a later run resumes from its checkpoint."""
        return self.config.recovery_dir is not None

    @contextmanager
    def running(self) -> Iterator[None]:
        """The run's context for its connectors (`run_context`) and its trace, while the block runs."""
        with running(RunContext(self.spark.session, str(self.checkpoint))), traced_run(self.plan.flow_id):
            yield


@dataclass
class DriverSide:
    """The driver's server, reported failures and driver inputs of one attempt of a run."""

    server: DriverServer
    box: ReportedFailures
    hub: DriverInputs
    wake_ups: WakeUps
    first_read: Optional[Tuple[Offset, Offset]] = None
    """The first micro-batch, read before Spark started (`DriverInputs.prime`), if it was."""

    @property
    def ends_at_once(self) -> bool:
        """The input ended within the first read: the run is one micro-batch (`batch_query`)."""
        return self.first_read is not None and recorded_end(self.first_read[1]["end"]) is InputEnd.EOF

    def close(self) -> None:
        """Close the driver link's server and the sources."""
        self.server.close()
        self.hub.close()


def driver_side(
    server: DriverServer, plan: Plan, config: RunConfig, parallelism: int, metrics: Optional[FlowMetrics]
) -> DriverSide:
    """The driver side of an attempt around `server`: its calls registered, its sources split for `parallelism` tasks."""
    if metrics is not None:
        server.register("metrics", metrics.add)
    server.register(OUTPUT_CALL, deliver)
    server.register(ERROR_PRINT_CALL, write_error_prints)
    box = ReportedFailures(server)
    hub = DriverInputs(
        plan,
        server,
        Polling(config.max_items_per_batch, config.max_seconds_per_poll, config.epoch_per_round),
        pieces=parallelism,
        workers=config.workers,
        meter=None if metrics is None else metrics.driver_meter(),
    )
    wake_ups = WakeUps()
    server.register(DUE_CALL, wake_ups.due)
    return DriverSide(server, box, hub, wake_ups)


@dataclass
class Attempt:
    """What one attempt of a run's query needs: the run (`SparkRun`), the driver side, the inputs read in the
    executors, the state groups, the writer and the workers' plan (`open_attempt` makes one)."""

    run: SparkRun
    driver: DriverSide
    inputs: ExecutorInputs
    groups: Groups
    writer: SinkWriter
    shipped: ShippedPlan
    queries: List[Any] = field(default_factory=list)
    """The started query, once it is (the progress line reads its state rows)."""

    @property
    def spark(self) -> RunSpark:
        return self.run.spark

    @property
    def plan(self) -> Plan:
        return self.run.plan

    @property
    def config(self) -> RunConfig:
        return self.run.config

    @property
    def checkpoint(self) -> Location:
        return self.run.checkpoint

    @property
    def metrics(self) -> Optional[FlowMetrics]:
        return self.run.metrics

    @property
    def link(self) -> DriverLink:
        """How Spark's tasks reach this process (`driver_link`)."""
        return self.driver.server.link

    @property
    def metered(self) -> bool:
        """The tasks count their steps' items (`metrics`)."""
        return self.run.metrics is not None

    def finish_progress(self) -> None:
        """The run's end on the progress line, if it shows one."""
        if self.config.progress is not None:
            self.config.progress.finish()

    @contextmanager
    def closing(self) -> Iterator[Attempt]:
        """Close the driver side and the writer after the block; after a failure, raise the error the user needs."""
        try:
            yield self
        except BaseException as ex:
            close_after(ex, self.driver, self.writer)
        self.driver.close()
        self.writer.close()


def open_attempt(run: SparkRun, driver: DriverSide, streaming: bool) -> Attempt:
    """The prelude both queries share: list the executor inputs, check or record the recovery directory's shape,
    make the writer and ship the workers' plan; on a failure, close `driver` and raise the user's error.

    A `streaming` attempt also tells the hub which partitions the
    executors read and, with a recovery directory, where to keep its
    input until committed; without one, nothing can resume a killed run,
    so nothing is lost by writing a micro-batch while Spark computes the
    next (`write_behind`).
    """
    plan, config, checkpoint, hub = run.plan, run.config, run.checkpoint, driver.hub
    try:
        inputs = list_executor_inputs(
            plan,
            checkpoint.join("query", snapshot_store.FOLDER),
            config.max_items_per_batch,
            config.max_seconds_per_poll,
            report=streaming and (run.metrics is not None or config.progress is not None),
        )
        if streaming:
            hub.expect_remote([(part.step_id, part.name) for part in inputs.parts])
            if run.resumable:
                hub.keep_input_in(checkpoint.join(INPUT_LOG))
        names = [here + there for here, there in zip(hub.partition_names(), inputs.partition_names(len(plan.inputs)))]
        groups = check_or_record(checkpoint, plan, names)
        queries: List[Any] = []
        writer = SinkWriter(
            plan,
            checkpoint,
            OutputStash(driver.server),
            link=driver.server.link,
            setup=WriterSetup(
                workers=config.workers,
                epoch_per_round=config.epoch_per_round,
                parallelism=run.spark.parallelism,
                write_behind=streaming and not run.resumable,
                resumable=run.resumable,
            ),
            hooks=WriterHooks(
                on_batch=batch_reporter(config.progress, hub, queries),
                meter=None if run.metrics is None else run.metrics.driver_meter(),
                wake_ups=driver.wake_ups,
            ),
        )
    except BaseException as ex:
        close_after(ex, driver, None)
    try:
        shipped = ship(plan, driver.server)
    except BaseException as ex:
        close_after(ex, driver, writer)
    return Attempt(run, driver, inputs, groups, writer, shipped, queries)


def ship(plan: Plan, server: DriverServer) -> ShippedPlan:
    """The workers' plan of `plan` (placed for the machines), as every task gets it; the steps of a run that keeps
    one worker's order are kept by the driver between tasks (`shipped_plan`)."""
    shipped = ShippedPlan(for_workers(plan), kept_by_driver=plan.ordered)
    if shipped.kept_by_driver:
        KeptSteps(shipped).register(server)
    else:
        ChangedSteps().register(server)
    return shipped


def batch_reporter(
    progress: Optional[Progress], hub: DriverInputs, queries: List[Any]
) -> Optional[Callable[[int, int], None]]:
    """The writer's per-batch callback that feeds `progress`, if there is one."""
    if progress is None:
        return None
    written = [0]
    last = [time.monotonic()]

    def report(batch_id: int, items_out: int) -> None:
        now = time.monotonic()
        written[0] += items_out
        last_progress = queries[0].lastProgress if queries else None
        progress.batch(
            BatchReport(
                batch_id + 1, hub.items_read, written[0], now - last[0], state_rows(last_progress), hub.fraction_done()
            )
        )
        last[0] = now

    return report


def close_after(ex: BaseException, driver: DriverSide, writer: Optional[SinkWriter]) -> NoReturn:
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
