"""`HoppingWindower`, `CountTumblingWindower` and `CountHoppingWindower`.

Expected values come from Quix Streams' windowing guide (docs/windowing.md):
the "Time-based Hopping Windows" membership example, the count-based
tumbling batch of three, the count-based hopping diagram (6 messages, step
2) and the count-based sliding example (average of the last 3 purchases),
with Quix's millisecond timestamps as milliseconds after the UTC epoch.
"""

from __future__ import annotations

import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import Outputs, Step, by_key, downs, drive_op, events, logic_builder, sec, sink_all, stamp

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.windowers import check_windower
from flowspark.testing import TestingSource, TimeTestingGetter, run_main

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MS = timedelta(milliseconds=1)


def ms_stamp(value: Tuple[float, Any]) -> datetime:
    return EPOCH + value[0] * MS


def collect(windower: Any, ordered: bool = True) -> Any:
    return lambda up, clock, _getter: win.collect_window("win", up, clock, windower, ordered=ordered)


def sum_and_count(windower: Any) -> Any:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.fold_window(
            "win",
            up,
            clock,
            windower,
            lambda: (0, 0),
            lambda acc, v: (acc[0] + v[1], acc[1] + 1),
            lambda a, b: (a[0] + b[0], a[1] + b[1]),
        )

    return build


def metas(records: Any) -> List[Tuple[int, Tuple[datetime, datetime]]]:
    return [(e[1], e[2]) for e in events(records) if e[0] == "meta"]


def logics_agree(build: Callable[[Any], Any], calls: List[Callable[[Any], Any]]) -> None:
    """Each call gives the same answer on a live logic and on one rebuilt from a pickled snapshot after every call."""
    live = build(None)
    rebuilt = build(None)
    for call in calls:
        assert call(rebuilt) == call(live)
        assert (rebuilt.notify_at(), rebuilt.is_empty()) == (live.notify_at(), live.is_empty())
        rebuilt = build(pickle.loads(pickle.dumps(rebuilt.snapshot())))


# Hopping windows by time.


def test_quix_hopping_membership_example() -> None:
    """Quix: with 1 h windows every 30 min, 00:33:13 is in [00:00, 01:00) and [00:30, 01:30)."""
    logic = win.HoppingWindower(timedelta(hours=1), timedelta(minutes=30), ALIGN).build(None)
    assert logic.open_for(ALIGN + timedelta(minutes=33, seconds=13)) == [0, 1]
    closed = logic.close_for(ALIGN + timedelta(hours=2))
    assert [(i, m.open_time, m.close_time) for i, m in closed] == [
        (0, ALIGN, ALIGN + timedelta(hours=1)),
        (1, ALIGN + timedelta(minutes=30), ALIGN + timedelta(minutes=90)),
    ]


@pytest.mark.parametrize("seed", range(3))
def test_hopping_is_sliding_under_its_quix_name(seed: int) -> None:
    rng = random.Random(seed)
    hopping = win.HoppingWindower(timedelta(seconds=10), timedelta(seconds=3), ALIGN)
    sliding = win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=3), ALIGN)
    calls: List[Callable[[Any], Any]] = []
    moment = 0.0
    for _ in range(100):
        moment += rng.uniform(0, 4)
        at = sec(moment)
        calls.append(lambda logic, at=at: logic.open_for(at))
        if rng.random() < 0.3:
            calls.append(lambda logic, at=at: (logic.late_for(at - timedelta(seconds=12)), logic.close_for(at)))
    logics_agree(hopping.build, calls)
    theirs, ours = sliding.build(None), hopping.build(None)
    assert [call(ours) for call in calls] == [call(theirs) for call in calls]
    assert ours.snapshot() == theirs.snapshot()


def test_hopping_fold_matches_sliding_and_takes_the_fast_path() -> None:
    script: List[Step] = [[(1, 5), (4, 1), (12, 7)], [(9, 2), (25, 1)], "eof"]

    def summed(windower: Any) -> Any:
        return lambda up, clock, _g: win.fold_window(
            "win", up, clock, windower, lambda: 0, lambda a, v: a + v[1], lambda a, b: a + b
        )

    hopping = win.HoppingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    sliding = win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    got = drive_op(summed(hopping), script, wait=timedelta(seconds=5))
    assert got == drive_op(summed(sliding), script, wait=timedelta(seconds=5))
    assert sorted(downs(got)) == [
        ("down", -1, 6),
        ("down", 0, 8),
        ("down", 1, 9),
        ("down", 2, 7),
        ("down", 4, 1),
        ("down", 5, 1),
    ]
    builder, _getter, _out = logic_builder(summed(hopping))
    assert builder.merges_batches
    assert type(builder(None)).__name__ == "MergingKeyWindowLogic"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((timedelta(0), timedelta(seconds=1), ALIGN), "`length` must be a positive `timedelta`"),
        ((timedelta(seconds=1), timedelta(seconds=2), ALIGN), r"`step` .* can't be longer than `length`"),
        ((timedelta(seconds=2), timedelta(seconds=1), datetime(2024, 1, 1)), "`align_to` must be a timezone-aware"),
    ],
)
def test_hopping_parameters_are_checked(args: Tuple[Any, ...], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^HoppingWindower {problem}"):
        win.HoppingWindower(*args)
    windower = win.HoppingWindower(timedelta(seconds=2), timedelta(seconds=1), ALIGN)
    windower.length, windower.step, windower.align_to = args
    with pytest.raises(ValueError, match=rf"^step 'df\.win': HoppingWindower {problem}"):
        check_windower("df.win", windower)


# Count windows.


def test_quix_tumbling_count_batch_of_three() -> None:
    """Quix: `tumbling_count_window(count=3)` with `Collect()`: one window [100, 50, 200], start 121, end 583."""
    script: List[Step] = [[(121, 100)], [(165, 50)], [(583, 200)], "eof"]
    records = drive_op(collect(win.CountTumblingWindower(3)), script, ts_getter=ms_stamp)
    # The window closes with its third value, not at end of input.
    assert records[2][0] == [
        ("down", 0, [(121, 100), (165, 50), (583, 200)]),
        ("meta", 0, (EPOCH + 121 * MS, EPOCH + 583 * MS)),
    ]
    assert records[3][0] == []


PURCHASES = [(121, 100), (165, 60), (583, 200), (723, 40), (1009, 120), (1242, 80)]
"""Quix's count-based sliding example: `(timestamp ms, amount)`."""


def test_quix_average_of_the_last_three_purchases() -> None:
    """Quix: `sliding_count_window(count=3)` (a hopping count window with step 1) and `Mean`."""
    records = drive_op(
        sum_and_count(win.CountHoppingWindower(3, 1)), [[p] for p in PURCHASES] + ["eof"], ts_getter=ms_stamp
    )
    results = [(window_id, total / n, n) for _k, window_id, (total, n) in downs(records)]
    assert results[:4] == [(0, 120, 3), (1, 100, 3), (2, 120, 3), (3, 80, 3)]
    spans = [(i, (a - EPOCH) // MS, (b - EPOCH) // MS) for i, (a, b) in metas(records)]
    assert spans[:4] == [(0, 121, 583), (1, 165, 723), (2, 583, 1009), (3, 723, 1242)]
    # Quix keeps the last two windows waiting for more purchases; end of input closes them.
    assert results[4:] == [(4, 100, 2), (5, 80, 1)]
    assert spans[4:] == [(4, 1009, 1242), (5, 1242, 1242)]


def test_quix_hopping_count_diagram() -> None:
    """Quix: 6 messages with a step of 2 give windows [0, 5], [2, 7], [4, 9], [6, 11]."""
    values = [(n, n) for n in range(12)]
    records = drive_op(collect(win.CountHoppingWindower(6, 2)), [values[:7], values[7:], "eof"], ts_getter=ms_stamp)
    assert [(i, [n for n, _ in v]) for _k, i, v in downs(records)] == [
        (0, [0, 1, 2, 3, 4, 5]),
        (1, [2, 3, 4, 5, 6, 7]),
        (2, [4, 5, 6, 7, 8, 9]),
        (3, [6, 7, 8, 9, 10, 11]),
        (4, [8, 9, 10, 11]),
        (5, [10, 11]),
    ]
    assert [i for _k, i, _v in downs(records[:1])] == [0]  # the first batch fills window 0 only


def test_count_window_counts_each_tumbling_window() -> None:
    def counted(up: Any, clock: Any, _getter: Any) -> Any:
        return win.count_window(
            "win", op.map("unkey", up, lambda v: v), clock, win.CountTumblingWindower(2), lambda _v: "k"
        )

    records = drive_op(counted, [[(1, "a"), (2, "b"), (3, "c")], [(4, "d"), (5, "e")], "eof"])
    assert downs(records) == [("down", 0, 2), ("down", 1, 2), ("down", 2, 1)]


def test_values_are_counted_in_timestamp_order_when_ordered() -> None:
    values = [(5, "e"), (1, "a"), (3, "c"), (2, "b"), (9, "i")]
    ordered = drive_op(collect(win.CountTumblingWindower(2)), [values, "eof"], wait=timedelta(seconds=10))
    assert downs(ordered) == [
        ("down", 0, [(1, "a"), (2, "b")]),
        ("down", 1, [(3, "c"), (5, "e")]),
        ("down", 2, [(9, "i")]),
    ]
    assert metas(ordered) == [(0, (sec(1), sec(2))), (1, (sec(3), sec(5))), (2, (sec(9), sec(9)))]
    unordered = drive_op(
        collect(win.CountTumblingWindower(2), ordered=False), [values, "eof"], wait=timedelta(seconds=10)
    )
    assert downs(unordered)[0] == ("down", 0, [(5, "e"), (1, "a")])
    # Arrival order, but the metadata is the earliest and latest timestamp, as Quix reports.
    assert metas(unordered)[0] == (0, (sec(1), sec(5)))


def test_late_values_go_to_late_with_the_sentinel_id() -> None:
    script: List[Step] = [[(10, "a"), (2, "late"), (11, "b")], "eof"]
    records = drive_op(collect(win.CountTumblingWindower(2)), script, wait=timedelta(seconds=5))
    assert [e for e in events(records) if e[0] in ("late", "down")] == [
        ("late", win.LATE_SESSION_ID, (2, "late")),
        ("down", 0, [(10, "a"), (11, "b")]),
    ]


def test_count_windows_keep_their_counter_on_idle_keys() -> None:
    builder, getter, _out = logic_builder(collect(win.CountTumblingWindower(2)))
    logic = builder(None)
    logic.on_batch([(1, "a"), (2, "b")])
    getter.advance(timedelta(hours=1))
    logic.on_notify()
    assert logic.snapshot().windower_state.applied == 2
    assert logic.notify_at() is None
    assert not builder.merges_batches


@pytest.mark.parametrize(("count", "step"), [(3, 1), (4, 4), (5, 2), (1, 1)])
def test_count_logic_round_trips_its_snapshot_after_every_call(count: int, step: int) -> None:
    rng = random.Random(count * 10 + step)
    calls: List[Callable[[Any], Any]] = []
    for n in range(60):
        at = sec(n + rng.uniform(-3, 3))
        calls.append(lambda logic, at=at: logic.open_for(at))
        if rng.random() < 0.3:
            calls.append(lambda logic, at=at: (list(logic.late_for(at)), list(logic.merged()), logic.close_for(at)))
    calls.append(lambda logic: logic.close_for(win.UTC_MAX))
    logics_agree(win.CountHoppingWindower(count, step).build, calls)


def test_every_value_lands_in_count_windows_by_position() -> None:
    logic = win.CountHoppingWindower(5, 2).build(None)
    for n in range(40):
        ids = logic.open_for(sec(n))
        assert ids == [k for k in range(n + 1) if k * 2 <= n < k * 2 + 5]
        full = [i for i, _meta in logic.close_for(sec(n))]
        assert full == ([(n - 4) // 2] if n >= 4 and (n - 4) % 2 == 0 else [])


@pytest.mark.parametrize(
    ("windower", "args", "problem"),
    [
        ("CountTumblingWindower", (0,), "`count` must be a positive `int`; got 0"),
        ("CountTumblingWindower", (True,), "`count` must be a positive `int`; got True"),
        ("CountHoppingWindower", (3, 0), "`step` must be a positive `int`; got 0"),
        ("CountHoppingWindower", (2, 3), "`step` 3 can't be larger than `count` 2"),
        ("CountHoppingWindower", (2.0, 1), r"`count` must be a positive `int`; got 2\.0"),
    ],
)
def test_count_parameters_are_checked(windower: str, args: Tuple[Any, ...], problem: str) -> None:
    cls = getattr(win, windower)
    with pytest.raises(ValueError, match=f"^{windower} {problem}"):
        cls(*args)
    good = cls(*[4 for _ in args])
    for name, value in zip(("count", "step"), args):
        setattr(good, name, value)
    with pytest.raises(ValueError, match=rf"^step 'df\.win': {windower} {problem}"):
        check_windower("df.win", good)


# A whole flow on Spark.


def test_flow_on_spark() -> None:
    flow = Dataflow("hopping_and_count")
    items = [
        ("a", (1, 5)),
        ("b", (2, 1)),
        ("a", (12, 7)),
        ("a", (8, 2)),
        ("b", (14, 3)),
        ("a", (25, 1)),
        ("b", (15, 4)),
    ]
    up = op.input("inp", flow, TestingSource(items, batch_size=3))
    getter = TimeTestingGetter(datetime(2030, 1, 1, tzinfo=timezone.utc))
    clock = win.EventClock(lambda kv: stamp(kv), timedelta(seconds=5), now_getter=getter.get)
    outputs: Outputs = {}
    hopping = win.HoppingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    sink_all(
        outputs,
        "hop",
        win.fold_window("hop", up, clock, hopping, lambda: 0, lambda a, v: a + v[1], lambda a, b: a + b),
        ("down",),
    )
    sink_all(outputs, "tumble", win.collect_window("tumble", up, clock, win.CountTumblingWindower(2)), ("down", "meta"))
    sink_all(outputs, "hopc", win.collect_window("hopc", up, clock, win.CountHoppingWindower(3, 2)), ("down",))
    run_main(flow)
    assert sorted(by_key(outputs["hop.down"])["a"]) == [(-1, 5), (0, 7), (1, 9), (2, 7), (4, 1), (5, 1)]
    tumble = by_key(outputs["tumble.down"])
    assert tumble == {
        "a": [(0, [(1, 5), (8, 2)]), (1, [(12, 7), (25, 1)])],
        "b": [(0, [(2, 1), (14, 3)]), (1, [(15, 4)])],
    }
    assert by_key(outputs["tumble.meta"])["b"][1][1].open_time == sec(15)
    assert by_key(outputs["hopc.down"])["a"] == [(0, [(1, 5), (8, 2), (12, 7)]), (1, [(12, 7), (25, 1)])]
