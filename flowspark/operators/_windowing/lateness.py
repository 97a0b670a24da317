"""The lateness part of a step with allowed lateness: closed windows kept for late values.

`KeptLateness` is the part a `firing.FiringWindowConfig` gives each key's
logic beside its `emission.PaneEmission`: it closes windows through the
panes, keeps each closed window until the watermark passes its reach plus
`allowed_lateness`, and places late values among the key's windows (rule 1
of `firing`).  It works on the key's windows only through `parts.KeyWindows`.
A kept window is saved in the key's snapshot as a `KeptWindow`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Generic, List, Optional, Set, Tuple

from typing_extensions import override

from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import (
    LATE_SESSION_ID,
    ZERO_TD,
    WindowerLogic,
    WindowLogic,
    WindowMetadata,
)
from flowspark.operators._windowing.emission import PaneEmission
from flowspark.operators._windowing.parts import Closed, KeyWindows, Late, Lateness, WindowCloser, WindowEvent
from flowspark.operators._windowing.triggers import WindowBook

__all__ = ["KeptLateness", "KeptWindow"]


@dataclass(frozen=True)
class KeptWindow(Generic[S]):
    """A closed window kept for late values, as saved in the key's snapshot."""

    state: S
    """The window logic's snapshot."""
    meta: WindowMetadata
    """The metadata reported on `meta` when it closed."""
    reach: datetime
    """Where it closed: `close_time`, plus the gap for sessions (a dynamic session's furthest reach)."""
    purge_at: datetime
    """Dropped once the watermark reaches this: `reach` plus `allowed_lateness` (plus 1 µs for sessions)."""
    book: WindowBook
    """Its pane bookkeeping (the next pane's index)."""


@dataclass
class _Kept(Generic[V, W, S]):
    """A kept window, live."""

    logic: WindowLogic[V, W, S]
    meta: WindowMetadata
    reach: datetime
    purge_at: datetime
    book: WindowBook


class KeptLateness(Lateness[V, W, S]):
    """The lateness part of a step with panes: closed windows kept for `allowed_lateness` (see the module).

    With no allowed lateness it behaves as `Lateness` does, but closes
    windows through its panes.  It works on the key's windows through
    `keys`, the key logic it is a part of: a late value is placed among
    them as they stand at the watermark.
    """

    def __init__(
        self,
        keys: KeyWindows[V, W, S],
        emission: PaneEmission[V, W, S],
        allowed_lateness: timedelta,
        builder: Callable[[Optional[S]], WindowLogic[V, W, S]],
        kept: Optional[Dict[int, Any]],
    ) -> None:
        super().__init__(emission)
        self._keys = keys
        self._panes = emission
        self._allowed = allowed_lateness
        self._builder = builder
        self._kept: Dict[int, _Kept[V, W, S]] = {
            i: _Kept(builder(k.state), copy.deepcopy(k.meta), k.reach, k.purge_at, k.book.copy())
            for i, k in (kept or {}).items()
        }

    # Closing and dropping.

    @override
    def closer(self, windower: WindowerLogic[Any], watermark: datetime) -> WindowCloser[V, W, S]:
        """Close through the panes; keep the window while the watermark has not reached its lateness."""
        lateness = self._allowed
        if lateness <= ZERO_TD:
            return self._panes.close
        # Read before `close_for` forgets the sessions it closes.
        spans = windower.session_spans()

        def close(window_id: int, logic: WindowLogic[V, W, S], meta: WindowMetadata) -> List[WindowEvent[V, W]]:
            reach = meta.close_time if spans is None else spans[window_id][1]
            purge_at = windower.kept_until(reach, lateness)
            keep = purge_at > watermark
            events, book = self._panes.finish(window_id, logic, meta, keep)
            if keep:
                self._kept[window_id] = _Kept(logic, copy.deepcopy(meta), reach, purge_at, book)
            return events

        return close

    @override
    def purge(self, watermark: datetime) -> None:
        if self._kept:
            self._kept = {i: k for i, k in self._kept.items() if k.purge_at > watermark}

    @override
    def holds_any(self) -> bool:
        return bool(self._kept)

    @override
    def notify_at(self) -> Optional[datetime]:
        return min((k.purge_at for k in self._kept.values()), default=None)

    @override
    def snapshot(self) -> Optional[Dict[int, Any]]:
        return {
            i: KeptWindow(k.logic.snapshot(), copy.deepcopy(k.meta), k.reach, k.purge_at, k.book.copy())
            for i, k in self._kept.items()
        }

    def _purge_at(self, reach: datetime) -> datetime:
        """When a window that closed at `reach` is dropped: the windower answers (`kept_until`)."""
        return self._keys.windower.kept_until(reach, self._allowed)

    # Late values.

    @override
    def late(self, windower: WindowerLogic[Any], value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        if self._allowed <= ZERO_TD:
            return super().late(windower, value, timestamp)
        # Bring the windows up to the watermark first, so a late value meets
        # them as it would in a batch of its own.
        keys = self._keys
        return keys.flush_to_watermark() + self._place_late(value, timestamp)

    def _place_late(self, value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """Give a late value to the windows that still take it, opening them if need be; the rest to `late`."""
        windower = self._keys.windower
        open_spans = windower.session_spans()
        if open_spans is not None:
            return self._late_in_session(open_spans, value, timestamp)
        window_ids = windower.late_windows(timestamp, self._kept)
        if window_ids == [LATE_SESSION_ID] and self._cannot_tell(LATE_SESSION_ID):
            return self._late_by_span(value, timestamp)
        events: List[WindowEvent[V, W]] = []
        taken = False
        for window_id in window_ids:
            if window_id in self._keys.logics:
                logic = self._keys.logics[window_id]
                events.extend(self._panes.wrap(window_id, logic.on_value(value)))
                events.extend(self._panes.took_in(window_id, self._keys.logics, value))
                taken = True
            elif window_id in self._kept:
                events.extend(self._refire(window_id, value))
                taken = True
            else:
                meta = windower.late_window(window_id)
                if meta is not None and self._purge_at(meta.close_time) > self._keys.watermark:
                    events.extend(self._open_late(window_id, meta, value))
                else:
                    events.append(Late(window_id, value))
        if taken:
            # Windows opened later over its timestamp take it from memory, like any applied value.
            self._keys.remember(value, timestamp)
        return events

    def _open_late(self, window_id: int, meta: WindowMetadata, value: V) -> List[WindowEvent[V, W]]:
        """Create the fixed window a late value is the first to fall in (Flink and Kafka Streams do).

        If the window has not ended yet it opens as usual.  If it has, it is
        created closed and kept: it emits its result at once as a `"late"`
        pane, then reports its metadata on `meta`.
        """
        if meta.close_time > self._keys.watermark:
            self._keys.windower.reopen(window_id, meta, meta.close_time)
            logic = self._keys.logics[window_id] = self._builder(None)
            return self._panes.wrap(window_id, logic.on_value(value)) + self._panes.took_in(
                window_id, self._keys.logics, value
            )
        purge_at = self._purge_at(meta.close_time)
        book = WindowBook(on_time=True)
        self._kept[window_id] = _Kept(self._builder(None), meta, meta.close_time, purge_at, book)
        return self._refire(window_id, value) + [Closed(window_id, copy.deepcopy(meta))]

    def _late_in_session(
        self, open_spans: Dict[int, Tuple[datetime, datetime]], value: V, timestamp: datetime
    ) -> List[WindowEvent[V, W]]:
        """Place a late value among the open and kept sessions, as Flink's merging window set does.

        `open_spans` are the windower's `session_spans()`.  The value
        reaches over `[t, reach]` (the windower's `reach_of`); every session,
        open or kept, whose `[open_time, reach]` touches it, or touches a
        session that does, joins one session with it.  If that session ends
        at or after the watermark (it holds an open session, or the value
        reaches that far), the kept ones are opened again and the value is
        applied as if on time.  Otherwise the kept ones merge into the one
        that opened first, which takes the value, stretches and re-fires
        (a `"late"` pane, and its new metadata on `meta`); a value touching
        no session opens a new one that way, if its reach is within the
        allowed lateness; else it goes to `late`.
        """
        windower = self._keys.windower
        low, high = timestamp, windower.reach_of(value, timestamp)
        touched_open: Set[int] = set()
        touched_kept: List[int] = []
        grew = True
        while grew:
            grew = False
            for window_id, (first, last) in open_spans.items():
                if window_id not in touched_open and first <= high and low <= last:
                    touched_open.add(window_id)
                    low, high, grew = min(low, first), max(high, last), True
            for window_id, kept in self._kept.items():
                if window_id not in touched_kept and kept.meta.open_time <= high and low <= kept.reach:
                    touched_kept.append(window_id)
                    low, high, grew = min(low, kept.meta.open_time), max(high, kept.reach), True
        if touched_open or high >= self._keys.watermark:
            for window_id in touched_kept:
                self._revive(window_id)
            return self._keys.apply([(value, timestamp)])
        if touched_kept:
            return self._merge_kept(touched_kept, value, timestamp, high)
        purge_at = self._purge_at(high)
        if purge_at <= self._keys.watermark:
            return [Late(LATE_SESSION_ID, value)]
        window_id = windower.new_id()
        meta = WindowMetadata(timestamp, timestamp)
        self._kept[window_id] = _Kept(self._builder(None), meta, high, purge_at, WindowBook(on_time=True))
        return self._refire(window_id, value) + [Closed(window_id, copy.deepcopy(meta))]

    def _revive(self, window_id: int) -> None:
        """Open a kept session again: a late value extends it past the watermark or joins it to an open one."""
        kept = self._kept.pop(window_id)
        self._keys.windower.reopen(window_id, copy.deepcopy(kept.meta), kept.reach)
        self._keys.logics[window_id] = kept.logic
        self._panes.adopt(window_id, kept.book)

    def _merge_kept(
        self, window_ids: List[int], value: V, timestamp: datetime, reach: datetime
    ) -> List[WindowEvent[V, W]]:
        """Merge kept sessions a late value bridges into the one that opened first; it takes the value and re-fires."""
        ordered = sorted(window_ids, key=lambda i: (self._kept[i].meta.open_time, i))
        target_id = ordered[0]
        target = self._kept[target_id]
        meta = copy.deepcopy(target.meta)
        events: List[WindowEvent[V, W]] = []
        for other_id in ordered[1:]:
            other = self._kept.pop(other_id)
            events.extend(self._panes.emit(target_id, target.logic.on_merge(other.logic), "late", target.book))
            meta.open_time = min(meta.open_time, other.meta.open_time)
            meta.close_time = max(meta.close_time, other.meta.close_time)
            meta.merged_ids.add(other_id)
        meta.open_time = min(meta.open_time, timestamp)
        meta.close_time = max(meta.close_time, timestamp)
        changed = meta != target.meta
        target.meta = meta
        target.reach = reach
        target.purge_at = self._purge_at(reach)
        events.extend(self._refire(target_id, value))
        if changed:
            events.append(Closed(target_id, copy.deepcopy(meta)))
        return events

    def _cannot_tell(self, window_id: int) -> bool:
        """Whether `late_for` returned the "cannot tell" sentinel rather than a real window id.

        Windowers whose `names_late_windows` says so (fixed-length windows,
        record sliding ones) have real ids that may be negative, `-1`
        included.
        """
        return (
            window_id not in self._keys.logics
            and window_id not in self._kept
            and not self._keys.windower.names_late_windows()
        )

    def _late_by_span(self, value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """A late value whose (user-defined) windower cannot name its window: the first kept window spanning it re-fires."""
        for window_id, kept in self._kept.items():
            if kept.meta.open_time <= timestamp <= kept.reach:
                return self._refire(window_id, value)
        return [Late(LATE_SESSION_ID, value)]

    def _refire(self, window_id: int, value: V) -> List[WindowEvent[V, W]]:
        """A kept window takes a late value and emits its corrected result."""
        kept = self._kept[window_id]
        kept.book.purged = False
        events = self._panes.emit(window_id, kept.logic.on_value(value), "late", kept.book)
        events.extend(self._panes.emit(window_id, self._panes.running(kept.logic), "late", kept.book))
        return events
