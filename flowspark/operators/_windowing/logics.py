"""The window logic of `fold_window` (and every fold-based operator) and the callbacks of `collect_window`."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Set, Tuple, Type

from typing_extensions import Self, override

from flowspark.operators._core import S, V
from flowspark.operators._windowing.base import WindowLogic

__all__ = [
    "FinishingFoldBuilder",
    "FinishingFoldWindowLogic",
    "FoldBuilder",
    "FoldWindowLogic",
    "collect_callbacks",
]


class FoldWindowLogic(WindowLogic[V, S, S]):
    """Folds a window's values into an accumulator, emitted once at close."""

    def __init__(self, folder: Callable[[S, V], S], merger: Callable[[S, S], S], state: S) -> None:
        self.folder = folder
        self.merger = merger
        self.state = state

    @override
    def on_value(self, value: V) -> Iterable[S]:
        self.state = self.folder(self.state, value)
        return ()

    @override
    def on_merge(self, original: Self) -> Iterable[S]:
        self.state = self.merger(self.state, original.state)
        return ()

    @override
    def on_close(self) -> Iterable[S]:
        return (self.state,)

    @override
    def snapshot(self) -> S:
        return copy.deepcopy(self.state)

    def current(self) -> Any:
        """The result the window would emit if it closed now, as a copy.

        Used for early and late emissions (`emit="current"`, triggers,
        allowed lateness): a deep copy, so folding more values into the live
        accumulator (e.g. appending to a collected list) cannot change what
        was already emitted.
        """
        return copy.deepcopy(self.state)

    @override
    def running(self, rebuild: Callable[[Optional[S]], WindowLogic[V, S, S]]) -> Iterable[S]:
        """`current()`: no copy of the logic needs rebuilding."""
        return (self.current(),)

    @override
    def fold_quietly(self, values: Iterable[V]) -> bool:
        """Fold `values` straight into the accumulator, unless a subclass changed `on_value`."""
        if type(self).on_value is not FoldWindowLogic.on_value:
            return False
        state, folder = self.state, self.folder
        for value in values:
            state = folder(state, value)
        self.state = state
        return True


class FinishingFoldWindowLogic(FoldWindowLogic[V, S]):
    """A fold whose emitted result is `finisher(accumulator)` (e.g. a mean from `(sum, count)`)."""

    def __init__(
        self,
        folder: Callable[[S, V], S],
        merger: Callable[[S, S], S],
        finisher: Callable[[S], Any],
        state: S,
    ) -> None:
        super().__init__(folder, merger, state)
        self.finisher = finisher

    @override
    def on_close(self) -> Iterable[Any]:
        return (self.finisher(self.state),)

    @override
    def current(self) -> Any:
        return self.finisher(copy.deepcopy(self.state))


@dataclass(frozen=True)
class FoldBuilder(Generic[V, S]):
    """Builds `fold_window`'s logic for a window, fresh or from its snapshot.

    A class rather than a closure so the runtime can tell the built-in
    window logics (which only emit at close) from users' own.
    """

    builder: Callable[[], S]
    folder: Callable[[S, V], S]
    merger: Callable[[S, S], S]

    def __call__(self, resume_state: Optional[S]) -> FoldWindowLogic[V, S]:
        state = self.builder() if resume_state is None else resume_state
        return FoldWindowLogic(self.folder, self.merger, state)


@dataclass(frozen=True)
class FinishingFoldBuilder(FoldBuilder[V, S]):
    """A `FoldBuilder` whose windows emit `finisher(accumulator)` instead of the accumulator.

    Its windows, like all folds, only emit at close by themselves, so the
    batch-merging fast path still applies.
    """

    finisher: Callable[[S], Any]

    def __call__(self, resume_state: Optional[S]) -> FinishingFoldWindowLogic[V, S]:
        state = self.builder() if resume_state is None else resume_state
        return FinishingFoldWindowLogic(self.folder, self.merger, self.finisher, state)


def _append(acc: List[Any], value: Any) -> List[Any]:
    acc.append(value)
    return acc


def _add(acc: Set[Any], value: Any) -> Set[Any]:
    acc.add(value)
    return acc


def _update(acc: Dict[Any, Any], other: Dict[Any, Any]) -> Dict[Any, Any]:
    acc.update(other)
    return acc


def collect_callbacks(
    step_id: str,
    into: Type[Any],
) -> Tuple[Callable[[], Any], Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    """The `(builder, folder, merger)` that collect values into `into`.

    `list` keeps every value (merging concatenates), `set` the distinct
    ones, `dict` takes `(key, value)` pairs where later pairs win.  Any
    other type (subclasses count as their base) is refused.
    """
    if isinstance(into, type) and issubclass(into, list):
        return (list, _append, list.__add__)
    if isinstance(into, type) and issubclass(into, set):
        return (set, _add, set.union)
    if isinstance(into, type) and issubclass(into, dict):

        def put(acc: Dict[Any, Any], pair: Any) -> Dict[Any, Any]:
            try:
                key, value = pair
            except (TypeError, ValueError) as ex:
                msg = (
                    f"step {step_id!r} collecting into a `dict` requires `(key, value)` "
                    f"2-tuple as the values in the stream; got a {type(pair)!r} instead"
                )
                raise TypeError(msg) from ex
            acc[key] = value
            return acc

        return (dict, put, _update)
    msg = (
        f"step {step_id!r}: `collect_window` can't collect into {into!r}; "
        "only `list`, `set` and `dict` are supported; use `fold_window` for anything else"
    )
    raise TypeError(msg)
