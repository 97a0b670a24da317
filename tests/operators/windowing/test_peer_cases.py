"""The peers' own test cases for lateness, merging and triggers, with the peers' expected values.

Each test names the peer test it ports.  Peer timestamps are milliseconds
after `ALIGN`.  Flink's harness sets watermarks by hand (`processWatermark`),
so its ports use `FlinkWatermarks`, a clock whose watermark moves only when
the script says so; Flink fires a window once the watermark reaches its
last millisecond, flowspark once the watermark passes its end, so Flink's
watermark `w` is flowspark's `w + 1 ms`.  Flink's session window ends at
the last value plus the gap; flowspark's session metadata reports the last
value itself as `close_time`.  Kafka Streams' stream time is the largest
timestamp seen, as an `EventClock` without a wait counts it (per key here,
per partition in Kafka; each test has one key).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, List, Optional, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import SYSTEM_START, drive_op, events, panes, payload

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.base import UTC_MAX, Clock, ClockLogic
from flowspark.testing import TestingSink, TestingSource, TimeTestingGetter, run_main

MS = timedelta(milliseconds=1)


def at_ms(value: Tuple[int, Any]) -> datetime:
    return ALIGN + value[0] * MS


def ms(moment: datetime) -> int:
    return (moment - ALIGN) // MS


def metas(records: Any) -> List[Tuple[int, int, int]]:
    """`(window_id, open ms, close ms)` of every `meta` event."""
    return [(e[1], ms(e[2][0]), ms(e[2][1])) for e in events(records) if e[0] == "meta"]


def lates(records: Any) -> List[Tuple[int, Any]]:
    return [(e[1], e[2]) for e in events(records) if e[0] == "late"]


# Kafka Streams: a late record within the grace period creates its window.


def concat(up: Any, clock: Any, emit: str) -> Any:
    """Kafka's `MockAggregator.toStringInstance("+")` with an `""` initializer: `agg + "+" + value`."""
    hopping = win.HoppingWindower(10 * MS, 5 * MS, ALIGN)
    return win.fold_window(
        "win",
        up,
        clock,
        hopping,
        lambda: "",
        lambda acc, v: acc + "+" + v[1],
        lambda a, b: a + b,
        emit=emit,
        allowed_lateness=90 * MS,  # type: ignore[arg-type]
    )


KAFKA_EXPIRED_WINDOW_SCRIPT: List[Any] = [[(t, str(t))] for t in (100, 0, 1, 2, 3, 4, 5, 6, 105, 106)] + ["eof"]
"""`KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindow`: one key `k`,
`TimeWindows.ofSizeAndGrace(10 ms, 90 ms).advanceBy(5 ms)`.  Window `i` is `[5i, 5i + 10)`."""


def test_kafka_late_record_within_grace_creates_its_window() -> None:
    """Kafka's emit-on-update output is flowspark's `emit="current"`, record for record."""
    records = drive_op(lambda up, clock, _g: concat(up, clock, "current"), KAFKA_EXPIRED_WINDOW_SCRIPT, ts_getter=at_ms)
    kafka_output = [
        (19, "+100"),  # [k@95/105]
        (20, "+100"),  # [k@100/110]
        (1, "+5"),  # [k@5/15]: 5 ms is behind stream time 100 but [5, 15) + 90 ms grace is not
        (1, "+5+6"),  # [k@5/15]
        (20, "+100+105"),
        (21, "+105"),  # [k@105/115]
        (20, "+100+105+106"),
        (21, "+105+106"),
    ]
    assert [e[1:3] for e in events(records) if e[0] == "down"] == kafka_output
    # Kafka skips 0..6 ms for the expired window [0, 10), seven records; [-5, 5) is a flowspark
    # window too (Kafka's windows start at 0), so 0..4 ms also go to `late` for window -1.
    assert [v for w, v in lates(records) if w == 0] == [(t, str(t)) for t in range(7)]
    assert [v for w, v in lates(records) if w == -1] == [(t, str(t)) for t in range(5)]
    timings = {w: [p[2] for p in panes(records) if p[0] == w] for w in (1, 20)}
    assert timings == {1: ["late", "late"], 20: ["early", "early", "early"]}


def test_kafka_late_record_within_grace_on_spark() -> None:
    """The same Kafka case as a whole flow, values arriving two per micro-batch.

    System time stands still (`now_getter`): stream time is the largest
    timestamp seen, as in Kafka Streams, not pushed on by the wall-clock
    time between micro-batches, which on millisecond timestamps would close
    windows early on a busy machine.
    """
    flow = Dataflow("kafka_grace")
    records = [("k", value) for batch in KAFKA_EXPIRED_WINDOW_SCRIPT[:-1] for value in batch]
    up = op.input("inp", flow, TestingSource(records, batch_size=2))
    clock = win.EventClock(at_ms, wait_for_system_duration=timedelta(0), now_getter=lambda: SYSTEM_START)
    out = concat(up, clock, "current")
    got: List[Any] = []
    op.output("out", out.down, TestingSink(got))
    run_main(flow)
    assert [value for _key, value in got] == [
        (19, "+100"),
        (20, "+100"),
        (1, "+5"),
        (1, "+5+6"),
        (20, "+100+105"),
        (21, "+105"),
        (20, "+100+105+106"),
        (21, "+105+106"),
    ]


def test_kafka_grace_with_final_results_fires_at_the_window_end_and_late() -> None:
    """flowspark's `"final"` emits when the window ends, then a late pane per late value (Flink's way).

    Kafka's `EmitStrategy.onWindowClose` emits `[k@5/15] "+5+6"` once, when stream time passes
    the end plus the grace (105 ms); flowspark has no such mode.
    """
    records = drive_op(lambda up, clock, _g: concat(up, clock, "final"), KAFKA_EXPIRED_WINDOW_SCRIPT, ts_getter=at_ms)
    assert [p for p in panes(records) if p[0] in (1, 19)] == [
        (1, "+5", "late", 0, False),
        (1, "+5+6", "late", 1, False),
        (19, "+100", "on_time", 0, False),
    ]
    # The window the late 5 ms record created reports its metadata when it is created.
    assert metas(records)[0] == (1, 5, 15)


# Flink: merging happens before the trigger sees the value.


def test_flink_session_windows_with_count_trigger() -> None:
    """`WindowOperatorTest.testSessionWindowsWithCountTrigger`: gap 3 s, `PurgingTrigger.of(CountTrigger.of(4))`.

    Flink emits `("key2-10", 0, 6500)` and `("key1-22", 10, 10000)`: the element at 4500
    merges key1's two sessions of three elements each, "they should now have count 6, and
    therefore fire" (with all seven elements).  Flink never advances the watermark here;
    a long clock wait and `ordered=False` apply each value on arrival without closing anything.
    """

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.sum_window("win", up, clock, gap, payload, False, trigger=win.CountTrigger(4, purge=True))

    wait = timedelta(seconds=100)
    key2 = drive_op(build, [[(0, 1), (1000, 2), (2500, 3), (3500, 4)]], wait=wait, ts_getter=at_ms)
    assert panes(key2) == [(0, 10, "early", 0, False)]
    key1_script: List[Any] = [[(10, 1), (1000, 2)], [(2500, 3)], [(6000, 1)], [(6500, 2)], [(7000, 3)]]
    key1 = drive_op(build, [*key1_script, [(4500, 10)], "eof"], wait=wait, ts_getter=at_ms)
    assert panes(key1) == [(0, 22, "early", 0, False)]
    # Purged with nothing since, the merged session closes without a result; its span is Flink's.
    assert metas(key1) == [(0, 10, 7000)]


# Flink: late elements within the allowed lateness, and session merges with kept sessions.


class FlinkWatermarks(Clock[Any, None]):
    """Millisecond timestamps from the value; the watermark is Flink's `processWatermark`, set by the script.

    The test time getter starts at `SYSTEM_START`, flowspark watermark `ALIGN`;
    `flink_script` advances it to Flink's watermark plus 1 ms, then notifies.
    """

    def __init__(self, getter: TimeTestingGetter) -> None:
        self.getter = getter

    def build(self, resume_state: None) -> ClockLogic[Any, None]:
        return _FlinkWatermarksLogic(self.getter)


class _FlinkWatermarksLogic(ClockLogic[Any, None]):
    def __init__(self, getter: TimeTestingGetter) -> None:
        self._getter = getter

    def _watermark(self) -> datetime:
        return ALIGN + (self._getter.get() - SYSTEM_START)

    def before_batch(self) -> None:
        pass

    def on_item(self, value: Any) -> Tuple[datetime, datetime]:
        return (at_ms(value), self._watermark())

    def on_notify(self) -> datetime:
        return self._watermark()

    def on_eof(self) -> datetime:
        return UTC_MAX

    def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
        return None

    def snapshot(self) -> None:
        return None


def flink_script(steps: List[Any], flink: bool = True) -> List[Any]:
    """`("wm", w)` is Flink's `processWatermark(w)`; an int `t` is `processElement` of `(t, 1)`.

    With `flink=False`, `w` is the watermark itself (Kafka Streams' stream time).
    """
    script: List[Any] = []
    watermark = 0
    for step in steps:
        if isinstance(step, tuple):
            target = step[1] + 1 if flink else step[1]
            script += [(target - watermark) * MS, "notify"]
            watermark = target
        else:
            script.append([(step, 1)])
    return script


# Both Flink tests feed the same elements and watermarks (`key2`, value 1 each).
FLINK_SESSION_LATENESS_STEPS: List[Any] = [
    1000,
    ("wm", 1999),
    2000,
    ("wm", 4998),
    4500,
    8500,
    ("wm", 7400),
    7000,
    ("wm", 11501),
    11600,
    ("wm", 14600),
    10000,
    14500,
    ("wm", 20000),
    ("wm", 100000),
]


def three_seconds(_value: Any) -> timedelta:
    return timedelta(seconds=3)


SESSION_WINDOWERS = [win.SessionWindower(timedelta(seconds=3)), win.DynamicSessionWindower(three_seconds)]
"""Flink's `EventTimeSessionWindows.withGap(3 s)`, and the same as a dynamic gap."""


def flink_sessions(lateness: timedelta, windower: Any) -> Any:
    def build(up: Any, _clock: Any, getter: TimeTestingGetter) -> Any:
        return win.sum_window("win", up, FlinkWatermarks(getter), windower, payload, False, allowed_lateness=lateness)

    return build


@pytest.mark.parametrize("windower", SESSION_WINDOWERS)
def test_flink_session_late_element_merges_kept_sessions_and_fires_at_once(windower: Any) -> None:
    """`WindowOperatorTest.testNotSideOutputDueToLatenessSessionWithHugeLateness`: gap 3 s, lateness 10 s.

    Flink's output: `key2-5 (1000, 11500)`, `key2-1 (11600, 14600)`, then the element at
    10000 merges both sessions, kept for the lateness: "the maxTimestamp of the merged
    session is already late, so we get an immediate firing" of `key2-7 (1000, 14600)`;
    14500 extends it past the watermark, and it fires `key2-8 (1000, 17500)` at watermark
    20000.  Nothing is late.
    """
    records = drive_op(flink_sessions(timedelta(seconds=10), windower), flink_script(FLINK_SESSION_LATENESS_STEPS))
    assert panes(records) == [
        (0, 5, "on_time", 0, False),
        (2, 1, "on_time", 0, False),
        (0, 7, "late", 1, False),
        (0, 8, "late", 2, False),
    ]
    calls = [[e[:3] for e in evs if e[0] == "down"] for evs, _at in records]
    assert calls[11] == [("down", 0, 7)], "the merged kept session fires when the element arrives"
    assert calls[13] == [("down", 0, 8)], "the session 14500 extended fires when the watermark passes it"
    # Session ends are the last values; Flink's window ends add the 3 s gap.
    assert metas(records) == [(0, 1000, 8500), (2, 11600, 11600), (0, 1000, 11600), (0, 1000, 14500)]
    assert lates(records) == []


@pytest.mark.parametrize("windower", SESSION_WINDOWERS)
def test_flink_session_late_element_extends_a_kept_session(windower: Any) -> None:
    """`WindowOperatorTest.testNotSideOutputDueToLatenessSessionWithLateness`: gap 3 s, lateness 10 ms.

    Flink's output: `key2-5 (1000, 11500)`, `key2-1 (11600, 14600)`; the first session is
    gone by then, so 10000 "will be merged into the session (11600-14600)", which, already
    past the watermark, fires `key2-2 (10000, 14600)` at once; 14500 extends it past the
    watermark and it fires `key2-3 (10000, 17500)` at watermark 20000.  Nothing is late.
    """
    records = drive_op(flink_sessions(timedelta(milliseconds=10), windower), flink_script(FLINK_SESSION_LATENESS_STEPS))
    assert panes(records) == [
        (0, 5, "on_time", 0, False),
        (2, 1, "on_time", 0, False),
        (2, 2, "late", 1, False),
        (2, 3, "late", 2, True),  # its lateness is over already: dropped at once
    ]
    assert metas(records) == [(0, 1000, 8500), (2, 11600, 11600), (2, 10000, 11600), (2, 10000, 14500)]
    assert lates(records) == []


def test_flink_elements_without_lateness_are_routed_as_in_bytewax() -> None:
    """The elements of `WindowOperatorTest.testSideOutputDueToLatenessSessionZeroLateness` without `allowed_lateness`.

    Flink sends only 10000 to the late side output: 4500 and 7000 are behind the watermark,
    but their merged session has not ended, so Flink takes them in.  Without
    `allowed_lateness` flowspark routes late values exactly as Bytewax does: every value
    behind the watermark goes to `late`.
    """

    def build(up: Any, _clock: Any, getter: TimeTestingGetter) -> Any:
        gap = win.SessionWindower(timedelta(seconds=3))
        return win.sum_window("win", up, FlinkWatermarks(getter), gap, payload, False)

    steps = [*FLINK_SESSION_LATENESS_STEPS[:12], ("wm", 20000)]
    records = drive_op(build, flink_script(steps))
    assert lates(records) == [(-1, (4500, 1)), (-1, (7000, 1)), (-1, (10000, 1))]
    assert [e[1:3] for e in events(records) if e[0] == "down"] == [(0, 2), (1, 1), (2, 1)]


def test_kafka_session_record_within_grace_opens_its_session() -> None:
    """`KStreamSessionWindowAggregateProcessorTest.shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace`.

    `SessionWindows.ofInactivityGapAndGrace(10 ms, 1 ms)`; each key's record at 0 ms:
    `OnTime1` at stream time 0 and `OnTime2` at stream time 11 ("delayed record arrives
    on time, should not be skipped"), `Late1` at stream time 12 is skipped (session
    `[0,0]`, expiration 1).  Kafka's stream time is the partition's, moved by other keys;
    here each key's watermark is set to it.
    """

    def build(up: Any, _clock: Any, getter: TimeTestingGetter) -> Any:
        gap = win.SessionWindower(10 * MS)
        return win.sum_window("win", up, FlinkWatermarks(getter), gap, payload, False, allowed_lateness=MS)

    def record_at_stream_time(stream_time: int) -> Any:
        return drive_op(build, [*flink_script([("wm", stream_time)], flink=False), [(0, 1)]])

    on_time_1 = record_at_stream_time(0)
    assert (events(on_time_1), lates(on_time_1)) == ([], [])
    on_time_2 = record_at_stream_time(11)
    assert panes(on_time_2) == [(0, 1, "late", 0, False)]
    assert metas(on_time_2) == [(0, 0, 0)]
    late_1 = record_at_stream_time(12)
    assert lates(late_1) == [(-1, (0, 1))]
    assert panes(late_1) == []


# flowspark's own cases for what the peers do with fixed windows.


def test_a_late_value_opens_its_windows_that_have_not_ended_yet() -> None:
    """A late value whose windows are still ahead of the watermark, but empty, opens them (as in Flink)."""

    def build(lateness: timedelta) -> Any:
        def build_op(up: Any, clock: Any, _getter: Any) -> Any:
            sliding = win.SlidingWindower(10 * MS, 5 * MS, ALIGN)
            return win.collect_window("win", up, clock, sliding, ordered=False, allowed_lateness=lateness)

        return build_op

    # A 6 ms wait: 20 ms moves the watermark to 14 ms, so 12 ms is late, but its windows
    # [5, 15) and [10, 20) have not ended.
    script: List[Any] = [[(20, "a")], [(12, "c")], "eof"]
    records = drive_op(build(MS), script, wait=6 * MS, ts_getter=at_ms)
    closed = sorted(e[1:3] for e in events(records) if e[0] == "down")
    assert closed == [(1, [(12, "c")]), (2, [(12, "c")]), (3, [(20, "a")]), (4, [(20, "a")])]
    assert lates(records) == []
    bytewax = drive_op(build(timedelta(0)), script, wait=6 * MS, ts_getter=at_ms)
    assert lates(bytewax) == [(1, (12, "c")), (2, (12, "c"))]


def test_a_late_value_creates_its_ended_tumbling_window_within_the_lateness() -> None:
    def build(up: Any, clock: Any, _getter: Any) -> Any:
        tumbling = win.TumblingWindower(10 * MS, ALIGN)
        return win.sum_window("win", up, clock, tumbling, payload, allowed_lateness=20 * MS)

    script: List[Any] = [[(25, 1)], [(5, 2)], [(29, 4)], [(8, 8)], [(31, 16)], [(9, 32)], "eof"]
    records = drive_op(build, script, ts_getter=at_ms)
    # 5 ms: window 0 ended at 10 ms, is kept until 30 ms: created, it fires at once and reports
    # its metadata.  8 ms re-fires it; at 31 ms it is dropped, and 9 ms is late.
    assert panes(records) == [
        (0, 2, "late", 0, False),
        (0, 10, "late", 1, False),
        (2, 5, "on_time", 0, False),
        (3, 16, "on_time", 0, True),
    ]
    assert metas(records) == [(0, 0, 10), (2, 20, 30), (3, 30, 40)]
    assert lates(records) == [(0, (9, 32))]
