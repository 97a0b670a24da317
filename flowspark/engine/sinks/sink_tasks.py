"""Sink partitions written in Spark's tasks: one Spark job per micro-batch, started by the `foreachBatch` callback.

An output whose `FixedPartitionedSink` need not live in the user's
process (`Sink.lives_in_driver` false; `plan.SinkPlace.EXECUTORS`) never
reaches the driver (a `DynamicSink` that need not is written by the tasks
that make its items: `task_sinks`).  The workers split its items by sink
partition (`route`), and the callback runs the micro-batch's rows through one job: a route column,
`repartition` into as many tasks as there are partitions (at most the
run's parallelism), and `mapInArrow`.  Each partition's rows land in one
task, which builds the partition from the snapshot the ledger holds for the
batch before, writes the rows' items in the order the driver would (by
group name, then sequence number), takes its snapshot, closes it and
returns a `PartWritten` row.  Rows bound for the driver (taps, the
control row, driver-written outputs) pass through the same job, so the
micro-batch's plan runs once; the driver writes those and commits the
ledger with the tasks' snapshots.

Exactly-once: a batch Spark replays after a crash before the ledger
commit, or a task Spark retries, is written again from the same previous
snapshots, which cut files back (`FileSink`); a batch the ledger already
has still runs its job (Spark's stateful operators must commit it) but its
tasks write nothing, and so does a task of a driver that another took the
recovery directory over from (`driver_fence`).
The first written batch of a resumed run also builds every partition that
has a snapshot but no items, so that it cuts back what an interrupted
batch left.  As in Bytewax, a partition no item reaches is never built
otherwise: a fresh run leaves no empty file for it.
A repartition with an explicit count is never merged by adaptive query
execution; the route column's values are chosen so that Spark's hash puts
partition `n` in task `n % tasks` (`route_keys`).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, Set, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import (
    WRITTEN_GROUP,
    DestinationKind,
    parse,
    sink_part_group,
    sink_part_prefix,
)
from flowspark.engine.plan.encoded_lines import EncodedLines, encoded, write_lines
from flowspark.engine.plan.plan import Plan
from flowspark.engine.recovery.driver_fence import DriverFence
from flowspark.engine.reports.driver_link import DriverLink
from flowspark.engine.reports.failures import StepFailure, built, reported_to
from flowspark.engine.reports.metrics import Count, Meter, Reading, Timing, worker_index
from flowspark.engine.sinks.batch_id import SinkBatch, writing
from flowspark.engine.sources.data_source import SCHEMA_DDL
from flowspark.engine.util.cyclic_gc import collector_paused, freeze_start_up_objects
from flowspark.outputs import FixedPartitionedSink, WorkerPartitionedSink

Snapshots = Dict[str, Dict[str, Any]]
"""Each fixed-partitioned output's partition snapshots, by step id and partition name (the ledger's)."""

_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def spark_int_hash(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of an `int` column (Murmur3 x86 32-bit), which `repartition(n, column)` buckets by."""
    k1 = _rotl((value * 0xCC9E2D51) & _MASK, 15) * 0x1B873593 & _MASK
    h1 = _rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def route_keys(tasks: int) -> List[int]:
    """For each task number `t`, the smallest int that `repartition(tasks, column)` sends to task `t`."""
    keys: Dict[int, int] = {}
    candidate = 0
    while len(keys) < tasks:
        keys.setdefault(spark_int_hash(candidate) % tasks, candidate)
        candidate += 1
    return [keys[t] for t in range(tasks)]


@dataclass(frozen=True)
class PartWritten:
    """What a task reports of one sink partition it wrote."""

    output: int
    part: int
    items: int
    snapshot: Any
    """The partition's snapshot after the batch."""


@dataclass(frozen=True)
class TaskOutput:
    """A partitioned output written in the executors, as its tasks need it."""

    step_id: str
    sink: Union[FixedPartitionedSink[Any, Any], WorkerPartitionedSink[Any, Any]]
    parts: Tuple[str, ...]
    """The sink's partitions, in order."""


def _row_order(row: Tuple[str, int, bytes]) -> Tuple[str, int]:
    """The order the driver writes rows in: by group name (so by origin), then by sequence number."""
    return row[0], row[1]


@dataclass(frozen=True)
class BatchWrite:
    """One micro-batch's work for `mapInArrow`, shipped to its tasks: write the sink partitions among their rows."""

    outputs: Dict[int, TaskOutput]
    batch: SinkBatch
    """The micro-batch, which its partitions' writes see (`batch_id`)."""
    write: bool
    """False for a batch the ledger already has: its tasks only pass the driver's rows on."""
    resume: Snapshots
    link: Optional[DriverLink]
    metered: bool
    fence: Optional[DriverFence] = None
    """The driver's claim on the recovery directory: a task of a driver that lost it writes nothing."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        mine: Dict[Tuple[int, int], List[Tuple[str, int, bytes]]] = {}
        for batch in batches:
            grps = batch.column(0).to_pylist()
            away = [grp.startswith(DestinationKind.SINK_PART.value) for grp in grps]
            if not all(away):
                yield batch.select(chunks.ARROW_SCHEMA.names).filter(pa.array([not a for a in away]))
            if not any(away):
                continue
            seqs = batch.column(1).to_pylist()
            payloads = batch.column(3).to_pylist()
            for grp, seq, payload, here in zip(grps, seqs, payloads, away):
                if here:
                    dest = parse(grp)
                    mine.setdefault((dest.index, dest.part), []).append((grp, seq, payload))
        if not self.write or not mine:
            return
        if self.fence is not None:
            self.fence.check()  # a stale task of a lost driver must not cut back what the new one wrote
        meter = Meter(self._report) if self.metered and self.link is not None else None
        guard: ContextManager[None] = nullcontext() if self.link is None else reported_to(self.link)
        freeze_start_up_objects()
        with guard, writing(self.batch), collector_paused():  # unpickling the items makes millions of objects
            written = [
                self._write_part(index, part, sorted(rows, key=_row_order), meter)
                for (index, part), rows in sorted(mine.items())
            ]
        if meter is not None:
            meter.flush()
        yield chunks.to_arrow([(WRITTEN_GROUP, 0, chunks.DATA, chunks.dumps(written))])

    def _write_part(
        self, index: int, part: int, rows: List[Tuple[str, int, bytes]], meter: Optional[Meter]
    ) -> PartWritten:
        out = self.outputs[index]
        name = out.parts[part]

        def call(what: str, func: Any, *args: Any) -> Any:
            try:
                return func(*args)
            except Exception as ex:
                msg = f"error calling `{what}` in step {out.step_id!r} for partition {name!r}"
                raise StepFailure(msg, ex) from ex

        partition = call(
            "build_part", built, out.sink.build_part, out.step_id, name, self.resume.get(out.step_id, {}).get(name)
        )
        items = 0
        try:
            for _, _, payload in rows:
                lines = encoded(payload)
                for values in [lines] if lines is not None else chunks.item_parts(payload):
                    started = time.perf_counter()
                    count = self._write(out.step_id, partition, values, call)
                    items += count
                    if meter is not None and count:
                        meter.time(Timing.WRITE_BATCH, out.step_id, time.perf_counter() - started)
                        meter.count(Count.ITEMS_IN, out.step_id, count)
            snapshot = call("snapshot", partition.snapshot)
        except BaseException as error:  # the write's own error is the one to raise
            try:
                partition.close()
            except Exception as also:
                error.add_note(f"closing the partition afterwards also failed: {also!r}")
            raise
        call("close", partition.close)
        return PartWritten(index, part, items, snapshot)

    @staticmethod
    def _write(step_id: str, partition: Any, values: Union[List[Any], EncodedLines], call: Callable[..., Any]) -> int:
        """Write a part of a chunk (its values, or the lines the pass encoded for them); how many values it held."""
        if isinstance(values, EncodedLines):
            if values.count:
                call("write_batch", write_lines, step_id, partition, values.data)
            return values.count
        if values:
            call("write_batch", partition.write_batch, values)
        return len(values)

    def _report(self, reading: Reading) -> None:
        assert self.link is not None
        self.link.call("metrics", worker_index(), reading)


@dataclass(frozen=True)
class SinkJob:
    """One micro-batch's sink job, as the driver plans it (picklable: it runs wherever the `foreachBatch` callback does)."""

    work: BatchWrite
    tasks: int
    route: Dict[str, int]
    """Each sink partition's route value (`route_keys`), by its group prefix."""
    default_route: int
    stale: Tuple[Tuple[int, int], ...]
    """`(output, partition)` of the partitions to build though no item reaches them: they cut back what an
    interrupted batch left."""

    def run(self, frame: Any) -> Tuple[pa.Table, List[PartWritten]]:
        """Run the job on the micro-batch `frame`: the rows bound for the driver, and what the tasks wrote."""
        if self.stale:
            empty = chunks.dumps([])
            touch = [(sink_part_group(index, part, ""), 0, chunks.DATA, empty) for index, part in self.stale]
            frame = frame.union(frame.sparkSession.createDataFrame(pa.Table.from_batches([chunks.to_arrow(touch)])))
        # SQL text, which a classic and a Spark Connect frame read alike; the
        # prefixes are flowspark's own group names (`sink_part_prefix`).
        routes = ", ".join(f"'{prefix}', {value}" for prefix, value in self.route.items())
        route = (
            f"cast(coalesce(try_element_at(map({routes}), substring_index(grp, '@', 1)), "
            f"{self.default_route}) as int) as route"
        )
        table = (
            frame.selectExpr("*", route).repartition(self.tasks, "route").mapInArrow(self.work, SCHEMA_DDL).toArrow()
        )
        grps = table.column("grp")
        reports = table.filter(pc.equal(grps, WRITTEN_GROUP))
        written: List[PartWritten] = [w for blob in reports.column("payload").to_pylist() for w in chunks.loads(blob)]
        return table.filter(pc.not_equal(grps, WRITTEN_GROUP)), written


class SinkTasks:
    """The driver's side: plans each micro-batch's job (`SinkJob`) and keeps what the tasks wrote."""

    def __init__(
        self,
        plan: Plan,
        parallelism: int,
        link: Optional[DriverLink] = None,
        metered: bool = False,
        fence: Optional[DriverFence] = None,
    ) -> None:
        self._link = link
        self._metered = metered
        self._fence = fence
        self.outputs = {
            index: TaskOutput(step.step_id, step.config.sink, layout.parts)
            for index, (step, layout) in enumerate(zip(plan.outputs, plan.sinks))
            if layout.in_executors and isinstance(step.config.sink, (FixedPartitionedSink, WorkerPartitionedSink))
        }
        slots = [(index, part) for index, out in sorted(self.outputs.items()) for part in range(len(out.parts))]
        self._tasks = max(1, min(parallelism, len(slots)))
        keys = route_keys(self._tasks)
        self._route = {sink_part_prefix(index, part): keys[n % self._tasks] for n, (index, part) in enumerate(slots)}
        self._default_route = keys[0]
        self._unbuilt: Set[Tuple[int, int]] = set(slots)
        """Partitions no written batch of this run has built yet (those with a snapshot are built to cut back)."""

    def job(self, batch: SinkBatch, fresh: bool, resume: Snapshots) -> SinkJob:
        """The job of micro-batch `batch`, whose sinks stand at `resume`; only a `fresh` one (not yet in the ledger) writes."""
        stale = tuple((i, p) for i, p in sorted(self._unbuilt) if fresh and self._snapshot(resume, i, p) is not None)
        work = BatchWrite(self.outputs, batch, fresh, resume, self._link, self._metered, self._fence)
        return SinkJob(work, self._tasks, dict(self._route), self._default_route, stale)

    def _snapshot(self, resume: Snapshots, index: int, part: int) -> Any:
        out = self.outputs[index]
        return resume.get(out.step_id, {}).get(out.parts[part])

    def committed(self) -> None:
        """A fresh batch's writes are in the ledger: every partition was built at least once."""
        self._unbuilt.clear()

    def snapshots(self, before: Snapshots, written: List[PartWritten]) -> Snapshots:
        """The fixed-partitioned outputs' snapshots after a batch: those the tasks took, the others as `before`."""
        after: Snapshots = {out.step_id: dict(before.get(out.step_id, {})) for out in self.outputs.values()}
        for w in written:
            out = self.outputs[w.output]
            after[out.step_id][out.parts[w.part]] = w.snapshot
        return after
