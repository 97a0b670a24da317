"""`emit="final" | "current" | "current_and_final"` and the `panes` stream.

Expected values are Quix Streams' documented examples (docs/windowing.md,
"Time-based Tumbling Windows", "Time-based Hopping Windows", "Emitting
results" and "Closing strategies"), with Quix's millisecond timestamps
written as seconds.  Every per-key test rebuilds the logic from a pickled
snapshot after each call.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List, Optional, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import (
    Outputs,
    by_key,
    downs,
    drive_op,
    events,
    flow_clock,
    logic_builder,
    panes,
    payload,
    run,
    sec,
    sink_all,
)
from support.oracle import core_arg, core_steps

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.firing import FiringWindowConfig
from flowspark.operators._windowing.per_key import WindowConfig
from flowspark.testing import TestingSource, run_main

HOUR = timedelta(hours=1)


def tumbling(length: timedelta) -> win.TumblingWindower:
    return win.TumblingWindower(length, ALIGN)


# Quix Streams' tables.


@pytest.mark.parametrize("operator", ["mean_window", "aggregate_window"])
def test_quix_tumbling_mean_current(operator: str) -> None:
    """Quix: 1 h tumbling windows, `Mean("temperature")`, `.current()`: 30, 29.5, 29."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        if operator == "mean_window":
            return win.mean_window("win", up, clock, tumbling(HOUR), payload, emit="current")
        aggs = {"avg_temperature": win.Mean(payload)}
        return win.aggregate_window("win", up, clock, tumbling(HOUR), aggs, emit="current")

    script: List[Any] = [[(0.1, 30)], [(0.2, 29)], [(0.3, 28)], "eof"]
    got = [value for _s, _w, value in downs(drive_op(build, script))]
    expected = [30, 29.5, 29]
    if operator == "aggregate_window":
        assert got == [{"avg_temperature": v} for v in expected]
    else:
        assert got == expected
    # `.current()` emits nothing extra at close; the metadata still comes.
    records = drive_op(build, script)
    assert records[-1][0] == [("meta", 0, (sec(0), sec(3600)))]


def test_quix_hopping_mean_current() -> None:
    """Quix: 1 h hopping windows, `Mean`, `.current()`, temperatures 30, 29, 28 at 50 s, 60 s, 62 s.

    The documented table is not self-consistent (a 10-minute step cannot
    yield a window starting at 60000 ms, and that window's first update
    cannot be 30); with a 1-minute step the windows it names exist and the
    means follow from its inputs.  Quix only has windows starting at or
    after the epoch, so the ones before `align_to` (negative ids) are left
    out here.
    """

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        hopping = win.SlidingWindower(HOUR, timedelta(minutes=1), ALIGN)
        return win.mean_window("win", up, clock, hopping, payload, emit="current")

    records = drive_op(build, [[(50, 30)], [(60, 29)], [(62, 28)]])
    got = [(w, v) for _s, w, v in downs(records) if w >= 0]
    assert got == [
        (0, 30),  # start 0
        (0, 29.5),  # start 0
        (1, 29),  # start 60000 (the table says 30)
        (0, 29),  # start 0
        (1, 28.5),  # start 60000
    ]


def test_quix_sum_current_then_final() -> None:
    """Quix "Emitting results": 10 s tumbling sums of 1s, `.current()` and `.final()`."""

    def build(emit: win.EmitMode) -> Any:
        def build_op(up: Any, clock: Any, _getter: Any) -> Any:
            return win.sum_window("win", up, clock, tumbling(timedelta(seconds=10)), payload, emit=emit)

        return build_op

    current = drive_op(build("current"), [[(0.100, 1)], [(0.101, 1)], [(0.102, 1)]])
    assert downs(current) == [("down", 0, 1), ("down", 0, 2), ("down", 0, 3)]

    final_script: List[Any] = [[(0.100, 1)], [(0.101, 1)], [(10.001, 1)]]
    final = drive_op(build("final"), final_script)
    # Nothing, nothing, then {"start": 0, "end": 10000, "value": 2} when time passes the end.
    assert [evs for evs, _at in final] == [[], [], [("down", 0, 2), ("meta", 0, (sec(0), sec(10)))]]

    both = drive_op(build("current_and_final"), final_script)
    assert panes(both) == [
        (0, 1, "early", 0, False),
        (0, 2, "early", 1, False),
        (1, 1, "early", 0, False),
        (0, 2, "on_time", 2, True),
    ]


def test_final_with_panes_marks_on_time_and_last() -> None:
    """`emit="final"` plus a feature that builds panes: one on-time pane per window, the last one."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, tumbling(timedelta(seconds=10)), payload, trigger=win.CountTrigger(100))

    records = drive_op(build, [[(1, 1), (2, 2)], [(12, 5)], "eof"])
    assert panes(records) == [(0, 3, "on_time", 0, True), (1, 5, "on_time", 0, True)]


# What "the running result" is.


def test_current_results_are_copies() -> None:
    """A collected list emitted early is never changed by values the window takes in later."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window("win", up, clock, tumbling(timedelta(seconds=10)), emit="current_and_final")

    builder, getter, _out = logic_builder(build)
    logic = builder(None)
    first, _ = logic.on_batch([(1, "a")])
    second, _ = logic.on_batch([(2, "b"), (3, "c")])
    closing, _ = logic.on_eof()
    assert [e.value for e in first] == [[(1, "a")]]
    assert [e.value for e in second] == [[(1, "a"), (2, "b")], [(1, "a"), (2, "b"), (3, "c")]]
    assert closing[0].value == [(1, "a"), (2, "b"), (3, "c")]
    assert closing[0].pane.timing == "on_time"


class ClosingTotal(win.WindowLogic[Any, Any, Tuple[int, bool]]):
    """Emits `("seen", amount)` on each value and `("total", n)` on close; remembers being closed."""

    def __init__(self, state: Optional[Tuple[int, bool]]) -> None:
        self.total, self.closed = state or (0, False)

    def on_value(self, value: Any) -> List[Any]:
        self.total += value[1]
        return [("seen", value[1])]

    def on_merge(self, original: "ClosingTotal") -> List[Any]:
        self.total += original.total
        return []

    def on_close(self) -> List[Any]:
        self.closed = True
        return [("total", self.total)]

    def snapshot(self) -> Tuple[int, bool]:
        return (self.total, self.closed)


def test_custom_logic_current_is_on_close_of_a_copy() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.window("win", up, clock, tumbling(timedelta(seconds=10)), ClosingTotal, emit="current")

    builder, getter, _out = logic_builder(build)
    records = run(builder, getter, [[(1, 5)], [(2, 7)]])
    # Its own on_value items pass through; then the running result: on_close of a copy.
    assert panes(records) == [
        (0, ("seen", 5), "early", 0, False),
        (0, ("total", 5), "early", 1, False),
        (0, ("seen", 7), "early", 2, False),
        (0, ("total", 12), "early", 3, False),
    ]
    logic = builder(None)
    logic.on_batch([(1, 5)])
    assert logic.snapshot().logic_states == {0: (5, False)}, "the live logic was closed"


def test_session_merge_emits_the_merged_running_result_once() -> None:
    """Unordered sessions: the bridging value merges the two first (as in Flink), then emits the merged result once."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.collect_window("win", up, clock, gap, list, False, emit="current")

    records = drive_op(build, [[(0, "a"), (6, "b"), (3, "bridge")], "eof"], wait=timedelta(seconds=30))
    assert downs(records) == [
        ("down", 0, [(0, "a")]),
        ("down", 1, [(6, "b")]),
        ("down", 0, [(0, "a"), (6, "b"), (3, "bridge")]),
    ]
    assert [e for e in events(records) if e[0] == "meta"] == [("meta", 0, (sec(0), sec(6)))]


# Wiring: nothing changes unless a feature is used.


def _step_ids(flow: Dataflow) -> List[str]:
    return [s.step_id for s in core_steps(flow)]


def test_default_keeps_bytewax_wiring_and_fast_path() -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    out = win.collect_window("win", up, win.SystemClock(), tumbling(timedelta(seconds=10)))
    assert not any("unwrap_panes" in s for s in _step_ids(flow))
    config = core_arg(flow, "df.win.fold_window.window.stateful_batch", "builder")
    assert type(config) is WindowConfig and config.merges_batches
    with pytest.raises(AttributeError, match=r"step 'df\.win\.fold_window\.window' has no `panes` stream: .*emit="):
        _ = out.panes
    assert not hasattr(out, "panes")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"emit": "current"},
        {"emit": "current_and_final"},
        {"allowed_lateness": timedelta(seconds=1)},
        {"trigger": win.CountTrigger(2)},
    ],
)
def test_features_add_the_panes_step_and_leave_the_fast_path(kwargs: Any) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    out = win.count_window("win", up, win.SystemClock(), tumbling(timedelta(seconds=10)), str, **kwargs)
    assert "df.win.sum.window.unwrap_panes.flat_map_value.flat_map.flat_map_batch" in _step_ids(flow)
    assert out.panes is not None
    config = core_arg(flow, "df.win.sum.window.stateful_batch", "builder")
    assert type(config) is FiringWindowConfig and not config.merges_batches


@pytest.mark.parametrize("emit", ["sometimes", "Final", None, 1])
def test_unknown_emit_mode_fails_naming_the_step(emit: Any) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(ValueError, match=r"^step 'df\.win\.fold_window\.window': unknown `emit` mode"):
        win.collect_window("win", up, win.SystemClock(), tumbling(timedelta(seconds=10)), emit=emit)
    with pytest.raises(ValueError, match=r"^step 'df\.w2\.window': unknown `emit` mode .*'current_and_final'"):
        win.sum_window("w2", up, win.SystemClock(), tumbling(timedelta(seconds=10)), emit=emit)


# A whole flow through Spark: Quix's "closing strategies" example, per key.

QUIX_KEYS = [
    ("A", (0.100, 1)),
    ("B", (0.101, 2)),
    ("C", (0.105, 3)),
    ("B", (10.100, 2)),
    ("A", (8.000, 1)),
    ("A", (10.001, 1)),
]


def build_quix_keys() -> Tuple[Dataflow, Outputs]:
    flow = Dataflow("quix_keys")
    up = op.input("inp", flow, TestingSource(QUIX_KEYS))
    outputs: Outputs = {}
    windower = tumbling(timedelta(seconds=10))
    sink_all(outputs, "final", win.sum_window("final", up, flow_clock(), windower, payload), ("down", "meta"))
    sink_all(outputs, "both", win.sum_window("both", up, flow_clock(), windower, payload, emit="current_and_final"))
    return flow, outputs


def test_quix_closing_strategy_key_flow() -> None:
    """Each key's own time closes its windows: B's at 10.1 s, A's at 10.001 s (Quix: value 2 each).

    Quix never closes C's window (no later C message); end of input does here.
    """
    flow, outputs = build_quix_keys()
    run_main(flow)
    assert by_key(outputs["final.down"]) == {"A": [(0, 2), (1, 1)], "B": [(0, 2), (1, 2)], "C": [(0, 3)]}
    assert by_key(outputs["both.down"])["A"] == [(0, 1), (0, 2), (1, 1), (0, 2), (1, 1)]
    a_panes = [(w, p.value, p.timing, p.index) for w, p in by_key(outputs["both.panes"])["A"]]
    assert a_panes == [
        (0, 1, "early", 0),
        (0, 2, "early", 1),
        (1, 1, "early", 0),
        (0, 2, "on_time", 2),
        (1, 1, "on_time", 1),
    ]
    assert [w for w, _meta in by_key(outputs["both.meta"])["B"]] == [0, 1]
