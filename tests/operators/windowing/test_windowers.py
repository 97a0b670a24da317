"""Windower logics driven directly: window assignment, closing, merging, snapshots.

Tests taking `engine` run against Bytewax 0.21.1 (the oracle) and flowspark;
the randomized tests compare the two engines call by call.
"""

from __future__ import annotations

import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import meta_tuple, sec
from support.oracle import ENGINES, Engine

from flowspark.operators._windowing.windowers import check_windower
from flowspark.operators.windowing import (
    LATE_SESSION_ID,
    UTC_MAX,
    UTC_MIN,
    SessionWindower,
    SlidingWindower,
    TumblingWindower,
    WindowMetadata,
)

US = timedelta(microseconds=1)


def closed(pairs: Any) -> List[Tuple[int, Tuple[datetime, datetime, List[int]]]]:
    return [(window_id, meta_tuple(meta)) for window_id, meta in pairs]


# Sliding and tumbling windows.


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("at", "ids"),
    [
        (sec(0), [0]),
        (sec(10) - US, [0]),
        (sec(10), [1]),
        (sec(0) - US, [-1]),
        (sec(-10), [-1]),
        (sec(-10) - US, [-2]),
    ],
)
def test_tumbling_open_is_inclusive_close_exclusive(engine: str, at: datetime, ids: List[int]) -> None:
    logic = Engine(engine).win.TumblingWindower(timedelta(seconds=10), ALIGN).build(None)
    assert list(logic.open_for(at)) == ids


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("length", "offset", "at", "ids"),
    [
        (10, 5, sec(0), [-1, 0]),
        (10, 5, sec(5) - US, [-1, 0]),
        (10, 5, sec(5), [0, 1]),
        (10, 3, sec(0), [-3, -2, -1, 0]),
        (10, 3, sec(1), [-2, -1, 0]),
        (10, 10, sec(25), [2]),
    ],
)
def test_sliding_window_membership(engine: str, length: int, offset: int, at: datetime, ids: List[int]) -> None:
    windower = Engine(engine).win.SlidingWindower(timedelta(seconds=length), timedelta(seconds=offset), ALIGN)
    assert list(windower.build(None).open_for(at)) == ids


def _reference_ids(length: timedelta, offset: timedelta, align_to: datetime, at: datetime) -> List[int]:
    """Closed form in whole microseconds: `i` such that `open_i <= at < open_i + length`."""
    us = timedelta(microseconds=1)
    since, off, span = (at - align_to) // us, offset // us, length // us
    around = since // off
    candidates = range(around - span // off - 2, around + 2)
    return [i for i in candidates if i * off <= since < i * off + span]


@pytest.mark.parametrize(
    "align_to",
    [
        UTC_MIN,
        datetime(1970, 1, 1, tzinfo=timezone.utc),
        datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc),
        datetime(9000, 1, 1, tzinfo=timezone.utc),
    ],
)
def test_sliding_ids_match_the_closed_form_and_bytewax(align_to: datetime) -> None:
    """Random parameters, including `align_to` far in the past or the future (#413)."""
    rng = random.Random(align_to.year)
    bytewax_win = Engine("bytewax").win
    for _ in range(300):
        length = timedelta(microseconds=rng.randint(1, 10**9))
        offset = timedelta(microseconds=rng.randint(1, length // US))
        at = datetime(2024, 6, 1, tzinfo=timezone.utc) + timedelta(microseconds=rng.randint(-(10**12), 10**12))
        ours = SlidingWindower(length, offset, align_to).build(None).late_for(at)
        theirs = bytewax_win.SlidingWindower(length, offset, align_to).build(None).late_for(at)
        assert ours == theirs == _reference_ids(length, offset, align_to, at)
        assert len(ours) in (length // offset, -(-length // offset))


@pytest.mark.parametrize("engine", ENGINES)
def test_sliding_close_at_exact_close_time_and_notify(engine: str) -> None:
    win = Engine(engine).win
    logic = win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN).build(None)
    assert logic.is_empty()
    assert logic.notify_at() is None
    assert list(logic.open_for(sec(7))) == [0, 1]
    assert list(logic.open_for(sec(2))) == [-1, 0]
    assert not logic.is_empty()
    assert logic.notify_at() == sec(5)
    assert list(logic.merged()) == []
    assert closed(logic.close_for(sec(5) - US)) == []
    assert closed(logic.close_for(sec(5))) == [(-1, (sec(-5), sec(5), []))]
    assert logic.notify_at() == sec(10)
    assert closed(logic.close_for(UTC_MAX)) == [(0, (sec(0), sec(10), [])), (1, (sec(5), sec(15), []))]
    assert logic.is_empty()


@pytest.mark.parametrize("engine", ENGINES)
def test_sliding_windows_closing_together_come_in_opening_order(engine: str) -> None:
    logic = Engine(engine).win.TumblingWindower(timedelta(seconds=10), ALIGN).build(None)
    for s in (25, 3, 14):
        logic.open_for(sec(s))
    assert [i for i, _meta in logic.close_for(UTC_MAX)] == [2, 0, 1]


def test_tumbling_runs_of_values_match_bytewax_call_by_call() -> None:
    """Mostly ordered values (runs in one window) with closes in between, as a key sees them."""
    rng = random.Random(7)
    length = timedelta(seconds=10)
    ours = TumblingWindower(length, ALIGN).build(None)
    theirs = Engine("bytewax").win.TumblingWindower(length, ALIGN).build(None)
    now = 0.0
    for _ in range(3000):
        now += rng.choice((0.0, 0.3, 2.0, 11.0))
        at = sec(now - rng.choice((0, 0, 0, 4, 15)))
        assert list(ours.open_for(at)) == list(theirs.open_for(at))
        if rng.random() < 0.05:
            watermark = sec(now - rng.choice((0, 10, 20)))
            assert closed(ours.close_for(watermark)) == closed(theirs.close_for(watermark))
    assert closed(ours.close_for(UTC_MAX)) == closed(theirs.close_for(UTC_MAX))


def test_late_for_opens_nothing() -> None:
    logic = TumblingWindower(timedelta(seconds=10), ALIGN).build(None)
    assert logic.late_for(sec(12)) == [1]
    assert logic.is_empty()
    assert logic.close_for(UTC_MAX) == []


def test_sliding_snapshot_is_a_deep_copy_and_round_trips() -> None:
    windower = TumblingWindower(timedelta(seconds=10), ALIGN)
    logic = windower.build(None)
    logic.open_for(sec(1))
    snap = logic.snapshot()
    logic.open_for(sec(11))
    logic.state.opened[0].merged_ids.add(99)
    resumed = windower.build(pickle.loads(pickle.dumps(snap)))
    assert closed(resumed.close_for(UTC_MAX)) == [(0, (sec(0), sec(10), []))]


@pytest.mark.parametrize("engine", ENGINES)
def test_sliding_offset_longer_than_length_is_refused(engine: str) -> None:
    win = Engine(engine).win
    with pytest.raises(ValueError, match="`offset` can't be longer than `length`"):
        win.SlidingWindower(timedelta(seconds=1), timedelta(seconds=2), ALIGN)
    win.SlidingWindower(timedelta(seconds=2), timedelta(seconds=2), ALIGN)


@pytest.mark.parametrize(
    ("windower", "problem"),
    [
        (TumblingWindower(timedelta(0), ALIGN), "TumblingWindower `length` must be a positive `timedelta`"),
        (TumblingWindower(timedelta(seconds=-1), ALIGN), "TumblingWindower `length` must be a positive"),
        (SlidingWindower(timedelta(seconds=1), timedelta(0), ALIGN), "SlidingWindower `offset` must be a positive"),
        (TumblingWindower(timedelta(seconds=1), datetime(2024, 1, 1)), "TumblingWindower `align_to` must be a"),
        (
            SlidingWindower(timedelta(seconds=1), timedelta(seconds=1), datetime(2024, 1, 1)),
            "SlidingWindower `align_to` must be a timezone-aware",
        ),
    ],
)
def test_check_windower_names_the_step(windower: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"^step 'df\.win': {problem}"):
        check_windower("df.win", windower)


def test_check_windower_catches_parameters_changed_after_construction() -> None:
    sliding = SlidingWindower(timedelta(seconds=2), timedelta(seconds=1), ALIGN)
    sliding.offset = timedelta(seconds=3)
    with pytest.raises(ValueError, match="can't be longer than `length`"):
        check_windower("df.win", sliding)
    session = SessionWindower(timedelta(seconds=1))
    session.gap = timedelta(seconds=-1)
    with pytest.raises(ValueError, match=r"step 'df\.win': SessionWindower `gap` must be a non-negative"):
        check_windower("df.win", session)
    check_windower("df.win", SessionWindower(timedelta(0)))


# Session windows.


@pytest.mark.parametrize("engine", ENGINES)
def test_session_gap_must_not_be_negative(engine: str) -> None:
    with pytest.raises(ValueError, match="`gap` must not be negative"):
        Engine(engine).win.SessionWindower(timedelta(seconds=-1))


@pytest.mark.parametrize("engine", ENGINES)
def test_windowing_guide_session_example(engine: str) -> None:
    """The guide's six values with a 30 minute gap.

    The guide draws three sessions, but the gap is inclusive in the code: 01:30
    is exactly 30 minutes after 01:00, so it extends the second session.
    """
    logic = Engine(engine).win.SessionWindower(timedelta(minutes=30)).build(None)
    day = datetime(2023, 12, 14, tzinfo=timezone.utc)
    ids = [list(logic.open_for(day + timedelta(minutes=m))) for m in (0, 10, 15, 50, 60, 90)]
    assert ids == [[0], [0], [0], [1], [1], [1]]
    assert closed(logic.close_for(UTC_MAX)) == [
        (0, (day, day + timedelta(minutes=15), [])),
        (1, (day + timedelta(minutes=50), day + timedelta(minutes=90), [])),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_session_extends_both_ways_within_an_inclusive_gap(engine: str) -> None:
    logic = Engine(engine).win.SessionWindower(timedelta(seconds=10)).build(None)
    assert list(logic.open_for(sec(100))) == [0]
    assert list(logic.open_for(sec(110))) == [0]
    assert list(logic.open_for(sec(90))) == [0]
    assert list(logic.open_for(sec(95))) == [0]
    assert list(logic.open_for(sec(120) + US)) == [1]
    assert list(logic.open_for(sec(80) - US)) == [2]
    assert list(logic.merged()) == []
    assert closed(logic.close_for(UTC_MAX)) == [
        (0, (sec(90), sec(110), [])),
        (1, (sec(120) + US, sec(120) + US, [])),
        (2, (sec(80) - US, sec(80) - US, [])),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_session_bridge_merges_into_the_earlier_session(engine: str) -> None:
    logic = Engine(engine).win.SessionWindower(timedelta(seconds=10)).build(None)
    assert list(logic.open_for(sec(0))) == [0]
    assert list(logic.open_for(sec(20))) == [1]
    assert list(logic.open_for(sec(10))) == [0]
    assert list(logic.merged()) == [(1, 0)]
    assert list(logic.merged()) == []
    assert closed(logic.close_for(UTC_MAX)) == [(0, (sec(0), sec(20), [1]))]


@pytest.mark.parametrize("engine", ENGINES)
def test_session_value_can_land_in_the_window_that_is_then_absorbed(engine: str) -> None:
    """The absorber is the earlier *opener*, which may have the larger id."""
    logic = Engine(engine).win.SessionWindower(timedelta(seconds=10)).build(None)
    assert [list(logic.open_for(sec(s))) for s in (30, 5, 18, 20)] == [[0], [1], [2], [0]]
    assert list(logic.merged()) == [(0, 2)]
    assert closed(logic.close_for(UTC_MAX)) == [(1, (sec(5), sec(5), [])), (2, (sec(18), sec(30), [0]))]


@pytest.mark.parametrize("engine", ENGINES)
def test_session_chained_merges_only_record_direct_ids(engine: str) -> None:
    """Window 2 merges into 1, then 1 into 0: 0's `merged_ids` is `{1}`, not `{1, 2}`."""
    logic = Engine(engine).win.SessionWindower(timedelta(seconds=10)).build(None)
    assert [list(logic.open_for(sec(s))) for s in (0, 30, 45, 38, 20, 10)] == [[0], [1], [2], [1], [1], [0]]
    assert list(logic.merged()) == [(2, 1), (1, 0)]
    assert closed(logic.close_for(UTC_MAX)) == [(0, (sec(0), sec(45), [1]))]


@pytest.mark.parametrize("engine", ENGINES)
def test_session_closes_strictly_after_the_gap(engine: str) -> None:
    logic = Engine(engine).win.SessionWindower(timedelta(seconds=5)).build(None)
    logic.open_for(sec(10))
    assert logic.notify_at() == sec(15)
    assert list(logic.close_for(sec(15))) == []
    assert closed(logic.close_for(sec(15) + US)) == [(0, (sec(10), sec(10), []))]
    assert logic.notify_at() is None
    assert list(logic.late_for(sec(3))) == [LATE_SESSION_ID]
    assert not logic.is_empty()


@pytest.mark.parametrize("engine", ENGINES)
def test_session_with_zero_gap_only_joins_equal_timestamps(engine: str) -> None:
    logic = Engine(engine).win.SessionWindower(timedelta(0)).build(None)
    assert [list(logic.open_for(t)) for t in (sec(1), sec(1), sec(1) + US)] == [[0], [0], [1]]
    assert list(logic.close_for(sec(1))) == []
    assert [i for i, _meta in logic.close_for(sec(1) + US)] == [0]


def test_session_snapshot_round_trips_ids_and_pending_merges() -> None:
    windower = SessionWindower(timedelta(seconds=10))
    logic = windower.build(None)
    for s in (0, 20, 10):
        logic.open_for(sec(s))
    resumed = windower.build(pickle.loads(pickle.dumps(logic.snapshot())))
    logic.open_for(sec(50))
    assert list(resumed.merged()) == [(1, 0)]
    assert list(resumed.open_for(sec(100))) == [2]
    assert closed(resumed.close_for(UTC_MAX)) == [(0, (sec(0), sec(20), [1])), (2, (sec(100), sec(100), []))]


def _random_calls(engine: str, windower_args: Tuple[str, Tuple[Any, ...]], seed: int) -> List[Any]:
    """A seeded random run of windower calls; returns everything the calls returned."""
    rng = random.Random(seed)
    kind, args = windower_args
    logic = getattr(Engine(engine).win, kind)(*args).build(None)
    watermark = sec(0)
    results: List[Any] = []
    for _ in range(200):
        roll = rng.random()
        if roll < 0.7:
            results.append(("open", list(logic.open_for(watermark + timedelta(seconds=rng.uniform(-5, 60))))))
        elif roll < 0.85:
            results.append(("merged", list(logic.merged())))
        else:
            watermark += timedelta(seconds=rng.uniform(0, 30))
            results.append(("closed", closed(logic.close_for(watermark)), logic.notify_at()))
    results.append(("closed", closed(logic.close_for(UTC_MAX))))
    return results


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
    "windower_args",
    [
        ("SessionWindower", (timedelta(seconds=4),)),
        ("SessionWindower", (timedelta(0),)),
        ("SlidingWindower", (timedelta(seconds=10), timedelta(seconds=3), ALIGN)),
        ("TumblingWindower", (timedelta(seconds=7), ALIGN)),
    ],
)
def test_windowers_match_bytewax_call_by_call(windower_args: Tuple[str, Tuple[Any, ...]], seed: int) -> None:
    assert _random_calls("flowspark", windower_args, seed) == _random_calls("bytewax", windower_args, seed)


def test_window_metadata_defaults_and_equality() -> None:
    meta = WindowMetadata(sec(0), sec(1))
    assert meta.merged_ids == set()
    assert meta == WindowMetadata(sec(0), sec(1), set())
    assert WindowMetadata(sec(0), sec(1)).merged_ids is not meta.merged_ids
