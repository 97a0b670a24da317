"""The windowing interfaces: clocks, windowers, window logics, metadata.

A window step combines three user-replaceable parts, each split into a
picklable *config* (`Clock`, `Windower`, the logic builder) and a per-key
*logic* built from the config and a resume snapshot:

* the clock says when each value happened and how far time has progressed
  (the watermark);
* the windower says which windows a timestamp belongs to and when they close;
* a `WindowLogic` per open window accumulates values and emits results.

Everything here is per key: each key has its own clock and watermark.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Set, Tuple, TypeVar

from typing_extensions import Self

from flowspark.operators._core import S, V, W

__all__ = [
    "LATE_SESSION_ID",
    "SC",
    "SW",
    "UTC_MAX",
    "UTC_MIN",
    "ZERO_TD",
    "Clock",
    "ClockLogic",
    "SeededWindowerLogic",
    "ValueWindowerLogic",
    "WindowLogic",
    "WindowMetadata",
    "Windower",
    "WindowerLogic",
    "add_clamped",
    "is_aware",
]

ZERO_TD: timedelta = timedelta(0)
"""A zero-length duration."""

UTC_MAX: datetime = datetime.max.replace(tzinfo=timezone.utc)
"""The latest representable UTC instant; the watermark at end of input."""

UTC_MIN: datetime = datetime.min.replace(tzinfo=timezone.utc)
"""The earliest representable UTC instant; the watermark of a new key."""

LATE_SESSION_ID: int = -1
"""Window id reported for values that arrive too late for any session."""

SC = TypeVar("SC")
"""Type of a clock logic's snapshots."""

SW = TypeVar("SW")
"""Type of a windower logic's snapshots."""


def is_aware(moment: datetime) -> bool:
    """Whether `moment` carries a usable time zone (so it compares with UTC)."""
    tz = moment.tzinfo
    return tz is not None and (tz is timezone.utc or moment.utcoffset() is not None)


def add_clamped(moment: datetime, delta: timedelta) -> datetime:
    """`moment + delta`, saturating at `UTC_MIN`/`UTC_MAX` instead of overflowing."""
    try:
        return moment + delta
    except OverflowError:
        return UTC_MAX if delta > timedelta(0) else UTC_MIN


class ClockLogic(ABC, Generic[V, S]):
    """One key's sense of time: item timestamps and the watermark.

    The watermark is the instant before which the clock expects no more
    values; values stamped earlier are late.  It must never move backwards
    (the window step holds it steady if a clock tries).  Build one with
    `Clock.build`; everything that has to survive a restart goes into
    `snapshot`, because flowspark may rebuild the logic from its snapshot
    before any call.
    """

    @abstractmethod
    def before_batch(self) -> None:
        """Get ready for a run of `on_item` calls (e.g. read the system time once)."""

    @abstractmethod
    def on_item(self, value: V) -> Tuple[datetime, datetime]:
        """Return `(timestamp of value, watermark after seeing it)`."""

    @abstractmethod
    def on_notify(self) -> datetime:
        """Return the current watermark when no value arrived (a wake-up)."""

    @abstractmethod
    def on_eof(self) -> datetime:
        """Return the watermark at end of input, usually `UTC_MAX` to close everything.

        This must not change the snapshotted state, so that a later run can
        continue where this one stopped.
        """

    @abstractmethod
    def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
        """Map a timestamp to the UTC system time when it will be reached.

        The window step uses this to schedule wake-ups that close windows
        without new input; `None` means "do not wake up for it".
        """

    @abstractmethod
    def snapshot(self) -> S:
        """Return a picklable copy of the state, shared with nothing live."""


class Clock(ABC, Generic[V, S]):
    """Configuration of a clock; builds one `ClockLogic` per key."""

    @abstractmethod
    def build(self, resume_state: Optional[S]) -> ClockLogic[V, S]:
        """Make a logic from this config and a snapshot (`None` for a new key)."""


@dataclass
class WindowMetadata:
    """What is known about a window when it closes.

    Whether `close_time` is inclusive depends on the windower: sessions
    include it, sliding and tumbling windows do not.
    """

    open_time: datetime
    """When the window starts."""

    close_time: datetime
    """When the window ends."""

    merged_ids: Set[int] = field(default_factory=set)
    """Ids of windows that were merged directly into this one."""


class WindowerLogic(ABC, Generic[S]):
    """One key's bookkeeping of which windows exist and when they close.

    Build one with `Windower.build`.  As with clocks, all state that matters
    must be in `snapshot`.
    """

    @abstractmethod
    def open_for(self, timestamp: datetime) -> Iterable[int]:
        """Return the ids of the windows an on-time value belongs to, opening them."""

    @abstractmethod
    def late_for(self, timestamp: datetime) -> Iterable[int]:
        """Return the ids a late value would have belonged to, without opening anything.

        A sentinel id is fine when the windower cannot tell.
        """

    @abstractmethod
    def merged(self) -> Iterable[Tuple[int, int]]:
        """Return and forget the merges since the last call, as `(original, target)`.

        An original id is gone afterwards: it is never reported as closed.
        """

    @abstractmethod
    def close_for(self, watermark: datetime) -> Iterable[Tuple[int, WindowMetadata]]:
        """Return and forget every window the watermark has passed, with its metadata.

        A closed id must never be opened again.
        """

    @abstractmethod
    def notify_at(self) -> Optional[datetime]:
        """Return the timestamp at which the next window could close, if any."""

    @abstractmethod
    def is_empty(self) -> bool:
        """Whether the windower holds nothing worth keeping (no open window).

        When this is true and the key has no open window and no queued value,
        flowspark keeps only a tombstone of the key (clock state and
        watermark) and later rebuilds the windower from scratch.
        """

    @abstractmethod
    def snapshot(self) -> S:
        """Return a picklable copy of the state, shared with nothing live."""

    # How the window step applies on-time values.  The defaults fit a
    # windower that picks windows from timestamps alone.

    def place(self, value: Any, timestamp: datetime) -> Iterable[int]:
        """Return the ids of the windows an on-time value belongs to, opening them (by default `open_for`)."""
        return self.open_for(timestamp)

    def places_by_timestamp(self) -> bool:
        """Whether `open_for` alone places values, into windows that start empty.

        The window step then feeds values on its shortest path; a windower
        that looks at values or seeds new windows says no.
        """
        return True

    def seed_span(self, window_id: int) -> Optional[Tuple[datetime, datetime]]:
        """The timestamps of remembered values a window takes as it opens, both ends included; `None` for none."""
        return None

    def memory(self) -> Optional[timedelta]:
        """How far behind the newest applied timestamp values must be remembered for `seed_span`; `None` for none."""
        return None

    def tumbling_window(self, timestamp: datetime) -> Optional[Tuple[int, datetime, datetime]]:
        """Open the only window a value at `timestamp` is in and return its id, open and close time.

        `None` (the default) unless windows tumble: each timestamp in
        exactly one window, `[open, close)`, so the window step can fold a
        run of values in one window in a tight loop.
        """
        return None

    # How a window step with `allowed_lateness` places late values (see
    # `firing`).  The defaults fit windows that neither merge nor open late.

    def session_spans(self) -> Optional[Dict[int, Tuple[datetime, datetime]]]:
        """`(open_time, reach)` of each open window, by id, if windows are sessions a late value can stretch and merge.

        `None` (the default) for any other windower.  A session windower
        also answers `new_id`, `reopen` and `reach_of` for its sessions.
        """
        return None

    def reach_of(self, value: Any, timestamp: datetime) -> datetime:
        """How far a value at `timestamp` keeps its window open: the timestamp itself, unless sessions add a gap."""
        return timestamp

    def kept_until(self, reach: datetime, lateness: timedelta) -> datetime:
        """When a window that closed at `reach` stops taking late values: once the watermark reaches this.

        By default `reach` plus the lateness (a window ends before its
        `close_time`); a session, which stays open while the watermark is at
        its reach, is kept one instant longer.
        """
        return add_clamped(reach, lateness)

    def names_late_windows(self) -> bool:
        """Whether `late_for` always names real windows, so `LATE_SESSION_ID` is a real id rather than "cannot tell"."""
        return False

    def late_windows(self, timestamp: datetime, kept: Iterable[int]) -> List[int]:
        """The ids of the windows a late value may join: `late_for`'s, plus any of the `kept` (closed) ones it names."""
        return list(self.late_for(timestamp))

    def late_window(self, window_id: int) -> Optional[WindowMetadata]:
        """Where a window that does not exist yet would lie, if a late value may create it; `None` (the default) if not."""
        return None

    def new_id(self) -> int:
        """Hand out the id of a session that a late value opens already closed; only session windowers can."""
        msg = f"{type(self).__name__} opens no sessions for late values"
        raise TypeError(msg)

    def reopen(self, window_id: int, meta: WindowMetadata, reach: datetime) -> None:
        """Open a window for a late value: one `late_window` named, or a kept session the value stretches.

        Only windowers that name such windows can.
        """
        msg = f"{type(self).__name__} cannot open window {window_id} for a late value"
        raise TypeError(msg)


class ValueWindowerLogic(WindowerLogic[S]):
    """A windower logic that needs each value, not only its timestamp, to pick its windows.

    Dynamic session gaps are the case: the gap comes from the value.  The
    window operator calls `open_for_value` instead of `open_for`.
    """

    @abstractmethod
    def open_for_value(self, value: Any, timestamp: datetime) -> Iterable[int]:
        """Return the ids of the windows an on-time value belongs to, opening them."""

    def open_for(self, timestamp: datetime) -> Iterable[int]:
        """Refuse: this windower cannot place a bare timestamp."""
        msg = f"{type(self).__name__} places values, not bare timestamps; call `open_for_value`"
        raise TypeError(msg)

    def place(self, value: Any, timestamp: datetime) -> Iterable[int]:
        """Place by value: `open_for_value`."""
        return self.open_for_value(value, timestamp)

    def places_by_timestamp(self) -> bool:
        """No: it needs the value."""
        return False


class SeededWindowerLogic(WindowerLogic[S]):
    """A windower logic that can open a window over values applied before it existed.

    Record-aligned sliding windows are the case: a window is created when a
    record enters or leaves it, yet it must hold every record in its span.
    The window operator remembers the applied values of the last `history()`
    (counted back from the newest applied timestamp) and, when `open_for`
    returns an id it has no window for, first feeds the new window the
    remembered values whose timestamps lie in `span(window_id)`.
    """

    @abstractmethod
    def history(self) -> timedelta:
        """How far behind the newest applied timestamp values must be remembered."""

    @abstractmethod
    def span(self, window_id: int) -> Tuple[datetime, datetime]:
        """The timestamps a new window takes from memory, both ends included."""

    def places_by_timestamp(self) -> bool:
        """No: new windows are seeded."""
        return False

    def seed_span(self, window_id: int) -> Optional[Tuple[datetime, datetime]]:
        """`span(window_id)`."""
        return self.span(window_id)

    def memory(self) -> Optional[timedelta]:
        """`history()`."""
        return self.history()

    def names_late_windows(self) -> bool:
        """Yes: ids are real windows (and may be negative)."""
        return True

    def late_windows(self, timestamp: datetime, kept: Iterable[int]) -> List[int]:
        """`late_for`'s ids and those of the kept windows whose span holds `timestamp`, ascending.

        `late_for` names open windows only; a closed window kept for
        allowed lateness takes the value too.
        """
        window_ids = list(self.late_for(timestamp))
        for window_id in kept:
            first, last = self.span(window_id)
            if first <= timestamp <= last:
                window_ids.append(window_id)
        return sorted(set(window_ids))


class Windower(ABC, Generic[S]):
    """Configuration of a kind of window; builds one `WindowerLogic` per key."""

    @abstractmethod
    def build(self, resume_state: Optional[S]) -> WindowerLogic[S]:
        """Make a logic from this config and a snapshot (`None` for a new key)."""


class WindowLogic(ABC, Generic[V, W, S]):
    """What to do with the values of one window of one key.

    The `window` operator builds one per window with its `builder` and
    wraps each returned item as `(key, (window_id, item))` on `down`.
    """

    @abstractmethod
    def on_value(self, value: V) -> Iterable[W]:
        """Take one value of this window (in timestamp order when `ordered`)."""

    @abstractmethod
    def on_merge(self, original: Self) -> Iterable[W]:
        """Absorb the state of `original`, a window merged into this one.

        `original` is dropped afterwards.  Only merging windowers (sessions)
        cause this.
        """

    @abstractmethod
    def on_close(self) -> Iterable[W]:
        """The window has closed; return its final items."""

    @abstractmethod
    def snapshot(self) -> S:
        """Return a picklable copy of the state, shared with nothing live."""

    def running(self, rebuild: Callable[[Optional[S]], WindowLogic[V, W, S]]) -> Iterable[W]:
        """What the window would emit if it closed now, without closing it (early and late panes).

        By default a copy is rebuilt from `snapshot()` with the step's
        builder `rebuild` and closed; the live logic is never closed early.
        """
        return rebuild(self.snapshot()).on_close()

    def fold_quietly(self, values: Iterable[V]) -> bool:
        """Take `values` in a tight loop if taking a value never emits anything; return whether it did.

        By default it does not (`on_value` may emit), and takes none.
        """
        return False
