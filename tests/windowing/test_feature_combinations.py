"""The new windowers together with emit modes, allowed lateness, triggers and aggregations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List

import pytest
from firing_helpers import ALIGN, drive_op, sec

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSink, TestingSource, run_main

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


def three_seconds(_value: Any) -> timedelta:
    return timedelta(seconds=3)


def test_dynamic_sessions_with_a_constant_gap_refire_exactly_as_sessions() -> None:
    def sessions(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.collect_window("win", up, clock, gap, allowed_lateness=timedelta(seconds=10))

    def dynamic(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.DynamicSessionWindower(three_seconds)
        return win.collect_window("win", up, clock, gap, allowed_lateness=timedelta(seconds=10))

    expected = drive_op(sessions, SESSION_SCRIPT)
    assert any(event[-1][0] == "late" for events, _ in expected for event in events if event[0] == "down")
    assert drive_op(dynamic, SESSION_SCRIPT) == expected


def gap_of(value: Any) -> timedelta:
    return timedelta(seconds=value[2])


def test_dynamic_sessions_place_late_values_by_their_own_gap() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window(
            "win", up, clock, win.DynamicSessionWindower(gap_of), allowed_lateness=timedelta(seconds=10)
        )

    records = drive_op(build, [[(0, "a", 1)], [(5, "b", 1)], [(3, "c", 2)], [(0.5, "d", 0)], [(2.5, "e", 0)], "eof"])
    assert [evs for evs, _at in records] == [
        [],
        # 5 s: session 0 (reach 1 s) closes and is kept until 11 s.
        [("down", 0, [(0, "a", 1)], ("on_time", 0, False)), ("meta", 0, (sec(0), sec(0)))],
        # 3 s with a 2 s gap reaches 5 s: it touches the open session 1 and joins it.
        [],
        # 0.5 s with no gap lies in kept session 0: a late firing.
        [("down", 0, [(0, "a", 1), (0.5, "d", 0)], ("late", 1, False))],
        # 2.5 s with no gap touches neither session.
        [("late", -1, (2.5, "e", 0))],
        [("down", 1, [(5, "b", 1), (3, "c", 2)], ("on_time", 0, True)), ("meta", 1, (sec(3), sec(5)))],
    ]


def test_count_windows_refuse_allowed_lateness_naming_the_step() -> None:
    flow = Dataflow("df")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([(0, "a")])), lambda _v: "k")
    clock = win.EventClock(lambda v: sec(v[0]), wait_for_system_duration=timedelta(0))
    with pytest.raises(ValueError, match=r"df\.late_count.*allowed_lateness"):
        win.collect_window("late_count", keyed, clock, win.CountTumblingWindower(2), allowed_lateness=timedelta(1))


def test_count_windows_with_early_results_and_a_trigger() -> None:
    def current(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window("win", up, clock, win.CountTumblingWindower(3), emit="current")

    def triggered(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window("win", up, clock, win.CountHoppingWindower(4, 2), trigger=win.CountTrigger(2))

    values = [(i, str(i)) for i in range(5)]
    early = [e for evs, _ in drive_op(current, [values, "eof"]) for e in evs if e[0] == "down"]
    assert [(e[1], [v for _s, v in e[2]], e[3][0]) for e in early] == [
        (0, ["0"], "early"), (0, ["0", "1"], "early"), (0, ["0", "1", "2"], "early"),
        (1, ["3"], "early"), (1, ["3", "4"], "early"),
    ]
    fired = [e for evs, _ in drive_op(triggered, [values, "eof"]) for e in evs if e[0] == "down"]
    assert [(e[1], [v for _s, v in e[2]], e[3][0]) for e in fired] == [
        (0, ["0", "1"], "early"),
        (0, ["0", "1", "2", "3"], "early"),
        (1, ["2", "3"], "early"),
        (0, ["0", "1", "2", "3"], "on_time"),
        (1, ["2", "3", "4"], "on_time"),
        (2, ["4"], "on_time"),
    ]


def test_aggregations_without_merger_are_refused_for_dynamic_sessions() -> None:
    flow = Dataflow("df")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([(0, 1)])), lambda _v: "k")
    clock = win.EventClock(lambda v: sec(v[0]), wait_for_system_duration=timedelta(0))
    no_merge = win.Aggregation(lambda: 0, lambda acc, v: acc + v[1])
    with pytest.raises(ValueError, match=r"df\.agg.*merger"):
        win.aggregate_window("agg", keyed, clock, win.DynamicSessionWindower(three_seconds), {"n": no_merge})


def test_hopping_mean_with_early_and_final_panes_on_spark() -> None:
    readings = [("k", (s, v)) for s, v in [(0, 10), (4, 20), (7, 30), (12, 40)]]
    flow = Dataflow("hop")
    inp = op.input("inp", flow, TestingSource(readings))
    clock = win.EventClock(lambda v: sec(v[0]), wait_for_system_duration=timedelta(0))
    hopping = win.HoppingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    means = win.mean_window("mean", inp, clock, hopping, lambda v: v[1], emit="current_and_final")
    panes: List[Any] = []
    op.output("out", means.panes, TestingSink(panes))
    run_main(flow)
    got = sorted((w, p.index, p.timing, p.value) for _k, (w, p) in panes)
    assert got == [
        (-1, 0, "early", 10.0), (-1, 1, "early", 15.0), (-1, 2, "on_time", 15.0),
        (0, 0, "early", 10.0), (0, 1, "early", 15.0), (0, 2, "early", 20.0), (0, 3, "on_time", 20.0),
        (1, 0, "early", 30.0), (1, 1, "early", 35.0), (1, 2, "on_time", 35.0),
        (2, 0, "early", 40.0), (2, 1, "on_time", 40.0),
    ]
