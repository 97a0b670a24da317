"""A live windowed flow, for stopping and starting again with a recovery directory.

    python -m bytewax.run benchmarks.flows.live_restart:flow -r DIR -s 1 -b 0   (or flowspark.run)

Two source partitions each emit `(key, stamp)` items in real time,
`FLOWBENCH_RATE` items per second each (default 50), over 48 keys; an
item's stamp is the time it was due, which after a restart is a time after
the restart.  A partition's snapshot is the number of items it has emitted,
so a resumed run goes on from there and never ends by itself.  Per key, 1 s
tumbling windows of event time (the stamp; 0.2 s wait) count the items and
keep the newest stamp; each closed window is printed as
`key window_id count newest_stamp`, so a reader can tell a window holding
items made after the restart.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from typing import List, Optional, Tuple

from benchmarks.flows import engine, module

KEYS = 48
PARTS = ("live-0", "live-1")
ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)

api = engine()
inputs = module("inputs")


class _LivePartition(inputs.StatefulSourcePartition):  # type: ignore[misc,name-defined]
    """`(key, stamp)` items due at `rate` per second from the partition's start; never ends."""

    def __init__(self, index: int, rate: float, sent: int) -> None:
        self._index, self._rate = index, rate
        self._start = time.time()
        self._resumed_at = sent
        self._sent = sent

    def next_batch(self) -> List[Tuple[str, float]]:
        now = time.time()
        due = self._resumed_at + int((now - self._start) * self._rate) + 1
        batch = [(f"k{(n * len(PARTS) + self._index) % KEYS}", self._due(n)) for n in range(self._sent, due)]
        self._sent = max(self._sent, due)
        return batch

    def _due(self, n: int) -> float:
        return self._start + (n - self._resumed_at) / self._rate

    def next_awake(self) -> datetime:
        return datetime.fromtimestamp(self._due(self._sent), timezone.utc)

    def snapshot(self) -> int:
        return self._sent


class LiveSource(inputs.FixedPartitionedSource):  # type: ignore[misc,name-defined]
    """Two partitions of paced, stamped items that resume from the count they had emitted."""

    def list_parts(self) -> List[str]:
        return list(PARTS)

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _LivePartition:
        rate = float(os.environ.get("FLOWBENCH_RATE", 50))
        return _LivePartition(PARTS.index(for_part), rate, resume_state or 0)


def key_of(item: Tuple[str, float]) -> str:
    return item[0]


def event_time(item: Tuple[str, float]) -> datetime:
    return datetime.fromtimestamp(item[1], timezone.utc)


def start() -> Tuple[int, float]:
    return 0, 0.0


def add(acc: Tuple[int, float], item: Tuple[str, float]) -> Tuple[int, float]:
    return acc[0] + 1, max(acc[1], item[1])


def merge(a: Tuple[int, float], b: Tuple[int, float]) -> Tuple[int, float]:
    return a[0] + b[0], max(a[1], b[1])


def fmt(key_window: Tuple[str, Tuple[int, Tuple[int, float]]]) -> str:
    key, (window_id, (count, newest)) = key_window
    return f"{key} {window_id} {count} {newest:.6f}"


flow = api.dataflow.Dataflow("live_restart")
items = api.op.key_on("key", api.op.input("inp", flow, LiveSource()), key_of)
clock = api.windowing.EventClock(event_time, wait_for_system_duration=timedelta(seconds=0.2))
windower = api.windowing.TumblingWindower(length=timedelta(seconds=1), align_to=ALIGN)
windows = api.windowing.fold_window("count", items, clock, windower, start, add, merge)
api.op.output("out", api.op.map("fmt", windows.down, fmt), module("connectors.stdio").StdOutSink())
