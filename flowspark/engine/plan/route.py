"""The fused stateless pass: carry batches through runs of stateless steps.

Starting from a stream, a batch goes through every `flat_map_batch`,
`branch`, `merge`, `redistribute` and `inspect_debug` downstream of it in one
Python call chain, and stops where it reaches a stateful step (grouped into
that step's key buckets), an output or a tap.  The same pass runs inside a
source's `read()` and after each stateful step, so no stateless step ever
costs a Spark stage of its own.  An output placed in the task that makes
its items (`plan.SinkPlace.MAKING_TASK`) is written by the pass itself
(`task_sinks`).
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from flowspark._step_config import (
    BranchConfig,
    FlatMapBatchConfig,
    InspectDebugConfig,
    MergeConfig,
    OutputConfig,
    RedistributeConfig,
    StatefulBatchConfig,
)
from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import origin_worker, output_group, sink_part_group, tap_group
from flowspark.engine.plan.encoded_lines import LineChunk
from flowspark.engine.plan.groups import Groups, bucket_of
from flowspark.engine.plan.keyed_chunks import KeyedChunk, Slot
from flowspark.engine.plan.order import Order
from flowspark.engine.plan.plan import Plan, SinkLayout, SinkRouting
from flowspark.engine.plan.task_sinks import TaskSinks
from flowspark.engine.reports.driver_link import DriverLink
from flowspark.engine.reports.failures import StepFailure, guarded
from flowspark.engine.reports.metrics import Meter, Timing
from flowspark.outputs import FixedPartitionedSink


class Collector:
    """Where one pass's results gather, by destination, before becoming chunks.

    With a `link` to the driver, the chunks bound for outputs and taps are
    handed to the driver's output stash at once, and their rows carry only
    the stash's ticket (`sink_writer.OutputStash`).  The pass marks the end
    of each run of items (`end_run`); an `ordered` collector also records
    where each run ended in every output and tap chunk, so that the driver
    can put runs from all tasks in one worker's order (`chunks.ordered`).
    Items of outputs written by the sink job (`sink_tasks`) gather per
    sink partition and travel in their rows, to the task that writes the
    partition.
    """

    def __init__(self, origin: str, link: Optional[DriverLink] = None, ordered: bool = False) -> None:
        self.origin = origin
        self._link = link
        self._ordered = ordered
        self.stateful: Dict[Tuple[int, str], KeyedChunk] = {}
        """Each stateful step's chunks, by the step's index and the bucket's group name."""
        self.slots: Dict[int, Dict[str, Slot]] = {}
        """Per stateful step, how to add each key's items to its bucket's chunk."""
        self.unflushed = 0
        """Items added to stateful chunks since they were last flushed."""
        self.outputs: Dict[int, Union[chunks.ItemChunk, LineChunk]] = {}
        self.sink_parts: Dict[Tuple[int, int], Union[chunks.ItemChunk, LineChunk]] = {}
        """Items of outputs written in the executors, by output index and sink partition."""
        self.taps: Dict[int, chunks.ItemChunk] = {}

    def end_run(self, order: Order) -> None:
        """The items pushed since the last call form one run, placed at `order`."""
        for chunk in self.stateful.values():
            chunk.end_run(order)
        if self._ordered:
            for items in self.outputs.values():
                if isinstance(items, chunks.ItemChunk):
                    items.end_run(order)
            for items in self.taps.values():
                items.end_run(order)

    def take(self) -> None:
        """Pickle what the pass gathered so far, at the end of a batch: a logic that emits its state object and
        changes it later (a `stateful_map` mapper returning its state) must not change what it emitted.

        Outputs written line by line are encoded as they come, and so already taken.
        """
        for chunk in self.stateful.values():
            chunk.flush()
        self.unflushed = 0
        for items in itertools.chain(self.outputs.values(), self.sink_parts.values(), self.taps.values()):
            if isinstance(items, chunks.ItemChunk):
                items.take()

    def rows(self, seq: Iterator[int]) -> List[chunks.Row]:
        """The gathered items as chunk rows, one per destination.

        A stateful destination gets a `KeyedChunk`; outputs and taps get
        their items in order.
        """
        rows: List[chunks.Row] = []
        for (_, grp), chunk in self.stateful.items():
            rows.append((grp, next(seq), chunks.DATA, chunk.dumps()))
        for index, items in self.outputs.items():
            rows.append((output_group(index, self.origin), next(seq), chunks.DATA, self._ship(items)))
        for (index, part), items in self.sink_parts.items():
            rows.append((sink_part_group(index, part, self.origin), next(seq), chunks.DATA, items.dumps()))
        for index, items in self.taps.items():
            rows.append((tap_group(index, self.origin), next(seq), chunks.DATA, self._ship(items)))
        return rows

    def _ship(self, items: Union[chunks.ItemChunk, LineChunk]) -> bytes:
        payload = items.dumps()
        if isinstance(items, chunks.ItemChunk) and self._ordered:
            payload = chunks.ordered(items.runs, payload)
        if self._link is None:
            return payload
        ticket: bytes = self._link.call("stash", payload)
        return ticket


def split_by_part(
    step_id: str, part_fn: Callable[[str], int], items: List[Tuple[str, Any]], count: int
) -> Dict[int, List[Any]]:
    """The values of `(key, value)` items by the partition `part_fn(key)` picks, modulo `count`; failures name the step and key.

    `part_fn` must return an `int`, as Bytewax requires; that is checked
    on the partitions found, not on every item.  A sink whose
    `list_parts()` gave none fails here, when items reach it, as in
    Bytewax (a run that brings it nothing is fine).
    """
    by_part: Dict[int, List[Any]] = {}
    key = ""
    try:
        if not count:
            key = items[0][0] if items else ""
            msg = "the sink's `list_parts()` returned no partitions"
            raise ValueError(msg)
        try:
            for key, value in items:
                by_part.setdefault(part_fn(key) % count, []).append(value)
        except TypeError:
            _check_part(part_fn(key))  # `"a" % 2` is string formatting: name the real fault
            raise
        for part in by_part:
            _check_part(part)
    except Exception as ex:
        msg = f"error calling `part_fn` in step {step_id!r} for key {key!r}"
        raise StepFailure(msg, ex) from ex
    return by_part


def _check_part(index: Any) -> None:
    if not isinstance(index, int) or isinstance(index, bool):
        msg = f"`part_fn` must return an `int`; got a {type(index)!r}"
        raise TypeError(msg)


def check_keyed(step_id: str, batch: List[Any]) -> None:
    """Steps that route by key (stateful steps, partitioned sinks) need `(str, value)` 2-tuples.

    Raises Bytewax's `TypeError` for the first item that is not one.
    """
    for item in batch:
        if type(item) is not tuple or len(item) != 2:
            msg = (
                f"step {step_id!r} requires `(key, value)` 2-tuple from upstream "
                f"for routing; got a `{type(item).__name__}` instead"
            )
            raise StepFailure(msg, TypeError(msg), bare=True)
        if not isinstance(item[0], str):
            msg = (
                f"step {step_id!r} requires `str` keys in `(key, value)` from upstream "
                f"for routing; got a `{type(item[0]).__name__}` instead"
            )
            raise StepFailure(msg, TypeError(msg), bare=True)


class Router:
    """Pushes batches from a stream through the stateless steps below it.

    With a `meter`, each step's items in and out are counted per batch and
    each `mapper` call is timed.  `sinks` writes the outputs placed in the
    task that makes their items; a plan with such outputs needs it.
    """

    def __init__(
        self, plan: Plan, groups: Groups, meter: Optional[Meter] = None, sinks: Optional[TaskSinks] = None
    ) -> None:
        self._plan = plan
        self._groups = groups
        self._meter = meter
        self._sinks = sinks
        self._bucket_cache: Dict[str, int] = {}

    def push(self, stream_id: str, batch: List[Any], out: Collector) -> None:
        """Send one batch of `stream_id` to everything that consumes that stream."""
        if not batch:
            return
        for consumer in self._plan.consumers.get(stream_id, ()):
            step_id = consumer.step.step_id
            config = consumer.step.config
            if isinstance(config, FlatMapBatchConfig):
                started = time.perf_counter()
                result = guarded(step_id, "mapper", config.mapper, batch)
                produced: List[Any] = guarded(step_id, "mapper", list, result)
                if self._meter is not None:
                    self._meter.time(Timing.MAPPER, step_id, time.perf_counter() - started)
                    self._meter.passed(step_id, len(batch), len(produced))
                self.push(config.downs[0], produced, out)
            elif isinstance(config, BranchConfig):
                self._branch(step_id, config, batch, out)
            elif isinstance(config, (MergeConfig, RedistributeConfig)):
                if self._meter is not None:
                    self._meter.passed(step_id, len(batch), len(batch))
                self.push(config.downs[0], batch, out)
            elif isinstance(config, InspectDebugConfig):
                if self._meter is not None:
                    self._meter.passed(step_id, len(batch), len(batch))
                tap = out.taps.get(consumer.index)
                if tap is None:
                    tap = out.taps[consumer.index] = chunks.ItemChunk(step_id)
                tap.extend(batch)
                self.push(config.downs[0], batch, out)
            elif isinstance(config, StatefulBatchConfig):
                self._to_stateful(step_id, consumer.index, batch, out)
            elif isinstance(config, OutputConfig):
                layout = self._plan.sinks[consumer.index]
                if layout.in_making_task:
                    assert self._sinks is not None, f"step {step_id!r} is written by the pass, which got no `TaskSinks`"
                    self._sinks.write(consumer.index, out.origin, batch)
                    continue
                if layout.in_executors:
                    self._to_sink_parts(step_id, consumer.index, layout, config, batch, out)
                    continue
                drop_keys = layout.drop_keys
                if drop_keys:
                    check_keyed(step_id, batch)
                sink = out.outputs.get(consumer.index)
                if sink is None:
                    sink = out.outputs[consumer.index] = (
                        chunks.ItemChunk(step_id) if layout.lines is None else LineChunk(step_id, layout.lines)
                    )
                sink.extend([value for _, value in batch] if drop_keys else batch)

    def _to_sink_parts(
        self, step_id: str, index: int, layout: SinkLayout, config: OutputConfig, batch: List[Any], out: Collector
    ) -> None:
        """Split a batch bound for a partitioned sink written by the sink job: by `part_fn(key)` modulo its partition
        count, or (`BY_WORKER`) to the partition of the worker the pass belongs to."""
        if layout.routing is SinkRouting.BY_WORKER:
            worker = origin_worker(out.origin, len(layout.parts))
            self._sink_part(step_id, index, layout, worker, out).extend(batch)
            return
        check_keyed(step_id, batch)
        if layout.routing is SinkRouting.ONE_PART:
            self._sink_part(step_id, index, layout, 0, out).extend([value for _, value in batch])
            return
        sink = config.sink
        assert isinstance(sink, FixedPartitionedSink), f"step {step_id!r} lost its sink on its way to the workers"
        by_part = split_by_part(step_id, sink.part_fn, batch, len(layout.parts))
        for part, values in by_part.items():
            self._sink_part(step_id, index, layout, part, out).extend(values)

    @staticmethod
    def _sink_part(
        step_id: str, index: int, layout: SinkLayout, part: int, out: Collector
    ) -> Union[chunks.ItemChunk, LineChunk]:
        items = out.sink_parts.get((index, part))
        if items is None:
            items = out.sink_parts[index, part] = (
                chunks.ItemChunk(step_id) if layout.lines is None else LineChunk(step_id, layout.lines)
            )
        return items

    def _branch(self, step_id: str, config: BranchConfig, batch: List[Any], out: Collector) -> None:
        predicate = config.predicate
        trues: List[Any] = []
        falses: List[Any] = []
        for item in batch:
            keep = guarded(step_id, "predicate", predicate, item)
            if not isinstance(keep, bool):
                msg = f"return value of `predicate` in step {step_id!r} must be a `bool`; got a {type(keep)!r} instead"
                failed = f"error calling `predicate` in step {step_id!r}"
                raise StepFailure(failed, TypeError(msg))
            (trues if keep else falses).append(item)
        if self._meter is not None:
            self._meter.passed(step_id, len(batch), len(batch))
        self.push(config.downs[0], trues, out)
        self.push(config.downs[1], falses, out)

    def _to_stateful(self, step_id: str, index: int, batch: List[Any], out: Collector) -> None:
        check_keyed(step_id, batch)
        slots = out.slots.setdefault(index, {})
        for key, value in batch:
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = self._slot(index, key, out)
            add_id, add_value, key_id = slot
            add_id(key_id)
            add_value(value)
        out.unflushed += len(batch)
        if out.unflushed >= chunks.PIECE_ITEMS:
            for chunk in out.stateful.values():
                chunk.flush()
            out.unflushed = 0

    def _slot(self, index: int, key: str, out: Collector) -> Slot:
        """Register a key new to this pass in its bucket's chunk.

        A key of a `str` subclass (a `StrEnum`, say) goes on as the plain
        `str` it holds, as Bytewax hands keys on.
        """
        if type(key) is not str:
            key = str.__str__(key)
        bucket = self._bucket_cache.get(key)
        if bucket is None:
            try:
                bucket = self._bucket_cache[key] = bucket_of(key, self._groups.buckets)
            except UnicodeEncodeError as ex:  # a lone surrogate, as `surrogateescape` decoding leaves
                step_id = self._plan.stateful[index].step_id
                msg = f"step {step_id!r} requires `str` keys that encode as UTF-8 for routing; got {key!r}"
                raise StepFailure(msg, TypeError(msg), bare=True) from ex
        grp = self._groups.name(index, bucket)
        chunk = out.stateful.get((index, grp))
        if chunk is None:
            chunk = out.stateful[(index, grp)] = KeyedChunk(self._plan.stateful[index].step_id)
        return chunk.slot(key)
