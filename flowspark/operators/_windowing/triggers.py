"""Triggers: fire a window's running result before it closes (Flink's triggers).

Pass one as `trigger=` to any window operator.  A *fire* emits the window's
running result as an `"early"` pane (on `down` too); with `purge=True`
(Flink's `PurgingTrigger`, fire-and-purge) the window's accumulated state is
then thrown away and the window starts again from `builder(None)`.  The
window still emits when it closes, as usual, unless it was purged and took
in nothing since (there would be nothing to report).

Triggers combine as Beam's composite triggers do (`AfterAny`, `AfterAll`,
`AfterEach`, `Repeatedly`, in `composite_triggers`; Flink builds the same
from its `Trigger` interface).  A trigger *finishes* when it will never fire again: the
built-in ones, like Flink's, never finish (they fire again and again);
`Once(trigger)` finishes after its first fire, as Beam's `AfterCount` and
`AfterProcessingTime` do.  A finished trigger fires no more early panes for
that window; the window still emits when it closes.

A trigger's state per window (values counted, next wake-up, which
subtriggers fired or finished) lives in a `WindowBook`, saved with the
key's snapshot; a combined trigger keeps one book per subtrigger in it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, List, Optional

from typing_extensions import override

from flowspark.dataflow import f_repr
from flowspark.operators._windowing.base import ZERO_TD, is_aware
from flowspark.operators._windowing.clocks import TimestampError, add_clamped, utc_now

__all__ = [
    "CountTrigger",
    "PredicateTrigger",
    "ProcessingTimeTrigger",
    "Trigger",
    "WindowBook",
    "check_trigger",
    "earlier",
    "trigger_problem",
]


def earlier(a: Optional[datetime], b: Optional[datetime]) -> Optional[datetime]:
    """The earlier of two optional moments; `None` only if both are."""
    if a is None:
        return b
    return a if b is None else min(a, b)


@dataclass
class WindowBook:
    """The per-window bookkeeping of emissions and triggers (part of the key's snapshot)."""

    panes: int = 0
    """Emissions so far: the next pane's `index`."""

    count: int = 0
    """Values taken in since the last fire (`CountTrigger`)."""

    next_fire: Optional[datetime] = None
    """System time of the next `ProcessingTimeTrigger` fire; `None` when nothing new to fire."""

    purged: bool = False
    """Purged by a trigger, and no value taken in since."""

    on_time: bool = False
    """The window has closed once already, so each later emission of it is `"late"`."""

    # The fields below came with combined triggers: a book pickled before them reads their
    # defaults from the class (so each must have a plain default, no `default_factory`).

    ready: bool = False
    """Of a subtrigger's book: it said fire, and its combined trigger has not fired it yet."""

    finished: bool = False
    """The trigger of this book finished: it fires no more (for the window's own book: no more early panes)."""

    step: int = 0
    """Of an `AfterEach`'s book: the index of the subtrigger in turn."""

    subs: Optional[List[WindowBook]] = field(default=None)
    """Of a combined trigger's book: one book per subtrigger, in order; `None` until first used."""

    def copy(self) -> WindowBook:
        """A copy that shares nothing mutable with this book (subtriggers' books included)."""
        return replace(self, subs=None if self.subs is None else [sub.copy() for sub in self.subs])

    def absorb(self, other: WindowBook) -> None:
        """Merge the trigger state of a session merged into this one (counts add up, the earlier wake-up wins).

        A subtrigger that fired or finished in either has, in the merged
        session; an `AfterEach` goes on from the further of the two steps,
        as Beam's does.
        """
        self.count += other.count
        self.next_fire = earlier(self.next_fire, other.next_fire)
        self.ready = self.ready or other.ready
        self.finished = self.finished or other.finished
        self.step = max(self.step, other.step)
        if other.subs is not None:
            if self.subs is None:
                self.subs = [sub.copy() for sub in other.subs]
            else:
                for mine, theirs in zip(self.subs, other.subs):
                    mine.absorb(theirs)

    def clear_wakeups(self) -> None:
        """Forget every pending processing-time fire (the window closed)."""
        self.next_fire = None
        for sub in self.subs or ():
            sub.clear_wakeups()


class Trigger(ABC):
    """When to fire a window early; see the module docstring.

    The built-ins are `CountTrigger`, `ProcessingTimeTrigger` and
    `PredicateTrigger`.  A subclass implements `after_value` and, for
    time-driven firing, `now`/`wake_at`/`due`.
    """

    purge: bool
    """Throw the window's state away after each fire (fire-and-purge)."""

    @abstractmethod
    def after_value(self, book: WindowBook, value: Any) -> bool:
        """A window took in `value`; update `book` and say whether to fire now."""

    def fired(self, book: WindowBook) -> None:
        """The window fired (for any reason); reset the trigger's part of `book`."""
        book.count = 0
        book.next_fire = None

    def on_fire(self, book: WindowBook) -> bool:
        """This trigger fired: update `book`, and say whether it is finished (never fires again).

        The default resets the trigger with `fired` and never finishes, as
        Flink's triggers (and flowspark's built-in ones) do.
        """
        self.fired(book)
        return False

    def reset(self, book: WindowBook) -> None:
        """Start this trigger over in `book`, as if the window were new (`Repeatedly` does, when it finished)."""
        book.count = 0
        book.next_fire = None
        book.step = 0
        book.subs = None

    def now(self) -> Optional[datetime]:
        """The system time, for time-driven triggers; `None` for the others."""
        return None

    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        """The system time at which this window wants a wake-up, if any."""
        return None

    def due(self, book: WindowBook, now: datetime) -> bool:
        """Whether a wake-up at system time `now` should fire this window."""
        return False

    def problem(self) -> Optional[str]:
        """What is wrong with this trigger's parameters, if anything."""
        return None


@dataclass(frozen=True)
class CountTrigger(Trigger):
    """Fire every `count` values a window takes in (Flink's `CountTrigger`).

    Values are counted per window, from its start or its last fire.  When a
    value bridges two sessions their counts add up before it counts (as
    Flink's `onMerge` does), so it may fire the merged session.  A late
    value taken in by a kept window re-fires it whatever the count.
    """

    count: int
    purge: bool = False

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        book.count += 1
        return book.count >= self.count

    @override
    def problem(self) -> Optional[str]:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            return f"`CountTrigger.count` must be a positive `int`; got {self.count!r}"
        return None


@dataclass(frozen=True)
class PredicateTrigger(Trigger):
    """Fire right after a value for which `predicate(value)` is true."""

    predicate: Callable[[Any], bool]
    purge: bool = False

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        return bool(self.predicate(value))

    @override
    def problem(self) -> Optional[str]:
        if not callable(self.predicate):
            return f"`PredicateTrigger.predicate` must be callable; got {self.predicate!r}"
        return None


@dataclass(frozen=True)
class ProcessingTimeTrigger(Trigger):
    """Fire a window `interval` of system time after it took in a value it has not fired for.

    So an open window with new values fires at most once per `interval` of
    system time, and an idle one never.  The wake-up is in system time
    (`now_getter`, UTC by default; swap in a `testing.TimeTestingGetter` for
    tests), whatever the clock: it is combined with the clock's event-time
    wake-ups, and the earlier one wins.
    """

    interval: timedelta
    purge: bool = False
    now_getter: Callable[[], datetime] = utc_now

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        if book.next_fire is None:
            book.next_fire = add_clamped(self._read(), self.interval)
        return False

    def _read(self) -> datetime:
        moment = self.now_getter()
        if not isinstance(moment, datetime) or not is_aware(moment):
            msg = (
                f"`ProcessingTimeTrigger.now_getter` {f_repr(self.now_getter)} must return "
                f"a timezone-aware `datetime`; got {moment!r}"
            )
            raise TimestampError(msg)
        return moment

    @override
    def now(self) -> Optional[datetime]:
        return self._read()

    @override
    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        return book.next_fire

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        return book.next_fire is not None and book.next_fire <= now

    @override
    def problem(self) -> Optional[str]:
        if not isinstance(self.interval, timedelta) or self.interval <= ZERO_TD:
            return f"`ProcessingTimeTrigger.interval` must be a positive `timedelta`; got {self.interval!r}"
        if not callable(self.now_getter):
            return f"`ProcessingTimeTrigger.now_getter` must be callable; got {self.now_getter!r}"
        return None


def trigger_problem(trigger: Trigger) -> Optional[str]:
    """What is wrong with a trigger, its `purge` flag included, if anything."""
    problem = trigger.problem()
    if problem is None and not isinstance(getattr(trigger, "purge", None), bool):
        problem = f"`{type(trigger).__name__}.purge` must be a `bool`; got {getattr(trigger, 'purge', None)!r}"
    return problem


def check_trigger(step_id: str, trigger: Any) -> None:
    """Refuse anything but a well-formed `Trigger` (or `None`), naming the step (at build time)."""
    if trigger is None:
        return
    if not isinstance(trigger, Trigger):
        msg = (
            f"step {step_id!r}: `trigger` must be a `CountTrigger`, `ProcessingTimeTrigger` "
            "or `PredicateTrigger`, or triggers combined (`AfterAny`, `AfterAll`, `AfterEach`, "
            f"`Repeatedly`, `Once`), or `None`; got {trigger!r}"
        )
        raise TypeError(msg)
    problem = trigger_problem(trigger)
    if problem is not None:
        msg = f"step {step_id!r}: {problem}"
        raise ValueError(msg)
