"""End-to-end latency: a source paced in real time, a sink that notes how late each item arrives.

    python -m bytewax.run benchmarks.flows.paced:map_flow      (or :count_flow; or flowspark.run)

One source partition emits `(index, stamp)` items at `FLOWBENCH_RATE` items
per second (default 1,000): item `i` is due at `start + i / rate`, and that
due time is its stamp, so an engine that polls late counts the wait as
latency, as it would with items waiting in a broker.  The partition asks to
be polled when its next item is due, at most once a millisecond, and hands
over every item due by then (about one at 1,000 items/s, 20 at 20,000).

- `map_flow`: source -> `map` (the stamp) -> sink.
- `count_flow`: source -> `key_on` (100 keys) -> `stateful_map` running
  count -> `map` (the stamp) -> sink.

The sink keeps `(stamp, time written)` for every item and writes them to a
file of its own in `FLOWBENCH_LATENCY_DIR` when it closes; its first write
also creates `FIRST` there, holding the time of that write.  Once the source
sees `FIRST`, it runs `FLOWBENCH_WARMUP` (default 5) plus `FLOWBENCH_SECONDS`
(default 15) more seconds and ends, so every engine gets the same steady
run whatever its start-up took; `benchmarks/responsiveness.py` keeps the
items stamped after the warm-up.
"""

from __future__ import annotations

import os
import time
import uuid
from array import array
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, List, Optional, Tuple

from benchmarks.flows import engine, module
from benchmarks.flows.samples import FIRST, KEYS, latency_dir, mark_first, stamped, write_samples

TICK = 0.001
"""The shortest time between two polls the source asks for, in seconds."""

api = engine()
inputs = module("inputs")
outputs = module("outputs")


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


class _PacedPartition(inputs.StatefulSourcePartition):  # type: ignore[misc,name-defined]
    """Items due at `rate` per second from the partition's start; ends a set time after the sink's first write."""

    def __init__(self, rate: float, warmup: float, seconds: float, first: Path) -> None:
        self._rate, self._warmup, self._seconds, self._first = rate, warmup, seconds, first
        self._start = time.time()
        self._sent = 0
        self._next_poll = self._start
        self._end: Optional[float] = None

    def next_batch(self) -> List[Tuple[int, float]]:
        now = time.time()
        if self._end is None and self._first.exists():
            self._end = now + self._warmup + self._seconds
        if self._end is not None and now >= self._end:
            raise StopIteration()
        due = int((now - self._start) * self._rate) + 1
        batch = stamped(self._start, self._rate, self._sent, due)
        self._sent = max(self._sent, due)
        self._next_poll = now + TICK
        return batch

    def next_awake(self) -> datetime:
        due = self._start + self._sent / self._rate
        return datetime.fromtimestamp(max(due, self._next_poll), timezone.utc)

    def snapshot(self) -> None:
        return None


class PacedSource(inputs.FixedPartitionedSource):  # type: ignore[misc,name-defined]
    """One partition of paced, stamped items (settings from the environment, read where the partition is built)."""

    def list_parts(self) -> List[str]:
        return ["paced"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _PacedPartition:
        return _PacedPartition(
            _env_float("FLOWBENCH_RATE", 1000),
            _env_float("FLOWBENCH_WARMUP", 5),
            _env_float("FLOWBENCH_SECONDS", 15),
            latency_dir() / FIRST,
        )


class _LatencyPartition(outputs.StatelessSinkPartition):  # type: ignore[misc,name-defined]
    """Notes each stamp with the time its batch was written; writes them out at close."""

    def __init__(self, folder: Path, name: str) -> None:
        self._folder, self._name = folder, name
        self._stamps = array("d")
        self._written = array("d")

    def write_batch(self, stamps: List[float]) -> None:
        now = time.time()
        if not self._written:
            mark_first(self._folder / FIRST, now)
        self._stamps.extend(stamps)
        self._written.extend([now] * len(stamps))

    def close(self) -> None:
        write_samples(self._folder / self._name, self._stamps, self._written)


class LatencySink(outputs.DynamicSink):  # type: ignore[misc,name-defined]
    """Writes `(stamp, written)` samples to `FLOWBENCH_LATENCY_DIR`, a file per sink partition."""

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _LatencyPartition:
        return _LatencyPartition(latency_dir(), f"samples-{os.getpid()}-{worker_index}-{uuid.uuid4().hex[:8]}.txt")


def stamp_of(item: Tuple[int, float]) -> float:
    return item[1]


def key_of(item: Tuple[int, float]) -> str:
    return f"k{item[0] % KEYS}"


def count(seen: Optional[int], item: Tuple[int, float]) -> Tuple[int, Tuple[int, float]]:
    seen = (seen or 0) + 1
    return seen, (seen, item[1])


def stamp_of_count(key_item: Tuple[str, Tuple[int, float]]) -> float:
    return key_item[1][1]


def _map_flow() -> Any:
    flow = api.dataflow.Dataflow("paced_map")
    items = api.op.input("inp", flow, PacedSource())
    api.op.output("out", api.op.map("stamp", items, stamp_of), LatencySink())
    return flow


def _count_flow() -> Any:
    flow = api.dataflow.Dataflow("paced_count")
    items = api.op.input("inp", flow, PacedSource())
    counts = api.op.stateful_map("count", api.op.key_on("key", items, key_of), count)
    api.op.output("out", api.op.map("stamp", counts, stamp_of_count), LatencySink())
    return flow


map_flow = _map_flow()
count_flow = _count_flow()
