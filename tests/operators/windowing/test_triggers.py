"""Triggers: `CountTrigger`, `ProcessingTimeTrigger`, `PredicateTrigger`, and purging.

After Flink's windows docs ("Triggers"): a `CountTrigger` fires once the
number of elements in a window reaches the given count; a `PurgingTrigger`
turns a trigger into a purging one (FIRE_AND_PURGE: the window's contents
are cleared after each fire).  In flowspark purging is `purge=True` on the
trigger, and the window still emits when it closes (unless purged with
nothing since).  Trigger state (counts, next fire) is in the key's
snapshot: every per-key test rebuilds the logic from a pickle after each
call.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import (
    SYSTEM_START,
    Outputs,
    by_key,
    downs,
    drive_op,
    events,
    flow_clock,
    logic_builder,
    on_system_clock,
    panes,
    payload,
    run,
    sec,
    sink_all,
    summing,
)

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource, run_main

BIG = win.TumblingWindower(timedelta(seconds=100), ALIGN)


SEVEN = [[(i, i)] for i in range(1, 8)] + ["eof"]
"""Seven values, 1 to 7, one per batch, then end of input (which closes the window)."""


def test_flink_count_trigger_fires_every_count_values() -> None:
    records = drive_op(summing(BIG, trigger=win.CountTrigger(3)), SEVEN)
    assert panes(records) == [
        (0, 6, "early", 0, False),  # 1 + 2 + 3
        (0, 21, "early", 1, False),  # ... + 4 + 5 + 6
        (0, 28, "on_time", 2, True),  # all seven, when the window closes
    ]


def test_flink_purging_count_trigger_fires_and_purges() -> None:
    records = drive_op(summing(BIG, trigger=win.CountTrigger(3, purge=True)), SEVEN)
    assert panes(records) == [(0, 6, "early", 0, False), (0, 15, "early", 1, False), (0, 7, "on_time", 2, True)]
    # Purged with nothing taken in since: the close emits nothing, but still reports metadata.
    six = drive_op(summing(BIG, trigger=win.CountTrigger(3, purge=True)), SEVEN[:6] + ["eof"])
    assert panes(six) == [(0, 6, "early", 0, False), (0, 15, "early", 1, False)]
    assert events(six)[-1] == ("meta", 0, (sec(0), sec(100)))


def test_count_survives_snapshots_and_counts_per_window() -> None:
    script: List[Any] = [[(1, 1)], [(101, 10)], [(2, 2)], [(102, 20)], "eof"]
    # Unordered, so 2 s is still taken in by window 0 after 101 s opened window 1.
    records = drive_op(summing(BIG, trigger=win.CountTrigger(2), ordered=False), script, wait=timedelta(seconds=500))
    assert panes(records) == [
        (0, 3, "early", 0, False),
        (1, 30, "early", 0, False),
        (0, 3, "on_time", 1, True),
        (1, 30, "on_time", 1, True),
    ]


def test_predicate_trigger_fires_after_a_matching_value() -> None:
    def build(purge: bool) -> Any:
        def build_op(up: Any, clock: Any, _getter: Any) -> Any:
            trigger = win.PredicateTrigger(lambda v: v[1].endswith("!"), purge=purge)
            return win.collect_window("win", up, clock, BIG, trigger=trigger)

        return build_op

    script: List[Any] = [[(1, "a"), (2, "b!"), (3, "c"), (4, "d!"), (5, "e")], "eof"]
    kept = downs(drive_op(build(False), script))
    assert [v for _s, _w, v in kept] == [
        [(1, "a"), (2, "b!")],
        [(1, "a"), (2, "b!"), (3, "c"), (4, "d!")],
        [(1, "a"), (2, "b!"), (3, "c"), (4, "d!"), (5, "e")],
    ]
    purged = downs(drive_op(build(True), script))
    assert [v for _s, _w, v in purged] == [[(1, "a"), (2, "b!")], [(3, "c"), (4, "d!")], [(5, "e")]]


def test_trigger_and_current_emit_once_per_value() -> None:
    records = drive_op(
        summing(BIG, trigger=win.CountTrigger(2, purge=True), emit="current"), [[(1, 1)], [(2, 2)], [(3, 3)], "eof"]
    )
    # After 1: current (1).  After 2: the trigger fires (3) and purges.  After 3: current (3).
    assert panes(records) == [(0, 1, "early", 0, False), (0, 3, "early", 1, False), (0, 3, "early", 2, False)]


@pytest.mark.parametrize("purge", [False, True])
def test_processing_time_trigger(purge: bool) -> None:
    """Fire `interval` of system time after the first value not yet fired for; combine wake-ups."""

    def build(up: Any, clock: Any, getter: Any) -> Any:
        trigger = win.ProcessingTimeTrigger(timedelta(seconds=5), purge=purge, now_getter=getter.get)
        tumbling = win.TumblingWindower(timedelta(seconds=10), ALIGN)
        return win.sum_window("win", up, clock, tumbling, payload, False, trigger=trigger)

    builder, getter, _out = logic_builder(build, to_system_utc=on_system_clock)
    at = SYSTEM_START
    script: List[Any] = [
        [(1, 1)],  # system time +0 s; fire due at +5 s; the window closes at +10 s
        timedelta(seconds=3),
        [(4, 2)],  # +3 s (the watermark is 4 s): the fire is still due at +5 s
        timedelta(seconds=2),
        "notify",  # +5 s: fire
        timedelta(seconds=1),
        "notify",  # +6 s: nothing new, nothing to fire; next wake-up: the window's close
        [(7.5, 4)],  # a new value: fire due at +11 s, but the close (+10 s) comes first
        timedelta(seconds=4),
        "notify",  # +10 s: the watermark (7.5 s + 4 s) passes 10 s, the window closes
    ]
    records = run(builder, getter, script)
    second = timedelta(seconds=1)
    assert [a for _e, a in records] == [
        at + 5 * second,
        at + 5 * second,
        at + 10 * second,
        at + 10 * second,
        at + 10 * second,
        None,
    ]
    assert panes(records) == [(0, 3, "early", 0, False), (0, 4 if purge else 7, "on_time", 1, True)]
    assert [evs for evs, _a in records][3] == []


def test_session_merges_add_up_trigger_counts() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.sum_window("win", up, clock, gap, payload, False, trigger=win.CountTrigger(3))

    # 0 s and 6 s open two sessions (one value each); 3 s bridges them.  As in Flink, the
    # sessions merge first (counts 1 + 1), then the merged session takes 3 s (count 3) and
    # fires with all three values; 4 s starts the count again.
    records = drive_op(build, [[(0, 1), (6, 2)], [(3, 4)], [(4, 8)], "eof"], wait=timedelta(seconds=60))
    assert panes(records) == [(0, 7, "early", 0, False), (0, 15, "on_time", 1, True)]


@pytest.mark.parametrize(
    ("trigger", "error", "message"),
    [
        ("every 3", TypeError, r"`trigger` must be a `CountTrigger`, `ProcessingTimeTrigger` or `PredicateTrigger`"),
        (win.CountTrigger(0), ValueError, r"`CountTrigger.count` must be a positive `int`; got 0"),
        (win.CountTrigger(2.5), ValueError, r"`CountTrigger.count` must be a positive `int`; got 2\.5"),  # type: ignore[arg-type]
        (win.CountTrigger(2, purge="yes"), ValueError, r"`CountTrigger.purge` must be a `bool`"),  # type: ignore[arg-type]
        (
            win.ProcessingTimeTrigger(timedelta(0)),
            ValueError,
            r"`ProcessingTimeTrigger.interval` must be a positive `timedelta`",
        ),
        (win.PredicateTrigger(5), ValueError, r"`PredicateTrigger.predicate` must be callable"),  # type: ignore[arg-type]
    ],
)
def test_bad_triggers_fail_naming_the_step(trigger: Any, error: type, message: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(error, match=r"^step 'df\.win\.reduce_window\.fold_window\.window': " + message):
        win.max_window("win", up, win.SystemClock(), BIG, trigger=trigger)


# A whole flow through Spark: Flink's purging count trigger, per key.

TRIGGER_INPUT = [("a", (i, f"a{i}")) for i in range(1, 6)] + [("b", (i, f"b{i}")) for i in range(1, 5)]


def build_trigger_flow() -> Tuple[Dataflow, Outputs]:
    flow = Dataflow("triggers")
    up = op.input("inp", flow, TestingSource(TRIGGER_INPUT, batch_size=2))
    outputs: Outputs = {}
    trigger = win.CountTrigger(2, purge=True)
    sink_all(outputs, "batches", win.collect_window("batches", up, flow_clock(), BIG, trigger=trigger))
    return flow, outputs


def test_purging_count_trigger_flow() -> None:
    flow, outputs = build_trigger_flow()
    run_main(flow)
    got = by_key(outputs["batches.down"])
    assert got["a"] == [(0, [(1, "a1"), (2, "a2")]), (0, [(3, "a3"), (4, "a4")]), (0, [(5, "a5")])]
    assert got["b"] == [(0, [(1, "b1"), (2, "b2")]), (0, [(3, "b3"), (4, "b4")])]
    timings = [(p.timing, p.index) for _w, p in by_key(outputs["batches.panes"])["a"]]
    assert timings == [("early", 0), ("early", 1), ("on_time", 2)]
    assert [w for w, _m in by_key(outputs["batches.meta"])["b"]] == [0]
