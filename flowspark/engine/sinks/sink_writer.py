"""The driver side of a flow's outputs: one `foreachBatch` callback.

Every `inspect_debug` tap, and every output whose sink lives in the
driver (`Sink.lives_in_driver`), runs here, in the user's process, so
`TestingSink` lists, prints and other in-process effects behave as in
Bytewax.  The other outputs are written in Spark's tasks: a
`FixedPartitionedSink` by one job per micro-batch that also brings this
callback its own rows (`sink_tasks`), a `DynamicSink` by the tasks that
make its items (`task_sinks`), and nothing of theirs comes here.
Each micro-batch is written once: a ledger in the checkpoint
directory records the last written batch id and the snapshot of every
`FixedPartitionedSink` partition after it, so a batch Spark replays after a
crash is skipped, or (if the crash hit mid-write) rewritten from partitions
rebuilt at the previous snapshot, which is how `FileSink` avoids duplicates.
A `MicroBatchSink` gets the whole batch at once with its id and the run's
id (kept beside the ledger), so it can make a rewrite replace the first try;
partitions written here or in the tasks can read both (`batch_id`), so
that one which can't cut back (a database table) can skip a batch it
already committed.
When the run keeps one worker's order (`Plan.ordered`), each output's and
tap's runs of items from every task are put in that order first (`order`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import CONTROL_GROUP, Destination, DestinationKind, origin_worker, parse
from flowspark.engine.plan.encoded_lines import EncodedLines, encoded, write_lines
from flowspark.engine.plan.order import EOF_ROUND, Order
from flowspark.engine.plan.plan import Plan, SinkLayout, SinkPlace, SinkRouting
from flowspark.engine.plan.route import check_keyed, split_by_part
from flowspark.engine.recovery.sink_ledger import LEDGER as LEDGER
from flowspark.engine.recovery.sink_ledger import RUN_ID as RUN_ID
from flowspark.engine.recovery.sink_ledger import Ledger
from flowspark.engine.recovery.sink_ledger import read_ledger as read_ledger
from flowspark.engine.recovery.storage import Location
from flowspark.engine.reports.driver_link import DriverLink, DriverServer
from flowspark.engine.reports.failures import StepFailure, built
from flowspark.engine.reports.metrics import Count, Meter, Timing
from flowspark.engine.sinks.async_write import WriteBehind
from flowspark.engine.sinks.batch_id import SinkBatch, writing
from flowspark.engine.sinks.sink_tasks import PartWritten, SinkJob, SinkTasks
from flowspark.engine.sources.input_end import InputEnd
from flowspark.engine.sources.wake_ups import WakeUps
from flowspark.engine.util.cyclic_gc import collector_paused
from flowspark.engine.util.shutdown import StopAtBoundary
from flowspark.errors import FlowsparkRuntimeError
from flowspark.tracing import BatchTrace, start_batch


class _Output:
    """The partitions of one output step, built as the plan lays them out (`SinkLayout`).

    Those of an output written in Spark's tasks are built there, never here.
    """

    def __init__(self, step_id: str, sink: Any, layout: SinkLayout, resume: Dict[str, Any], workers: int = 1) -> None:
        self.step_id = step_id
        self.sink = sink
        self.routing = layout.routing
        here = layout.place is SinkPlace.DRIVER
        self.fixed = self.routing in (SinkRouting.BY_KEY, SinkRouting.ONE_PART, SinkRouting.BY_WORKER) and here
        self.names = list(layout.parts)
        self.pending: List[Any] = []
        self.parts: Dict[str, Any] = {}
        if not here:
            return
        self._resume = resume
        if self.fixed:
            # As in Bytewax, a partition is built when items reach it; one
            # with a snapshot is built at once, so that a resumed run cuts
            # back what an interrupted batch left.
            for name in self.names:
                if resume.get(name) is not None:
                    self._part(name)
        elif self.routing is SinkRouting.BY_PASS:
            # One partition per worker, as Bytewax builds them.
            for index in range(workers):
                self.parts[str(index)] = self._call("build", built, sink.build, step_id, index, workers)

    def _call(self, what: str, func: Any, *args: Any) -> Any:
        try:
            return func(*args)
        except Exception as ex:
            msg = f"error calling `{what}` in step {self.step_id!r}"
            raise FlowsparkRuntimeError(msg) from ex

    def _part(self, name: str) -> Any:
        """The partition `name`, built from its snapshot the first time it is needed."""
        part = self.parts.get(name)
        if part is None:
            part = self.parts[name] = self._call(
                "build_part", built, self.sink.build_part, self.step_id, name, self._resume.get(name)
            )
        return part

    def write(self, items: Union[List[Any], EncodedLines], origin: str) -> int:
        """Write items that the pass named `origin` made (a dynamic sink's worker is chosen by the origin); their count."""
        if isinstance(items, EncodedLines):
            self._write_lines(items.data)
            return items.count
        if self.routing is SinkRouting.MICRO_BATCH:
            self.pending.extend(items)
        elif self.routing is SinkRouting.BY_PASS:
            worker = origin_worker(origin, len(self.parts))
            self._call("write_batch", self.parts[str(worker)].write_batch, items)
        elif self.routing is SinkRouting.ONE_PART:
            self._call("write_batch", self._part(self.names[0]).write_batch, items)
        elif self.routing is SinkRouting.BY_WORKER:
            worker = origin_worker(origin, len(self.names))
            self._call("write_batch", self._part(self.names[worker]).write_batch, items)
        else:
            self._write_by_key(items)
        return len(items)

    def _write_by_key(self, items: List[Any]) -> None:
        check_keyed(self.step_id, items)
        try:
            by_part = split_by_part(self.step_id, self.sink.part_fn, items, len(self.names))
        except StepFailure as failure:
            raise FlowsparkRuntimeError(failure.message) from failure.cause
        for index, values in by_part.items():
            self._call("write_batch", self._part(self.names[index]).write_batch, values)

    def _write_lines(self, data: bytes) -> None:
        """Append what the workers encoded for the one partition (`encoded_lines`)."""
        self._call("write_batch", write_lines, self.step_id, self._part(self.names[0]), data)

    def end_batch(self, batch_id: int, run_id: str) -> None:
        """Hand a `MicroBatchSink` everything the batch brought it."""
        if self.routing is SinkRouting.MICRO_BATCH and self.pending:
            items, self.pending = self.pending, []
            self._call("write_micro_batch", self.sink.write_micro_batch, self.step_id, batch_id, run_id, items)

    def snapshots(self) -> Dict[str, Any]:
        return {name: self._call("snapshot", part.snapshot) for name, part in self.parts.items()} if self.fixed else {}

    def close(self) -> None:
        for part in self.parts.values():
            self._call("close", part.close)
        if self.routing is SinkRouting.MICRO_BATCH:
            self._call("close", self.sink.close)


class OutputStash:
    """Output and tap chunks the workers handed over, kept until their batch is written.

    A worker stashes each chunk it makes for an output or a tap as soon as
    its pass ends, and the row it sends through Spark carries only the
    ticket; the writer takes the chunk by its ticket.  Through Spark, the
    JVM would convert every chunk to rows and back to Arrow and collect it
    as a task result.  Micro-batches run one after another, so once a
    batch's job has ended the stash holds its chunks and those of task
    attempts Spark dropped, which the writer's lookup by ticket leaves.
    """

    TICKET = b"FST"
    """Prefix of a ticket (a pickle never starts with it)."""

    def __init__(self, server: DriverServer) -> None:
        self._chunks: Dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        server.register("stash", self.put)

    def put(self, payload: bytes) -> bytes:
        ticket = self.TICKET + uuid.uuid4().bytes
        with self._lock:
            self._chunks[ticket] = payload
        return ticket

    def detach(self) -> Dict[bytes, bytes]:
        """Every chunk stashed so far, taken out at once; later chunks gather anew.

        Called once a batch's job has ended: the chunks its rows name are
        all here, and the next batch's cannot be yet.
        """
        with self._lock:
            taken, self._chunks = self._chunks, {}
        return taken


_Part = Tuple[Destination, Optional[Order], int, Union[List[Any], EncodedLines]]
"""What the writer handles at once: a destination (with its origin, if known), the items' order if known, the kind
and the items (or their encoded lines)."""

_LAST: Order = (2 * EOF_ROUND, 0, 0, "")
"""Order of items a chunk holds beyond its last marked run: after all others."""


@dataclass(frozen=True)
class WriterSetup:
    """How a run's writer writes (`SinkWriter`).

    `workers` is Bytewax's worker count (a `DynamicSink` gets one partition
    per worker); `epoch_per_round` counts taps' epochs by source round
    (Bytewax's zero epoch interval), else by micro-batch; `parallelism` is
    the most tasks a micro-batch's sink job uses; `write_behind` writes each
    batch while Spark computes the next (a run that can't resume);
    `resumable` (a run with a recovery directory) has the sink tasks check
    that the run still owns the directory (`driver_fence`).
    """

    workers: int = 1
    epoch_per_round: bool = False
    parallelism: int = 1
    write_behind: bool = False
    resumable: bool = False


@dataclass(frozen=True)
class WriterHooks:
    """Who hears of a writer's batches: `on_batch` (batch id, items written; the progress line), `meter` (each
    output's items and write times, in a metered run), `wake_ups` (the stateful buckets' wake-up reports)."""

    on_batch: Optional[Callable[[int, int], None]] = None
    meter: Optional[Meter] = None
    wake_ups: Optional[WakeUps] = None


class SinkWriter:
    """Writes each micro-batch's output rows to the flow's sinks, exactly once per batch id.

    `stash` holds what the tasks handed the driver; `link` (for failures
    and metrics) serves the outputs written in the executors; `setup` says
    how to write (`WriterSetup`), `hooks` who hears of it (`WriterHooks`).
    """

    def __init__(
        self,
        plan: Plan,
        checkpoint: str | Location,
        stash: Optional[OutputStash] = None,
        link: Optional[DriverLink] = None,
        setup: WriterSetup = WriterSetup(),
        hooks: WriterHooks = WriterHooks(),
    ) -> None:
        on_batch, meter, wake_ups = hooks.on_batch, hooks.meter, hooks.wake_ups
        workers, epoch_per_round, parallelism = setup.workers, setup.epoch_per_round, setup.parallelism
        write_behind, resumable = setup.write_behind, setup.resumable
        self._plan = plan
        self._stash = stash
        self._on_batch = on_batch
        self._meter = meter
        """Counts each output's items and times its writes, if the run is metered."""
        self._epoch_per_round = epoch_per_round
        self._last_round = -1
        """The latest source round taps saw (`_epoch`)."""
        self._ledger = Ledger(checkpoint)
        self._outputs = [
            _Output(step.step_id, step.config.sink, layout, self._ledger.snapshots.get(step.step_id, {}), workers)
            for step, layout in zip(plan.outputs, plan.sinks)
        ]
        # Only a recovery directory is storage every task sees, and only a
        # run that resumes from one can meet an earlier run's tasks.
        tasks = SinkTasks(
            plan, parallelism, link, metered=meter is not None, fence=self._ledger.fence if resumable else None
        )
        self._tasks = tasks if tasks.outputs else None
        self.finished = threading.Event()
        self.ending: Optional[InputEnd] = None
        self.failure: Optional[BaseException] = None
        self.last_batch = self._ledger.batch
        self._wake_ups = wake_ups
        """Hears the stateful buckets' wake-up reports (`wake_ups`), if the run's query asks for ticks."""
        self._behind = WriteBehind() if write_behind else None
        """Writes each batch while Spark computes the next (`async_write`), if the run can't resume."""
        self._trace: Optional[BatchTrace] = None
        """The span of the batch being written (micro-batches are written one at a time)."""
        self._writing = threading.Condition()
        """Guards `_in_batch` and `_holding`; notified when a batch's write ends (`hold`)."""
        self._in_batch = False
        self._holding = False

    def __call__(self, frame: Any, batch_id: int) -> None:
        """Spark's `foreachBatch` callback, when Spark calls it in this process: run the batch's job, then write it."""
        job = self.begin(batch_id)
        try:
            table, written = job.run(frame) if job is not None else (frame.toArrow(), [])
        except BaseException as ex:
            self.failed(ex)
            raise
        self.take(batch_id, table, written)

    def begin(self, batch_id: int) -> Optional[SinkJob]:
        """A micro-batch's write begins: the sink job to run on its rows, if some outputs are written in Spark's tasks.

        Every batch must be run in full, even one Spark starts after the end
        of input (timers): skipping it fails Spark's state commit check.
        The job takes the rows bound for this process out of the batch as
        Arrow, not `collect()`: for `collect()` the JVM pickles a binary
        column one byte at a time (as a latin-1 string), about 6 CPU-s per
        10M output items of the stateless benchmark.  After `hold`, a batch
        fails here (`StopAtBoundary`), unwritten and uncommitted.
        """
        with self._writing:
            if self._holding:
                msg = f"micro-batch {batch_id} is not written: the run is stopping"
                raise StopAtBoundary(msg)
            self._in_batch = True
        self._trace = start_batch(self._plan.flow_id, batch_id)
        try:
            self._ledger.fence.check()  # a run that another took the directory from starts no job
            if self._tasks is None:
                return None
            # The sink job starts from the snapshots the last write committed.
            self._settle()
            batch = SinkBatch(self._ledger.run_id, batch_id)
            return self._tasks.job(batch, batch_id > self._ledger.batch, self._ledger.snapshots)
        except BaseException as ex:
            self.failed(ex)
            raise

    def take(self, batch_id: int, table: Any, written: List[PartWritten]) -> None:
        """Write a batch's rows bound for this process (`table`) and commit it with what the tasks wrote."""
        trace = self._trace
        assert trace is not None, "take() comes after begin()"
        try:
            stashed = self._stash.detach() if self._stash is not None else {}
            if self._behind is None:
                self._write_table(table, batch_id, written, stashed, trace)
            else:
                self._behind.submit(lambda: self._write_table(table, batch_id, written, stashed, trace))
        except BaseException as ex:
            self.failed(ex)
            raise
        self._ended()

    def failed(self, ex: BaseException) -> None:
        """The batch's job failed: its span ends with `ex`, which is the run's failure if it has none."""
        if self._trace is not None:
            self._trace.end(ex)
        self._fail(ex)
        self._ended()

    def _ended(self) -> None:
        with self._writing:
            self._in_batch = False
            self._writing.notify_all()

    def hold(self, alive: Callable[[], bool]) -> None:
        """Write no micro-batch after the one being written, if any, and wait for that one's write to end.

        A batch Spark starts afterwards fails in `begin`, so a resumed run
        writes it.  The wait ends early once `alive()` (the query's) is false.
        """
        with self._writing:
            self._holding = True
            while self._in_batch and alive():
                self._writing.wait(0.1)
        with contextlib.suppress(BaseException):  # a failed write is the run's `failure` already
            self._settle()

    def _fail(self, ex: BaseException) -> None:
        # Once the run is over, stopping the query may interrupt a batch;
        # it is not committed and a resumed run replays it.
        if self.failure is None and not self.finished.is_set():
            self.failure = ex

    def _settle(self) -> None:
        """Wait for the write of the last batch, if it is behind."""
        if self._behind is not None:
            self._behind.join()

    def _write_table(
        self, table: Any, batch_id: int, away: List[PartWritten], stashed: Dict[bytes, bytes], trace: BatchTrace
    ) -> None:
        """Write a batch's rows (`table`) and what the tasks wrote (`away`); end its span."""
        try:
            with trace.active(), collector_paused(), writing(SinkBatch(self._ledger.run_id, batch_id)):
                rows = zip(*(table.column(name).to_pylist() for name in chunks.ARROW_SCHEMA.names))
                self._write(rows, batch_id, away, stashed)
        except BaseException as ex:
            trace.end(ex)
            self._fail(ex)
            raise
        trace.end()

    def _write(
        self, rows: Iterable[chunks.Row], batch_id: int, away: List[PartWritten], stashed: Dict[bytes, bytes]
    ) -> None:
        """Write the driver's rows of a batch and commit it with what the tasks wrote (`away`)."""
        ordered = sorted(rows, key=lambda r: (r[0] == CONTROL_GROUP, r[0], r[1]))
        if self._wake_ups is not None:
            for _, _, _, payload in (row for row in ordered if row[2] == chunks.WAKE_UPS):
                self._wake_ups.note(chunks.loads(payload))
        ordered = [row for row in ordered if row[2] != chunks.WAKE_UPS]
        fresh = batch_id > self._ledger.batch
        # A batch written before a restart is skipped whole, its end marker
        # included: that end belonged to the earlier run.
        if not fresh:
            return
        written = sum(w.items for w in away)
        for dest, order, kind, items in (
            self._in_order(ordered, stashed) if self._plan.ordered else self._as_sent(ordered, stashed)
        ):
            if dest.kind is DestinationKind.OUTPUT:
                started = time.perf_counter()
                count = self._outputs[dest.index].write(items, dest.origin)
                written += count
                if self._meter is not None:
                    step_id = self._outputs[dest.index].step_id
                    self._meter.time(Timing.WRITE_BATCH, step_id, time.perf_counter() - started)
                    self._meter.count(Count.ITEMS_IN, step_id, count)
            elif isinstance(items, EncodedLines):
                msg = f"{dest} got encoded lines: only a sink's chunks are encoded"
                raise AssertionError(msg)
            elif kind == chunks.CONTROL:
                self.ending = InputEnd(chunks.loads(items[0]))
            else:
                self._inspect(dest.index, items, self._epoch(order, batch_id))
        for output in self._outputs:
            output.end_batch(batch_id, self._ledger.run_id)
        if self.ending is InputEnd.ABORT:
            # The aborted epoch is not kept: a resumed run writes it again
            # from the partitions' snapshots before it (no duplicates in files).
            self._ledger.commit(batch_id, self._ledger.snapshots)
        else:
            snapshots = {o.step_id: o.snapshots() for o in self._outputs if o.fixed}
            if self._tasks is not None:
                snapshots.update(self._tasks.snapshots(self._ledger.snapshots, away))
            self._ledger.commit(batch_id, snapshots)
            if self._tasks is not None:
                self._tasks.committed()
        self.last_batch = batch_id
        if self._meter is not None:
            self._meter.flush()
        if self._on_batch is not None:
            self._on_batch(batch_id, written)
        if self.ending is not None:
            self.finished.set()

    @staticmethod
    def _payload(payload: bytes, stashed: Dict[bytes, bytes]) -> bytes:
        """The chunk a row's payload stands for: the stashed one for a ticket, else the payload itself."""
        return stashed.pop(payload) if payload.startswith(OutputStash.TICKET) else payload

    def _as_sent(self, rows: List[chunks.Row], stashed: Dict[bytes, bytes]) -> Iterator[_Part]:
        """Each row's items a part at a time: the driver never holds a whole chunk's items."""
        for grp, _, kind, payload in rows:
            dest = parse(grp)
            if kind == chunks.CONTROL:
                yield dest, None, kind, [payload]
                continue
            chunk = self._payload(payload, stashed)
            lines = encoded(chunk)
            if lines is not None:
                yield dest, None, kind, lines
                continue
            for items in chunks.item_parts(chunk):
                yield dest, None, kind, items

    def _in_order(self, rows: List[chunks.Row], stashed: Dict[bytes, bytes]) -> Iterator[_Part]:
        """Every run of items of the batch in one Bytewax worker's order.

        That worker takes a round through every step before the next
        round, running its steps in the order the flow created them: runs
        come by round, then by their destination's place in the flow, then
        by their `Order`.  Runs of the same order keep the order of their
        rows (sorted by origin and sequence number).  Sorting needs the
        batch's items at once, which one worker's runs (`run_main`, tests)
        can afford.
        """
        runs: List[Tuple[Destination, Order, int, List[Any]]] = []
        for grp, _, kind, payload in rows:
            if kind == chunks.CONTROL:
                yield parse(grp), None, kind, [payload]
                continue
            target = parse(grp).without_origin()
            marks, inner = chunks.runs_of(self._payload(payload, stashed))
            items = chunks.loads(inner)
            start = 0
            for order, end in marks or []:
                runs.append((target, order, len(runs), items[start:end]))
                start = end
            if start < len(items):
                runs.append((target, _LAST, len(runs), items[start:]))
        runs.sort(key=lambda run: (run[1][0], self._place(run[0]), run[1], run[2]))
        # An output's runs in a row go to its sink together (one
        # `write_batch`); a tap's stay apart, as each may report its own epoch.
        for dest, group in itertools.groupby(runs, key=lambda run: run[0]):
            if dest.kind is DestinationKind.OUTPUT:
                yield dest, None, chunks.DATA, [item for _, _, _, items in group for item in items]
                continue
            for _, order, _, items in group:
                yield dest, order, chunks.DATA, items

    def _place(self, dest: Destination) -> int:
        """Where the output or tap `dest` stands among the flow's steps, in the order the flow created them."""
        steps = self._plan.outputs if dest.kind is DestinationKind.OUTPUT else self._plan.taps
        return self._plan.positions[steps[dest.index].step_id]

    def _epoch(self, order: Optional[Order], batch_id: int) -> int:
        """The epoch `inspect_debug` reports: the micro-batch's, counted from 1 as Bytewax counts epochs.

        With `epoch_per_round` (Bytewax's zero epoch interval), each source
        round is an epoch; what timers and the end of input bring belongs
        to the last round seen.
        """
        if not self._epoch_per_round or order is None:
            return batch_id + 1
        if 0 <= order[0] < EOF_ROUND:
            self._last_round = max(self._last_round, order[0])
            return order[0] + 1
        return max(self._last_round, 0) + 1

    def _inspect(self, index: int, batch: List[Any], epoch: int) -> None:
        step = self._plan.taps[index]
        inspector = step.config.inspector
        if inspector is None:
            msg = f"step {step.step_id!r} has no inspector: the writer was given the workers' plan, not the driver's"
            raise AssertionError(msg)
        for item in batch:
            try:
                inspector(step.step_id, item, epoch, 0)
            except Exception as ex:
                msg = f"error calling `inspector` in step {step.step_id!r}"
                raise FlowsparkRuntimeError(msg) from ex

    def close(self) -> None:
        """Close the sinks' partitions once the last write is over (its error, if any, is the run's `failure`)."""
        with contextlib.suppress(BaseException):
            self._settle()
        for output in self._outputs:
            output.close()
