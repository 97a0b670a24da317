"""Aggregations for `aggregate_window`: several results from one pass over a window.

The ready-made ones carry Quix Streams' names (`Sum`, `Count`, `Mean`,
`Min`, `Max`, `First`, `Last`, `Collect`).  Where Quix takes a column name,
these take `by`: a function of the value, or a key to look up
(`Mean("temperature")` means `Mean(by=lambda v: v["temperature"])`; a key
missing from a mapping reads as `None`, like Quix's `value.get(column)`);
without it the value itself is used.  As in Quix Streams, `Sum`, `Count`,
`Mean`, `Min`, `Max`, `First` and `Last` skip values whose `by(value)` is
`None`: `Count` counts the others, and a window with nothing else gives
`Sum` 0, `Count` 0 and `None` for the rest.  `Collect` keeps `None`s.

An `Aggregation` is four functions, named as in `fold_window`: `builder()`
makes an empty accumulator, `folder(acc, value)` adds a value, `merger(acc,
other)` combines two accumulators (needed only when sessions merge), and
`finisher(acc)` turns the accumulator into the reported result (identity
when omitted).  In Quix Streams' terms: `initialize`, `agg`, `merge` and
`result`.  Accumulators are folded in place where that is cheaper and copied
when a result is emitted early, so emitted results are never changed later.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union

from typing_extensions import override

from flowspark.dataflow import f_repr
from flowspark.operators._core import V
from flowspark.operators._windowing.logics import FinishingFoldBuilder, FoldBuilder

__all__ = [
    "Aggregation",
    "AggregationSet",
    "Collect",
    "Count",
    "First",
    "Last",
    "Max",
    "Mean",
    "Min",
    "Sum",
    "mean_builder",
    "sum_builder",
]

A = TypeVar("A")
"""Type of an aggregation's accumulator."""
R = TypeVar("R")
"""Type of an aggregation's result."""

By = Union[str, int, Callable[[Any], Any], None]
"""What to aggregate of each value: `None` for the value, a function of it, or a key/index into it."""


def _getter(by: By) -> Callable[[Any], Any]:
    if by is None:
        return _identity
    if callable(by):
        return by
    if isinstance(by, (str, int)):
        return _Lookup(by)
    msg = f"`by` must be a function of the value, a key to look up, or `None`; got {by!r}"
    raise TypeError(msg)


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Lookup:
    """`value[key]`; for a mapping `value.get(key)`, so a missing key reads as `None` (Quix's columns)."""

    key: Union[str, int]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return value.get(self.key)
        return value[self.key]


class Aggregation(Generic[V, A, R]):
    """One result of `aggregate_window`, defined by four functions (see the module).

    For example, Quix Streams' `PowerSum` (sum of squares):
    `Aggregation(lambda: 0, lambda acc, v: acc + v * v, operator.add)`.
    """

    def __init__(
        self,
        builder: Callable[[], A],
        folder: Callable[[A, V], A],
        merger: Optional[Callable[[A, A], A]] = None,
        finisher: Optional[Callable[[A], R]] = None,
    ) -> None:
        self.builder = builder
        self.folder = folder
        self.merger = merger
        self.finisher = finisher

    def finish(self, acc: A) -> R:
        """The result for accumulator `acc`."""
        if self.finisher is None:
            return acc  # type: ignore[return-value]
        return self.finisher(acc)

    def __repr__(self) -> str:
        if type(self) is not Aggregation:
            params = {k: v for k, v in vars(self).items() if k not in ("builder", "folder", "merger", "finisher")}
            return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())})"
        parts = [f_repr(f) for f in (self.builder, self.folder, self.merger, self.finisher) if f is not None]
        return f"Aggregation({', '.join(parts)})"


# The ready-made aggregations; their helpers are module-level so they pickle by reference.


def _zero() -> int:
    return 0


def _no_value() -> Tuple[Any, ...]:
    return ()


def _zero_pair() -> Tuple[Any, int]:
    return (0, 0)


@dataclass(frozen=True)
class _Plus:
    get: Callable[[Any], Any]

    def __call__(self, acc: Any, value: Any) -> Any:
        got = self.get(value)
        return acc if got is None else acc + got


@dataclass(frozen=True)
class _CountPresent:
    get: Callable[[Any], Any]

    def __call__(self, acc: int, value: Any) -> int:
        return acc if self.get(value) is None else acc + 1


@dataclass(frozen=True)
class _MeanFold:
    get: Callable[[Any], Any]

    def __call__(self, acc: Tuple[Any, int], value: Any) -> Tuple[Any, int]:
        got = self.get(value)
        return acc if got is None else (acc[0] + got, acc[1] + 1)


def _pair_add(acc: Tuple[Any, int], other: Tuple[Any, int]) -> Tuple[Any, int]:
    return (acc[0] + other[0], acc[1] + other[1])


def _ratio(acc: Tuple[Any, int]) -> Any:
    return acc[0] / acc[1] if acc[1] else None


@dataclass(frozen=True)
class _Pick:
    """Keeps the smaller (or larger) of the accumulator and each value; ties keep the earlier; `None` is skipped."""

    get: Callable[[Any], Any]
    choose: Callable[[Any, Any], Any]

    def __call__(self, acc: Any, value: Any) -> Any:
        got = self.get(value)
        if got is None:
            return acc
        return got if acc is None else self.choose(acc, got)


@dataclass(frozen=True)
class _PickMerge:
    choose: Callable[[Any, Any], Any]

    def __call__(self, acc: Any, other: Any) -> Any:
        if acc is None or other is None:
            return other if acc is None else acc
        return self.choose(acc, other)


@dataclass(frozen=True)
class _KeepFirst:
    get: Callable[[Any], Any]

    def __call__(self, acc: Tuple[Any, ...], value: Any) -> Tuple[Any, ...]:
        if acc:
            return acc
        got = self.get(value)
        return acc if got is None else (got,)


@dataclass(frozen=True)
class _KeepLast:
    get: Callable[[Any], Any]

    def __call__(self, acc: Tuple[Any, ...], value: Any) -> Tuple[Any, ...]:
        got = self.get(value)
        return acc if got is None else (got,)


def _first_of(acc: Tuple[Any, ...], other: Tuple[Any, ...]) -> Tuple[Any, ...]:
    return acc if acc else other


def _last_of(acc: Tuple[Any, ...], other: Tuple[Any, ...]) -> Tuple[Any, ...]:
    return other if other else acc


def _unwrap(acc: Tuple[Any, ...]) -> Any:
    return acc[0] if acc else None


def _empty_list() -> List[Any]:
    return []


@dataclass(frozen=True)
class _Append:
    get: Callable[[Any], Any]

    def __call__(self, acc: List[Any], value: Any) -> List[Any]:
        acc.append(self.get(value))
        return acc


class Sum(Aggregation[Any, Any, Any]):
    """The sum of `by(value)` (the values themselves by default), starting from 0; `None`s are skipped."""

    def __init__(self, by: By = None) -> None:
        super().__init__(_zero, _Plus(_getter(by)), operator.add)
        self.by = by


class Count(Aggregation[Any, int, int]):
    """The number of values whose `by(value)` is not `None` (the values themselves by default), as Quix counts."""

    def __init__(self, by: By = None) -> None:
        super().__init__(_zero, _CountPresent(_getter(by)), operator.add)
        self.by = by


class Mean(Aggregation[Any, Tuple[Any, int], Any]):
    """The arithmetic mean of `by(value)`, `None`s skipped: a running `(sum, count)`, divided when emitted.

    `None` when the window holds no other value.
    """

    def __init__(self, by: By = None) -> None:
        super().__init__(_zero_pair, _MeanFold(_getter(by)), _pair_add, _ratio)
        self.by = by


class Min(Aggregation[Any, Any, Any]):
    """The smallest `by(value)`, `None`s skipped (unlike `min_window`, which emits the whole smallest value)."""

    def __init__(self, by: By = None) -> None:
        super().__init__(_nothing, _Pick(_getter(by), min), _PickMerge(min))
        self.by = by


class Max(Aggregation[Any, Any, Any]):
    """The largest `by(value)`, `None`s skipped (unlike `max_window`, which emits the whole largest value)."""

    def __init__(self, by: By = None) -> None:
        super().__init__(_nothing, _Pick(_getter(by), max), _PickMerge(max))
        self.by = by


class First(Aggregation[Any, Tuple[Any, ...], Any]):
    """The first `by(value)` that is not `None` the window took in (timestamp order when `ordered`).

    When sessions merge, the earlier-opened session's first value wins.
    """

    def __init__(self, by: By = None) -> None:
        super().__init__(_no_value, _KeepFirst(_getter(by)), _first_of, _unwrap)
        self.by = by


class Last(Aggregation[Any, Tuple[Any, ...], Any]):
    """The last `by(value)` that is not `None` the window took in (timestamp order when `ordered`).

    When sessions merge, the absorbed session's last value wins (if it has one).
    """

    def __init__(self, by: By = None) -> None:
        super().__init__(_no_value, _KeepLast(_getter(by)), _last_of, _unwrap)
        self.by = by


class Collect(Aggregation[Any, List[Any], List[Any]]):
    """A list of `by(value)` in the order taken in; merged sessions concatenate."""

    def __init__(self, by: By = None) -> None:
        super().__init__(_empty_list, _Append(_getter(by)), operator.add)
        self.by = by


def _nothing() -> Any:
    return None


@dataclass(frozen=True)
class AggregationSet:
    """Several named aggregations folded together: the accumulator is a list, one slot each."""

    step_id: str
    names: Tuple[str, ...]
    aggregations: Tuple[Aggregation[Any, Any, Any], ...]

    @classmethod
    def of(cls, step_id: str, aggregations: Any) -> AggregationSet:
        """Check `aggregations` (a mapping of names to `Aggregation`s), naming the step if wrong."""
        if not isinstance(aggregations, Mapping) or not aggregations:
            msg = (
                f"step {step_id!r}: `aggregations` must be a non-empty mapping of names "
                f"to `Aggregation`s; got {aggregations!r}"
            )
            raise TypeError(msg)
        for name, agg in aggregations.items():
            if not isinstance(name, str) or not isinstance(agg, Aggregation):
                msg = f"step {step_id!r}: aggregation {name!r} must be a `str` name for an `Aggregation`; got {agg!r}"
                raise TypeError(msg)
        return cls(step_id, tuple(aggregations), tuple(aggregations.values()))

    def unmergeable(self) -> List[str]:
        """The names of the aggregations without a `merger`."""
        return [name for name, agg in zip(self.names, self.aggregations) if agg.merger is None]

    def initialize(self) -> List[Any]:
        return [agg.builder() for agg in self.aggregations]

    def fold(self, acc: List[Any], value: Any) -> List[Any]:
        for i, agg in enumerate(self.aggregations):
            acc[i] = agg.folder(acc[i], value)
        return acc

    def merge(self, acc: List[Any], other: List[Any]) -> List[Any]:
        for i, agg in enumerate(self.aggregations):
            if agg.merger is None:
                msg = (
                    f"step {self.step_id!r}: aggregation {self.names[i]!r} ({agg!r}) has no `merger`, "
                    "but the windower merged two windows"
                )
                raise TypeError(msg)
            acc[i] = agg.merger(acc[i], other[i])
        return acc

    def finish(self, acc: List[Any]) -> Dict[str, Any]:
        return {name: agg.finish(a) for name, agg, a in zip(self.names, self.aggregations, acc)}

    def builder(self) -> FinishingFoldBuilder[Any, List[Any]]:
        """The window logic builder folding all the aggregations at once."""
        return FinishingFoldBuilder(self.initialize, self.fold, self.merge, self.finish)

    @override
    def __repr__(self) -> str:
        return "{" + ", ".join(f"{n!r}: {a!r}" for n, a in zip(self.names, self.aggregations)) + "}"


def sum_builder(by: By = None) -> FoldBuilder[Any, Any]:
    """The window logic builder of `sum_window`: a plain fold, so the fast path applies."""
    return FoldBuilder(_zero, _Plus(_getter(by)), operator.add)


def mean_builder(by: By = None) -> FinishingFoldBuilder[Any, Tuple[Any, int]]:
    """The window logic builder of `mean_window`: a running `(sum, count)`, divided when emitted."""
    return FinishingFoldBuilder(_zero_pair, _MeanFold(_getter(by)), _pair_add, _ratio)
