"""`join`: gather each key's values from several keyed streams into rows.

The sides are tagged with their index, merged, and fed to one `stateful`
step whose state keeps, per side, the values the insert mode retains.
"""

from __future__ import annotations

import copy
import itertools
import typing
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterable, List, Literal, Optional, Tuple, TypeVar, overload

from typing_extensions import Self, TypeAlias, override

from flowspark.dataflow import KeyedStream, operator
from flowspark.operators._core import V, W, X, merge
from flowspark.operators._stateful import StatefulLogic, stateful
from flowspark.operators._stateless import map_value

U = TypeVar("U")
"""Type of the values of another side."""

JoinInsertMode: TypeAlias = Literal["first", "last", "product"]
"""Which values of a side a join keeps.

- `first`: only the first value seen on the side.
- `last`: only the latest value seen on the side.
- `product`: every value; rows are the cross product of all sides.
"""

JoinEmitMode: TypeAlias = Literal["complete", "final", "running"]
"""When a join emits rows.

- `complete`: as soon as every side has a value; then the key's state is
  dropped.
- `final`: when the input ends (finite inputs only); then the state is
  dropped.
- `running`: on every new value, with the missing sides as `None`; the state
  is kept forever.
"""


def check_join_modes(insert_mode: str, emit_mode: str) -> None:
    """Reject unknown modes with a `ValueError` while the flow is built."""
    if insert_mode not in typing.get_args(JoinInsertMode):
        msg = f"unknown join insert mode {insert_mode!r}"
        raise ValueError(msg)
    if emit_mode not in typing.get_args(JoinEmitMode):
        msg = f"unknown join emit mode {emit_mode!r}"
        raise ValueError(msg)


@dataclass
class JoinState:
    """The values kept so far for one key: one list per side."""

    seen: List[List[Any]]

    @classmethod
    def for_side_count(cls, side_count: int) -> Self:
        """An empty state for `side_count` sides."""
        return cls([[] for _ in range(side_count)])

    def set_val(self, side: int, value: Any) -> None:
        """Make `value` the only one of `side`."""
        self.seen[side] = [value]

    def add_val(self, side: int, value: Any) -> None:
        """Add `value` to those of `side`."""
        self.seen[side].append(value)

    def is_set(self, side: int) -> bool:
        """Whether `side` has a value."""
        return bool(self.seen[side])

    def insert(self, side: int, value: Any, mode: JoinInsertMode) -> None:
        """Record `value` on `side` as `mode` says."""
        if mode == "product":
            self.add_val(side, value)
        elif mode == "last" or not self.is_set(side):
            self.set_val(side, value)

    def all_set(self) -> bool:
        """Whether every side has at least one value."""
        return all(self.seen)

    def astuples(self) -> List[Tuple[Any, ...]]:
        """Every combination of the sides' values; an empty side gives `None`."""
        return list(itertools.product(*(values or [None] for values in self.seen)))

    def clear(self) -> None:
        """Forget every side's values."""
        for values in self.seen:
            values.clear()

    def __iadd__(self, other: Self) -> Self:
        """Add `other`'s values, side by side, after this state's."""
        self._check_sides(other)
        self.seen = [mine + theirs for mine, theirs in zip(self.seen, other.seen)]
        return self

    def __ior__(self, other: Self) -> Self:
        """Take `other`'s values on the sides where it has any."""
        self._check_sides(other)
        self.seen = [theirs or mine for mine, theirs in zip(self.seen, other.seen)]
        return self

    def _check_sides(self, other: JoinState) -> None:
        if len(self.seen) != len(other.seen):
            msg = "join states are not same cardinality"
            raise ValueError(msg)


@dataclass
class _JoinLogic(StatefulLogic[Tuple[int, Any], Tuple[Any, ...], JoinState]):
    insert_mode: JoinInsertMode
    emit_mode: JoinEmitMode
    state: JoinState

    @override
    def on_item(self, value: Tuple[int, Any]) -> Tuple[Iterable[Tuple[Any, ...]], bool]:
        side, side_value = value
        self.state.insert(side, side_value, self.insert_mode)
        if self.emit_mode == "complete" and self.state.all_set():
            return (self.state.astuples(), StatefulLogic.DISCARD)
        if self.emit_mode == "running":
            return (self.state.astuples(), StatefulLogic.RETAIN)
        return ((), StatefulLogic.RETAIN)

    @override
    def on_eof(self) -> Tuple[Iterable[Tuple[Any, ...]], bool]:
        if self.emit_mode == "final":
            return (self.state.astuples(), StatefulLogic.DISCARD)
        return ((), StatefulLogic.RETAIN)

    @override
    def snapshot(self) -> JoinState:
        return copy.deepcopy(self.state)


def _tag(side: int, value: Any) -> Tuple[int, Any]:
    return (side, value)


@operator
def _join_label_merge(step_id: str, *ups: KeyedStream[Any]) -> KeyedStream[Tuple[int, Any]]:
    """Tag each side's values with the side's index and merge the sides."""
    labelled = [map_value(f"label_{i}", up, partial(_tag, i)) for i, up in enumerate(ups)]
    return merge("merge", *labelled)


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"] = ...,
) -> KeyedStream[Tuple[U, V]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"] = ...,
) -> KeyedStream[Tuple[U, V, W]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    side4: KeyedStream[X],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"] = ...,
) -> KeyedStream[Tuple[U, V, W, X]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[V]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[Optional[U], Optional[V]]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[Optional[U], Optional[V], Optional[W]]]: ...


@overload
def join(
    step_id: str,
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    side4: KeyedStream[X],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[Optional[U], Optional[V], Optional[W], Optional[X]]]: ...


@overload
def join(
    step_id: str,
    *sides: KeyedStream[V],
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"] = ...,
) -> KeyedStream[Tuple[V, ...]]: ...


@overload
def join(
    step_id: str,
    *sides: KeyedStream[V],
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[Optional[V], ...]]: ...


@overload
def join(
    step_id: str,
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode,
) -> KeyedStream[Tuple[Any, ...]]: ...


@operator
def join(
    step_id: str,
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "complete",
) -> KeyedStream[Tuple[Any, ...]]:
    """Gather the values of each key from every side into tuples, one slot per side.

    `insert_mode` picks which of a side's values are kept, `emit_mode` when
    rows are emitted (see `JoinInsertMode` and `JoinEmitMode`).  A side with
    no value yet fills its slot with `None`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("join_eg")
    names = op.input("names", flow, TestingSource([("7", "ada")]))
    emails = op.input("emails", flow, TestingSource([("7", "ada@example.com")]))
    out = []
    op.output("out", op.join("user", names, emails), TestingSink(out))
    run_main(flow)
    assert out == [("7", ("ada", "ada@example.com"))]
    ```
    """
    check_join_modes(insert_mode, emit_mode)
    side_count = len(sides)

    def shim_builder(resume_state: Optional[JoinState]) -> _JoinLogic:
        state = resume_state if resume_state is not None else JoinState.for_side_count(side_count)
        return _JoinLogic(insert_mode, emit_mode, state)

    merged = _join_label_merge("add_names", *sides)
    return stateful("join", merged, shim_builder)
