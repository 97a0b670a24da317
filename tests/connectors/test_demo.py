"""`RandomMetricSource`, driven partition by partition and checked against Bytewax's."""

from __future__ import annotations

import itertools
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Tuple

import bytewax.connectors.demo as bw
import pytest

from flowspark.connectors.demo import RandomMetricSource

SECOND = timedelta(seconds=1)


def counter() -> Callable[[], float]:
    """A `next_random` that returns 0, 1, 2, ..."""
    return itertools.count().__next__


def run(part: Any) -> List[Tuple[List[Any], datetime]]:
    """Every batch of a partition, each with the `next_awake` that follows it."""
    out: List[Tuple[List[Any], datetime]] = []
    while True:
        try:
            got = part.next_batch()
        except StopIteration:
            return out
        out.append((got, part.next_awake()))


def test_matches_bytewax() -> None:
    ours = RandomMetricSource("m", SECOND, 4, counter())
    theirs = bw.RandomMetricSource("m", SECOND, 4, counter())
    assert ours.list_parts() == theirs.list_parts() == ["m"]
    our_part, their_part = ours.build_part("in", "m", None), theirs.build_part("in", "m", None)
    our_start, their_start = our_part.next_awake(), their_part.next_awake()
    assert our_start is not None and their_start is not None
    our_run, their_run = run(our_part), run(their_part)
    assert [(got, awake - our_start) for got, awake in our_run] == [
        (got, awake - their_start) for got, awake in their_run
    ]
    assert our_run == [([("m", i)], our_start + (i + 1) * SECOND) for i in range(4)]


def test_first_value_is_due_at_once() -> None:
    before = datetime.now(timezone.utc)
    awake = RandomMetricSource("m").build_part("in", "m", None).next_awake()
    assert awake is not None and before <= awake <= datetime.now(timezone.utc)


def test_resume_continues_count_and_schedule() -> None:
    source = RandomMetricSource("cpu", SECOND, 5, counter())
    part = source.build_part("in", "cpu", None)
    part.next_batch()
    part.next_batch()
    snap = pickle.loads(pickle.dumps(part.snapshot()))
    awake = part.next_awake()
    resumed = source.build_part("in", "cpu", snap)
    assert resumed.next_awake() == awake
    assert [got for got, _ in run(resumed)] == [[("cpu", 2)], [("cpu", 3)], [("cpu", 4)]]


def test_late_resume_catches_up_back_to_back() -> None:
    source = RandomMetricSource("m", timedelta(hours=1), 5, counter())
    snap = source.build_part("in", "m", None).snapshot()
    now = datetime.now(timezone.utc)
    snap.awake_at = now - timedelta(hours=3)  # as if down for three hours
    resumed = source.build_part("in", "m", snap)
    due = []
    for _ in range(4):
        resumed.next_batch()
        awake = resumed.next_awake()
        assert awake is not None
        due.append(awake < now)
    assert due == [True, True, False, False]


def test_snapshot_is_a_copy() -> None:
    part = RandomMetricSource("m", SECOND, 3, counter()).build_part("in", "m", None)
    snap = part.snapshot()
    part.next_batch()
    assert snap.count == 0
    assert part.snapshot().count == 1


def test_resume_does_not_change_the_snapshot_it_was_given() -> None:
    source = RandomMetricSource("m", SECOND, 3, counter())
    snap = source.build_part("in", "m", None).snapshot()
    source.build_part("in", "m", snap).next_batch()
    assert snap.count == 0


def test_count_zero_ends_at_once() -> None:
    with pytest.raises(StopIteration):
        RandomMetricSource("m", count=0).build_part("in", "m", None).next_batch()


def test_default_values_are_digits() -> None:
    part = RandomMetricSource("m", count=200).build_part("in", "m", None)
    values = [value for got, _ in run(part) for _name, value in got]
    assert len(values) == 200
    assert set(values) <= set(range(10))
    assert all(isinstance(value, int) for value in values)


def test_source_pickles() -> None:
    source = pickle.loads(pickle.dumps(RandomMetricSource("m", SECOND, 2)))
    assert source.list_parts() == ["m"]
    assert len(run(source.build_part("in", "m", None))) == 2
