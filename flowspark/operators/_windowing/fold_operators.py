"""The window operators built on `fold_window`: collect, count, reduce, max and min.

Each wires one `fold_window` with its own builder, folder and merger (the
small module-level ones here, so that a step's recorded parameters name
them).  Users import them from `flowspark.operators.windowing`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Type, TypeVar, overload

from typing_extensions import Unpack

from flowspark.dataflow import KeyedStream, Stream, operator
from flowspark.operators._core import V, X
from flowspark.operators._stateless import key_on
from flowspark.operators._windowing.base import Clock, Windower
from flowspark.operators._windowing.firing import Firing, FiringKeywords, firing_of
from flowspark.operators._windowing.logics import collect_callbacks
from flowspark.operators._windowing.window_operators import WindowOut, fold_window

__all__ = ["collect_window", "count_window", "max_window", "min_window", "reduce_window"]

DK = TypeVar("DK")
"""Type of the keys of a collected `dict`."""
DV = TypeVar("DV")
"""Type of the values of a collected `dict`."""


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, List[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[List[Any]],
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, List[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Set[Any]],
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, Set[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[Tuple[DK, DV]],
    clock: Clock[Tuple[DK, DV], Any],
    windower: Windower[Any],
    into: Type[Dict[Any, Any]],
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[Tuple[DK, DV], Dict[DK, DV]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Any] = ...,
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, Any]: ...


@operator
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Any] = list,
    ordered: bool = True,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, Any]:
    """Collect each window's values into a `list` (default), `set` or `dict`.

    Lists keep timestamp order (arrival order with `ordered=False`); a
    `dict` needs `(key, value)` values, later ones winning.  Other container
    types raise `TypeError` when the flow is built.  `firing` (or its
    keywords): see `window`; each early or late result
    is a copy, never changed by later values.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in [(1, 3), (4, 5), (12, 2)]]
    flow = Dataflow("collect_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    batches = win.collect_window("batch", keyed, clock, ten_s)
    out = []
    op.output("out", op.map_value("values", batches.down, lambda w: (w[0], [v for _, v in w[1]])), TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, [3, 5])), ("a", (1, [2]))]
    ```
    """
    coll_builder, coll_folder, coll_merger = collect_callbacks(step_id, into)
    return fold_window(
        "fold_window",
        up,
        clock,
        windower,
        coll_builder,
        coll_folder,
        coll_merger,
        ordered,
        firing=firing_of(step_id, firing, keywords),
    )


def _zero() -> int:
    return 0


def _plus_one(count: int, _value: Any) -> int:
    return count + 1


def _sum(count: int, other: int) -> int:
    return count + other


@operator
def count_window(
    step_id: str,
    up: Stream[X],
    clock: Clock[X, Any],
    windower: Windower[Any],
    key: Callable[[X], str],
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[X, int]:
    """Count the items of each window per `key(item)`; emits `(key, (window_id, count))`.

    The input need not be keyed.  Items are counted in arrival order.
    `firing` (or its keywords): see `window`.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in [(1, 3), (4, 5), (12, 2)]]
    flow = Dataflow("count_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    counts = win.count_window("count", op.key_rm("values", keyed), clock, ten_s, lambda _: "all")
    out = []
    op.output("out", counts.down, TestingSink(out))
    run_main(flow)
    assert out == [("all", (0, 2)), ("all", (1, 1))]
    ```
    """
    keyed = key_on("keyed", up, key)
    return fold_window(
        "sum",
        keyed,
        clock,
        windower,
        _zero,
        _plus_one,
        _sum,
        ordered=False,
        firing=firing_of(step_id, firing, keywords),
    )


def _nothing() -> Any:
    return None


@operator
def reduce_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    reducer: Callable[[V, V], V],
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, V]:
    """Combine each window's values pairwise with `reducer(acc, value)`, in arrival order.

    The first value is the starting accumulator; `reducer` also merges
    sessions.  A `None` accumulator counts as "no value yet".  `firing` (or its
    keywords): see `window`.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in [(1, 3), (4, 5), (12, 2)]]
    flow = Dataflow("reduce_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    latest = win.reduce_window("latest", keyed, clock, ten_s, lambda a, b: b)
    out = []
    op.output("out", latest.down, TestingSink(out))
    run_main(flow)
    assert [(key, (window_id, value[1])) for key, (window_id, value) in out] == [("a", (0, 5)), ("a", (1, 2))]
    ```
    """

    def shim_folder(acc: Optional[V], value: V) -> V:
        return value if acc is None else reducer(acc, value)

    return fold_window(
        "fold_window",
        up,
        clock,
        windower,
        _nothing,
        shim_folder,
        reducer,
        ordered=False,
        firing=firing_of(step_id, firing, keywords),
    )


def _identity(value: V) -> V:
    return value


@operator
def max_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, V]:
    """Emit each window's largest value, compared by `by(value)`; ties keep the earlier value.

    `firing` (or its keywords): see `window`.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in [(1, 3), (4, 5), (12, 2)]]
    flow = Dataflow("max_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    peaks = win.max_window("peak", keyed, clock, ten_s, by=lambda v: v[1])
    out = []
    op.output("out", op.map_value("value", peaks.down, lambda w: (w[0], w[1][1])), TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, 5)), ("a", (1, 2))]
    ```
    """

    def bigger(acc: V, value: V) -> V:
        return max(acc, value, key=by)

    return reduce_window(
        "reduce_window",
        up,
        clock,
        windower,
        bigger,
        firing=firing_of(step_id, firing, keywords),
    )


@operator
def min_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, V]:
    """Emit each window's smallest value, compared by `by(value)`; ties keep the earlier value.

    `firing` (or its keywords): see `window`.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)

    readings = [("a", (T0 + timedelta(seconds=s), v)) for s, v in [(1, 3), (4, 5), (12, 2)]]
    flow = Dataflow("min_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    lows = win.min_window("low", keyed, clock, ten_s, by=lambda v: v[1])
    out = []
    op.output("out", op.map_value("value", lows.down, lambda w: (w[0], w[1][1])), TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, 3)), ("a", (1, 2))]
    ```
    """

    def smaller(acc: V, value: V) -> V:
        return min(acc, value, key=by)

    return reduce_window(
        "reduce_window",
        up,
        clock,
        windower,
        smaller,
        firing=firing_of(step_id, firing, keywords),
    )
