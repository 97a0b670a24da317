"""A user's flow that subscripts the generic classes of the API as Bytewax allows.

`tests/test_typing.py` type-checks it as written (for flowspark) and with
`flowspark` replaced by `bytewax`: both must pass `mypy --strict`.
"""

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, List, Optional, Tuple

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.connectors.files import FileSink, FileSource
from flowspark.connectors.kafka import KafkaSinkMessage, KafkaSourceMessage
from flowspark.dataflow import Dataflow, Stream
from flowspark.inputs import (
    DynamicSource,
    FixedPartitionedSource,
    SimplePollingSource,
    Source,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from flowspark.outputs import DynamicSink, FixedPartitionedSink, Sink, StatefulSinkPartition, StatelessSinkPartition
from flowspark.testing import TestingSink, TestingSource


class Ticks(SimplePollingSource[int]):
    def next_item(self) -> int:
        return 1


class ResumableTicks(SimplePollingSource[int, int]):
    def next_item(self) -> int:
        return 1

    def snapshot(self) -> int:
        return 0


class CountPartition(StatefulSourcePartition[int, int]):
    def __init__(self, start: int) -> None:
        self._next = start

    def next_batch(self) -> List[int]:
        self._next += 1
        return [self._next]

    def snapshot(self) -> int:
        return self._next


class Counts(FixedPartitionedSource[int, int]):
    def list_parts(self) -> List[str]:
        return ["one"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> CountPartition:
        return CountPartition(resume_state or 0)


class WordPartition(StatelessSourcePartition[str]):
    def next_batch(self) -> List[str]:
        raise StopIteration


class Words(DynamicSource[str]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> WordPartition:
        return WordPartition()


class PrintPartition(StatelessSinkPartition[str]):
    def write_batch(self, items: List[str]) -> None:
        print(items)


class Printer(DynamicSink[str]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> PrintPartition:
        return PrintPartition()


class TotalPartition(StatefulSinkPartition[int, int]):
    def __init__(self) -> None:
        self.total = 0

    def write_batch(self, values: List[int]) -> None:
        self.total += sum(values)

    def snapshot(self) -> int:
        return self.total


class Totals(FixedPartitionedSink[int, int]):
    def list_parts(self) -> List[str]:
        return ["all"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> TotalPartition:
        return TotalPartition()


class Summer(op.StatefulBatchLogic[int, int, int]):
    def __init__(self, total: Optional[int]) -> None:
        self.total = total or 0

    def on_batch(self, values: List[int]) -> Tuple[Iterable[int], bool]:
        self.total += sum(values)
        return [self.total], op.StatefulBatchLogic.RETAIN

    def snapshot(self) -> int:
        return self.total


class Concat(win.WindowLogic[str, str, List[str]]):
    def __init__(self, seen: Optional[List[str]]) -> None:
        self.seen = list(seen or [])

    def on_value(self, value: str) -> Iterable[str]:
        self.seen.append(value)
        return []

    def on_merge(self, original: "Concat") -> Iterable[str]:
        self.seen.extend(original.seen)
        return []

    def on_close(self) -> Iterable[str]:
        return ["".join(self.seen)]

    def snapshot(self) -> List[str]:
        return list(self.seen)


source: Source[int] = TestingSource[int]([1, 2, 3])
sink: Sink[str] = TestingSink[str]([])
polling: SimplePollingSource[int, None] = Ticks(timedelta(seconds=1))
lines: FixedPartitionedSource[str, int] = FileSource(Path("in.txt"))
written: FixedPartitionedSink[str, int] = FileSink(Path("out.txt"))
clock: win.Clock[Tuple[str, datetime], Any] = win.EventClock[Tuple[str, datetime]](
    lambda v: v[1], wait_for_system_duration=timedelta(0)
)
windower: win.Windower[Any] = win.TumblingWindower(timedelta(seconds=10), datetime(2024, 1, 1, tzinfo=timezone.utc))
message: KafkaSourceMessage[bytes, bytes] = KafkaSourceMessage(key=b"k", value=b"v")
outgoing: KafkaSinkMessage[str, str] = KafkaSinkMessage(key="k", value="v")
cache: Optional[op.TTLCache[str, int]] = None

flow = Dataflow("generic")
nums: Stream[int] = op.input("nums", flow, Counts())
keyed = op.key_on("key", nums, str)
sums: Stream[Tuple[str, int]] = op.stateful_batch("sum", keyed, Summer)
op.output("totals", sums, Totals())
words = op.map("show", nums, str)
branches: op.BranchOut[str, str] = op.branch("short", words, lambda w: len(w) < 3)
op.output("print", op.merge("all", branches.trues, branches.falses, op.input("words", flow, Words())), Printer())
stamped = op.map(
    "stamp", op.input("ticks", flow, Ticks(timedelta(seconds=1))), lambda n: (str(n), datetime.now(timezone.utc))
)
out: win.WindowOut[Tuple[str, datetime], int] = win.count_window("count", stamped, clock, windower, lambda v: v[0])
op.inspect("see", out.down)
