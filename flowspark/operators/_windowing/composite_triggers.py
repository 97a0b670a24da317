"""Triggers made of triggers, as Beam's composite triggers: `AfterAny`, `AfterAll`, `AfterEach`, `Repeatedly`, `Once`.

They follow Beam's `apache_beam.transforms.trigger`: a combination fires
when its subtriggers say (any of them, all of them, the one in turn) and
*finishes* when Beam's does (`AfterAny` when a subtrigger that fired
finishes, `AfterAll` when all have, `AfterEach` after its last,
`Repeatedly` never, `Once` after its first fire).  flowspark's built-in
triggers never finish, as Flink's do; `Once` makes one-shot triggers of
them, as Beam's `AfterCount` and `AfterProcessingTime` are.  Each
subtrigger keeps its state in its own `WindowBook`, inside its parent's
(`WindowBook.subs`); `Repeatedly` and `Once` share their subtrigger's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, List, Optional, Sequence, Tuple

from typing_extensions import override

from flowspark.operators._windowing.triggers import Trigger, WindowBook, earlier, trigger_problem

__all__ = ["AfterAll", "AfterAny", "AfterEach", "AfterFirst", "Once", "Repeatedly"]


def _subtriggers_problem(owner: str, triggers: Sequence[Any], least: int) -> Optional[str]:
    """What is wrong with a combined trigger's subtriggers, if anything."""
    if len(triggers) < least:
        return f"`{owner}` needs at least {least} trigger(s); got {len(triggers)}"
    for sub in triggers:
        if not isinstance(sub, Trigger):
            return f"`{owner}` combines triggers; got {sub!r}"
        if getattr(sub, "purge", False) is True:
            return f"`{owner}`: set `purge=True` on the outermost trigger only; got {sub!r}"
        problem = trigger_problem(sub)
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


class _Wrapping(Trigger):
    """A trigger around one other: it sees every value, time and reset as `trigger` does; subclasses decide what
    a fire of it means."""

    trigger: Trigger

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
    def reset(self, book: WindowBook) -> None:
        self.trigger.reset(book)


@dataclass(frozen=True)
class Repeatedly(_Wrapping):
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
    def on_fire(self, book: WindowBook) -> bool:
        if self.trigger.on_fire(book):
            self.trigger.reset(book)
        return False

    @override
    def problem(self) -> Optional[str]:
        return _subtriggers_problem("Repeatedly", [self.trigger], 1)


@dataclass(frozen=True)
class Once(_Wrapping):
    """Fire when `trigger` first fires, then finish: Beam's one-shot triggers (`AfterCount(n)` is `Once(CountTrigger(n))`).

    Used under `AfterEach` (so that the next trigger gets its turn) and
    under `Repeatedly` or `AfterAny` (so that everything starts over at
    each fire).  Alone, a window fires early once at most.
    """

    trigger: Trigger
    purge: bool = False

    @override
    def on_fire(self, book: WindowBook) -> bool:
        self.trigger.on_fire(book)
        return True

    @override
    def problem(self) -> Optional[str]:
        return _subtriggers_problem("Once", [self.trigger], 1)
