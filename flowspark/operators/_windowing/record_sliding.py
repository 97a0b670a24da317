"""Kafka Streams' record-aligned sliding windows (KIP-450, `SlidingWindows`).

Fixed-length windows whose ends are picked by the records themselves, so
that every distinct set of a key's records that fits in `length` gets one
window and no two windows hold the same records.  Time is counted in whole
`unit`s (Kafka Streams counts milliseconds): a timestamp is placed by the
unit it falls in, window bounds are whole units and both ends are included.
For a record in unit `t` (`L` units per `length`):

* its *left window* `[t - L, t]` ends at the record.  It is created when the
  record is applied, unless a window with that end already exists (created
  by an earlier record in the same unit, or as the right window of a record
  exactly `L + 1` units earlier), which the record simply joins;
* its *right window* `[t + 1, t + 1 + L]` starts one unit after the record,
  the first window the record has dropped out of.  It is created only when
  it would not be empty: by the first later record that falls in it, which
  finds it missing and opens it.

Every existing window spanning a record takes it.  A window created after
some of its records were applied is filled first with those records: the
window operator remembers recent values for it (see `SeededWindowerLogic`).
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.operators._windowing.base import UTC_MAX, UTC_MIN, SeededWindowerLogic, Windower, WindowMetadata
from flowspark.operators._windowing.windowers import SelfCheckingWindower, _positive

__all__ = [
    "EPOCH",
    "RecordSlidingWindower",
    "RecordSlidingWindowerLogic",
    "RecordSlidingWindowerState",
]

EPOCH: datetime = datetime(1970, 1, 1, tzinfo=timezone.utc)
"""The UTC epoch, from which record sliding window ids count units."""

_US = timedelta(microseconds=1)


@dataclass
class RecordSlidingWindowerState:
    """What one key's record sliding windows need to remember (all unit numbers since `EPOCH`)."""

    opened: List[int] = field(default_factory=list)
    """Ids (start units) of the open windows, ascending."""
    units: List[int] = field(default_factory=list)
    """Distinct units of applied records whose right window may still be created, ascending."""
    watermark: datetime = UTC_MIN
    """The latest watermark `close_for` was given."""
    latest: datetime = UTC_MIN
    """The timestamp of the value last placed by `open_for`."""


class RecordSlidingWindowerLogic(SeededWindowerLogic[RecordSlidingWindowerState]):
    """Implements `RecordSlidingWindower` for one key (the rules are in the module docstring)."""

    def __init__(self, length: timedelta, unit: timedelta, state: RecordSlidingWindowerState) -> None:
        self.length = length
        self.unit = unit
        self.units_per_window = length // unit
        self.state = state

    def _unit_of(self, moment: datetime) -> int:
        return (moment - EPOCH) // self.unit

    def _start_of(self, unit: int) -> datetime:
        """When `unit` starts, saturating at the ends of the datetime range."""
        try:
            return EPOCH + self.unit * unit
        except OverflowError:
            return UTC_MAX if unit > 0 else UTC_MIN

    def _end_of(self, unit: int) -> datetime:
        """The last representable instant of `unit`, saturating at the ends of the datetime range."""
        try:
            return EPOCH + self.unit * (unit + 1) - _US
        except OverflowError:
            return UTC_MAX if unit > 0 else UTC_MIN

    def _spanning(self, unit: int) -> List[int]:
        """The open windows whose span includes `unit`, ascending."""
        opened = self.state.opened
        low = bisect.bisect_left(opened, unit - self.units_per_window)
        high = bisect.bisect_right(opened, unit)
        return opened[low:high]

    def _open(self, window_id: int) -> None:
        index = bisect.bisect_left(self.state.opened, window_id)
        if index == len(self.state.opened) or self.state.opened[index] != window_id:
            self.state.opened.insert(index, window_id)

    @override
    def open_for(self, timestamp: datetime) -> List[int]:
        unit = self._unit_of(timestamp)
        self.state.latest = timestamp
        self._open(unit - self.units_per_window)
        units = self.state.units
        index = bisect.bisect_left(units, unit)
        if index > 0 and units[index - 1] + 1 + self.units_per_window >= unit:
            # The record before this one has dropped out of a window this one is in.
            self._open(units[index - 1] + 1)
        if index == len(units) or units[index] != unit:
            units.insert(index, unit)
        return self._spanning(unit)

    @override
    def late_for(self, timestamp: datetime) -> List[int]:
        unit = self._unit_of(timestamp)
        ids = self._spanning(unit)
        left = unit - self.units_per_window
        return ids if left in ids else sorted([left, *ids])

    @override
    def merged(self) -> Iterable[Tuple[int, int]]:
        return ()

    @override
    def close_for(self, watermark: datetime) -> List[Tuple[int, WindowMetadata]]:
        self.state.watermark = max(self.state.watermark, watermark)
        now = self._unit_of(watermark)
        # A window closes once the watermark is past its last unit.
        done = bisect.bisect_left(self.state.opened, now - self.units_per_window)
        closed = [
            (window_id, WindowMetadata(self._start_of(window_id), self._start_of(window_id + self.units_per_window)))
            for window_id in self.state.opened[:done]
        ]
        del self.state.opened[:done]
        # A record's right window can only be created while it can still take an on-time value.
        del self.state.units[: bisect.bisect_left(self.state.units, now - 1 - self.units_per_window)]
        return closed

    @override
    def notify_at(self) -> Optional[datetime]:
        if self.state.opened:
            return self._start_of(self.state.opened[0] + self.units_per_window + 1)
        if self.state.units:
            # Wake up to forget the last record once its right window is out of reach.
            return self._start_of(self.state.units[-1] + self.units_per_window + 2)
        return None

    @override
    def is_empty(self) -> bool:
        return not self.state.opened and not self.state.units

    @override
    def history(self) -> timedelta:
        # New windows start at most one length before the value being placed,
        # which is never before the watermark (nor before the last value with
        # `ordered=True`): keep everything from there on.  The start saturates
        # at `UTC_MIN`, so `latest - history()` cannot overflow.
        latest = self.state.latest
        earliest_placed = min(self._unit_of(latest), self._unit_of(self.state.watermark))
        return latest - self._start_of(earliest_placed - self.units_per_window)

    @override
    def span(self, window_id: int) -> Tuple[datetime, datetime]:
        return (self._start_of(window_id), self._end_of(window_id + self.units_per_window))

    @override
    def snapshot(self) -> RecordSlidingWindowerState:
        return copy.deepcopy(self.state)


@dataclass
class RecordSlidingWindower(Windower[RecordSlidingWindowerState], SelfCheckingWindower):
    """Kafka Streams' sliding windows (KIP-450): one window per distinct set of records `length` apart.

    Like `SlidingWindows.ofTimeDifferenceAndGrace(length, grace)`: a window
    spans `length` with both ends included (`close_time - open_time ==
    length`, and a value exactly at `close_time` is in), and windows are
    created where records enter and leave, not on a grid: each record opens
    the window ending at it (its *left* window, unless a window with that
    end exists) and, once a later record falls in it, the window starting
    one `unit` after it (its *right* window, never empty).  With values
    applied in timestamp order (`ordered=True`, the default) every distinct
    non-empty set of a key's records that fits in a window of `length` is
    emitted exactly once, as Kafka Streams does.

    Time is counted in whole `unit`s (default 1 ms, Kafka Streams'
    resolution): a timestamp is placed by the unit it falls in, so a window
    holds every value whose unit lies between its start and end units.
    `length` must be a whole number of units.  The window id is the number of
    units from the UTC epoch to the window's start (negative before 1970;
    with the default unit, Kafka Streams' window start in milliseconds).
    Unlike Kafka Streams, records less than `length` after the epoch get no
    special "early" window: windows simply start before the epoch.

    Kafka Streams' grace is the clock's wait here: with an `EventClock`, a
    window closes (and its result goes out) once the watermark, the newest
    timestamp minus `wait_for_system_duration`, passes the window's last
    unit.  A value behind the watermark goes to `late` (with the ids of the
    open windows that span it and of its left window), where Kafka Streams
    would still add it to those of its windows not yet closed.  With
    `allowed_lateness` it joins the open windows that span it and re-fires
    the kept ones that do, and windows opened later over its timestamp take
    it too; it opens no window itself, so its left window (unless that
    exists) is reported on `late`, and it gets no right window.

    To fill a window created after some of its values, the window operator
    keeps each key's recent values: those at most `length` before the
    watermark (so, with `ordered=False`, up to `length` plus the clock's wait
    behind the newest value).  Early emissions (`emit="current"`, triggers)
    come only after the value that created the window, never once per value
    it was filled with.

    `ordered=False` is inexact: Kafka Streams' promise (every distinct set
    emitted exactly once) holds only for values applied in timestamp order.
    A value applied after later ones still joins every open window spanning
    it and gets its left window, but not its right one (a window can only be
    opened by a value it holds), so sets that leave it out (such as the
    later values alone) can be missing.  Use `ordered=True` (and a clock wait covering the
    disorder) when the windows must be exact.

    A key whose windows have all closed keeps its last record's unit until
    no on-time value can fall in that record's right window, then becomes an
    ordinary tombstone.
    """

    length: timedelta
    unit: timedelta = timedelta(milliseconds=1)

    def __post_init__(self) -> None:
        self._refuse_problems()

    @override
    def problems(self) -> List[str]:
        found = [_positive("length", self.length), _positive("unit", self.unit)]
        problems = [problem for problem in found if problem is not None]
        if not problems and self.length % self.unit:
            problems.append(f"`length` {self.length!r} must be a whole number of `unit`s {self.unit!r}")
        return problems

    @override
    def build(self, resume_state: Optional[RecordSlidingWindowerState]) -> RecordSlidingWindowerLogic:
        state = RecordSlidingWindowerState() if resume_state is None else resume_state
        return RecordSlidingWindowerLogic(self.length, self.unit, state)
