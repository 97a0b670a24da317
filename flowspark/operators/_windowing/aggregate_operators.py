"""flowspark's aggregating window operators: `sum_window`, `mean_window` and `aggregate_window`.

Each runs `window` with a window logic from `aggregations` (a running sum,
a running `(sum, count)`, or several Quix Streams-style aggregations in one
pass).  Users import them from `flowspark.operators.windowing`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, TypeVar, cast, overload

from typing_extensions import Unpack

from flowspark.dataflow import KeyedStream, operator
from flowspark.operators._core import V
from flowspark.operators._windowing.aggregations import Aggregation, AggregationSet, mean_builder, sum_builder
from flowspark.operators._windowing.base import Clock, Windower
from flowspark.operators._windowing.dynamic_sessions import DynamicSessionWindower
from flowspark.operators._windowing.firing import Firing, FiringKeywords, firing_of
from flowspark.operators._windowing.window_operators import WindowOut, window
from flowspark.operators._windowing.windowers import SessionWindower

__all__ = ["aggregate_window", "mean_window", "sum_window"]

N = TypeVar("N", int, float)
"""Type of the numbers `sum_window` adds."""


@overload
def sum_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], N],
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, N]: ...


@overload
def sum_window(
    step_id: str,
    up: KeyedStream[N],
    clock: Clock[N, Any],
    windower: Windower[Any],
    by: None = ...,
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[N, N]: ...


@operator
def sum_window(
    step_id: str,
    up: KeyedStream[Any],
    clock: Clock[Any, Any],
    windower: Windower[Any],
    by: Optional[Callable[[Any], Any]] = None,
    ordered: bool = True,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[Any, Any]:
    """Add up each window's numbers; emits `(key, (window_id, total))`.

    A flowspark addition, shaped like `count_window` but for a keyed stream
    of numbers, or of values whose number is `by(value)` (handy when an
    `EventClock` needs a timestamp from the same value).  Any values that
    add to `0` work at run time.  A `None` is skipped, as Quix Streams'
    `Sum` does (a window of `None`s sums to `0`).  With `ordered` (default)
    numbers are added in timestamp order, so float sums are reproducible.
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
    flow = Dataflow("sum_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    totals = win.sum_window("total", keyed, clock, ten_s, by=lambda v: v[1])
    out = []
    op.output("out", totals.down, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, 8)), ("a", (1, 2))]
    ```
    """
    kw: Dict[str, Any] = {"firing": firing_of(step_id, firing, keywords)}
    return window("window", up, clock, windower, sum_builder(by), ordered, **kw)


@overload
def mean_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], float],
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, float]: ...


@overload
def mean_window(
    step_id: str,
    up: KeyedStream[float],
    clock: Clock[float, Any],
    windower: Windower[Any],
    by: None = ...,
    ordered: bool = ...,
    *,
    firing: Optional[Firing] = ...,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[float, float]: ...


@operator
def mean_window(
    step_id: str,
    up: KeyedStream[Any],
    clock: Clock[Any, Any],
    windower: Windower[Any],
    by: Optional[Callable[[Any], float]] = None,
    ordered: bool = True,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[Any, float]:
    """Average each window's numbers (or `by(value)`s); emits `(key, (window_id, mean))`.

    A flowspark addition.  The window keeps a running `(sum, count)`; every
    emission (early ones with `emit="current"` included) is `sum / count`,
    as Quix Streams' `Mean`, which skips `None`s (a window of `None`s emits
    `None`).  `firing` (or its keywords): see `window`.

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
    flow = Dataflow("mean_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    means = win.mean_window("mean", keyed, clock, ten_s, by=lambda v: v[1])
    out = []
    op.output("out", means.down, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, 4.0)), ("a", (1, 2.0))]
    ```
    """
    kw: Dict[str, Any] = {"firing": firing_of(step_id, firing, keywords)}
    out = window("window", up, clock, windower, mean_builder(by), ordered, **kw)
    return cast(WindowOut[Any, float], out)


@operator
def aggregate_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    aggregations: Mapping[str, Aggregation[V, Any, Any]],
    ordered: bool = True,
    *,
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, Dict[str, Any]]:
    """Compute several aggregations of each window in one pass; emits `(key, (window_id, {name: result}))`.

    A flowspark addition, after Quix Streams' `.agg(name=Aggregation, ...)`:
    `aggregations` maps result names to `Sum`, `Count`, `Mean`, `Min`,
    `Max`, `First`, `Last`, `Collect` or your own `Aggregation(builder,
    folder, merger, finisher)`, e.g. `{"avg": Mean("temperature"), "n":
    Count()}`; the ready-made ones but `Collect` skip `None`s, as Quix's
    do.  Each emission is a fresh `dict` of finished results (early ones
    too).  Session windows (`SessionWindower`,
    `DynamicSessionWindower`) need every aggregation to have a `merger`
    (refused here otherwise).  `firing` (or its keywords): see
    `window`.

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
    flow = Dataflow("aggregate_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    aggregations = {"n": win.Count(), "max": win.Max(lambda v: v[1])}
    stats = win.aggregate_window("stats", keyed, clock, ten_s, aggregations)
    out = []
    op.output("out", stats.down, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, {"n": 2, "max": 5})), ("a", (1, {"n": 1, "max": 2}))]
    ```
    """
    aggs = AggregationSet.of(step_id, aggregations)
    unmergeable = aggs.unmergeable()
    if unmergeable and isinstance(windower, (SessionWindower, DynamicSessionWindower)):
        msg = (
            f"step {step_id!r}: {type(windower).__name__} merges sessions, "
            f"but aggregations {unmergeable!r} have no `merger`"
        )
        raise ValueError(msg)
    kw: Dict[str, Any] = {"firing": firing_of(step_id, firing, keywords)}
    out = window("window", up, clock, windower, aggs.builder(), ordered, **kw)
    return cast(WindowOut[V, Dict[str, Any]], out)
