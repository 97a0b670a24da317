"""`RecordSlidingWindower`: Kafka Streams' KIP-450 sliding windows.

Expected windows are Kafka Streams' own: the `SlidingWindows` javadoc
example and the final windows of `KStreamSlidingWindowAggregateTest`
(`testAggregateSmallInput`, `testReduceSmallInput`, key A of
`testAggregateLargeInput`), with Kafka's millisecond timestamps as
milliseconds after the UTC epoch, so window ids are Kafka's window starts.
A brute-force property test checks the defining promise: every distinct
non-empty set of a key's records that fits in a window is emitted once.
"""

from __future__ import annotations

import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, FrozenSet, List, Set, Tuple

import pytest
from support.firing_helpers import Outputs, Step, by_key, downs, drive_op, events, logic_builder, sink_all

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.record_sliding import EPOCH, RecordSlidingWindowerState
from flowspark.operators._windowing.windowers import check_windower
from flowspark.testing import TestingSource, TimeTestingGetter, run_main

MS = timedelta(milliseconds=1)


def at(ms: float) -> datetime:
    return EPOCH + ms * MS


def ms_stamp(value: Tuple[float, Any]) -> datetime:
    """The timestamp of a `(milliseconds after the epoch, payload)` value."""
    return at(value[0])


def collect(length_ms: int, ordered: bool = True, unit: timedelta = MS) -> Any:
    windower = win.RecordSlidingWindower(length_ms * MS, unit)
    return lambda up, clock, _getter: win.collect_window("win", up, clock, windower, ordered=ordered)


def payloads(records: Any) -> Dict[int, List[Any]]:
    """Each emitted window's payloads, by window id."""
    return {window_id: [p for _t, p in value] for _kind, window_id, value in downs(records)}


def metas(records: Any) -> Dict[int, Tuple[datetime, datetime]]:
    return {e[1]: e[2] for e in events(records) if e[0] == "meta"}


# Kafka Streams' examples.


def test_kafka_javadoc_example() -> None:
    """Time difference 5000 ms; records at 8000, 9200, 12400: five windows."""
    script: List[Step] = [[(8000, 1)], [(9200, 2)], [(12400, 3)], "eof"]
    records = drive_op(collect(5000), script, ts_getter=ms_stamp)
    assert payloads(records) == {
        3000: [1],  # created when the first record enters
        4200: [1, 2],  # the second enters
        7400: [1, 2, 3],  # the third enters
        8001: [2, 3],  # the first drops out
        9201: [3],  # the second drops out
    }
    assert metas(records)[8001] == (at(8001), at(13001))
    assert all(close - open_ == 5000 * MS for open_, close in metas(records).values())


def test_kafka_aggregate_small_input_with_a_duplicate_timestamp() -> None:
    """`testAggregateSmallInput`: 10 ms difference; two records at 10 share one left window."""
    values = [(10, 1), (10, 2), (14, 3), (15, 4), (20, 5), (22, 6), (30, 7)]
    records = drive_op(collect(10), [[v] for v in values] + ["eof"], ts_getter=ms_stamp)
    assert payloads(records) == {
        0: [1, 2],
        4: [1, 2, 3],
        5: [1, 2, 3, 4],
        10: [1, 2, 3, 4, 5],
        11: [3, 4, 5],
        12: [3, 4, 5, 6],
        15: [4, 5, 6],
        16: [5, 6],
        20: [5, 6, 7],
        21: [6, 7],
        23: [7],
    }


def test_kafka_reduce_small_input() -> None:
    """`testReduceSmallInput`, as a sum of the string payloads' numbers."""
    values = [(10, 1), (14, 2), (15, 3), (22, 4), (26, 5), (30, 6)]

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        windower = win.RecordSlidingWindower(10 * MS)
        return win.fold_window("win", up, clock, windower, list, lambda acc, v: [*acc, v[1]], lambda a, b: a + b)

    records = drive_op(build, [values, "eof"], ts_getter=ms_stamp)
    assert {window_id: value for _k, window_id, value in downs(records)} == {
        0: [1],
        4: [1, 2],
        5: [1, 2, 3],
        11: [2, 3],
        12: [2, 3, 4],
        15: [3, 4],
        16: [4, 5],
        20: [4, 5, 6],
        23: [5, 6],
        27: [6],
    }


KEY_A = [(10, 1), (20, 2), (22, 3), (15, 4)]
"""Key A of `testAggregateLargeInput`: the record at 15 arrives last."""

KEY_A_FINAL = {0: [1], 5: [1, 4], 10: [1, 4, 2], 11: [4, 2], 12: [4, 2, 3], 16: [2, 3], 21: [3]}
"""Kafka's final windows for key A (payloads in timestamp order)."""


def test_kafka_out_of_order_record_within_grace() -> None:
    """With a wait covering the straggler, ordered mode applies it in place: Kafka's windows."""
    records = drive_op(collect(10), [KEY_A, "eof"], wait=7 * MS, ts_getter=ms_stamp)
    assert payloads(records) == KEY_A_FINAL


def test_unordered_mode_gives_a_straggler_no_right_window() -> None:
    """With `ordered=False`, 15 joins the open windows and gets its left window, but
    its right window `[16, 26]` (records 20 and 22 alone) cannot be opened."""
    records = drive_op(collect(10, ordered=False), [KEY_A, "eof"], wait=7 * MS, ts_getter=ms_stamp)
    got = {window_id: sorted(ps) for window_id, ps in payloads(records).items()}
    expected = {window_id: sorted(ps) for window_id, ps in KEY_A_FINAL.items() if window_id != 16}
    assert got == expected


def test_a_value_behind_the_watermark_goes_to_late() -> None:
    """Kafka's key B straggler (14 after 25, grace 10) is late here as a whole."""
    values = [(12, 1), (13, 2), (18, 3), (19, 4), (25, 5), (14, 6)]
    records = drive_op(collect(10), [values[:5], values[5:], "eof"], wait=10 * MS, ts_getter=ms_stamp)
    late = [e for e in events(records) if e[0] == "late"]
    # At watermark 15 only 12 and 13 are applied: 12's right window [13, 23] is open and
    # spans 14, and [4, 14] is the left window 14 would have had.
    assert late == [("late", 4, (14, 6)), ("late", 13, (14, 6))]
    assert 6 not in [p for ps in payloads(records).values() for p in ps]


def test_left_window_that_is_an_earlier_records_right_window() -> None:
    """A record `length + unit` after another: its left window is that record's right window."""
    records = drive_op(collect(10), [[(0, "a")], [(11, "b")], [(11, "c")], "eof"], ts_getter=ms_stamp)
    assert payloads(records) == {-10: ["a"], 1: ["b", "c"]}


def test_timestamps_count_in_whole_units() -> None:
    unit = timedelta(seconds=1)
    values = [(200, "a"), (900, "b"), (1500, "c"), (2000, "d")]
    records = drive_op(collect(1000, unit=unit), [values, "eof"], ts_getter=ms_stamp)
    # Units 0, 0, 1, 2: window ids count seconds since the epoch.
    assert payloads(records) == {-1: ["a", "b"], 0: ["a", "b", "c"], 1: ["c", "d"], 2: ["d"]}
    assert metas(records)[0] == (at(0), at(1000))


# The defining property, checked by brute force.


def distinct_sets(stamps: List[int], length: int) -> Set[FrozenSet[int]]:
    """Every distinct non-empty set of record indices `{i : s <= stamps[i] <= s + length}`."""
    found: Set[FrozenSet[int]] = set()
    for start in range(min(stamps) - length, max(stamps) + 1):
        members = frozenset(i for i, t in enumerate(stamps) if start <= t <= start + length)
        if members:
            found.add(members)
    return found


def random_stamps(rng: random.Random) -> List[int]:
    now = rng.randint(-20, 20)
    stamps = []
    for _ in range(rng.randint(1, 25)):
        now += rng.choice([0, 0, 1, 2, 3, 5, 8, 13, 30])
        stamps.append(now)
    return stamps


def script_of(rng: random.Random, values: List[Any], wait: int, quiet_time: bool) -> List[Step]:
    """Batches of `values` in their order and, with `quiet_time`, system time passing between
    them (closing windows early), but never so much that the next value would be late."""
    script: List[Step] = []
    rest = list(values)
    watermark_base, pushed_at, system = float("-inf"), 0, 0  # the EventClock, mirrored in ms
    while rest:
        take = rng.randint(1, 4)
        for stamp_ms, _payload in rest[:take]:
            if stamp_ms - wait > watermark_base + (system - pushed_at):
                watermark_base, pushed_at = stamp_ms - wait, system
        script.append(rest[:take])
        rest = rest[take:]
        if quiet_time and rest and rng.random() < 0.4:
            room = rest[0][0] - (watermark_base + (system - pushed_at))
            advance = rng.randint(0, int(room))
            system += advance
            script.extend([advance * MS, "notify"])
    script.append("eof")
    return script


def emitted_sets(records: Any) -> List[FrozenSet[int]]:
    return [frozenset(i for _t, i in value) for _kind, _id, value in downs(records)]


@pytest.mark.parametrize("seed", range(30))
def test_in_order_records_emit_every_distinct_set_once(seed: int) -> None:
    rng = random.Random(seed)
    stamps = random_stamps(rng)
    length = rng.choice([1, 3, 10, 25])
    wait = rng.choice([0, 2, 50])
    values = [(t, i) for i, t in enumerate(stamps)]
    script = script_of(rng, values, wait, quiet_time=True)
    records = drive_op(collect(length), script, wait=wait * MS, ts_getter=ms_stamp)
    got = emitted_sets(records)
    assert len(got) == len(set(got)), "a record set was emitted twice"
    assert set(got) == distinct_sets(stamps, length)
    assert not [e for e in events(records) if e[0] == "late"]


@pytest.mark.parametrize("seed", range(20))
def test_out_of_order_within_the_wait_matches_sorted_input(seed: int) -> None:
    rng = random.Random(seed)
    stamps = random_stamps(rng)
    length = rng.choice([1, 3, 10])
    wait = rng.choice([1, 5, 20])
    values = [(t, i) for i, t in enumerate(stamps)]
    # Arrival order by timestamp plus a jitter within the wait: nothing is late.
    shuffled = sorted(values, key=lambda v: v[0] + rng.uniform(0, wait))
    by_id = {}
    for arrival in (values, shuffled):
        script = script_of(rng, arrival, wait, quiet_time=False)
        records = drive_op(collect(length), script, wait=wait * MS, ts_getter=ms_stamp)
        assert not [e for e in events(records) if e[0] == "late"]
        by_id[arrival is values] = {i: sorted(ps) for i, ps in payloads(records).items()}
    assert by_id[False] == by_id[True]
    assert {frozenset(ps) for ps in by_id[True].values()} == distinct_sets(stamps, length)


# Through the other window operators.


def test_count_and_fold_windows() -> None:
    values = [(8000, 1), (9200, 2), (12400, 3)]

    def counted(up: Any, clock: Any, _getter: Any) -> Any:
        unkeyed = op.map("unkey", up, lambda kv: kv)
        return win.count_window("win", unkeyed, clock, win.RecordSlidingWindower(5000 * MS), lambda _v: "k")

    def summed(up: Any, clock: Any, _getter: Any) -> Any:
        windower = win.RecordSlidingWindower(5000 * MS)
        return win.fold_window("win", up, clock, windower, lambda: 0, lambda acc, v: acc + v[1], lambda a, b: a + b)

    counts = drive_op(counted, [values, "eof"], ts_getter=ms_stamp)
    assert {window_id: n for _k, window_id, n in downs(counts)} == {3000: 1, 4200: 2, 7400: 3, 8001: 2, 9201: 1}
    sums = drive_op(summed, [values, "eof"], ts_getter=ms_stamp)
    assert {window_id: n for _k, window_id, n in downs(sums)} == {3000: 1, 4200: 3, 7400: 6, 8001: 5, 9201: 3}


# Quiet keys: the last record is kept while its right window can still come.


def test_idle_key_keeps_its_last_record_then_becomes_a_tombstone() -> None:
    builder, getter, _out = logic_builder(collect(10), wait=5 * MS, ts_getter=ms_stamp)
    logic = builder(None)
    logic.on_batch([(100, "a")])
    getter.advance(10 * MS)  # watermark 105: the left window [90, 100] closes
    evs, _discard = logic.on_notify()
    assert [type(e).__name__ for e in evs] == ["Emitted", "Closed"]
    snap = logic.snapshot()
    assert snap.logic_states == {}
    assert snap.windower_state.units == [100]  # 100's right window [101, 111] may still come
    assert logic.notify_at() == at(112)
    getter.advance(7 * MS)  # watermark 112: no on-time value can reach [101, 111] any more
    logic.on_notify()
    assert logic.snapshot().windower_state == RecordSlidingWindowerState()
    assert logic.notify_at() is None


def test_a_record_after_all_windows_closed_still_fills_the_right_window() -> None:
    script: List[Step] = [[(100, "a")], 10 * MS, "notify", [(106, "b")], "eof"]
    records = drive_op(collect(10), script, wait=5 * MS, ts_getter=ms_stamp)
    assert payloads(records) == {90: ["a"], 96: ["a", "b"], 101: ["b"]}


def test_history_near_the_start_of_time_does_not_overflow() -> None:
    base = datetime.min.replace(tzinfo=timezone.utc)

    def stamp(value: Tuple[int, Any]) -> datetime:
        return base + value[0] * MS

    windower = win.RecordSlidingWindower(timedelta(days=1))
    records = drive_op(
        lambda up, clock, _g: win.collect_window("win", up, clock, windower),
        [[(0, "a"), (1, "b")], [(2, "c")], "eof"],
        ts_getter=stamp,
    )
    assert sorted(map(sorted, payloads(records).values())) == [
        ["a"],
        ["a", "b"],
        ["a", "b", "c"],
        ["b", "c"],
        ["c"],
    ]


# The windower logic alone.


def test_logic_round_trips_its_snapshot_after_every_call() -> None:
    """A logic rebuilt from a pickled snapshot after every call answers as one never rebuilt."""
    rng = random.Random(3)
    windower = win.RecordSlidingWindower(10 * MS)
    live = windower.build(None)
    rebuilt = windower.build(None)
    watermark = at(0)
    now = 0
    for _ in range(400):
        roll = rng.random()
        if roll < 0.5:
            now += rng.choice([0, 1, 4, 12])
            calls: Any = lambda logic: (logic.open_for(at(now)), logic.history())
        elif roll < 0.6:
            late = at(now - rng.randint(0, 15))
            calls = lambda logic: logic.late_for(late)
        elif roll < 0.7:
            window_id = rng.randint(now - 20, now)
            calls = lambda logic: logic.span(window_id)
        else:
            watermark = max(watermark, at(now - rng.randint(0, 15)))
            calls = lambda logic: logic.close_for(watermark)
        assert calls(rebuilt) == calls(live)
        assert (rebuilt.notify_at(), rebuilt.is_empty()) == (live.notify_at(), live.is_empty())
        rebuilt = windower.build(pickle.loads(pickle.dumps(rebuilt.snapshot())))
    assert rebuilt.close_for(at(10**6)) == live.close_for(at(10**6))
    assert rebuilt.is_empty() and live.is_empty()


def test_span_includes_the_whole_last_unit() -> None:
    logic = win.RecordSlidingWindower(timedelta(seconds=2), timedelta(seconds=1)).build(None)
    assert logic.span(5) == (at(5000), at(8000) - timedelta(microseconds=1))


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((timedelta(0),), "`length` must be a positive `timedelta`"),
        ((timedelta(seconds=1), timedelta(0)), "`unit` must be a positive `timedelta`"),
        ((timedelta(milliseconds=15), timedelta(milliseconds=10)), "`length` .* must be a whole number of `unit`s"),
    ],
)
def test_bad_parameters_are_refused(args: Tuple[Any, ...], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^RecordSlidingWindower {problem}"):
        win.RecordSlidingWindower(*args)
    windower = win.RecordSlidingWindower(timedelta(seconds=1))
    windower.length, *rest = args
    if rest:
        windower.unit = rest[0]
    with pytest.raises(ValueError, match=rf"^step 'df\.win': RecordSlidingWindower {problem}"):
        check_windower("df.win", windower)


# A whole flow on Spark.


def test_flow_on_spark() -> None:
    flow = Dataflow("record_sliding")
    items = [("a", (8000, 1)), ("b", (0, "x")), ("a", (9200, 2)), ("b", (11, "y")), ("a", (12400, 3))]
    up = op.input("inp", flow, TestingSource(items, batch_size=2))
    getter = TimeTestingGetter(datetime(2030, 1, 1, tzinfo=timezone.utc))
    clock = win.EventClock(lambda kv: at(kv[0]), timedelta(0), now_getter=getter.get)
    outputs: Outputs = {}
    sink_all(outputs, "c", win.collect_window("c", up, clock, win.RecordSlidingWindower(5000 * MS)), ("down", "meta"))
    sink_all(outputs, "s", win.collect_window("s", up, clock, win.RecordSlidingWindower(10 * MS)), ("down",))
    run_main(flow)
    five_seconds = by_key(outputs["c.down"])
    assert {i: [p for _t, p in v] for i, v in five_seconds["a"]} == {
        3000: [1],
        4200: [1, 2],
        7400: [1, 2, 3],
        8001: [2, 3],
        9201: [3],
    }
    assert sorted(five_seconds["b"]) == [(-5000, [(0, "x")]), (-4989, [(0, "x"), (11, "y")]), (1, [(11, "y")])]
    assert dict(by_key(outputs["c.meta"])["a"])[7400].close_time == at(12400)
    assert sorted(by_key(outputs["s.down"])["b"]) == [(-10, [(0, "x")]), (1, [(11, "y")])]
