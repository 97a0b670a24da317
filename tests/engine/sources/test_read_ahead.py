"""Reading the next micro-batch ahead: same output, and it really reads ahead while a batch runs."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.run_config import RunConfig
from flowspark.engine.runner import run_flow
from flowspark.engine.sources.read_ahead import ReadAhead
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition
from flowspark.testing import TestingSink

ITEMS = 600
LIMIT = 50


class _Counted(StatefulSourcePartition[Tuple[str, int], int]):
    """Emits `(key, i)` items ten at a time; notes how far the sink got at each call."""

    def __init__(self, start: int, written: List[Any], seen: List[Tuple[int, int]]) -> None:
        self._next = start
        self._written = written
        self._seen = seen

    def next_batch(self) -> List[Tuple[str, int]]:
        if self._next >= ITEMS:
            raise StopIteration
        self._seen.append((self._next, len(self._written)))
        batch = [(f"k{i % 7}", i) for i in range(self._next, min(ITEMS, self._next + 10))]
        self._next += len(batch)
        return batch

    def snapshot(self) -> int:
        return self._next


class _CountedSource(FixedPartitionedSource[Tuple[str, int], int]):
    def __init__(self, written: List[Any], seen: List[Tuple[int, int]]) -> None:
        self._written = written
        self._seen = seen

    def list_parts(self) -> List[str]:
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _Counted:
        return _Counted(resume_state or 0, self._written, self._seen)


def test_a_backlog_is_read_ahead_and_the_output_is_unchanged() -> None:
    written: List[Any] = []
    seen: List[Tuple[int, int]] = []
    flow = Dataflow("ahead")
    items = op.input("inp", flow, _CountedSource(written, seen))
    counts = op.stateful_map("count", items, lambda n, i: ((n or 0) + 1, (i, (n or 0) + 1)))
    op.output("out", counts, TestingSink(written))
    run_flow(flow, RunConfig(max_items_per_batch=LIMIT))

    expected = {}
    for i in range(ITEMS):
        key = f"k{i % 7}"
        expected.setdefault(key, []).append((key, (i, len(expected[key]) + 1)))
    assert {k: [w for w in written if w[0] == k] for k in expected} == expected
    # Without reading ahead, a batch is read once everything before it is
    # written: at most LIMIT - 10 items read and not yet written when a
    # batch of ten is asked for.  Reading ahead, a whole batch more.
    assert max(read - done for read, done in seen) > LIMIT


def test_a_read_ahead_hands_over_its_result_or_its_error() -> None:
    assert ReadAhead(lambda: [1, 2]).take() == [1, 2]

    def broken() -> List[int]:
        msg = "source is gone"
        raise ValueError(msg)

    with pytest.raises(ValueError, match="source is gone"):
        ReadAhead(broken).take()
    ReadAhead(broken).wait()  # dropping a failed read raises nothing
