"""`allowed_lateness`: closed windows are kept for late values, which re-fire them.

The main example is Flink's (windows docs, "Allowed Lateness", and e.g.
Aiven's Flink guide): a window from 15:00 to 15:10 with one minute of
allowed lateness still takes values that arrive while the watermark is
between 15:10 and 15:11; each such value fires the window again with the
corrected result ("late firing"), to be treated as an update of the earlier
one; once the watermark passes 15:11 the window's state is dropped and later
values are late.  Timestamps here are seconds after 15:00 (`sec`).
"""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import (
    Outputs,
    by_key,
    drive_op,
    events,
    flow_clock,
    logic_builder,
    panes,
    payload,
    run,
    sec,
    sink_all,
    summing,
)
from test_window_ops import random_script

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.firing import KeptWindow
from flowspark.operators._windowing.per_key import KeySnapshot
from flowspark.testing import TestingSource, run_main

TEN_MINUTES = timedelta(minutes=10)
MINUTE = timedelta(minutes=1)


def m(minutes: float) -> float:
    """Seconds after 15:00 of 15:`minutes`."""
    return minutes * 60


FLINK_SCRIPT: List[Any] = [
    [(m(1), 1), (m(9), 2)],  # 15:01 and 15:09: window [15:00, 15:10)
    [(m(10.5), 10)],  # 15:10:30: the watermark passes 15:10, the window fires on time
    [(m(5), 4)],  # 15:05 arrives late, within the lateness: a late firing
    [(m(11.5), 20)],  # 15:11:30: the watermark passes 15:11, the window's state is dropped
    [(m(6), 8)],  # 15:06: too late now
    "eof",
]


def test_flink_allowed_lateness_example() -> None:
    records = drive_op(summing(win.TumblingWindower(TEN_MINUTES, ALIGN), allowed_lateness=MINUTE), FLINK_SCRIPT)
    assert [evs for evs, _at in records] == [
        [],
        [("down", 0, 3, ("on_time", 0, False)), ("meta", 0, (sec(0), sec(m(10))))],
        [("down", 0, 7, ("late", 1, False))],
        [],
        [("late", 0, (m(6), 8))],
        [("down", 1, 30, ("on_time", 0, True)), ("meta", 1, (sec(m(10)), sec(m(20))))],
    ]
    # While the window is kept, the key wakes up when it is to be dropped (15:11).
    assert [at for _evs, at in records[:4]] == [sec(m(10)), sec(m(11)), sec(m(11)), sec(m(20))]


def test_zero_lateness_is_bytewax() -> None:
    """Without lateness the same script sends 15:05 to `late`, and nothing is kept."""
    records = drive_op(summing(win.TumblingWindower(TEN_MINUTES, ALIGN), allowed_lateness=timedelta(0)), FLINK_SCRIPT)
    assert events(records) == [
        ("down", 0, 3),
        ("meta", 0, (sec(0), sec(m(10)))),
        ("late", 0, (m(5), 4)),
        ("late", 0, (m(6), 8)),
        ("down", 1, 30),
        ("meta", 1, (sec(m(10)), sec(m(20)))),
    ]


def test_lateness_is_judged_per_window() -> None:
    """As in Flink: a value behind the watermark still joins its window while that is open."""
    tumbling = win.TumblingWindower(timedelta(seconds=10), ALIGN)
    script: List[Any] = [[(9, 1)], [(12, 1)], [(11, 5)], [(3, 2)], "eof"]
    lenient = drive_op(summing(tumbling, allowed_lateness=timedelta(seconds=5)), script)
    assert panes(lenient) == [(0, 1, "on_time", 0, False), (0, 3, "late", 1, False), (1, 6, "on_time", 0, True)]
    strict = drive_op(summing(tumbling, allowed_lateness=timedelta(0)), script)
    assert [e for e in events(strict) if e[0] == "late"] == [("late", 1, (11, 5)), ("late", 0, (3, 2))]


def test_sliding_windows_refire_each_kept_window() -> None:
    sliding = win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    script: List[Any] = [[(6, 1)], [(12, 1)], [(7, 10)], [(40, 0)], [(8, 100)]]
    records = drive_op(summing(sliding, allowed_lateness=timedelta(seconds=3)), script)
    got = [p for p in panes(records) if p[0] in (0, 1)]
    # 12 s closes window 0 ([0, 10)) only; 7 s is late for it (kept until 13 s) and joins
    # window 1 ([5, 15)), which is still open.  40 s drops window 0 and closes window 1,
    # already past its lateness, so it is released at once.
    assert got == [(0, 1, "on_time", 0, False), (0, 11, "late", 1, False), (1, 12, "on_time", 0, True)]
    assert ("late", 0, (8, 100)) in events(records) and ("late", 1, (8, 100)) in events(records)


def test_sessions_refire_within_their_span() -> None:
    """Kept sessions take late values within `gap` of their span; open ones as if on time."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.collect_window("win", up, clock, gap, allowed_lateness=timedelta(seconds=10))

    script: List[Any] = [
        [(0, "a"), (2, "b")],
        [(10, "c")],
        [(4, "late-a")],
        [(8, "late-c")],
        [(-10, "lost")],
        [(16, "d")],
        [(1, "still-kept")],
        [(17.5, "e")],
        [(1, "gone")],
        "eof",
    ]
    records = drive_op(build, script)
    assert [evs for evs, _at in records] == [
        [],
        # 10 s: session 0 closes (its last value + gap < watermark) and is kept until 2 + 3 + 10.
        [("down", 0, [(0, "a"), (2, "b")], ("on_time", 0, False)), ("meta", 0, (sec(0), sec(2)))],
        # 4 s is within the gap after session 0: it stretches the kept session (a late firing,
        # and its new metadata; it is now kept until 4 + 3 + 10).
        [("down", 0, [(0, "a"), (2, "b"), (4, "late-a")], ("late", 1, False)), ("meta", 0, (sec(0), sec(4)))],
        # 8 s is behind the watermark but within the gap before the open session 1: it joins it.
        [],
        [("late", -1, (-10, "lost"))],
        # 16 s: session 1 closes (kept until 23 s); session 0 is still kept (up to 17 s).
        # (A late value is applied when it arrives, after the values before it.)
        [("down", 1, [(10, "c"), (8, "late-c")], ("on_time", 0, False)), ("meta", 1, (sec(8), sec(10)))],
        [("down", 0, [(0, "a"), (2, "b"), (4, "late-a"), (1, "still-kept")], ("late", 2, False))],
        # 17.5 s drops session 0 (kept while the watermark is at most 17 s).
        [],
        [("late", -1, (1, "gone"))],
        [("down", 2, [(16, "d"), (17.5, "e")], ("on_time", 0, True)), ("meta", 2, (sec(16), sec(17.5)))],
    ]


def final_snapshot(build: Any, script: List[Any]) -> Any:
    """Drive one key through `script` (rebuilding it from a pickle after every call); its last snapshot."""
    builder, getter, _out = logic_builder(build)
    logic = builder(None)
    for step in script:
        if isinstance(step, timedelta):
            getter.advance(step)
            continue
        if isinstance(step, list):
            logic.on_batch(step)
        else:
            logic.on_notify()
        logic = builder(pickle.loads(pickle.dumps(logic.snapshot())))
    return logic.snapshot()


def offline_session_sums(values: List[Tuple[float, int]], gap: timedelta) -> List[int]:
    """The sums of the sessions all the values would form if they came in timestamp order."""
    sessions: List[List[Tuple[float, int]]] = []
    for value in sorted(values):
        if sessions and sec(value[0]) - sec(sessions[-1][-1][0]) <= gap:
            sessions[-1].append(value)
        else:
            sessions.append([value])
    return sorted(sum(n for _t, n in session) for session in sessions)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("dynamic", [False, True])
def test_late_values_end_in_the_sessions_they_would_have_joined_on_time(
    seed: int, ordered: bool, dynamic: bool
) -> None:
    """With a lateness longer than the input, late values create, stretch and merge sessions, open or kept.

    Whatever the arrival order, the open and kept sessions then hold exactly the
    sessions all values form in timestamp order, and nothing is late.
    """
    gap = timedelta(seconds=3)
    windower = win.DynamicSessionWindower(lambda _v: gap) if dynamic else win.SessionWindower(gap)

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, windower, payload, ordered, allowed_lateness=timedelta(days=1))

    script = [step for step in random_script(seed) if step != "eof"]
    values = [value for step in script if isinstance(step, list) for value in step]
    snap = final_snapshot(build, script)
    assert snap.queue == [], "the clock has no wait: every value is applied"
    held = sorted([*snap.logic_states.values(), *(k.state for k in snap.kept.values())])
    assert held == offline_session_sums(values, gap)
    assert not [e for e in events(drive_op(build, script)) if e[0] == "late"]


def test_kept_windows_are_snapshotted_woken_for_and_then_dropped() -> None:
    build = summing(win.TumblingWindower(timedelta(seconds=10), ALIGN), allowed_lateness=timedelta(seconds=120))
    builder, getter, _out = logic_builder(build)
    records = run(builder, getter, [[(9, 1)], timedelta(seconds=60), "notify"])
    # System time moved the watermark to 69 s: window 0 closed on time and is kept until 130 s.
    assert records[-1] == ([("down", 0, 1, ("on_time", 0, False)), ("meta", 0, (sec(0), sec(10)))], sec(130))
    logic = builder(None)
    logic.on_batch([(9, 1)])
    getter.advance(timedelta(seconds=60))
    logic.on_notify()
    snap = pickle.loads(pickle.dumps(logic.snapshot()))
    assert snap.logic_states == {}
    (kept,) = snap.kept.values()
    assert isinstance(kept, KeptWindow) and kept.state == 1 and kept.purge_at == sec(130) and kept.book.panes == 1
    # A late value re-fires it from the snapshot.
    logic = builder(snap)
    fired, _ = logic.on_batch([(5, 2)])
    assert [(e.value, e.pane.timing, e.pane.index) for e in fired] == [(3, "late", 1)]
    # Once system time takes the watermark past 130 s it is dropped, silently: a tombstone is left.
    getter.advance(timedelta(seconds=61))
    dropped, discard = logic.on_notify()
    assert (list(dropped), discard) == ([], False)
    snap = logic.snapshot()
    assert (snap.kept, snap.logic_states, snap.windower_state.opened) == ({}, {}, {})
    assert logic.notify_at() is None
    straggler, _ = logic.on_batch([(6, 4)])
    assert [type(e).__name__ for e in straggler] == ["Late"]


def test_a_late_value_meets_the_windows_as_a_batch_of_its_own_would() -> None:
    """15:10:30 and the late 15:05 in one batch: the window closes on time first, then re-fires."""
    build = summing(win.TumblingWindower(TEN_MINUTES, ALIGN), allowed_lateness=MINUTE)
    one_batch = [FLINK_SCRIPT[0], FLINK_SCRIPT[1] + FLINK_SCRIPT[2], *FLINK_SCRIPT[3:]]
    assert (
        panes(drive_op(build, one_batch))
        == panes(drive_op(build, FLINK_SCRIPT))
        == [
            (0, 3, "on_time", 0, False),
            (0, 7, "late", 1, False),
            (1, 30, "on_time", 0, True),
        ]
    )


def test_released_at_once_when_the_watermark_is_already_past_the_lateness() -> None:
    records = drive_op(
        summing(win.TumblingWindower(timedelta(seconds=10), ALIGN), allowed_lateness=timedelta(seconds=5)),
        [[(9, 1)], [(30, 1)], [(8, 1)]],
    )
    assert panes(records)[0] == (0, 1, "on_time", 0, True)
    assert ("late", 0, (8, 1)) in events(records)


def test_snapshots_without_the_new_fields_still_load() -> None:
    """A `KeySnapshot` pickled before `books`/`kept` existed rebuilds both kinds of logic."""
    for lateness in (timedelta(0), timedelta(seconds=5)):
        builder, _getter, _out = logic_builder(
            summing(win.TumblingWindower(timedelta(seconds=10), ALIGN), allowed_lateness=lateness)
        )
        logic = builder(None)
        logic.on_batch([(1, 2)])
        snap = logic.snapshot()
        for name in ("books", "kept"):
            object.__delattr__(snap, name)
        old = pickle.loads(pickle.dumps(snap))
        assert "kept" not in vars(old) and isinstance(old, KeySnapshot)
        revived = builder(old)
        closing, _ = revived.on_eof()
        assert [getattr(e, "value", None) for e in closing][0] == 2


@pytest.mark.parametrize("lateness", [timedelta(seconds=-1), 5, None])
def test_bad_lateness_fails_naming_the_step(lateness: Any) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(
        ValueError, match=r"^step 'df\.win\.fold_window\.window': `allowed_lateness` must be a non-negative `timedelta`"
    ):
        win.collect_window(
            "win", up, win.SystemClock(), win.TumblingWindower(TEN_MINUTES, ALIGN), allowed_lateness=lateness
        )


# A whole flow through Spark.

LATE_INPUT = [
    ("a", (m(1), 1)),
    ("b", (m(2), 5)),
    ("a", (m(9), 2)),
    ("a", (m(10.5), 10)),
    ("a", (m(5), 4)),
    ("b", (m(10.2), 1)),
    ("a", (m(11.5), 20)),
    ("b", (m(3), 7)),
    ("a", (m(6), 8)),
    ("b", (m(30), 0)),
    ("b", (m(4), 9)),
]
"""`a` is Flink's example; `b` re-fires once, then its window is dropped."""


def build_late_flow() -> Tuple[Dataflow, Outputs]:
    flow = Dataflow("lateness")
    up = op.input("inp", flow, TestingSource(LATE_INPUT))
    outputs: Outputs = {}
    tumbling = win.TumblingWindower(TEN_MINUTES, ALIGN)
    sink_all(outputs, "sum", win.sum_window("sum", up, flow_clock(), tumbling, payload, allowed_lateness=MINUTE))
    return flow, outputs


def test_allowed_lateness_flow() -> None:
    flow, outputs = build_late_flow()
    run_main(flow)
    assert by_key(outputs["sum.down"]) == {"a": [(0, 3), (0, 7), (1, 30)], "b": [(0, 5), (0, 12), (1, 1), (3, 0)]}
    assert [(w, p.timing, p.index) for w, p in by_key(outputs["sum.panes"])["b"]] == [
        (0, "on_time", 0),
        (0, "late", 1),
        (1, "on_time", 0),
        (3, "on_time", 0),
    ]
    assert by_key(outputs["sum.late"]) == {"a": [(0, (m(6), 8))], "b": [(0, (m(4), 9))]}
    assert [w for w, _meta in by_key(outputs["sum.meta"])["a"]] == [0, 1]


def test_custom_logic_kept_window_is_never_closed_early() -> None:
    """A kept custom logic emits `on_close()` of copies; its own items follow the window's timing."""

    class Totals(win.WindowLogic[Any, Any, int]):
        def __init__(self, state: Any) -> None:
            self.total = state or 0

        def on_value(self, value: Any) -> List[Any]:
            self.total += value[1]
            return [("seen", value[1])]

        def on_merge(self, original: Any) -> List[Any]:
            return []

        def on_close(self) -> List[Any]:
            return [("total", self.total)]

        def snapshot(self) -> int:
            return self.total

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        tumbling = win.TumblingWindower(timedelta(seconds=10), ALIGN)
        return win.window("win", up, clock, tumbling, Totals, allowed_lateness=timedelta(seconds=5))

    records = drive_op(build, [[(1, 1)], [(11, 2)], [(2, 3)], "eof"])
    assert panes(records) == [
        (0, ("seen", 1), "early", 0, False),
        (1, ("seen", 2), "early", 0, False),
        (0, ("total", 1), "on_time", 1, False),
        (0, ("seen", 3), "late", 2, False),
        (0, ("total", 4), "late", 3, False),
        (1, ("total", 2), "on_time", 1, True),
    ]
