"""Clock logics driven directly: Bytewax's documented watermark rules, then flowspark's extras.

Tests taking `engine` run the same checks against Bytewax 0.21.1 (the
oracle) and flowspark.
"""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from typing import Any, List, Tuple

import pytest
from support.oracle import ENGINES, Engine

from flowspark.operators._windowing.clocks import SystemClockLogic, TimestampError, add_clamped
from flowspark.operators.windowing import UTC_MAX, UTC_MIN, EventClock, SystemClock
from flowspark.testing import TimeTestingGetter

DAY = datetime(2023, 12, 14, tzinfo=timezone.utc)


def at(hh_mm: str) -> datetime:
    """A time of `DAY` written as `"10:32"`."""
    hours, minutes = hh_mm.split(":")
    return DAY.replace(hour=int(hours), minute=int(minutes))


def event_clock(engine: Engine, getter: Any, wait: timedelta, **kwargs: Any) -> Any:
    """An engine's `EventClock` over `datetime` values, reading `getter`."""
    return engine.win.EventClock(lambda ts: ts, wait_for_system_duration=wait, now_getter=getter.get, **kwargs)


@pytest.mark.parametrize("engine", ENGINES)
def test_windowing_guide_watermark_tables(engine: str) -> None:
    """The five tables of the windowing guide, with a 5 minute wait, row by row."""
    getter = TimeTestingGetter(at("10:32"))
    logic = event_clock(Engine(engine), getter, timedelta(minutes=5)).build(None)

    # Row 1: the first item sets the watermark to its timestamp minus the wait.
    logic.before_batch()
    assert logic.on_item(at("10:35")) == (at("10:35"), at("10:30"))

    # Row 2: a minute of system time with no items moves the watermark a minute.
    getter.now = at("10:33")
    assert logic.on_notify() == at("10:31")

    # Row 3: a candidate (10:33) ahead of the current watermark (10:32) is accepted.
    getter.now = at("10:34")
    logic.before_batch()
    assert logic.on_item(at("10:38")) == (at("10:38"), at("10:33"))

    # Row 4: a candidate (10:34) behind the current watermark (10:35) is rejected;
    # the item itself (10:39) is on time.
    getter.now = at("10:36")
    logic.before_batch()
    timestamp, watermark = logic.on_item(at("10:39"))
    assert (timestamp, watermark) == (at("10:39"), at("10:35"))
    assert timestamp >= watermark

    # Row 5: an item before the current watermark (10:37) is late.
    getter.now = at("10:38")
    logic.before_batch()
    timestamp, watermark = logic.on_item(at("10:36"))
    assert (timestamp, watermark) == (at("10:36"), at("10:37"))
    assert timestamp < watermark


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_replay_with_zero_system_time_follows_the_data(engine: str) -> None:
    """Replaying faster than real time: only timestamps push the watermark."""
    getter = TimeTestingGetter(at("00:00"))
    logic = event_clock(Engine(engine), getter, timedelta(minutes=1)).build(None)
    logic.before_batch()
    stamps = [logic.on_item(at(t)) for t in ("10:00", "10:05", "10:02", "10:30")]
    assert [wm for _ts, wm in stamps] == [at("09:59"), at("10:04"), at("10:04"), at("10:29")]
    late = [ts for ts, wm in stamps if ts < wm]
    assert late == [at("10:02")]


@pytest.mark.parametrize("engine", ENGINES)
def test_wait_forever_only_closes_at_eof(engine: str) -> None:
    """`timedelta.max` keeps the watermark near `UTC_MIN` until EOF, without overflowing."""
    getter = TimeTestingGetter(at("00:00"))
    logic = event_clock(Engine(engine), getter, timedelta.max).build(None)
    logic.before_batch()
    assert logic.on_item(at("10:00")) == (at("10:00"), UTC_MIN)
    getter.advance(timedelta(hours=1))
    assert logic.on_notify() == UTC_MIN + timedelta(hours=1)
    assert logic.on_eof() == UTC_MAX


@pytest.mark.parametrize("engine", ENGINES)
def test_eof_does_not_touch_the_snapshot(engine: str) -> None:
    getter = TimeTestingGetter(at("10:00"))
    logic = event_clock(Engine(engine), getter, timedelta(0)).build(None)
    logic.before_batch()
    logic.on_item(at("10:00"))
    before = pickle.dumps(logic.snapshot())
    assert logic.on_eof() == UTC_MAX
    assert pickle.dumps(logic.snapshot()) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_to_system_utc_defaults_to_identity_and_can_be_replaced(engine: str) -> None:
    getter = TimeTestingGetter(at("10:00"))
    e = Engine(engine)
    assert event_clock(e, getter, timedelta(0)).build(None).to_system_utc(at("11:00")) == at("11:00")
    shifted = event_clock(e, getter, timedelta(0), to_system_utc=lambda ts: ts + timedelta(hours=1))
    assert shifted.build(None).to_system_utc(at("11:00")) == at("12:00")
    never = event_clock(e, getter, timedelta(0), to_system_utc=lambda ts: None)
    assert never.build(None).to_system_utc(at("11:00")) is None


def _run(logic: Any, getter: TimeTestingGetter, steps: List[Tuple[str, Any]]) -> List[Any]:
    """Feed `("now", t)`, `("item", ts)` and `("notify", None)` steps; collect the results."""
    out: List[Any] = []
    for kind, arg in steps:
        if kind == "now":
            getter.now = arg
            logic.before_batch()
        elif kind == "item":
            out.append(logic.on_item(arg))
        else:
            out.append(logic.on_notify())
    return out


STEPS = [
    ("now", at("10:00")),
    ("item", at("10:01")),
    ("item", at("09:59")),
    ("now", at("10:05")),
    ("notify", None),
    ("item", at("10:10")),
    ("now", at("10:06")),
    ("item", at("10:07")),
    ("notify", None),
]


def test_event_clock_rebuilt_from_pickled_snapshots_behaves_the_same() -> None:
    """flowspark may rebuild a clock from its snapshot before every call."""
    getter = TimeTestingGetter(at("10:00"))
    clock = EventClock(lambda ts: ts, timedelta(minutes=2), now_getter=getter.get)
    straight = _run(clock.build(None), getter, STEPS)

    getter.now = at("10:00")
    logic = clock.build(None)
    rebuilt: List[Any] = []
    for step in STEPS:
        rebuilt.extend(_run(logic, getter, [step]))
        logic = clock.build(pickle.loads(pickle.dumps(logic.snapshot())))
    assert rebuilt == straight


def test_snapshot_is_a_copy() -> None:
    getter = TimeTestingGetter(at("10:00"))
    logic = EventClock(lambda ts: ts, timedelta(0), now_getter=getter.get).build(None)
    logic.before_batch()
    logic.on_item(at("10:00"))
    snap = logic.snapshot()
    kept = pickle.dumps(snap)
    getter.advance(timedelta(minutes=5))
    logic.before_batch()
    logic.on_item(at("10:30"))
    assert pickle.dumps(snap) == kept


def test_system_time_going_backwards_holds_the_watermark_even_across_rebuilds() -> None:
    """Bytewax 0.21.1 could fail an assertion here (issue #479); flowspark holds steady."""
    getter = TimeTestingGetter(at("10:00"))
    clock = EventClock(lambda ts: ts, timedelta(0), now_getter=getter.get)
    logic = clock.build(None)
    logic.before_batch()
    assert logic.on_item(at("10:00")) == (at("10:00"), at("10:00"))
    getter.now = at("10:05")
    assert logic.on_notify() == at("10:05")

    getter.now = at("09:00")
    logic = clock.build(pickle.loads(pickle.dumps(logic.snapshot())))
    assert logic.on_notify() == at("10:05")
    logic.before_batch()
    assert logic.on_item(at("10:01")) == (at("10:01"), at("10:05"))

    getter.now = at("10:07")
    assert logic.on_notify() == at("10:07")


def test_watermark_saturates_instead_of_overflowing() -> None:
    getter = TimeTestingGetter(at("10:00"))
    logic = EventClock(lambda ts: ts, timedelta(0), now_getter=getter.get).build(None)
    logic.before_batch()
    near_end = UTC_MAX - timedelta(seconds=1)
    assert logic.on_item(near_end) == (near_end, near_end)
    getter.advance(timedelta(days=1))
    assert logic.on_notify() == UTC_MAX
    assert add_clamped(UTC_MIN, -timedelta(days=1)) == UTC_MIN


@pytest.mark.parametrize("bad", [datetime(2024, 1, 1), "2024-01-01", 1704067200])
def test_ts_getter_must_return_aware_datetimes(bad: Any) -> None:
    def stamp(value: Any) -> Any:
        return bad

    logic = EventClock(stamp, timedelta(0)).build(None)
    logic.before_batch()
    with pytest.raises(TimestampError, match=r"`ts_getter` .*stamp.* must return a timezone-aware `datetime`"):
        logic.on_item("v")


def test_now_getter_must_return_aware_datetimes() -> None:
    with pytest.raises(TimestampError, match="`now_getter`"):
        EventClock(lambda v: v, timedelta(0), now_getter=lambda: datetime(2024, 1, 1)).build(None)


def test_system_clock_stamps_with_the_time_read_before_the_batch() -> None:
    getter = TimeTestingGetter(at("10:00"))
    logic = SystemClockLogic(getter.get, None)
    logic.before_batch()
    getter.advance(timedelta(seconds=30))
    assert logic.on_item("a") == (at("10:00"), at("10:00"))
    assert logic.on_notify() == at("10:00") + timedelta(seconds=30)
    assert logic.on_eof() == UTC_MAX
    assert logic.to_system_utc(at("11:00")) == at("11:00")


def test_system_clock_never_goes_backwards_even_when_rebuilt() -> None:
    getter = TimeTestingGetter(at("10:00"))
    logic = SystemClockLogic(getter.get, None)
    getter.now = at("09:00")
    logic.before_batch()
    assert logic.on_item("a") == (at("10:00"), at("10:00"))
    rebuilt = SystemClockLogic(getter.get, pickle.loads(pickle.dumps(logic.snapshot())))
    assert rebuilt.on_notify() == at("10:00")


def test_system_clock_reads_real_utc_time() -> None:
    before = datetime.now(timezone.utc)
    logic = SystemClock().build(None)
    logic.before_batch()
    timestamp, watermark = logic.on_item("a")
    assert timestamp == watermark
    assert before <= timestamp <= datetime.now(timezone.utc)
    assert timestamp.tzinfo is not None


def _one_at_a_time(logic: Any, values: List[Any], watermark: datetime) -> Tuple[List[Any], List[Any], datetime]:
    """What the window step did per value before `stamp_all`: `on_item`, then the late check."""
    on_time, late = [], []
    for value in values:
        timestamp, candidate = logic.on_item(value)
        watermark = max(watermark, candidate)
        (late if timestamp < watermark else on_time).append((value, timestamp))
    return on_time, late, watermark


PLUS_TWO = timezone(timedelta(hours=2))


@pytest.mark.parametrize("seed", range(40))
def test_stamp_all_is_on_item_for_each_value_in_turn(seed: int) -> None:
    import random

    rng = random.Random(seed)
    getter = TimeTestingGetter(DAY)
    # Waits whose threshold (`watermark + wait`) overflows either way: `timedelta.max`, and a negative wait
    # while the watermark is still the smallest datetime (a value at that datetime pushes it).
    wait = rng.choice([timedelta(0), timedelta(seconds=5), timedelta(seconds=30), timedelta(seconds=-5), timedelta.max])
    clock = EventClock(lambda v: v[1], wait_for_system_duration=wait, now_getter=getter.get)
    one, bulk = clock.build(None), clock.build(None)
    watermark = UTC_MIN
    for batch in range(6):
        getter.now = DAY + timedelta(seconds=batch * rng.choice([0, 3]))
        values = ([(-1, UTC_MIN)] if rng.random() < 0.3 else []) + [
            (i, (DAY + timedelta(seconds=rng.randint(-20, 60))).astimezone(rng.choice([timezone.utc, PLUS_TWO])))
            for i in range(rng.randint(0, 30))
        ]
        one.before_batch()
        bulk.before_batch()
        expected = _one_at_a_time(one, values, watermark)
        assert bulk.stamp_all(values, watermark) == expected
        assert bulk.snapshot() == one.snapshot()
        watermark = expected[2]


def test_stamp_all_refuses_a_naive_timestamp_like_on_item() -> None:
    clock = EventClock(lambda v: v, wait_for_system_duration=timedelta(0)).build(None)
    with pytest.raises(TimestampError, match="timezone-aware"):
        clock.stamp_all([DAY, datetime(2024, 1, 1)], UTC_MIN)


def test_stamp_all_of_an_unrepresentable_candidate_pushes_nothing() -> None:
    clock = EventClock(lambda v: v, wait_for_system_duration=timedelta(days=1)).build(None)
    on_time, late, watermark = clock.stamp_all([UTC_MIN], UTC_MIN)
    assert (on_time, late, watermark) == ([(UTC_MIN, UTC_MIN)], [], UTC_MIN)


@pytest.mark.parametrize("before", [UTC_MIN, DAY + timedelta(hours=1)])
def test_system_clock_stamp_all_is_on_item_for_each_value(before: datetime) -> None:
    one, bulk = SystemClockLogic(lambda: DAY, None), SystemClockLogic(lambda: DAY, None)
    assert bulk.stamp_all(["a", "b"], before) == _one_at_a_time(one, ["a", "b"], before)
