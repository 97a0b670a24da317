"""Triggers: fire a window's running result before it closes (Flink's triggers).

Pass one as `trigger=` to any window operator.  A *fire* emits the window's
running result as an `"early"` pane (on `down` too); with `purge=True`
(Flink's `PurgingTrigger`, fire-and-purge) the window's accumulated state is
then thrown away and the window starts again from `builder(None)`.  The
window still emits when it closes, as usual, unless it was purged and took
in nothing since (there would be nothing to report).

Triggers combine as Beam's composite triggers do (`AfterAny`, `AfterAll`,
`AfterEach`, `Repeatedly`; Flink builds the same from its `Trigger`
interface).  A trigger *finishes* when it will never fire again: the
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
from typing import Any, Callable, List, Optional, Sequence, Tuple

from typing_extensions import override

from flowspark.dataflow import f_repr
from flowspark.operators._windowing.base import ZERO_TD, is_aware
from flowspark.operators._windowing.clocks import TimestampError, add_clamped, utc_now

__all__ = [
    "AfterAll",
    "AfterAny",
    "AfterEach",
    "AfterFirst",
    "CountTrigger",
    "Once",
    "PredicateTrigger",
    "ProcessingTimeTrigger",
    "Repeatedly",
    "Trigger",
    "WindowBook",
    "check_trigger",
    "earlier",
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


# Combined triggers (Beam's composite triggers).


def _problem_of(trigger: Trigger) -> Optional[str]:
    """What is wrong with a trigger, its `purge` flag included, if anything."""
    problem = trigger.problem()
    if problem is None and not isinstance(getattr(trigger, "purge", None), bool):
        problem = f"`{type(trigger).__name__}.purge` must be a `bool`; got {getattr(trigger, 'purge', None)!r}"
    return problem


def _subtriggers_problem(owner: str, triggers: Sequence[Any], least: int) -> Optional[str]:
    """What is wrong with a combined trigger's subtriggers, if anything."""
    if len(triggers) < least:
        return f"`{owner}` needs at least {least} trigger(s); got {len(triggers)}"
    for sub in triggers:
        if not isinstance(sub, Trigger):
            return f"`{owner}` combines triggers; got {sub!r}"
        if getattr(sub, "purge", False) is True:
            return f"`{owner}`: set `purge=True` on the outermost trigger only; got {sub!r}"
        problem = _problem_of(sub)
        if problem is not None:
            return problem
    return None


class _Combined(Trigger):
    """A trigger made of subtriggers, each with its own book in `book.subs`."""

    triggers: Tuple[Trigger, ...]

    def _subs(self, book: WindowBook) -> List[WindowBook]:
        if book.subs is None or len(book.subs) != len(self.triggers):
            book.subs = [WindowBook() for _ in self.triggers]
        return book.subs

    def _live(self, book: WindowBook) -> List[Tuple[Trigger, WindowBook]]:
        """The subtriggers not finished, with their books."""
        return [(t, sub) for t, sub in zip(self.triggers, self._subs(book)) if not sub.finished]

    @override
    def now(self) -> Optional[datetime]:
        for trigger in self.triggers:
            moment = trigger.now()
            if moment is not None:
                return moment
        return None

    @override
    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        at: Optional[datetime] = None
        for trigger, sub in self._live(book):
            if not sub.ready:
                at = earlier(at, trigger.wake_at(sub))
        return at

    @override
    def problem(self) -> Optional[str]:
        return _subtriggers_problem(type(self).__name__, self.triggers, 1)


@dataclass(frozen=True, init=False)
class AfterAny(_Combined):
    """Fire when any of `triggers` fires; finished as soon as one that fired finishes (Beam's `AfterAny`).

    Every value goes to every subtrigger not finished; when it fires, each
    subtrigger that said fire is fired (reset), the others keep their
    state.  Beam's classic "every 100 values or every minute, whichever
    comes first" is `AfterAny(CountTrigger(100),
    ProcessingTimeTrigger(timedelta(minutes=1)))`; to start both over at
    each fire, as Beam's `Repeatedly(AfterAny(AfterCount(100),
    AfterProcessingTime(60)))` does, write `Repeatedly(AfterAny(Once(...),
    Once(...)))`.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    minute = win.TumblingWindower(timedelta(minutes=1), T0)
    # Every 3 values, or right after a value over 100, whichever comes first.
    trigger = win.AfterAny(win.CountTrigger(3), win.PredicateTrigger(lambda v: v[1] > 100))

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in enumerate([5, 500, 7, 8, 9])]
    flow = Dataflow("after_any_eg")
    keyed = op.input("inp", flow, TestingSource(readings))
    sums = win.sum_window("sum", keyed, clock, minute, by=lambda v: v[1], trigger=trigger)
    out = []
    op.output("out", sums.panes, TestingSink(out))
    run_main(flow)
    assert [(p.value, p.timing) for _key, (_id, p) in out] == [(505, "early"), (512, "early"), (529, "on_time")]
    ```
    """

    triggers: Tuple[Trigger, ...]
    purge: bool = False

    def __init__(self, *triggers: Trigger, purge: bool = False) -> None:
        object.__setattr__(self, "triggers", tuple(triggers))
        object.__setattr__(self, "purge", purge)

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        fire = False
        for trigger, sub in self._live(book):
            sub.ready = trigger.after_value(sub, value)
            fire = fire or sub.ready
        return fire

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        fire = False
        for trigger, sub in self._live(book):
            sub.ready = trigger.due(sub, now)
            fire = fire or sub.ready
        return fire

    @override
    def on_fire(self, book: WindowBook) -> bool:
        finished = False
        for trigger, sub in self._live(book):
            if sub.ready:
                sub.ready = False
                if trigger.on_fire(sub):
                    sub.finished = finished = True
        return finished


AfterFirst = AfterAny
"""Beam Java's name for `AfterAny`."""


@dataclass(frozen=True, init=False)
class AfterAll(_Combined):
    """Fire once every one of `triggers` has fired; finished when all are (Beam's `AfterAll`).

    A subtrigger that said fire waits, ready, until the others have too;
    then all of them are fired (reset) at once.  A finished subtrigger
    counts as ready.
    """

    triggers: Tuple[Trigger, ...]
    purge: bool = False

    def __init__(self, *triggers: Trigger, purge: bool = False) -> None:
        object.__setattr__(self, "triggers", tuple(triggers))
        object.__setattr__(self, "purge", purge)

    def _all_ready(self, book: WindowBook) -> bool:
        return all(sub.ready or sub.finished for sub in self._subs(book))

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        for trigger, sub in self._live(book):
            if trigger.after_value(sub, value):
                sub.ready = True
        return self._all_ready(book)

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        for trigger, sub in self._live(book):
            if not sub.ready and trigger.due(sub, now):
                sub.ready = True
        return self._all_ready(book)

    @override
    def on_fire(self, book: WindowBook) -> bool:
        for trigger, sub in self._live(book):
            sub.ready = False
            if trigger.on_fire(sub):
                sub.finished = True
        return all(sub.finished for sub in self._subs(book))


@dataclass(frozen=True, init=False)
class AfterEach(_Combined):
    """Each of `triggers` in turn: fire when the one in turn fires; move on when it finishes (Beam's `AfterEach`).

    Only the subtrigger in turn sees values.  One that never finishes (any
    built-in trigger but under `Once`) keeps its turn for good; the
    `AfterEach` finishes when its last subtrigger does.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    minute = win.TumblingWindower(timedelta(minutes=1), T0)
    # Fire at the first value, then every 3 values.
    trigger = win.AfterEach(win.Once(win.CountTrigger(1)), win.CountTrigger(3))

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in enumerate([1, 2, 3, 4, 5, 6])]
    flow = Dataflow("after_each_eg")
    keyed = op.input("inp", flow, TestingSource(readings))
    sums = win.sum_window("sum", keyed, clock, minute, by=lambda v: v[1], trigger=trigger)
    out = []
    op.output("out", sums.panes, TestingSink(out))
    run_main(flow)
    assert [(p.value, p.timing) for _key, (_id, p) in out] == [(1, "early"), (10, "early"), (21, "on_time")]
    ```
    """

    triggers: Tuple[Trigger, ...]
    purge: bool = False

    def __init__(self, *triggers: Trigger, purge: bool = False) -> None:
        object.__setattr__(self, "triggers", tuple(triggers))
        object.__setattr__(self, "purge", purge)

    def _current(self, book: WindowBook) -> Optional[Tuple[Trigger, WindowBook]]:
        subs = self._subs(book)
        if book.step >= len(self.triggers):
            return None
        return self.triggers[book.step], subs[book.step]

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        current = self._current(book)
        return current is not None and current[0].after_value(current[1], value)

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        current = self._current(book)
        return current is not None and current[0].due(current[1], now)

    @override
    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        current = self._current(book)
        return None if current is None else current[0].wake_at(current[1])

    @override
    def on_fire(self, book: WindowBook) -> bool:
        current = self._current(book)
        if current is not None and current[0].on_fire(current[1]):
            current[1].finished = True
            book.step += 1
        return book.step >= len(self.triggers)


@dataclass(frozen=True)
class Repeatedly(Trigger):
    """Fire whenever `trigger` fires, starting it over each time it finishes; never finishes (Beam's `Repeatedly`).

    Over a built-in trigger, which never finishes, it changes nothing; over
    `Once(...)`, or a combined trigger that finishes, it starts that one
    over from scratch.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    minute = win.TumblingWindower(timedelta(minutes=1), T0)
    # As `AfterAny`'s example, but both start over at each fire.
    trigger = win.Repeatedly(win.AfterAny(win.Once(win.CountTrigger(3)), win.Once(win.PredicateTrigger(lambda v: v[1] > 100))))

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in enumerate([5, 500, 7, 8, 9])]
    flow = Dataflow("repeatedly_eg")
    keyed = op.input("inp", flow, TestingSource(readings))
    sums = win.sum_window("sum", keyed, clock, minute, by=lambda v: v[1], trigger=trigger)
    out = []
    op.output("out", sums.panes, TestingSink(out))
    run_main(flow)
    assert [(p.value, p.timing) for _key, (_id, p) in out] == [(505, "early"), (529, "early"), (529, "on_time")]
    ```
    """

    trigger: Trigger
    purge: bool = False

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        return self.trigger.after_value(book, value)

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        return self.trigger.due(book, now)

    @override
    def now(self) -> Optional[datetime]:
        return self.trigger.now()

    @override
    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        return self.trigger.wake_at(book)

    @override
    def on_fire(self, book: WindowBook) -> bool:
        if self.trigger.on_fire(book):
            self.trigger.reset(book)
        return False

    @override
    def reset(self, book: WindowBook) -> None:
        self.trigger.reset(book)

    @override
    def problem(self) -> Optional[str]:
        return _subtriggers_problem("Repeatedly", [self.trigger], 1)


@dataclass(frozen=True)
class Once(Trigger):
    """Fire when `trigger` first fires, then finish: Beam's one-shot triggers (`AfterCount(n)` is `Once(CountTrigger(n))`).

    Used under `AfterEach` (so that the next trigger gets its turn) and
    under `Repeatedly` or `AfterAny` (so that everything starts over at
    each fire).  Alone, a window fires early once at most.
    """

    trigger: Trigger
    purge: bool = False

    @override
    def after_value(self, book: WindowBook, value: Any) -> bool:
        return self.trigger.after_value(book, value)

    @override
    def due(self, book: WindowBook, now: datetime) -> bool:
        return self.trigger.due(book, now)

    @override
    def now(self) -> Optional[datetime]:
        return self.trigger.now()

    @override
    def wake_at(self, book: WindowBook) -> Optional[datetime]:
        return self.trigger.wake_at(book)

    @override
    def on_fire(self, book: WindowBook) -> bool:
        self.trigger.on_fire(book)
        return True

    @override
    def reset(self, book: WindowBook) -> None:
        self.trigger.reset(book)

    @override
    def problem(self) -> Optional[str]:
        return _subtriggers_problem("Once", [self.trigger], 1)


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
    problem = _problem_of(trigger)
    if problem is not None:
        msg = f"step {step_id!r}: {problem}"
        raise ValueError(msg)
