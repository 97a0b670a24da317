"""When a stateful logic is woken: a `notify_at` in the past means "at the next activation".

Bytewax calls `on_notify` for a due key once per activation; on flowspark an
activation is a micro-batch.  Keys whose wake-ups fall at different past
times, and share a state bucket, must not be woken once per timer of that
bucket within one micro-batch.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, List, Optional, Tuple

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition
from flowspark.testing import TestingSink, run_main

LONG_AGO = datetime(2000, 1, 1, tzinfo=timezone.utc)
KEYS = 64
"""Four keys per state bucket on average, with as many distinct wake-up times."""


class Poller(op.StatefulBatchLogic[int, int, Tuple[int, int]]):
    """Asks to be woken at a distinct past time forever; counts its wake-ups, reports them at EOF.

    Each wake-up also touches the file `woken`, which lets the source end.
    """

    def __init__(self, state: Optional[Tuple[int, int]], woken: str) -> None:
        self.index, self.wakes = state or (0, 0)
        self.woken = woken

    def on_batch(self, values: List[int]) -> Tuple[List[int], bool]:
        self.index = values[-1]
        return [], op.StatefulBatchLogic.RETAIN

    def on_notify(self) -> Tuple[List[int], bool]:
        self.wakes += 1
        open(self.woken, "a").close()
        return [], op.StatefulBatchLogic.RETAIN

    def on_eof(self) -> Tuple[List[int], bool]:
        return [self.wakes], op.StatefulBatchLogic.DISCARD

    def notify_at(self) -> Optional[datetime]:
        return LONG_AGO + timedelta(seconds=self.index)

    def snapshot(self) -> Tuple[int, int]:
        return (self.index, self.wakes)


class _UntilWoken(StatefulSourcePartition[Tuple[str, int], int]):
    """All the items at once, then nothing until a key has been woken (or a minute), then the end."""

    def __init__(self, items: List[Tuple[str, int]], woken: str) -> None:
        self._items = items
        self._woken = woken
        self._give_up: Optional[datetime] = None
        self._next_look: Optional[datetime] = None

    def next_batch(self) -> List[Tuple[str, int]]:
        now = datetime.now(timezone.utc)
        self._next_look = now + timedelta(milliseconds=100)
        if self._give_up is None:
            self._give_up = now + timedelta(minutes=1)
            return self._items
        if os.path.exists(self._woken) or now >= self._give_up:
            raise StopIteration
        return []

    def next_awake(self) -> Optional[datetime]:
        return self._next_look

    def snapshot(self) -> int:
        return 0


class ItemsUntilWoken(FixedPartitionedSource[Tuple[str, int], int]):
    def __init__(self, items: List[Tuple[str, int]], woken: str) -> None:
        self._items = items
        self._woken = woken

    def list_parts(self) -> List[str]:
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _UntilWoken:
        return _UntilWoken(self._items, self._woken)


def test_past_wake_ups_run_once_per_micro_batch_for_every_key(tmp_path: Path) -> None:
    woken = str(tmp_path / "woken")
    flow = Dataflow("wake_ups")
    items = [(f"k{i:02d}", i) for i in range(KEYS)]
    keyed = op.input("inp", flow, ItemsUntilWoken(items, woken))
    wakes = op.stateful_batch("poll", keyed, lambda state: Poller(state, woken))
    out: List[Any] = []
    op.output("out", wakes, TestingSink(out))
    run_main(flow)
    counts = dict(out)
    assert sorted(counts) == [k for k, _ in items]
    # Every key was due in every micro-batch after the first, so each was
    # woken as often as the others, and at least once (the source waits for
    # it); were keys woken once per timer of their bucket, keys sharing a
    # bucket would count their neighbours' wake-ups too.
    assert len(set(counts.values())) == 1, counts
    assert next(iter(counts.values())) >= 1, counts
