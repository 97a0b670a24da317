"""Spark's view of a flow's inputs: one Python streaming data source.

Its driver-side methods (offsets, planning partitions) run in a Python
process Spark starts (the planner).  Partitions that live in the executors
(`executor_source`) are planned there from their snapshots alone; for the
driver-resident ones it asks the `DriverInputs` in the user's process.
`read()` runs in Spark's Python workers: it reads an executor partition
itself, or fetches a piece of pickled batches from the hub, pushes the
batches through the stateless steps right after the inputs (the fused
pass), which also writes the dynamic sinks placed in the task that makes
their items (`task_sinks`), and yields chunk rows as Arrow.  A range that ends the input
(`InputEnd`) also yields the end's marker for every stateful bucket and the
control row that tells the driver.
"""

from __future__ import annotations

import base64
import itertools
import pickle
from datetime import datetime, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union, cast

import cloudpickle
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import CONTROL_GROUP, source_origin
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.line_blocks import batch_items
from flowspark.engine.plan.order import SOURCE
from flowspark.engine.plan.plan import Plan, input_ranks
from flowspark.engine.plan.route import Collector, Router
from flowspark.engine.plan.shipped_plan import ShippedPlan
from flowspark.engine.plan.task_sinks import TaskSinks
from flowspark.engine.reports.driver_link import DriverLink
from flowspark.engine.reports.failures import lent_by_driver, reported_to, unloadable_items
from flowspark.engine.reports.metrics import Meter, Reading, worker_index
from flowspark.engine.sources.executor_source import (
    ExecutorInputs,
    PartReader,
    PartTask,
    Position,
    next_position,
    prune,
    tasks,
    tell_committed,
    tick,
)
from flowspark.engine.sources.input_end import InputEnd, recorded_end
from flowspark.engine.sources.wake_ups import DUE_CALL, Ping
from flowspark.engine.util.cyclic_gc import collector_paused, freeze_start_up_objects

if TYPE_CHECKING:
    from flowspark.engine.sources.driver_inputs import Piece


def encode_options(
    link: DriverLink,
    shipped: ShippedPlan,
    groups: Groups,
    inputs: ExecutorInputs,
    driver_parts: bool,
    metered: bool = False,
) -> Dict[str, str]:
    """The options Spark passes to the source: how to reach the driver, the workers' plan, the state groups.

    `inputs` are the partitions read in the executors, `driver_parts` says
    whether the driver's `DriverInputs` has any; `metered` makes each task count its
    steps' items and report them to the driver (`metrics`).
    """
    return {
        "link": base64.b64encode(pickle.dumps(link)).decode(),
        "plan": base64.b64encode(pickle.dumps(shipped)).decode(),
        "groups": base64.b64encode(pickle.dumps(groups)).decode(),
        "inputs": base64.b64encode(cloudpickle.dumps(inputs)).decode(),
        "hub": "1" if driver_parts else "",
        "metered": "1" if metered else "",
        "one_worker": "1" if shipped.kept_by_driver else "",
    }


class ReadTask(InputPartition):
    """One task's work: an executor partition to read, a piece of the hub's data (`driver_inputs.Piece`) or all its
    pieces (one worker's order), the end, or a ping (`wake_ups`)."""

    def __init__(self, value: Union[PartTask, Piece, List[Piece], InputEnd, Ping]) -> None:
        super().__init__(value)


class Reader(DataSourceStreamReader):
    """Offsets and planning in Spark's planner processes, reading in its workers.

    Each part of the options is unpickled when first used: the planner
    that only pickles `read` for the workers loads none of them, and the
    one that keeps the offsets never loads the plan (and with it the
    user's modules).
    """

    def __init__(self, options: Dict[str, str]) -> None:
        self._options = options
        self._hub = bool(options.get("hub"))
        self._metered = bool(options.get("metered"))
        self._one_worker = bool(options.get("one_worker"))
        """The run keeps one worker's order: one task reads all the hub's pieces of a micro-batch, in turn."""
        self._ended_at: Optional[int] = None
        """The micro-batch that ended the input in this query: nothing is read after it."""
        self._pinged = False
        """This query's first micro-batch asked every stateful bucket for its earliest wake-up (`wake_ups`)."""
        self._seen: Optional[Dict[str, Any]] = None
        """The offset the next micro-batch starts at, for Spark 4.1, which calls `latestOffset()` without it: the
        initial one, the end of the last micro-batch planned, or the one a restarted query resumes at."""

    def _decoded(self, name: str) -> Any:
        return pickle.loads(base64.b64decode(self._options[name]))

    @cached_property
    def _link(self) -> DriverLink:
        return cast(DriverLink, self._decoded("link"))

    @cached_property
    def _shipped(self) -> ShippedPlan:
        return cast(ShippedPlan, self._decoded("plan"))

    @cached_property
    def _plan(self) -> Plan:
        return self._shipped.plan(self._link)

    @cached_property
    def _groups(self) -> Groups:
        return cast(Groups, self._decoded("groups"))

    @cached_property
    def _inputs(self) -> ExecutorInputs:
        return cast(ExecutorInputs, self._decoded("inputs"))

    def _call(self, name: str, *args: Any) -> Any:
        return self._link.call(name, *args)

    def _poll_hub(self, start: Dict[str, Any]) -> Dict[str, Any]:
        return self._call("latest_offset", start)  # type: ignore[no-any-return]

    def initialOffset(self) -> Dict[str, Any]:  # noqa: N802 - Spark's name
        self._seen = Position(hub=self._call("initial_offset") if self._hub else None).offset()
        return self._seen

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Any = None) -> Dict[str, Any]:  # noqa: N802 - Spark's name
        """The next micro-batch's end: from `start` (Spark 4.2 on), else from the offset Spark last saw (Spark 4.1,
        which asks a new query for its latest offset before its initial one)."""
        if start is None:
            start = self._seen if self._seen is not None else self.initialOffset()
        position = Position.of(start)
        if position.end and self._ended_at == position.batch:
            return start
        now = datetime.now(timezone.utc)
        with lent_by_driver(self._link):  # a source's `has_news` warns on the run's standard error
            after = next_position(position, self._inputs, self._poll_hub if self._hub else None, now)
        if (
            after == position
            and self._groups.names
            and (not self._pinged or self._call(DUE_CALL, int(now.timestamp() * 1000)))
        ):
            after = tick(position, self._inputs)  # a micro-batch without input: for due timers, or the first ping
        self._seen = after.offset()
        return self._seen

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        # A restarted query first plans an empty range at the offset it resumes at (Spark's `setLatestSeenOffset`).
        self._seen = end
        if start == end:
            return []
        first, last = Position.of(start), Position.of(end)
        pieces: List[InputPartition] = []
        if first.hub is not None and last.hub != first.hub:
            read = self._call("partition_data", first.hub, last.hub)
            if self._one_worker and read:
                pieces.append(ReadTask(read))
            else:
                pieces.extend(ReadTask(p) for p in read)
        pieces.extend(ReadTask(task) for task in tasks(first, last, self._inputs))
        ending = recorded_end(last.end)
        if ending is not None:
            self._ended_at = last.batch
            pieces.append(ReadTask(ending))
        if not self._pinged and self._groups.names:
            self._pinged = True
            pieces.append(ReadTask(Ping()))
        return pieces

    def commit(self, end: Dict[str, Any]) -> None:
        position = Position.of(end)
        if position.hub is not None:
            self._call("commit", position.hub)
        prune(self._inputs, position)
        with lent_by_driver(self._link):  # a source's `committed` warns on the run's standard error
            tell_committed(self._inputs, position)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_start_up_objects()
        value = partition.value
        if isinstance(value, InputEnd):
            yield chunks.to_arrow(self._end_rows(value))
            return
        if isinstance(value, Ping):
            yield chunks.to_arrow(
                [(grp, chunks.LAST_SEQ, chunks.PING, b"") for names in self._groups.names for grp in names]
            )
            return
        if isinstance(value, PartTask):
            rows = self._read_part(value)
            self._shipped.check_in(self._link)
            yield chunks.to_arrow(rows)
            return
        if isinstance(value, list):  # pieces of a run that keeps one worker's order: one task reads them in turn
            for piece in value:
                yield from self.read(ReadTask(piece))
            return
        origin, seq_base, number, index, first_round, rank = value
        payload = self._call("piece", number, index)
        meter = Meter(self._report) if self._metered else None
        with reported_to(self._link), collector_paused():
            batch = chunks.to_arrow(self._fused_pass(origin, seq_base, payload, first_round, rank, meter))
        self._shipped.check_in(self._link)
        if meter is not None:
            meter.flush()
        yield batch

    def _fused_pass(
        self, origin: str, seq_base: int, payload: bytes, first_round: int, rank: int, meter: Optional[Meter]
    ) -> List[chunks.Row]:
        """Push the piece's batches, one at a time as they are unpickled (or decoded: `line_blocks`), through the fused steps.

        Each batch is one run, placed at its round and partition (`order`).
        """
        step = self._plan.inputs[int(origin.split(".")[0])]
        stream_id = step.config.downs[0]
        out = Collector(origin, self._link, self._plan.ordered)
        with TaskSinks(self._plan, meter) as sinks:
            router = Router(self._plan, self._groups, meter, sinks)
            for round_, blob in enumerate(pickle.loads(payload), first_round):
                try:
                    items = batch_items(blob)
                except Exception as ex:  # an item whose class pickles but won't load (a `__reduce__` that raises)
                    msg = f"error unpickling the items of step {step.step_id!r}"
                    raise unloadable_items(msg, ex) from ex
                router.push(stream_id, items, out)
                out.end_run((round_, SOURCE, rank, ""))
                out.take()
        return out.rows(itertools.count(seq_base))

    def _read_part(self, task: PartTask) -> List[chunks.Row]:
        """Read an executor partition for a micro-batch and push its batches through the fused steps.

        Each batch is one run, placed at its round and partition (`order`).
        A reading that another attempt of the task beat to the record (a
        speculative copy) is dropped and done again as a replay of that one;
        what the dropped reading wrote to sinks written by the pass stays
        written (they are at least once).
        """
        spec = self._inputs.parts[task.part]
        stream_id = self._plan.inputs[spec.input_index].config.downs[0]
        rank = input_ranks(self._plan)[spec.input_index] << 20 | spec.index
        with reported_to(self._link), collector_paused():
            recorded = False
            while not recorded:
                meter = Meter(self._report) if self._metered else None
                out = Collector(source_origin(spec.input_index, spec.index, 0), self._link, self._plan.ordered)
                with TaskSinks(self._plan, meter) as sinks, PartReader(self._inputs, spec, task.batch, meter) as reader:
                    router = Router(self._plan, self._groups, meter, sinks)
                    for round_, batch in enumerate(reader.batches(), task.first_round):
                        router.push(stream_id, batch, out)
                        out.end_run((round_, SOURCE, rank, ""))
                        out.take()
                    note = reader.finish()
                    recorded = reader.recorded
            rows = out.rows(itertools.count(0))
        if self._inputs.report:
            self._call("source_read", note)
        if meter is not None:
            meter.flush()
        return rows

    def _report(self, reading: Reading) -> None:
        self._call("metrics", worker_index(), reading)

    def _end_rows(self, end: InputEnd) -> List[chunks.Row]:
        """The end's marker for every stateful bucket, and the control row that ends the run."""
        rows: List[chunks.Row] = [
            (grp, chunks.LAST_SEQ, end.marker, b"") for names in self._groups.names for grp in names
        ]
        rows.append((CONTROL_GROUP, chunks.LAST_SEQ, chunks.CONTROL, chunks.dumps(end.value)))
        return rows
