"""The built-in clocks: `SystemClock` and `EventClock`.

Both keep the system time they last saw in their snapshot and never let it
go backwards, so the watermark holds steady (instead of failing, as Bytewax
0.21.1's assertions could) when the wall clock jumps back, even if the logic
is rebuilt from its snapshot between micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Optional, Tuple

from typing_extensions import TypeAlias, override

from flowspark.dataflow import f_repr
from flowspark.operators._core import V
from flowspark.operators._windowing.base import UTC_MAX, UTC_MIN, Clock, ClockLogic, add_clamped, is_aware

__all__ = [
    "EventClock",
    "EventClockLogic",
    "EventClockState",
    "SystemClock",
    "SystemClockLogic",
    "TimestampError",
    "add_clamped",
    "utc_now",
]


Stamped: TypeAlias = Tuple[List[Tuple[V, datetime]], List[Tuple[V, datetime]], datetime]
"""What `stamp_all` returns: on-time values and late values with their timestamps, and the watermark."""


class TimestampError(TypeError):
    """A clock was given something other than a timezone-aware `datetime`.

    The window step catches it to add its step id to the message.
    """


def utc_now() -> datetime:
    """The current system time, timezone-aware in UTC."""
    return datetime.now(timezone.utc)


def _identity(moment: datetime) -> Optional[datetime]:
    return moment


class SystemClockLogic(ClockLogic[Any, Optional[datetime]]):
    """Stamps every value with the system time read before its batch.

    The watermark is that same time, so nothing is ever late; end of input
    closes every window.  The snapshot is the last time read, used only to
    keep time from running backwards.
    """

    def __init__(self, now_getter: Callable[[], datetime], last_now: Optional[datetime]) -> None:
        self._now_getter = now_getter
        self._now = UTC_MIN if last_now is None else last_now
        self._read_now()

    def _read_now(self) -> None:
        self._now = max(self._now, self._now_getter())

    @override
    def before_batch(self) -> None:
        self._read_now()

    @override
    def on_item(self, value: Any) -> Tuple[datetime, datetime]:
        return (self._now, self._now)

    def stamp_all(self, values: List[Any], watermark: datetime) -> Stamped[Any]:
        """`on_item` for every value (see `EventClockLogic.stamp_all`); nothing is ever late."""
        watermark = max(watermark, self._now)
        if self._now < watermark:
            return [], [(value, self._now) for value in values], watermark
        return [(value, self._now) for value in values], [], watermark

    @override
    def on_notify(self) -> datetime:
        self._read_now()
        return self._now

    @override
    def on_eof(self) -> datetime:
        return UTC_MAX

    @override
    def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
        return timestamp

    @override
    def snapshot(self) -> Optional[datetime]:
        return self._now


@dataclass
class SystemClock(Clock[Any, Optional[datetime]]):
    """Use the system time (UTC) as each value's timestamp and as the watermark.

    Windows close as soon as system time passes them, and all close at end
    of input.  Results depend on when values are processed, so they are not
    reproducible across runs; use `EventClock` for that.
    """

    @override
    def build(self, resume_state: Optional[datetime]) -> SystemClockLogic:
        return SystemClockLogic(utc_now, resume_state)


@dataclass
class EventClockState:
    """What an event clock remembers between calls (and across restarts)."""

    system_time_of_max_event: datetime
    """System time when the watermark was last pushed forward by a value."""

    watermark_base: datetime
    """The watermark right after that push: that value's timestamp minus the wait."""

    system_now: datetime
    """The latest system time seen; the clock never goes back before it."""


class EventClockLogic(ClockLogic[V, EventClockState]):
    """Implements `EventClock` for one key; see there for the rules."""

    def __init__(self, config: EventClock[V], resume_state: Optional[EventClockState]) -> None:
        self._config = config
        if resume_state is None:
            now = self._read_system_time()
            self._state = EventClockState(now, UTC_MIN, now)
        else:
            self._state = replace(resume_state)
        self._current = self._watermark()

    def _read_system_time(self) -> datetime:
        now = self._config.now_getter()
        if not isinstance(now, datetime) or not is_aware(now):
            msg = f"`now_getter` {f_repr(self._config.now_getter)} must return a timezone-aware `datetime`; got {now!r}"
            raise TimestampError(msg)
        return now

    def _check_timestamp(self, timestamp: Any, value: V) -> None:
        if not isinstance(timestamp, datetime) or not is_aware(timestamp):
            msg = (
                f"`ts_getter` {f_repr(self._config.ts_getter)} must return a "
                f"timezone-aware `datetime` (e.g. with `tzinfo=timezone.utc`); "
                f"got {timestamp!r} for value {value!r}"
            )
            raise TimestampError(msg)

    def _watermark(self) -> datetime:
        elapsed = self._state.system_now - self._state.system_time_of_max_event
        return add_clamped(self._state.watermark_base, elapsed)

    @override
    def before_batch(self) -> None:
        now = self._read_system_time()
        if now > self._state.system_now:
            self._state.system_now = now
            self._current = self._watermark()

    @override
    def on_item(self, value: V) -> Tuple[datetime, datetime]:
        timestamp = self._config.ts_getter(value)
        self._check_timestamp(timestamp, value)
        # System time only moves in `before_batch`, so the watermark computed
        # there (or at the last push) holds for every value in between.
        watermark = self._current
        try:
            candidate = timestamp - self._config.wait_for_system_duration
        except OverflowError:
            # Unrepresentable, hence below any watermark: nothing to push.
            return (timestamp, watermark)
        if candidate > watermark:
            self._state.watermark_base = candidate
            self._state.system_time_of_max_event = self._state.system_now
            self._current = candidate
            return (timestamp, candidate)
        return (timestamp, watermark)

    def stamp_all(self, values: List[V], watermark: datetime) -> Stamped[V]:
        """`on_item` for every value in turn, split by the running watermark.

        `watermark` is the caller's; each value may push it forward, and a
        value stamped before it (as pushed by the values so far) is late.
        Returns the on-time and the late values with their timestamps, in
        arrival order, and the new watermark.  The same as calling
        `on_item` per value, in one loop: the window step's fast path.
        """
        ts_getter = self._config.ts_getter
        wait = self._config.wait_for_system_duration
        datetime_class, utc = datetime, timezone.utc
        current = self._current
        pushed = False
        # A value pushes the watermark when `timestamp - wait > current`, i.e.
        # `timestamp > current + wait`: one comparison per value, the
        # subtraction only for the values that push.
        pushes_above = _push_threshold(current, wait)
        if values and current > watermark:  # as the first value's `on_item` would
            watermark = current
        on_time: List[Tuple[V, datetime]] = []
        late: List[Tuple[V, datetime]] = []
        for value in values:
            timestamp = ts_getter(value)
            if type(timestamp) is not datetime_class or timestamp.tzinfo is not utc:
                self._check_timestamp(timestamp, value)
            if pushes_above is None or timestamp > pushes_above:
                try:
                    current = timestamp - wait
                except OverflowError:
                    pass  # unrepresentable, hence below any watermark
                else:
                    pushed = True
                    pushes_above = _push_threshold(current, wait)
                    if current > watermark:
                        watermark = current
            if timestamp < watermark:
                late.append((value, timestamp))
            else:
                on_time.append((value, timestamp))
        if pushed:
            self._state.watermark_base = current
            self._state.system_time_of_max_event = self._state.system_now
            self._current = current
        return on_time, late, watermark

    @override
    def on_notify(self) -> datetime:
        self.before_batch()
        return self._current

    @override
    def on_eof(self) -> datetime:
        return UTC_MAX

    @override
    def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
        return self._config.to_system_utc(timestamp)

    @override
    def snapshot(self) -> EventClockState:
        return replace(self._state)


def _push_threshold(watermark: datetime, wait: timedelta) -> Optional[datetime]:
    """The timestamp a value must exceed to push `watermark`: `watermark + wait`, or None when every value does."""
    try:
        return watermark + wait
    except OverflowError:
        # Past the largest datetime no value is; below the smallest, every value is.
        return UTC_MAX if wait > timedelta(0) else None


@dataclass
class EventClock(Clock[V, EventClockState]):
    """Use a timestamp carried by each value; the watermark follows the data.

    The watermark is the largest `ts_getter(value) - wait_for_system_duration`
    seen so far, plus the system time elapsed since that value was seen, so
    windows still close when a key goes quiet.  A value only pushes the
    watermark if its candidate is ahead of the current (time-advanced)
    watermark.  End of input closes every window.

    `ts_getter` must return timezone-aware datetimes (UTC is easiest), since
    they are compared with `now_getter`'s times and with window bounds.
    `now_getter` supplies the system time (swap in a
    `testing.TimeTestingGetter` for reproducible tests); `to_system_utc`
    maps a window's close timestamp to the system time at which to wake up
    and close it (`None`: do not wake up for it; new values or end of input
    will close it).  With `wait_for_system_duration=timedelta.max`, windows
    only close at end of input.
    """

    ts_getter: Callable[[V], datetime]
    wait_for_system_duration: timedelta
    now_getter: Callable[[], datetime] = utc_now
    to_system_utc: Callable[[datetime], Optional[datetime]] = _identity

    @override
    def build(self, resume_state: Optional[EventClockState]) -> ClockLogic[V, EventClockState]:
        return EventClockLogic(self, resume_state)
