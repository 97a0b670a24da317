"""The per-key state machine behind every window operator.

One `KeyWindowLogic` per key runs inside a single `stateful_batch` step and
owns that key's clock, windower, open window logics and (in ordered mode)
the queue of values waiting for the watermark, so all of them are saved and
restored together as one `KeySnapshot`.

It follows Bytewax 0.21.1's `window` operator step for step, with one
deliberate difference: Bytewax throws a key's whole state away once its
windower is empty, so a later straggler meets a brand-new clock, counts as
on time and reopens (and re-emits) a window that already closed.  Here an
idle key keeps a tombstone instead: the clock state and the watermark stay,
the windower is reset, and nothing else is held, so stragglers go to `late`.

How windows emit and what happens to late values and closed windows are
two parts the step's config hands each key's logic: `Emission` and
`Lateness` here behave as Bytewax does.  flowspark's additions live in
their own parts, `emission.PaneEmission` (emit modes, panes, triggers) and
`lateness.KeptLateness` (allowed lateness), which only steps that ask for
them use; a lateness part works on the key's windows through the public
members listed by `parts.KeyWindows`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Tuple, Union

from typing_extensions import override

from flowspark._batch_logic import StatefulBatchLogic
from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import (
    UTC_MIN,
    Clock,
    Windower,
    WindowerLogic,
    WindowLogic,
    is_aware,
)
from flowspark.operators._windowing.clocks import (
    EventClock,
    EventClockLogic,
    SystemClock,
    SystemClockLogic,
    TimestampError,
)
from flowspark.operators._windowing.hopping import HoppingWindower
from flowspark.operators._windowing.logics import FoldBuilder
from flowspark.operators._windowing.parts import (
    Closed,
    Emission,
    Emitted,
    Fired,
    Late,
    Lateness,
    WindowEvent,
)
from flowspark.operators._windowing.windowers import (
    SessionWindower,
    SlidingWindower,
    TumblingWindower,
)

# The events live in `parts`; they are importable here too, where pickles made
# before the split name them.
__all__ = [
    "Closed",
    "Emitted",
    "Fired",
    "KeySnapshot",
    "KeyWindowLogic",
    "Late",
    "WindowConfig",
    "WindowEvent",
]

_VALUE = itemgetter(0)
_TIMESTAMP = itemgetter(1)
"""Parts of a `(value, timestamp)` pair in a key's queue."""


@dataclass(frozen=True)
class KeySnapshot(Generic[V, S]):
    """Everything a key's window state needs to be rebuilt, in one picklable value.

    An idle key (no open window, nothing queued) is a tombstone: the clock
    state, a fresh windower state and the watermark.
    """

    clock_state: Any
    windower_state: Any
    logic_states: Dict[int, S]
    queue: List[Tuple[V, datetime]]
    """Values not yet applied (ordered mode), with their timestamps, in arrival order."""
    watermark: datetime
    """The highest watermark seen outside end of input; it never goes back."""
    history: List[Tuple[V, datetime]] = field(default_factory=list)
    """Recently applied values, for a `SeededWindowerLogic`; in application order."""
    books: Optional[Dict[int, Any]] = None
    """Pane and trigger bookkeeping (`triggers.WindowBook`) of open windows; steps with panes only."""
    kept: Optional[Dict[int, Any]] = None
    """Closed windows kept for `allowed_lateness` (`firing.KeptWindow`); steps with panes only."""


@dataclass(frozen=True)
class WindowConfig(Generic[V, W, S]):
    """The configuration of one window step; called with a snapshot, it builds a key's logic."""

    step_id: str
    clock: Clock[V, Any]
    windower: Windower[Any]
    builder: Callable[[Optional[S]], WindowLogic[V, W, S]]
    ordered: bool

    def __call__(self, resume_state: Optional[KeySnapshot[V, S]]) -> KeyWindowLogic[V, W, S]:
        """Build the logic of one key (the `stateful_batch` builder)."""
        if self.merges_batches:
            return MergingKeyWindowLogic(self, resume_state)
        return KeyWindowLogic(self, resume_state)

    def parts(
        self, keys: KeyWindowLogic[V, W, S], resume_state: Optional[KeySnapshot[V, S]]
    ) -> Tuple[Emission[V, W, S], Lateness[V, W, S]]:
        """The emission and lateness parts of the key logic `keys`: Bytewax's."""
        emission: Emission[V, W, S] = Emission()
        return emission, Lateness(emission)

    @property
    def merges_batches(self) -> bool:
        """Whether a key's batches may be fed as one: built-in clock, windower and fold logic.

        Those emit only when a window closes and stamp values independently
        of batch boundaries, so one call per micro-batch gives the same
        output; a user's own logic, clock or windower keeps one call per
        batch, as in Bytewax.
        """
        return (
            isinstance(self.builder, FoldBuilder)
            and type(self.clock) in (EventClock, SystemClock)
            and type(self.windower) in _FAST_WINDOWERS
        )


_FAST_WINDOWERS = (TumblingWindower, SlidingWindower, SessionWindower, HoppingWindower)
"""The built-in windowers whose logics are safe for the batch-merging fast path (`HoppingWindower` is sliding
windows under Quix Streams' name)."""


class KeyWindowLogic(StatefulBatchLogic[V, WindowEvent[V, W], KeySnapshot[V, S]]):
    """One key's windows: stamps values, routes late ones, applies, merges and closes.

    How windows emit and how late values are treated are parts the step's
    config gives it (`WindowConfig.parts`).
    """

    def __init__(self, config: WindowConfig[V, W, S], resume_state: Optional[KeySnapshot[V, S]]) -> None:
        self._config = config
        if resume_state is None:
            self._clock = config.clock.build(None)
            self._windower = config.windower.build(None)
            self._logics: Dict[int, WindowLogic[V, W, S]] = {}
            self._queue: List[Tuple[V, datetime]] = []
            self._watermark = UTC_MIN
            self._history: List[Tuple[V, datetime]] = []
        else:
            self._clock = config.clock.build(resume_state.clock_state)
            self._windower = config.windower.build(resume_state.windower_state)
            self._logics = {i: config.builder(state) for i, state in resume_state.logic_states.items()}
            self._queue = list(resume_state.queue)
            self._watermark = resume_state.watermark
            self._history = list(resume_state.history)
        self._emission, self._lateness = config.parts(self, resume_state)

    @contextmanager
    def _naming_step(self) -> Iterator[None]:
        """Put the step id in front of a clock's complaint about a bad datetime."""
        try:
            yield
        except TimestampError as ex:
            msg = f"step {self._config.step_id!r}: {ex}"
            raise TypeError(msg) from None

    def _check_aware(self, what: str, moment: Any) -> datetime:
        if not isinstance(moment, datetime) or not is_aware(moment):
            msg = (
                f"step {self._config.step_id!r}: the clock returned a {what} that is not "
                f"a timezone-aware `datetime`: {moment!r}"
            )
            raise TypeError(msg)
        return moment

    # What the lateness part works on (`parts.KeyWindows`).

    @property
    def watermark(self) -> datetime:
        """The key's watermark."""
        return self._watermark

    @property
    def windower(self) -> WindowerLogic[Any]:
        """The key's windower logic."""
        return self._windower

    @property
    def logics(self) -> Dict[int, WindowLogic[V, W, S]]:
        """The key's open windows' logics, by window id (live)."""
        return self._logics

    def flush_to_watermark(self) -> List[WindowEvent[V, W]]:
        """Apply the queued values the watermark has reached and close the windows it passed."""
        return self._flush(self._watermark)

    def apply(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        """Apply `(value, timestamp)` pairs to their windows, as on-time values are."""
        return self._apply(due)

    def remember(self, value: V, timestamp: datetime) -> None:
        """Keep an applied value for windows the windower opens later over its timestamp."""
        self._remember(value, timestamp)

    def _advance(self, watermark: datetime) -> datetime:
        """Record a watermark from the clock; one that went back is held at the old value."""
        self._watermark = max(self._watermark, self._check_aware("watermark", watermark))
        return self._watermark

    def _never_opened(self, window_id: int, why: str) -> RuntimeError:
        msg = (
            f"step {self._config.step_id!r}: {type(self._windower).__name__} {why} "
            f"window {window_id}, which was never opened"
        )
        return RuntimeError(msg)

    def _apply(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        if self._emission.merges_first():
            return self._apply_merging_first(due)
        if not self._windower.places_by_timestamp():
            return self._apply_special(due)
        events: List[WindowEvent[V, W]] = []
        logics = self._logics
        open_for = self._windower.open_for
        for value, timestamp in due:
            for window_id in open_for(timestamp):
                logic = logics.get(window_id)
                if logic is None:
                    logic = logics[window_id] = self._config.builder(None)
                emitted = logic.on_value(value)
                if emitted:
                    events.extend(Emitted(window_id, w) for w in emitted)
        return events

    def _apply_special(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        """`_apply` for windowers that look at values or seed new windows from history."""
        events: List[WindowEvent[V, W]] = []
        for value, timestamp in due:
            for window_id in self._windower.place(value, timestamp):
                events.extend(self._take_into(window_id, value))
            self._remember(value, timestamp)
        return events

    def _apply_merging_first(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        """`_apply` for an emission part that reports merges before the value that causes them (see `_take`)."""
        events: List[WindowEvent[V, W]] = []
        for value, timestamp in due:
            events.extend(self._take(value, timestamp))
        return events

    def _remembered(self, span: Tuple[datetime, datetime]) -> List[V]:
        """The remembered values whose timestamps lie in `span` (both ends included), in application order."""
        first, last = span
        return [value for value, timestamp in self._history if first <= timestamp <= last]

    def _take_into(self, window_id: int, value: V) -> List[WindowEvent[V, W]]:
        """Give `value` to window `window_id`'s logic, opening (and seeding) the window if it is new."""
        events: List[WindowEvent[V, W]] = []
        logic = self._logics.get(window_id)
        if logic is None:
            logic = self._logics[window_id] = self._config.builder(None)
            span = self._windower.seed_span(window_id)
            if span is not None:
                events.extend(self._seed(window_id, logic, span))
        events.extend(self._emission.wrap(window_id, logic.on_value(value)))
        events.extend(self._emission.took_in(window_id, self._logics, value))
        return events

    def _take(self, value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """Apply one value: open its windows, merge the sessions it bridges, then feed it.

        The merge comes before the value is taken in, as in Flink's merging
        window set, so a trigger sees the merged session (counts added up)
        and an emit mode emits its result once.
        """
        window_ids = list(self._windower.place(value, timestamp))
        events, absorbed_into = self._merge_pending()
        for window_id in window_ids:
            while window_id in absorbed_into:
                window_id = absorbed_into[window_id]
            events.extend(self._take_into(window_id, value))
        self._remember(value, timestamp)
        return events

    def _seed(
        self, window_id: int, logic: WindowLogic[V, W, S], span: Tuple[datetime, datetime]
    ) -> List[WindowEvent[V, W]]:
        """Feed a window the windower just opened the remembered values in its `span`."""
        events: List[WindowEvent[V, W]] = []
        values = self._remembered(span)
        for value in values:
            events.extend(self._emission.wrap(window_id, logic.on_value(value)))
        self._emission.seeded(window_id, values)
        return events

    def _remember(self, value: V, timestamp: datetime) -> None:
        """Keep an applied value for windows opened later, if the windower seeds them; forget what is too old to matter.

        Forgetting counts back from this value's timestamp: an out-of-order
        value only makes it keep more than needed, never less.
        """
        memory = self._windower.memory()
        if memory is None:
            return
        self._history.append((value, timestamp))
        try:
            horizon = timestamp - memory
        except OverflowError:
            horizon = UTC_MIN
        if self._history[0][1] < horizon:
            self._history = [(v, t) for v, t in self._history if t >= horizon]

    def _merge_pending(self) -> Tuple[List[WindowEvent[V, W]], Dict[int, int]]:
        """Merge the windows the windower just merged; also return which id each absorbed one went into."""
        events: List[WindowEvent[V, W]] = []
        absorbed_into: Dict[int, int] = {}
        for original_id, target_id in self._windower.merged():
            if original_id == target_id:
                continue
            original = self._logics.pop(original_id, None)
            target = self._logics.get(target_id)
            if original is None or target is None:
                missing = original_id if original is None else target_id
                raise self._never_opened(missing, "merged")
            absorbed_into[original_id] = target_id
            events.extend(self._emission.merged(original_id, target_id, target.on_merge(original)))
        return events, absorbed_into

    def _close(self, watermark: datetime) -> List[WindowEvent[V, W]]:
        events: List[WindowEvent[V, W]] = []
        close = self._lateness.closer(self._windower, watermark)
        for window_id, meta in self._windower.close_for(watermark):
            logic = self._logics.pop(window_id, None)
            if logic is None:
                raise self._never_opened(window_id, "closed")
            events.extend(close(window_id, logic, meta))
        return events

    def _flush(self, watermark: datetime) -> List[WindowEvent[V, W]]:
        """Apply the values that are due, then report merges, then close windows."""
        if self._config.ordered:
            # A stable sort keeps arrival order among equal timestamps, so the
            # due prefix is the due values in timestamp order, then arrival.
            queue = self._queue
            queue.sort(key=_TIMESTAMP)
            cut = bisect_right(queue, watermark, key=_TIMESTAMP)
            due, self._queue = queue[:cut], queue[cut:]
        else:
            due, self._queue = self._queue, []
        events = self._apply(due) + self._merge_pending()[0] + self._close(watermark)
        self._lateness.purge(watermark)
        with self._naming_step():
            events.extend(self._emission.due(self._logics))
        return events

    def _finish(self, events: List[WindowEvent[V, W]]) -> Tuple[List[WindowEvent[V, W]], bool]:
        """Reset an idle key's windower (as Bytewax would) but keep the key: the tombstone."""
        if not self._lateness.holds_any() and not self._logics and not self._queue and self._windower.is_empty():
            self._windower = self._config.windower.build(None)
            self._history = []
        return (events, StatefulBatchLogic.RETAIN)

    @override
    def on_batch(self, values: List[V]) -> Tuple[List[WindowEvent[V, W]], bool]:
        if not values:
            return self.on_notify()
        events: List[WindowEvent[V, W]] = []
        with self._naming_step():
            self._clock.before_batch()
            for value in values:
                timestamp, watermark = self._clock.on_item(value)
                self._check_aware("timestamp", timestamp)
                if timestamp < self._advance(watermark):
                    events.extend(self._late(value, timestamp))
                else:
                    self._queue.append((value, timestamp))
        return self._finish(events + self._flush(self._watermark))

    def _late(self, value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """A value stamped before the watermark: the lateness part places it."""
        return self._lateness.late(self._windower, value, timestamp)

    @override
    def on_notify(self) -> Tuple[List[WindowEvent[V, W]], bool]:
        with self._naming_step():
            watermark = self._advance(self._clock.on_notify())
        return self._finish(self._flush(watermark))

    @override
    def on_eof(self) -> Tuple[List[WindowEvent[V, W]], bool]:
        # The end-of-input watermark closes everything but is not kept, so a
        # later run can continue from this state.
        eof_watermark = max(self._check_aware("watermark", self._clock.on_eof()), self._watermark)
        return self._finish(self._flush(eof_watermark))

    @override
    def notify_at(self) -> Optional[datetime]:
        candidates = [self._windower.notify_at()]
        if self._config.ordered and self._queue:
            candidates.append(min(timestamp for _value, timestamp in self._queue))
        candidates.append(self._lateness.notify_at())
        due = [moment for moment in candidates if moment is not None]
        return self._emission.wake_at(self._clock.to_system_utc(min(due)) if due else None)

    @override
    def snapshot(self) -> KeySnapshot[V, S]:
        return KeySnapshot(
            self._clock.snapshot(),
            self._windower.snapshot(),
            {window_id: logic.snapshot() for window_id, logic in self._logics.items()},
            list(self._queue),
            self._watermark,
            list(self._history),
            self._emission.snapshot(),
            self._lateness.snapshot(),
        )


class MergingKeyWindowLogic(KeyWindowLogic[V, W, S]):
    """A key's windows with a built-in clock, windower and fold (see `merges_batches`).

    Its output does not depend on batch boundaries, and its clock always
    returns aware datetimes, so values take a shorter path.
    """

    MERGE_BATCHES = True

    @override
    def on_batch(self, values: List[V]) -> Tuple[List[WindowEvent[V, W]], bool]:
        if not values:
            return self.on_notify()
        clock: Union[EventClockLogic[V], SystemClockLogic] = self._clock  # type: ignore[assignment]
        with self._naming_step():
            clock.before_batch()
            on_time, late, self._watermark = clock.stamp_all(values, self._watermark)
        self._queue.extend(on_time)
        late_for = self._windower.late_for
        events: List[WindowEvent[V, W]] = [Late(i, value) for value, timestamp in late for i in late_for(timestamp)]
        return self._finish(events + self._flush(self._watermark))

    @override
    def _apply(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        """Fold runs of values that fall in one tumbling window in a tight loop.

        In ordered mode `due` is in timestamp order, so the values of one
        tumbling window come one after another; a fold window emits nothing
        per value.  Other windows take the general path, a value at a time.
        """
        windower = self._windower
        logics = self._logics
        ordered = self._config.ordered
        count = len(due)
        i = 0
        while i < count:
            window = windower.tumbling_window(due[i][1])
            if window is None:
                return super()._apply(due[i:])
            window_id, open_time, close_time = window
            logic = logics.get(window_id)
            if logic is None:
                logic = logics[window_id] = self._config.builder(None)
            if ordered:  # due[i] is in the window and the rest come in timestamp order
                end = bisect_left(due, close_time, i + 1, count, key=_TIMESTAMP)
            else:
                end = i
                while end < count and open_time <= due[end][1] < close_time:
                    end += 1
            if not logic.fold_quietly(map(_VALUE, due[i:end])):
                return super()._apply(due[i:])
            i = end
        return []
