"""The new windowers with emit modes, triggers, allowed lateness and aggregations.

Every windower added beside Bytewax's (`HoppingWindower`, the count
windowers, `RecordSlidingWindower`, `DynamicSessionWindower`) is driven here
with an aggregation operator, `emit="current"`, a trigger and, except for
the count windowers, `allowed_lateness`.  `drive_op` rebuilds the key's
logic from a pickled snapshot after every call, so each expectation also
checks the round trip.  Values are `(seconds, number)` (dynamic sessions
add their gap in seconds) stamped at `ALIGN + seconds`; with the default
clock the watermark is the newest timestamp.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import Outputs, by_key, drive_op, flow_clock, panes, sec, sink_all

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.record_sliding import EPOCH
from flowspark.testing import TestingSink, TestingSource, run_main

SECOND = timedelta(seconds=1)


def number(value: Tuple[Any, ...]) -> Any:
    return value[1]


def gap_of(value: Tuple[Any, ...]) -> timedelta:
    return value[2] * SECOND


def three_seconds(_value: Any) -> timedelta:
    return 3 * SECOND


SUM_AND_COUNT: Dict[str, win.Aggregation[Any, Any, Any]] = {"sum": win.Sum(number), "n": win.Count()}


def agg(total: Any, n: int) -> Dict[str, Any]:
    return {"sum": total, "n": n}


def calls(records: List[Any]) -> List[List[Tuple[Any, ...]]]:
    """Each call's events, without `notify_at`."""
    return [evs for evs, _at in records]


def meta(window_id: int, open_s: float, close_s: float) -> Tuple[Any, ...]:
    return ("meta", window_id, (sec(open_s), sec(close_s)))


# HoppingWindower: 10 s windows every 5 s; window k covers [5k, 5k + 10).

HOPPING = win.HoppingWindower(10 * SECOND, 5 * SECOND, ALIGN)


def test_hopping_aggregation_with_current_and_final_results_and_lateness() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.aggregate_window(
            "win", up, clock, HOPPING, SUM_AND_COUNT, emit="current_and_final", allowed_lateness=5 * SECOND
        )

    records = drive_op(build, [[(1, 1), (6, 2)], [(12, 4)], [(3, 8)], [(16, 16)], "eof"])
    assert calls(records) == [
        [
            ("down", -1, agg(1, 1), ("early", 0, False)),
            ("down", 0, agg(1, 1), ("early", 0, False)),
            ("down", 0, agg(3, 2), ("early", 1, False)),
            ("down", 1, agg(2, 1), ("early", 0, False)),
            # Watermark 6: window -1 closes and is kept until 5 s + 5 s.
            ("down", -1, agg(1, 1), ("on_time", 1, False)),
            meta(-1, -5, 5),
        ],
        [
            ("down", 1, agg(6, 2), ("early", 1, False)),
            ("down", 2, agg(4, 1), ("early", 0, False)),
            ("down", 0, agg(3, 2), ("on_time", 2, False)),
            meta(0, 0, 10),
        ],
        # 3 s is late for windows -1 (dropped at 10 s) and 0 (kept until 15 s).
        [("late", -1, (3, 8)), ("down", 0, agg(11, 3), ("late", 3, False))],
        [
            ("down", 2, agg(20, 2), ("early", 1, False)),
            ("down", 3, agg(16, 1), ("early", 0, False)),
            ("down", 1, agg(6, 2), ("on_time", 2, False)),
            meta(1, 5, 15),
        ],
        [
            ("down", 2, agg(20, 2), ("on_time", 2, True)),
            meta(2, 10, 20),
            ("down", 3, agg(16, 1), ("on_time", 1, True)),
            meta(3, 15, 25),
        ],
    ]


def test_hopping_sum_with_a_purging_count_trigger() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, HOPPING, number, trigger=win.CountTrigger(2, purge=True))

    records = drive_op(build, [[(1, 1), (2, 2), (3, 4), (6, 8)], "eof"])
    assert calls(records) == [
        [
            ("down", -1, 3, ("early", 0, False)),
            ("down", 0, 3, ("early", 0, False)),
            ("down", 0, 12, ("early", 1, False)),
            ("down", -1, 4, ("on_time", 1, True)),
            meta(-1, -5, 5),
        ],
        # Window 0 was purged by its last value: nothing left to emit when it closes.
        [meta(0, 0, 10), ("down", 1, 8, ("on_time", 0, True)), meta(1, 5, 15)],
    ]


# Count windows: closed when full (or at end of input), so no allowed lateness.


def test_count_tumbling_aggregation_with_current_and_final_results() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        aggs = {"sum": win.Sum(number), "max": win.Max(number)}
        return win.aggregate_window("win", up, clock, win.CountTumblingWindower(3), aggs, emit="current_and_final")

    records = drive_op(build, [[(0, 5), (1, 3)], [(2, 7), (3, 1)], [(1, 100)], [(4, 2)], "eof"])
    assert calls(records) == [
        [
            ("down", 0, {"sum": 5, "max": 5}, ("early", 0, False)),
            ("down", 0, {"sum": 8, "max": 5}, ("early", 1, False)),
        ],
        [
            ("down", 0, {"sum": 15, "max": 7}, ("early", 2, False)),
            ("down", 1, {"sum": 1, "max": 1}, ("early", 0, False)),
            ("down", 0, {"sum": 15, "max": 7}, ("on_time", 3, True)),
            meta(0, 0, 2),
        ],
        # A late value has no position, so no window.
        [("late", -1, (1, 100))],
        [("down", 1, {"sum": 3, "max": 2}, ("early", 1, False))],
        [("down", 1, {"sum": 3, "max": 2}, ("on_time", 2, True)), meta(1, 3, 4)],
    ]


def test_count_hopping_sum_with_a_predicate_trigger() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        big = win.PredicateTrigger(lambda value: value[1] >= 10)
        return win.sum_window("win", up, clock, win.CountHoppingWindower(4, 2), number, trigger=big)

    records = drive_op(build, [[(0, 1), (1, 10), (2, 2), (3, 3), (4, 20), (5, 4)], "eof"])
    assert calls(records) == [
        [
            ("down", 0, 11, ("early", 0, False)),
            ("down", 1, 25, ("early", 0, False)),
            ("down", 2, 20, ("early", 0, False)),
            ("down", 0, 16, ("on_time", 1, True)),
            meta(0, 0, 3),
            ("down", 1, 29, ("on_time", 1, True)),
            meta(1, 2, 5),
        ],
        [("down", 2, 24, ("on_time", 1, True)), meta(2, 4, 5)],
    ]


def test_collected_count_windows_with_current_results_and_a_count_trigger() -> None:
    def current(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window("win", up, clock, win.CountTumblingWindower(3), emit="current")

    def triggered(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window("win", up, clock, win.CountHoppingWindower(4, 2), trigger=win.CountTrigger(2))

    values = [(i, str(i)) for i in range(5)]

    def emitted(build: Any) -> List[Tuple[int, List[str], str]]:
        emissions = panes(drive_op(build, [values, "eof"]))
        return [(w, [v for _s, v in items], timing) for w, items, timing, _i, _l in emissions]

    assert emitted(current) == [
        (0, ["0"], "early"),
        (0, ["0", "1"], "early"),
        (0, ["0", "1", "2"], "early"),
        (1, ["3"], "early"),
        (1, ["3", "4"], "early"),
    ]
    assert emitted(triggered) == [
        (0, ["0", "1"], "early"),
        (0, ["0", "1", "2", "3"], "early"),
        (1, ["2", "3"], "early"),
        (0, ["0", "1", "2", "3"], "on_time"),
        (1, ["2", "3", "4"], "on_time"),
        (2, ["4"], "on_time"),
    ]


@pytest.mark.parametrize("windower", [win.CountTumblingWindower(2), win.CountHoppingWindower(4, 2)])
def test_count_windows_refuse_allowed_lateness_naming_the_step(windower: Any) -> None:
    flow = Dataflow("df")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([(0, 1)])), lambda _v: "k")
    refusal = r"^step 'df\.late_count\.window': count windows close when full.*`allowed_lateness`"
    with pytest.raises(ValueError, match=refusal):
        win.aggregate_window("late_count", keyed, flow_clock(), windower, SUM_AND_COUNT, allowed_lateness=SECOND)
    # Zero lateness is the default, and fine.
    win.aggregate_window("on_time_count", keyed, flow_clock(), windower, SUM_AND_COUNT, allowed_lateness=timedelta(0))


# RecordSlidingWindower: 10 s windows with both ends included, counted in whole seconds.

RECORD_SLIDING = win.RecordSlidingWindower(10 * SECOND, SECOND)
BASE = int((ALIGN - EPOCH).total_seconds())


def rs(start_s: int) -> int:
    """The id of the record sliding window starting at `start_s` seconds."""
    return BASE + start_s


def rs_meta(start_s: int) -> Tuple[Any, ...]:
    return ("meta", rs(start_s), (sec(start_s), sec(start_s + 10)))


RECORD_SCRIPT: List[Any] = [[(0, 1)], [(5, 2)], [(8, 4)], [(12, 8)], "eof"]
"""Windows: [-10, 0], then [-5, 5] (seeded with 0 s) and [1, 11] (the 0 s record's right window),
then [-2, 8] (seeded with 0 s and 5 s) and [6, 16], then [2, 12] (seeded with 5 s and 8 s) and [9, 19]."""


def test_record_sliding_current_results_emit_once_per_value_not_per_seeded_value() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, RECORD_SLIDING, number, emit="current")

    records = drive_op(build, RECORD_SCRIPT)
    assert calls(records) == [
        [("down", rs(-10), 1, ("early", 0, False))],
        [("down", rs(-5), 3, ("early", 0, False)), ("down", rs(1), 2, ("early", 0, False)), rs_meta(-10)],
        [
            ("down", rs(-2), 7, ("early", 0, False)),
            ("down", rs(1), 6, ("early", 1, False)),
            ("down", rs(6), 4, ("early", 0, False)),
            rs_meta(-5),
        ],
        [
            ("down", rs(2), 14, ("early", 0, False)),
            ("down", rs(6), 12, ("early", 1, False)),
            ("down", rs(9), 8, ("early", 0, False)),
            rs_meta(-2),
            rs_meta(1),
        ],
        [rs_meta(2), rs_meta(6), rs_meta(9)],
    ]


def test_record_sliding_count_trigger_counts_seeded_values_and_fires_once() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, RECORD_SLIDING, number, trigger=win.CountTrigger(2))

    # [-5, 5] holds two values once the 5 s record opens it: it fires then, once.
    assert panes(drive_op(build, RECORD_SCRIPT)) == [
        (rs(-5), 3, "early", 0, False),
        (rs(-10), 1, "on_time", 0, True),
        (rs(-2), 7, "early", 0, False),
        (rs(1), 6, "early", 0, False),
        (rs(-5), 3, "on_time", 1, True),
        (rs(2), 14, "early", 0, False),
        (rs(6), 12, "early", 0, False),
        (rs(-2), 7, "on_time", 1, True),
        (rs(1), 6, "on_time", 1, True),
        (rs(2), 14, "on_time", 1, True),
        (rs(6), 12, "on_time", 1, True),
        (rs(9), 8, "on_time", 0, True),
    ]


def test_record_sliding_aggregation_with_lateness() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.aggregate_window("win", up, clock, RECORD_SLIDING, SUM_AND_COUNT, allowed_lateness=10 * SECOND)

    records = drive_op(build, [[(0, 1)], [(5, 2)], [(12, 8)], [(3, 16)], [(13, 32)], "eof"])
    assert calls(records) == [
        [],
        [("down", rs(-10), agg(1, 1), ("on_time", 0, False)), rs_meta(-10)],
        # Watermark 12: [-10, 0] is dropped (kept until 10 s); [-5, 5] and [1, 11] close and are kept.
        [
            ("down", rs(-5), agg(3, 2), ("on_time", 0, False)),
            rs_meta(-5),
            ("down", rs(1), agg(2, 1), ("on_time", 0, False)),
            rs_meta(1),
        ],
        # 3 s: its left window [-7, 3] cannot be opened any more; the kept windows spanning it
        # re-fire and the open [2, 12] takes it.
        [
            ("late", rs(-7), (3, 16)),
            ("down", rs(-5), agg(19, 3), ("late", 1, False)),
            ("down", rs(1), agg(18, 2), ("late", 1, False)),
        ],
        [("down", rs(2), agg(26, 3), ("on_time", 0, False)), rs_meta(2)],
        # [3, 13], opened by the 13 s record, is seeded with the late 3 s value too.
        [
            ("down", rs(3), agg(58, 4), ("on_time", 0, True)),
            rs_meta(3),
            ("down", rs(6), agg(40, 2), ("on_time", 0, True)),
            rs_meta(6),
            ("down", rs(13), agg(32, 1), ("on_time", 0, True)),
            rs_meta(13),
        ],
    ]


# DynamicSessionWindower: values are (seconds, number, gap seconds).

DYNAMIC = win.DynamicSessionWindower(gap_of)
BRIDGED: List[Any] = [[(0, 1, 2)], [(5, 2, 1)], [(1.5, 4, 4)], "eof"]
"""Sessions [0, reach 2] and [5, reach 6]; 1.5 s with a 4 s gap joins the first and bridges to the second.

Driven with a 10 s clock wait and `ordered=False`, so values apply at once and nothing closes before the end.
"""


def test_dynamic_sessions_current_results_through_a_merge() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, DYNAMIC, number, ordered=False, emit="current")

    records = drive_op(build, BRIDGED, wait=10 * SECOND)
    assert calls(records) == [
        [("down", 0, 1, ("early", 0, False))],
        [("down", 1, 2, ("early", 0, False))],
        # 1.5 s bridges the sessions: they merge first (as in Flink), then it is taken in: one result.
        [("down", 0, 7, ("early", 1, False))],
        [meta(0, 0, 5)],
    ]


def test_dynamic_sessions_count_trigger_adds_up_across_a_merge() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, DYNAMIC, number, ordered=False, trigger=win.CountTrigger(2))

    records = drive_op(build, BRIDGED, wait=10 * SECOND)
    # As in Flink, the sessions merge before 1.5 s is counted: 1 + 1, then 1.5 s makes 3, which fires.
    assert calls(records) == [
        [],
        [],
        [("down", 0, 7, ("early", 0, False))],
        [("down", 0, 7, ("on_time", 1, True)), meta(0, 0, 5)],
    ]


def test_dynamic_sessions_aggregation_places_late_values_by_their_own_gap() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.aggregate_window("win", up, clock, DYNAMIC, SUM_AND_COUNT, allowed_lateness=10 * SECOND)

    records = drive_op(build, [[(0, 1, 1)], [(5, 2, 1)], [(3, 4, 2)], [(0.5, 8, 0)], [(2.5, 16, 0)], "eof"])
    assert calls(records) == [
        [],
        # Session 0 reaches 1 s: it closes and is kept until 1 s + 10 s.
        [("down", 0, agg(1, 1), ("on_time", 0, False)), meta(0, 0, 0)],
        # 3 s with a 2 s gap reaches 5 s: it touches the open session 1 and joins it.
        [],
        # 0.5 s with no gap lies in the kept session 0: a late firing; its last value is now 0.5 s.
        [("down", 0, agg(9, 2), ("late", 1, False)), meta(0, 0, 0.5)],
        # 2.5 s with no gap touches neither session, but its own session is within the lateness:
        # it opens one, already closed (as Flink would), which fires at once.
        [("down", 2, agg(16, 1), ("late", 0, False)), meta(2, 2.5, 2.5)],
        [("down", 1, agg(6, 2), ("on_time", 0, True)), meta(1, 3, 5)],
    ]


def test_dynamic_sessions_are_kept_from_their_reach_not_their_last_value() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, DYNAMIC, number, allowed_lateness=2 * SECOND)

    script = [[(0, 1, 1)], [(2.9, 2, 0)], [(0.5, 4, 0)], [(3.1, 8, 0)], [(0.6, 16, 0)], "eof"]
    records = drive_op(build, script)
    assert calls(records) == [
        [],
        # Session 0's last value is at 0 s but it reaches 1 s: kept until 1 s + 2 s.
        [("down", 0, 1, ("on_time", 0, False)), meta(0, 0, 0)],
        [("down", 0, 5, ("late", 1, False)), meta(0, 0, 0.5)],
        [("down", 1, 2, ("on_time", 0, False)), meta(1, 2.9, 2.9)],
        [("late", -1, (0.6, 16, 0))],
        [("down", 2, 8, ("on_time", 0, True)), meta(2, 3.1, 3.1)],
    ]


SESSION_SCRIPT: List[Any] = [
    [(0, "a"), (2, "b")],
    [(10, "c")],
    [(4, "late-a")],
    [(8, "late-c")],
    [(-10, "lost")],
    [(16, "d")],
    [(1, "gone")],
    "eof",
]


def test_dynamic_sessions_with_a_constant_gap_refire_exactly_as_sessions() -> None:
    def sessions(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(3 * SECOND)
        return win.collect_window("win", up, clock, gap, allowed_lateness=10 * SECOND, emit="current_and_final")

    def dynamic(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.DynamicSessionWindower(three_seconds)
        return win.collect_window("win", up, clock, gap, allowed_lateness=10 * SECOND, emit="current_and_final")

    expected = drive_op(sessions, SESSION_SCRIPT)
    assert {timing for _w, _v, timing, _i, _l in panes(expected)} == {"early", "on_time", "late"}
    assert drive_op(dynamic, SESSION_SCRIPT) == expected


@pytest.mark.parametrize("windower", [win.SessionWindower(3 * SECOND), win.DynamicSessionWindower(three_seconds)])
def test_aggregations_without_merger_are_refused_for_merging_windowers(windower: Any) -> None:
    flow = Dataflow("df")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([(0, 1)])), lambda _v: "k")
    no_merge = win.Aggregation(lambda: 0, lambda acc, v: acc + v[1])
    name = type(windower).__name__
    with pytest.raises(ValueError, match=rf"^step 'df\.agg': {name} merges sessions, but aggregations \['n'\]"):
        win.aggregate_window("agg", keyed, flow_clock(), windower, {"n": no_merge})


# Whole flows on Spark.


def test_hopping_mean_with_early_and_final_panes_on_spark() -> None:
    readings = [("k", (s, v)) for s, v in [(0, 10), (4, 20), (7, 30), (12, 40)]]
    flow = Dataflow("hop")
    inp = op.input("inp", flow, TestingSource(readings))
    means = win.mean_window("mean", inp, flow_clock(), HOPPING, number, emit="current_and_final")
    got: List[Any] = []
    op.output("out", means.panes, TestingSink(got))
    run_main(flow)
    assert sorted((w, p.index, p.timing, p.value) for _k, (w, p) in got) == [
        (-1, 0, "early", 10.0),
        (-1, 1, "early", 15.0),
        (-1, 2, "on_time", 15.0),
        (0, 0, "early", 10.0),
        (0, 1, "early", 15.0),
        (0, 2, "early", 20.0),
        (0, 3, "on_time", 20.0),
        (1, 0, "early", 30.0),
        (1, 1, "early", 35.0),
        (1, 2, "on_time", 35.0),
        (2, 0, "early", 40.0),
        (2, 1, "on_time", 40.0),
    ]


DYNAMIC_LATE_INPUT = [
    ("a", (0, 1, 1)),
    ("b", (0, 1, 1)),
    ("a", (5, 2, 1)),
    ("b", (10.9, 2, 0)),
    ("a", (3, 4, 2)),
    ("b", (0.5, 4, 0)),
    ("a", (0.5, 8, 0)),
    ("b", (11.1, 8, 0)),
    ("a", (2.5, 16, 0)),
    ("b", (0.6, 16, 0)),
]
"""`a` is the own-gap example above; `b`'s first session (reach 1 s) is kept until 11 s."""


def test_dynamic_sessions_with_lateness_on_spark() -> None:
    flow = Dataflow("dyn")
    up = op.input("inp", flow, TestingSource(DYNAMIC_LATE_INPUT))
    outputs: Outputs = {}
    sums = win.sum_window("sum", up, flow_clock(), DYNAMIC, number, allowed_lateness=10 * SECOND)
    sink_all(outputs, "sum", sums)
    run_main(flow)
    assert by_key(outputs["sum.down"]) == {
        "a": [(0, 1), (0, 9), (2, 16), (1, 6)],
        "b": [(0, 1), (0, 5), (1, 2), (2, 8)],
    }
    assert {k: [(w, p.timing, p.index) for w, p in ps] for k, ps in by_key(outputs["sum.panes"]).items()} == {
        "a": [(0, "on_time", 0), (0, "late", 1), (2, "late", 0), (1, "on_time", 0)],
        "b": [(0, "on_time", 0), (0, "late", 1), (1, "on_time", 0), (2, "on_time", 0)],
    }
    assert by_key(outputs["sum.late"]) == {"b": [(-1, (0.6, 16, 0))]}
    assert {k: [(w, m.open_time, m.close_time) for w, m in ms] for k, ms in by_key(outputs["sum.meta"]).items()} == {
        "a": [(0, sec(0), sec(0)), (0, sec(0), sec(0.5)), (2, sec(2.5), sec(2.5)), (1, sec(3), sec(5))],
        "b": [(0, sec(0), sec(0)), (0, sec(0), sec(0.5)), (1, sec(10.9), sec(10.9)), (2, sec(11.1), sec(11.1))],
    }
