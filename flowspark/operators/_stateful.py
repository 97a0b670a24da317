"""Per-key stateful operators, built on `stateful_batch`.

`stateful` adapts a per-value `StatefulLogic` to the batch interface; every
other operator here (and in `_final`, the operators that emit at end of
input) is a `StatefulLogic` plus a builder.  The runtime may
rebuild a logic from its snapshot before any batch, so every logic keeps all
of its state in what `snapshot()` returns and its builder restores it fully.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, ClassVar, Generic, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark._batch_logic import _EMPTY, StatefulBatchLogic
from flowspark.dataflow import KeyedStream, f_repr, operator
from flowspark.operators._core import S, V, W, stateful_batch


class StatefulLogic(ABC, Generic[V, W, S]):
    """The per-key state machine of `stateful`, fed one value at a time.

    Each method returns the values to emit and whether to throw the logic
    away (`DISCARD`) or keep it (`RETAIN`).  After a discard, the key's next
    value builds a fresh logic with `None`.
    """

    RETAIN: ClassVar[bool] = False
    """Keep this logic after the call."""

    DISCARD: ClassVar[bool] = True
    """Drop this logic after the call."""

    @abstractmethod
    def on_item(self, value: V) -> Tuple[Iterable[W], bool]:
        """Handle one value of this key."""

    def on_notify(self) -> Tuple[Iterable[W], bool]:
        """Called once the time `notify_at` returned has passed."""
        return (_EMPTY, StatefulLogic.RETAIN)

    def on_eof(self) -> Tuple[Iterable[W], bool]:
        """Called once when the input ends, if the logic is still alive."""
        return (_EMPTY, StatefulLogic.RETAIN)

    def notify_at(self) -> Optional[datetime]:
        """When `on_notify` should next be called; `None` for never."""
        return None

    @abstractmethod
    def snapshot(self) -> S:
        """The state to rebuild this logic from; must not share mutable objects."""


@dataclass
class _PerItemLogic(StatefulBatchLogic[V, W, S]):
    """Feeds a batch to a `StatefulLogic` value by value, rebuilding it after discards."""

    MERGE_BATCHES = True

    logic: Optional[StatefulLogic[V, W, S]]
    builder: Callable[[Optional[S]], StatefulLogic[V, W, S]]

    @override
    def on_batch(self, values: List[V]) -> Tuple[Iterable[W], bool]:
        if type(self.logic) is _StatefulFlatMapLogic:
            # The logic of `stateful_map` and `stateful_flat_map`: one loop
            # over the mapper instead of an `on_item` call per value.
            emits, state = self.logic.on_values(values)
            if state is None:
                self.logic = None
            return (emits, self.logic is None)
        emits = []
        for value in values:
            if self.logic is None:
                self.logic = self.builder(None)
            ws, discard = self.logic.on_item(value)
            emits.extend(ws)
            if discard:
                self.logic = None
        return (emits, self.logic is None)

    def _live(self) -> StatefulLogic[V, W, S]:
        assert self.logic is not None, "a discarded logic was called again"
        return self.logic

    def state_function(self) -> Optional[Callable[[Optional[S], List[V]], Tuple[List[W], Optional[S]]]]:
        """For `stateful_map` and `stateful_flat_map`: their whole behaviour as a function of state and values.

        Their logics never ask to be woken and do nothing at the end of
        input, and their snapshot is the state itself, so the runtime can
        keep states instead of logics (see `engine.state.stateful`).
        """
        return self.logic.fold if type(self.logic) is _StatefulFlatMapLogic else None

    @override
    def on_notify(self) -> Tuple[Iterable[W], bool]:
        return self._live().on_notify()

    @override
    def on_eof(self) -> Tuple[Iterable[W], bool]:
        return self._live().on_eof()

    @override
    def notify_at(self) -> Optional[datetime]:
        return self._live().notify_at()

    @override
    def snapshot(self) -> S:
        return self._live().snapshot()


@operator
def stateful(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[Optional[S]], StatefulLogic[V, W, S]],
) -> KeyedStream[W]:
    """Run a `StatefulLogic` per key, one value at a time.

    `builder` gets `None` for a new key, or the logic's last snapshot when
    resuming; emitted values come out as `(key, value)`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main


    class RunningSum(op.StatefulLogic):
        def __init__(self, resume_state):
            self.total = resume_state or 0

        def on_item(self, value):
            self.total += value
            return [self.total], op.StatefulLogic.RETAIN

        def snapshot(self):
            return self.total


    flow = Dataflow("stateful_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("a", 2)]))
    out = []
    op.output("out", op.stateful("sum", keyed, RunningSum), TestingSink(out))
    run_main(flow)
    assert out == [("a", 1), ("a", 3)]
    ```
    """

    def shim_builder(resume_state: Optional[S]) -> _PerItemLogic[V, W, S]:
        return _PerItemLogic(builder(resume_state), builder)

    return stateful_batch("stateful_batch", up, shim_builder)


@dataclass
class _StatefulFlatMapLogic(StatefulLogic[V, W, S]):
    step_id: str
    mapper: Callable[[Optional[S], V], Tuple[Optional[S], Iterable[W]]]
    state: Optional[S]

    def _bad_return(self, res: Any) -> TypeError:
        msg = (
            f"return value of `mapper` {f_repr(self.mapper)} in step {self.step_id!r} "
            "must be a 2-tuple of `(updated_state, emit_values)`; "
            f"got a {type(res)!r} instead"
        )
        return TypeError(msg)

    @override
    def on_item(self, value: V) -> Tuple[Iterable[W], bool]:
        res = self.mapper(self.state, value)
        try:
            state, ws = res
        except TypeError as ex:
            raise self._bad_return(res) from ex
        if state is None:
            return (ws, StatefulLogic.DISCARD)
        self.state = state
        return (ws, StatefulLogic.RETAIN)

    def on_values(self, values: List[V]) -> Tuple[List[W], Optional[S]]:
        """`on_item` for each value in turn; what they emit and the state left (`None`: discarded)."""
        emits, self.state = self.fold(self.state, values, spans_batches=False)
        return emits, self.state

    def fold(self, state: Optional[S], values: List[V], spans_batches: bool = True) -> Tuple[List[W], Optional[S]]:
        """Thread `state` through the mapper over `values`; what they emit and the state left (`None`: discarded).

        A value after one that discarded the state starts from `None`, as
        it would with the logic rebuilt for it.  Uses only the step's
        mapper, so one logic's `fold` serves every key of the step.  When
        the values come from several of Bytewax's batches at once
        (`spans_batches`: a key's values of a micro-batch in one call), a
        `stateful_map` mapper that emits its state object itself, with more
        values to come, emits a copy, so that later values do not change
        what an earlier one emitted; within one of Bytewax's batches (an
        `on_batch` call) its values all show the object as the batch left
        it, as on Bytewax.
        """
        mapper = self.mapper
        emits: List[W] = []
        left = len(values)
        for value in values:
            res = mapper(state, value)
            try:
                state, ws = res
            except TypeError as ex:
                raise self._bad_return(res) from ex
            left -= 1
            if (
                spans_batches
                and left
                and type(ws) is tuple
                and len(ws) == 1
                and ws[0] is state
                and state is not None
                and not _immutable(state)
            ):
                ws = (copy.deepcopy(state),)
            emits.extend(ws)
        return emits, state

    @override
    def snapshot(self) -> S:
        """The state itself: the engine pickles a snapshot as soon as it takes it, which copies it."""
        assert self.state is not None, "a discarded state was snapshotted"
        return self.state


_ATOMIC_TYPES = frozenset({int, float, complex, str, bytes, bool, type(None)})
"""Types whose values `copy.deepcopy` returns as they are."""


def _immutable(value: Any) -> bool:
    """Whether `value` is one `copy.deepcopy` would return as it is: an atomic value, or a tuple of them."""
    kind = type(value)
    if kind in _ATOMIC_TYPES:
        return True
    return kind is tuple and all(type(item) in _ATOMIC_TYPES for item in value)


@operator
def stateful_flat_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[Optional[S], V], Tuple[Optional[S], Iterable[W]]],
) -> KeyedStream[W]:
    """Thread a per-key state through `mapper`, emitting every value it returns.

    The state starts as `None`; returning `None` as the new state forgets it.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("stateful_flat_map_eg")
    keyed = op.input("inp", flow, TestingSource([("a", "x"), ("a", "x"), ("a", "y")]))


    def new_values_only(seen, value):
        seen = seen or set()
        if value in seen:
            return seen, []
        return seen | {value}, [value]


    out = []
    op.output("out", op.stateful_flat_map("dedupe", keyed, new_values_only), TestingSink(out))
    run_main(flow)
    assert out == [("a", "x"), ("a", "y")]
    ```
    """

    def shim_builder(resume_state: Optional[S]) -> _StatefulFlatMapLogic[V, W, S]:
        return _StatefulFlatMapLogic(step_id, mapper, resume_state)

    return stateful("stateful", up, shim_builder)


@operator
def stateful_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[Optional[S], V], Tuple[Optional[S], W]],
) -> KeyedStream[W]:
    """Thread a per-key state through `mapper`, emitting one value per value.

    The state starts as `None`; returning `None` as the new state forgets it.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("stateful_map_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 5), ("a", 2)]))


    def running_sum(total, value):
        total = (total or 0) + value
        return total, total


    out = []
    op.output("out", op.stateful_map("sum", keyed, running_sum), TestingSink(out))
    run_main(flow)
    assert out == [("a", 1), ("b", 5), ("a", 3)]
    ```
    """

    def shim_mapper(state: Optional[S], v: V) -> Tuple[Optional[S], Iterable[W]]:
        res = mapper(state, v)
        try:
            new_state, w = res
        except TypeError as ex:
            msg = (
                f"return value of `mapper` {f_repr(mapper)} in step {step_id!r} "
                "must be a 2-tuple of `(updated_state, emit_value)`; "
                f"got a {type(res)!r} instead"
            )
            raise TypeError(msg) from ex
        return (new_state, (w,))

    return stateful_flat_map("stateful_flat_map", up, shim_mapper)


@dataclass
class _CollectState(Generic[V]):
    acc: List[V] = field(default_factory=list)
    timeout_at: Optional[datetime] = None


def _system_utc() -> datetime:
    return datetime.now(tz=timezone.utc)


@dataclass
class _CollectLogic(StatefulLogic[V, List[V], _CollectState[V]]):
    step_id: str
    now_getter: Callable[[], datetime]
    timeout: timedelta
    max_size: int
    state: _CollectState[V]

    @override
    def on_item(self, value: V) -> Tuple[Iterable[List[V]], bool]:
        self.state.timeout_at = self.now_getter() + self.timeout
        self.state.acc.append(value)
        if len(self.state.acc) >= self.max_size:
            return ((self.state.acc,), StatefulLogic.DISCARD)
        return (_EMPTY, StatefulLogic.RETAIN)

    @override
    def on_notify(self) -> Tuple[Iterable[List[V]], bool]:
        return ((self.state.acc,), StatefulLogic.DISCARD)

    @override
    def on_eof(self) -> Tuple[Iterable[List[V]], bool]:
        return ((self.state.acc,), StatefulLogic.DISCARD)

    @override
    def notify_at(self) -> Optional[datetime]:
        return self.state.timeout_at

    @override
    def snapshot(self) -> _CollectState[V]:
        return self.state  # pickled as soon as it is taken


@operator
def collect(
    step_id: str,
    up: KeyedStream[V],
    timeout: timedelta,
    max_size: int,
) -> KeyedStream[List[V]]:
    """Gather each key's values into lists.

    A key's list is emitted once it holds `max_size` values, once `timeout`
    of system time has passed since its last value, or at EOF.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main
    from datetime import timedelta

    flow = Dataflow("collect_eg")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(["a1", "a2", "b1", "a3"])), lambda s: s[0])
    out = []
    op.output("out", op.collect("pairs", keyed, timeout=timedelta(seconds=10), max_size=2), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", ["a1", "a2"]), ("a", ["a3"]), ("b", ["b1"])]
    ```
    """

    def shim_builder(resume_state: Optional[_CollectState[V]]) -> _CollectLogic[V]:
        state = resume_state if resume_state is not None else _CollectState[V]()
        return _CollectLogic(step_id, _system_utc, timeout, max_size, state)

    return stateful("stateful", up, shim_builder)
