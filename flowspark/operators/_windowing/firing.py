"""A window operator's firing options as one value, `Firing`, and the configuration of steps that use them.

`Firing(emit=..., allowed_lateness=..., trigger=...)` holds what Beam's
`Windowing` holds beside its window function: when panes go out (emit mode
and trigger) and how long closed windows wait for late values.  Every window
operator but `join_window` takes it as `firing=`, or its fields as the
keywords `emit=`, `allowed_lateness=` and `trigger=` (`firing_of` turns
either into one `Firing`, refusing both at once).

A `FiringWindowConfig` gives each key's `per_key.KeyWindowLogic` two parts:
`emission.PaneEmission` (emit modes, panes, triggers) and `KeptLateness`
(allowed lateness), defined here.  A step that uses none of these features
never builds them, so Bytewax flows keep their exact behaviour and the
batch-merging fast path.  The rules, in the order a call applies them:

1. **Late values** (stamped before the watermark).  With `allowed_lateness`
   zero they go to `late`, as in Bytewax.  Otherwise lateness is judged per
   window, as in Flink, and a late value meets the windows as they stand at
   the watermark (the batch is flushed up to it first), so where it goes
   does not depend on how values were batched.

   * Fixed windows (`late_for` names them): each one still open takes the
     value at once (out of timestamp order, even with `ordered`); each one
     closed but still *kept* takes it and immediately emits its corrected
     result as a `"late"` pane.  One that does not exist yet is created, as
     Flink and Kafka Streams do, if the watermark has not passed its end
     plus the lateness: opened as usual if it has not ended, else created
     closed and kept, emitting its result as a `"late"` pane and then its
     metadata on `meta`.  The rest go to `late`.  Record sliding windows
     also offer the value to every kept window whose span holds it (their
     `late_for` names open ones only), and remember it, if any window took
     it, for windows opened later; they create no window for it.
   * Sessions (`SessionWindower`, `DynamicSessionWindower`): the value
     reaches over `[t, t + gap]` (`gap_for(value)` for dynamic ones); every
     open or kept session whose `[open_time, reach]` touches it, or touches
     one that does, forms one session with it, as in Flink's merging window
     set.  If that session ends at or after the watermark (it holds an open
     session, or the value reaches that far) the kept ones are opened again
     and the value is applied as if on time, merging them; the session
     closes again later, its emission then a `"late"` pane.  Otherwise the
     kept ones merge into the one opened first (the others' ids go to
     `merged_ids`), which takes the value, stretches, re-fires as a
     `"late"` pane, and reports its new metadata on `meta`.  A value that
     touches no session opens one that way, closed and kept, if the
     watermark has not passed its reach plus the lateness; else it goes to
     `late`.
   * Other windowers that return `LATE_SESSION_ID`: the first kept window
     whose `[open_time, reach]` holds `t` re-fires; else `late`.

   Count windows refuse `allowed_lateness` (`window` checks).
2. **Values taken in** (on time, or late as above): a value that bridges
   sessions first merges them (see 3), then the merged session takes it.
   After each value the window's running result is emitted as an
   `"early"` pane if `emit` is `"current"`/`"current_and_final"` or the
   trigger fires (once if both); a purging trigger then resets the window
   to `builder(None)`.  A record sliding window opened over remembered
   values is fed them first: its trigger counts them, but only the value
   that opened it can fire it or emit its running result, so seeding adds
   no pane of its own (only items a custom logic returns from `on_value`).
3. **Merges** (sessions) happen before the value that causes them is taken
   in, as in Flink: trigger counts add up, and the trigger then sees the
   value in the merged session (a merge does not fire by itself).  Items a
   custom logic returns from `on_merge` are emitted as `"early"` panes.
4. **Closes**: if `emit` includes final and the window was not purged
   without new values since, its result is emitted as an `"on_time"` pane
   (`"late"` if it had closed before and was opened again by a late
   value), then its metadata goes to `meta`.  If `allowed_lateness` is
   positive and the watermark has not yet reached the window's *reach*
   plus the lateness (for sessions: not yet passed it, since their gap
   counts inclusively), the window is *kept* for late values instead of
   being dropped; it is dropped, silently, once the watermark gets there.
   The reach is where the window closed: `close_time`, `close_time + gap`
   for a `SessionWindower`, the furthest `t + gap_for(value)` of its
   values for a `DynamicSessionWindower`.
5. **Processing-time triggers** fire open windows whose wake-up has come.

The *running result* of a window is, for the fold-based operators, a deep
copy of the accumulator (finished, e.g. a mean, where the operator has a
finishing step), so later values cannot change what was emitted.  For a
custom `WindowLogic` it is what the window would emit if it closed now: a
copy is rebuilt from `logic.snapshot()` with the step's builder and its
`on_close()` items are emitted (one pane each); the live logic is never
closed early.  A kept window's results (on time and late) are computed the
same way, since its live logic must keep taking values.  Items a custom
logic returns from `on_value`/`on_merge` are emitted as they are, as
`"early"` panes (`"late"` for a kept window).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Set, Tuple

from typing_extensions import TypedDict, override

from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import (
    LATE_SESSION_ID,
    ZERO_TD,
    WindowerLogic,
    WindowLogic,
    WindowMetadata,
)
from flowspark.operators._windowing.emission import PaneEmission
from flowspark.operators._windowing.panes import EmitMode, check_allowed_lateness, check_emit
from flowspark.operators._windowing.parts import Closed, Emission, Late, Lateness, WindowCloser, WindowEvent
from flowspark.operators._windowing.per_key import KeySnapshot, KeyWindowLogic, WindowConfig
from flowspark.operators._windowing.triggers import Trigger, WindowBook, check_trigger

__all__ = [
    "Firing",
    "FiringKeyWindowLogic",
    "FiringKeywords",
    "FiringWindowConfig",
    "KeptLateness",
    "KeptWindow",
    "firing_of",
]


@dataclass(frozen=True)
class Firing:
    """When a window operator emits and how long it waits for late values: one value, as Beam's `Windowing`.

    Pass it as `firing=` to any window operator but `join_window`.  The
    default, `Firing()`, is Bytewax's behaviour: the step is wired and runs
    exactly as in Bytewax 0.21.1.  Any other value also builds the
    operator's `panes` stream; see `window` for the rules.

    * `emit`: `"final"` (default), `"current"` or `"current_and_final"`
      (an `EmitMode`): emit when the window closes, after each value, or
      both (Beam's accumulating early panes, Quix Streams' `.current()`).
    * `allowed_lateness`: how long, in event time, a closed window is kept
      for late values that correct it (Beam's and Flink's allowed lateness,
      Kafka Streams' grace); a non-negative `timedelta`, zero by default.
    * `trigger`: fire a window early (`CountTrigger`,
      `ProcessingTimeTrigger`, `PredicateTrigger`, or several combined
      with `AfterAny`, `AfterAll`, `AfterEach`, `Repeatedly` and `Once`).

    The old keywords `emit=`, `allowed_lateness=` and `trigger=` are still
    accepted by every operator (one or the other, not both).  Bad values
    fail when the flow is built, naming the step.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)
    every_two = win.Firing(trigger=win.CountTrigger(2))

    readings = [("a", (T0 + timedelta(seconds=s), 1)) for s in [1, 2, 3]]
    flow = Dataflow("firing_eg")
    keyed = op.input("inp", flow, TestingSource(readings))
    counts = win.sum_window("count", keyed, clock, ten_s, by=lambda v: v[1], firing=every_two)
    out = []
    op.output("out", counts.panes, TestingSink(out))
    run_main(flow)
    assert [(p.value, p.timing) for _key, (_window_id, p) in out] == [(2, "early"), (3, "on_time")]
    ```
    """

    emit: EmitMode = "final"
    """When results go out: `"final"`, `"current"` or `"current_and_final"`."""

    allowed_lateness: timedelta = ZERO_TD
    """How long a closed window is kept for late values; zero is Bytewax's behaviour."""

    trigger: Optional[Trigger] = None
    """What fires a window before it closes, if anything."""

    @property
    def is_plain(self) -> bool:
        """Whether this is Bytewax's behaviour: emit when closed, nothing kept, no trigger."""
        return self.emit == "final" and self.allowed_lateness == ZERO_TD and self.trigger is None

    def check(self, step_id: str) -> None:
        """Refuse a bad field, naming the step (at build time)."""
        check_emit(step_id, self.emit)
        check_allowed_lateness(step_id, self.allowed_lateness)
        check_trigger(step_id, self.trigger)


class FiringKeywords(TypedDict, total=False):
    """The fields of `Firing` as separate keywords, as window operators took them before it (still accepted)."""

    emit: EmitMode
    allowed_lateness: timedelta
    trigger: Optional[Trigger]


_FIRING_FIELDS = ("emit", "allowed_lateness", "trigger")


def firing_of(step_id: str, firing: Optional[Firing], keywords: Mapping[str, Any]) -> Firing:
    """The one `Firing` a window operator was given: `firing`, or one made of the old keywords.

    Raises `TypeError`, naming the step, for both at once, for a `firing`
    that is not a `Firing`, and for a keyword the operators do not take.
    """
    unknown = sorted(set(keywords) - set(_FIRING_FIELDS))
    if unknown:
        names = ", ".join(f"`{name}`" for name in unknown)
        msg = f"step {step_id!r}: unexpected keyword argument(s) {names}; the window operators take `firing=`"
        raise TypeError(msg)
    if firing is None:
        return Firing(**keywords)
    if not isinstance(firing, Firing):
        msg = f"step {step_id!r}: `firing` must be a `Firing` (or `None`); got {firing!r}"
        raise TypeError(msg)
    if keywords:
        given = ", ".join(f"`{name}=`" for name in _FIRING_FIELDS if name in keywords)
        msg = (
            f"step {step_id!r}: got both `firing=` and {given}; pass one or the other "
            "(put the keywords' values in the `Firing`, e.g. `Firing(emit=..., trigger=...)`)"
        )
        raise TypeError(msg)
    return firing


@dataclass(frozen=True)
class FiringWindowConfig(WindowConfig[V, W, S]):
    """A window step's configuration with flowspark's emission features.

    `window` uses it only when `emit`, `allowed_lateness` or `trigger` is
    not the default, so a Bytewax flow's configuration (and its recovery
    fingerprint) stays a plain `WindowConfig`.
    """

    emit: EmitMode = "final"
    allowed_lateness: timedelta = ZERO_TD
    trigger: Optional[Trigger] = None

    @property
    @override
    def merges_batches(self) -> bool:
        """Never: output depends on each value's moment (early panes, lateness per window)."""
        return False

    @override
    def parts(
        self, keys: KeyWindowLogic[V, W, S], resume_state: Optional[KeySnapshot[V, S]]
    ) -> Tuple[Emission[V, W, S], Lateness[V, W, S]]:
        """Panes for emission; closed windows kept for `allowed_lateness` (if positive)."""
        books = None if resume_state is None else resume_state.books
        kept = None if resume_state is None else resume_state.kept
        emission: PaneEmission[V, W, S] = PaneEmission(self.builder, self.emit, self.trigger, books)
        return emission, KeptLateness(keys, emission, self.allowed_lateness, self.builder, kept)


FiringKeyWindowLogic = KeyWindowLogic
"""The key logic a `FiringWindowConfig` builds: `KeyWindowLogic` with its panes and lateness parts."""


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
        keys: KeyWindowLogic[V, W, S],
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
        return self._keys._windower.kept_until(reach, self._allowed)

    # Late values.

    @override
    def late(self, windower: WindowerLogic[Any], value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        if self._allowed <= ZERO_TD:
            return super().late(windower, value, timestamp)
        # Bring the windows up to the watermark first, so a late value meets
        # them as it would in a batch of its own.
        keys = self._keys
        return keys._flush(keys._watermark) + self._place_late(value, timestamp)

    def _place_late(self, value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """Give a late value to the windows that still take it, opening them if need be; the rest to `late`."""
        windower = self._keys._windower
        open_spans = windower.session_spans()
        if open_spans is not None:
            return self._late_in_session(open_spans, value, timestamp)
        window_ids = windower.late_windows(timestamp, self._kept)
        if window_ids == [LATE_SESSION_ID] and self._cannot_tell(LATE_SESSION_ID):
            return self._late_by_span(value, timestamp)
        events: List[WindowEvent[V, W]] = []
        taken = False
        for window_id in window_ids:
            if window_id in self._keys._logics:
                logic = self._keys._logics[window_id]
                events.extend(self._panes.wrap(window_id, logic.on_value(value)))
                events.extend(self._panes.took_in(window_id, self._keys._logics, value))
                taken = True
            elif window_id in self._kept:
                events.extend(self._refire(window_id, value))
                taken = True
            else:
                meta = windower.late_window(window_id)
                if meta is not None and self._purge_at(meta.close_time) > self._keys._watermark:
                    events.extend(self._open_late(window_id, meta, value))
                else:
                    events.append(Late(window_id, value))
        if taken:
            # Windows opened later over its timestamp take it from memory, like any applied value.
            self._keys._remember(value, timestamp)
        return events

    def _open_late(self, window_id: int, meta: WindowMetadata, value: V) -> List[WindowEvent[V, W]]:
        """Create the fixed window a late value is the first to fall in (Flink and Kafka Streams do).

        If the window has not ended yet it opens as usual.  If it has, it is
        created closed and kept: it emits its result at once as a `"late"`
        pane, then reports its metadata on `meta`.
        """
        if meta.close_time > self._keys._watermark:
            self._keys._windower.reopen(window_id, meta, meta.close_time)
            logic = self._keys._logics[window_id] = self._builder(None)
            return self._panes.wrap(window_id, logic.on_value(value)) + self._panes.took_in(
                window_id, self._keys._logics, value
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
        windower = self._keys._windower
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
        if touched_open or high >= self._keys._watermark:
            for window_id in touched_kept:
                self._revive(window_id)
            return self._keys._apply([(value, timestamp)])
        if touched_kept:
            return self._merge_kept(touched_kept, value, timestamp, high)
        purge_at = self._purge_at(high)
        if purge_at <= self._keys._watermark:
            return [Late(LATE_SESSION_ID, value)]
        window_id = windower.new_id()
        meta = WindowMetadata(timestamp, timestamp)
        self._kept[window_id] = _Kept(self._builder(None), meta, high, purge_at, WindowBook(on_time=True))
        return self._refire(window_id, value) + [Closed(window_id, copy.deepcopy(meta))]

    def _revive(self, window_id: int) -> None:
        """Open a kept session again: a late value extends it past the watermark or joins it to an open one."""
        kept = self._kept.pop(window_id)
        self._keys._windower.reopen(window_id, copy.deepcopy(kept.meta), kept.reach)
        self._keys._logics[window_id] = kept.logic
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
            window_id not in self._keys._logics
            and window_id not in self._kept
            and not self._keys._windower.names_late_windows()
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
