"""The built-in windowers: sliding, tumbling and session windows.

Sliding (and tumbling) window ids are computed from the timestamp alone, so
they are stable across keys and restarts and may be negative.  Session ids
are handed out per key in creation order.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.operators._windowing.base import (
    LATE_SESSION_ID,
    UTC_MIN,
    ZERO_TD,
    Windower,
    WindowerLogic,
    WindowMetadata,
    add_clamped,
    is_aware,
)

__all__ = [
    "INSTANT",
    "SelfCheckingWindower",
    "SessionWindower",
    "SessionWindowerLogic",
    "SessionWindowerState",
    "SlidingWindower",
    "SlidingWindowerLogic",
    "SlidingWindowerState",
    "TumblingWindower",
    "check_windower",
]


@dataclass
class SlidingWindowerState:
    """The windows of one key that are open, by id."""

    opened: Dict[int, WindowMetadata] = field(default_factory=dict)


class SlidingWindowerLogic(WindowerLogic[SlidingWindowerState]):
    """Fixed-length windows; window `i` covers `[align_to + i*offset, +length)`."""

    def __init__(
        self,
        length: timedelta,
        offset: timedelta,
        align_to: datetime,
        state: SlidingWindowerState,
    ) -> None:
        self.length = length
        self.offset = offset
        self.align_to = align_to
        self.state = state
        self._last_tumbling: Optional[Tuple[datetime, datetime, int]] = None
        """The open time, close time and id of the tumbling window that took the last value."""

    def intersects(self, timestamp: datetime) -> List[int]:
        """The ids of every window containing `timestamp`, in ascending order."""
        since_origin = timestamp - self.align_to
        if self.offset == self.length:
            return [since_origin // self.offset]
        first = (since_origin - self.length) // self.offset + 1
        last = since_origin // self.offset
        return list(range(first, last + 1))

    def metadata_for(self, window_id: int) -> WindowMetadata:
        """Where window `window_id` starts and ends, whether or not it is open."""
        open_time = self.align_to + self.offset * window_id
        return WindowMetadata(open_time, open_time + self.length)

    @override
    def open_for(self, timestamp: datetime) -> List[int]:
        last = self._last_tumbling
        if last is not None and last[0] <= timestamp < last[1] and last[2] in self.state.opened:
            # A key's values mostly come in time order, so a tumbling window
            # gets many in a row: skip the timedelta arithmetic for those.
            return [last[2]]
        ids = self.intersects(timestamp)
        for window_id in ids:
            if window_id not in self.state.opened:
                self.state.opened[window_id] = self.metadata_for(window_id)
        if self.offset == self.length:
            meta = self.state.opened[ids[0]]
            self._last_tumbling = (meta.open_time, meta.close_time, ids[0])
        return ids

    @override
    def late_for(self, timestamp: datetime) -> List[int]:
        return self.intersects(timestamp)

    @override
    def tumbling_window(self, timestamp: datetime) -> Optional[Tuple[int, datetime, datetime]]:
        if self.offset != self.length:
            return None
        window_id = self.open_for(timestamp)[0]
        meta = self.state.opened[window_id]
        return (window_id, meta.open_time, meta.close_time)

    @override
    def names_late_windows(self) -> bool:
        return True

    @override
    def late_window(self, window_id: int) -> Optional[WindowMetadata]:
        return self.metadata_for(window_id)

    @override
    def reopen(self, window_id: int, meta: WindowMetadata, reach: datetime) -> None:
        """Open window `window_id` for a late value, its window still ahead of the watermark."""
        if window_id not in self.state.opened:
            self.state.opened[window_id] = self.metadata_for(window_id)

    @override
    def merged(self) -> Iterable[Tuple[int, int]]:
        return ()

    @override
    def close_for(self, watermark: datetime) -> List[Tuple[int, WindowMetadata]]:
        closed = [(i, meta) for i, meta in self.state.opened.items() if meta.close_time <= watermark]
        for window_id, _meta in closed:
            del self.state.opened[window_id]
        return closed

    @override
    def notify_at(self) -> Optional[datetime]:
        return min((meta.close_time for meta in self.state.opened.values()), default=None)

    @override
    def is_empty(self) -> bool:
        return not self.state.opened

    @override
    def snapshot(self) -> SlidingWindowerState:
        return copy.deepcopy(self.state)


@dataclass
class SlidingWindower(Windower[SlidingWindowerState]):
    """Windows of fixed `length` starting every `offset`, aligned to `align_to`.

    With `offset < length` windows overlap and a value lands in several;
    `offset == length` is `TumblingWindower`.  `offset > length` would leave
    gaps that silently drop values, so it is refused.  Open times are
    inclusive, close times exclusive.  Changing the parameters across a
    restart makes the windows open at the time of the snapshot wrong.
    """

    length: timedelta
    offset: timedelta
    align_to: datetime

    def __post_init__(self) -> None:
        if self.offset > self.length:
            msg = (
                "sliding window `offset` can't be longer than `length`; there would be "
                f"gaps between windows (offset={self.offset!r}, length={self.length!r})"
            )
            raise ValueError(msg)

    @override
    def build(self, resume_state: Optional[SlidingWindowerState]) -> SlidingWindowerLogic:
        state = SlidingWindowerState() if resume_state is None else resume_state
        return SlidingWindowerLogic(self.length, self.offset, self.align_to, state)


@dataclass
class TumblingWindower(Windower[SlidingWindowerState]):
    """Back-to-back windows of fixed `length`, aligned to `align_to`.

    Every value is in exactly one window.  Open times are inclusive, close
    times exclusive.
    """

    length: timedelta
    align_to: datetime

    @override
    def build(self, resume_state: Optional[SlidingWindowerState]) -> SlidingWindowerLogic:
        state = SlidingWindowerState() if resume_state is None else resume_state
        return SlidingWindowerLogic(self.length, self.length, self.align_to, state)


@dataclass
class SessionWindowerState:
    """One key's sessions, the last id handed out and the merges not yet reported."""

    max_key: int = LATE_SESSION_ID
    sessions: Dict[int, WindowMetadata] = field(default_factory=dict)
    merge_queue: List[Tuple[int, int]] = field(default_factory=list)


INSTANT: timedelta = timedelta(microseconds=1)
"""The smallest step of a `datetime`: what "at or after" adds to "after" (sessions include their reach)."""


def _merge_sessions(sessions: Dict[int, WindowMetadata], gap: timedelta) -> List[Tuple[int, int]]:
    """Merge, in place, sessions that are within `gap` of each other.

    Sessions are walked by open time; each one that starts within `gap` of
    the end of the session before it is folded into that one (the earlier
    opener keeps its id).  Returns the `(absorbed, absorber)` pairs.
    """
    merges: List[Tuple[int, int]] = []
    by_open = sorted(sessions.items(), key=lambda id_meta: id_meta[1].open_time)
    into_id, into = by_open[0]
    for this_id, this in by_open[1:]:
        if this.open_time - into.close_time <= gap:
            into.close_time = max(into.close_time, this.close_time)
            # Only the direct id is recorded; ids `this` absorbed earlier are not
            # carried over (as in Bytewax 0.21.1).
            into.merged_ids.add(this_id)
            del sessions[this_id]
            merges.append((this_id, into_id))
        else:
            into_id, into = this_id, this
    return merges


class SessionWindowerLogic(WindowerLogic[SessionWindowerState]):
    """Sessions separated by more than `gap`; see `SessionWindower`."""

    def __init__(self, gap: timedelta, state: SessionWindowerState) -> None:
        self.gap = gap
        self.state = state

    def _extended(self, window_id: int) -> Tuple[int]:
        if len(self.state.sessions) > 1:
            self.state.merge_queue.extend(_merge_sessions(self.state.sessions, self.gap))
        return (window_id,)

    @override
    def open_for(self, timestamp: datetime) -> Iterable[int]:
        # The first session (in creation order) the timestamp is in or near wins.
        for window_id, meta in self.state.sessions.items():
            until_open = meta.open_time - timestamp
            since_close = timestamp - meta.close_time
            if until_open <= ZERO_TD and since_close <= ZERO_TD:
                return (window_id,)
            if ZERO_TD < until_open <= self.gap:
                meta.open_time = timestamp
                return self._extended(window_id)
            if ZERO_TD < since_close <= self.gap:
                meta.close_time = timestamp
                return self._extended(window_id)
        # Farther than `gap` from every session: a new one, which cannot merge.
        self.state.max_key += 1
        self.state.sessions[self.state.max_key] = WindowMetadata(timestamp, timestamp)
        return (self.state.max_key,)

    @override
    def late_for(self, timestamp: datetime) -> Iterable[int]:
        return (LATE_SESSION_ID,)

    @override
    def merged(self) -> List[Tuple[int, int]]:
        merges, self.state.merge_queue = self.state.merge_queue, []
        return merges

    @override
    def new_id(self) -> int:
        """Hand out the next session id (for a session that a late value opens already closed)."""
        self.state.max_key += 1
        return self.state.max_key

    @override
    def reopen(self, window_id: int, meta: WindowMetadata, reach: datetime) -> None:
        """Open again a closed session, kept for allowed lateness, that a late value reaches.

        Its reach is `meta.close_time + gap`, as for any session.
        """
        self.state.sessions[window_id] = meta

    def spans(self) -> Dict[int, Tuple[datetime, datetime]]:
        """Each open session's first timestamp and reach (last timestamp plus `gap`), by id.

        A value at `t` joins a session when `[t, t + gap]` touches the
        session's span; the session closes once the watermark passes its
        reach.  Allowed lateness uses this to place late values.
        """
        return {i: (meta.open_time, add_clamped(meta.close_time, self.gap)) for i, meta in self.state.sessions.items()}

    @override
    def session_spans(self) -> Optional[Dict[int, Tuple[datetime, datetime]]]:
        return self.spans()

    @override
    def reach_of(self, value: Any, timestamp: datetime) -> datetime:
        return add_clamped(timestamp, self.gap)

    @override
    def kept_until(self, reach: datetime, lateness: timedelta) -> datetime:
        return add_clamped(add_clamped(reach, lateness), INSTANT)

    @override
    def close_for(self, watermark: datetime) -> List[Tuple[int, WindowMetadata]]:
        try:
            close_before = watermark - self.gap
        except OverflowError:
            close_before = UTC_MIN
        closed = [(i, meta) for i, meta in self.state.sessions.items() if meta.close_time < close_before]
        for window_id, _meta in closed:
            del self.state.sessions[window_id]
        return closed

    @override
    def notify_at(self) -> Optional[datetime]:
        first_close = min((meta.close_time for meta in self.state.sessions.values()), default=None)
        return None if first_close is None else add_clamped(first_close, self.gap)

    @override
    def is_empty(self) -> bool:
        # Session ids are counted per key: forgetting the counter would reuse
        # ids a downstream join may already have seen.
        return False

    @override
    def snapshot(self) -> SessionWindowerState:
        return copy.deepcopy(self.state)


@dataclass
class SessionWindower(Windower[SessionWindowerState]):
    """Group a key's values into sessions separated by more than `gap` of silence.

    A value within `gap` before or after a session joins (and stretches) it;
    sessions that come within `gap` of each other merge into the one that
    opened first, whose metadata lists the absorbed ids in `merged_ids`.  A
    session closes once the watermark is more than `gap` past its last value;
    its `close_time` (the last value's timestamp) is inclusive.  Late values
    are reported with the window id `LATE_SESSION_ID`.
    """

    gap: timedelta

    def __post_init__(self) -> None:
        if self.gap < ZERO_TD:
            msg = f"session window `gap` must not be negative; got {self.gap!r}"
            raise ValueError(msg)

    @override
    def build(self, resume_state: Optional[SessionWindowerState]) -> SessionWindowerLogic:
        state = SessionWindowerState() if resume_state is None else resume_state
        return SessionWindowerLogic(self.gap, state)


class SelfCheckingWindower(ABC):
    """A windower that lists its own unworkable parameters, for `check_windower`.

    flowspark's additional windowers mix this in, so that `check_windower`
    can name the step for them too without knowing each one.
    """

    @abstractmethod
    def problems(self) -> List[str]:
        """What is wrong with the parameters, one sentence each, starting with the parameter; empty if nothing."""

    def _refuse_problems(self) -> None:
        """Raise `ValueError` for the first problem (at construction, where no step is known yet)."""
        problems = self.problems()
        if problems:
            msg = f"{type(self).__name__} {problems[0]}"
            raise ValueError(msg)


def _positive(name: str, value: Any) -> Optional[str]:
    if isinstance(value, timedelta) and value > ZERO_TD:
        return None
    return f"`{name}` must be a positive `timedelta`; got {value!r}"


def _aware(name: str, value: Any) -> Optional[str]:
    if isinstance(value, datetime) and is_aware(value):
        return None
    return f"`{name}` must be a timezone-aware `datetime` (e.g. with `tzinfo=timezone.utc`); got {value!r}"


def check_windower(step_id: str, windower: Windower[Any]) -> None:
    """Refuse built-in windower parameters that cannot work, naming the step.

    Runs when the flow is built, so a zero length or a naive `align_to`
    fails there instead of deep inside a run.  User-defined windowers are
    not checked.
    """
    problems: List[Optional[str]] = []
    if isinstance(windower, SlidingWindower):
        problems = [
            _positive("length", windower.length),
            _positive("offset", windower.offset),
            _aware("align_to", windower.align_to),
        ]
        if not any(problems) and windower.offset > windower.length:
            problems.append(f"`offset` {windower.offset!r} can't be longer than `length` {windower.length!r}")
    elif isinstance(windower, TumblingWindower):
        problems = [_positive("length", windower.length), _aware("align_to", windower.align_to)]
    elif isinstance(windower, SessionWindower):
        if not isinstance(windower.gap, timedelta) or windower.gap < ZERO_TD:
            problems = [f"`gap` must be a non-negative `timedelta`; got {windower.gap!r}"]
    elif isinstance(windower, SelfCheckingWindower):
        problems = list(windower.problems())
    for problem in problems:
        if problem is not None:
            msg = f"step {step_id!r}: {type(windower).__name__} {problem}"
            raise ValueError(msg)
