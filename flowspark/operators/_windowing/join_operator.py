"""The `join_window` operator: join the values of each key across streams, window by window.

It labels each side's values with their side index, merges the sides into
one stream and runs `window` with the `JoinWindowLogic` of `join`.  Users
import it from `flowspark.operators.windowing`.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Tuple, TypeVar, Union, overload

from flowspark.dataflow import KeyedStream, operator
from flowspark.operators._core import V, W
from flowspark.operators._join import JoinEmitMode, JoinInsertMode, JoinState, _join_label_merge, check_join_modes
from flowspark.operators._windowing.base import Clock, Windower
from flowspark.operators._windowing.clocks import EventClock
from flowspark.operators._windowing.join import JoinWindowLogic, SideValueClock
from flowspark.operators._windowing.window_operators import WindowOut, window

__all__ = ["join_window"]

U = TypeVar("U")
"""Type of the values of another join side."""


@overload
def join_window(
    step_id: str,
    clock: Clock[V, Any],
    windower: Windower[Any],
    side1: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"],
    ordered: bool = ...,
) -> WindowOut[V, Tuple[V]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[Union[U, V], Any],
    windower: Windower[Any],
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"],
    ordered: bool = ...,
) -> WindowOut[Union[U, V], Tuple[U, V]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[Union[U, V, W], Any],
    windower: Windower[Any],
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: Literal["complete"],
    ordered: bool = ...,
) -> WindowOut[Union[U, V, W], Tuple[U, V, W]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[V, Any],
    windower: Windower[Any],
    side1: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode = ...,
    ordered: bool = ...,
) -> WindowOut[V, Tuple[Optional[V]]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[Union[U, V], Any],
    windower: Windower[Any],
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode = ...,
    ordered: bool = ...,
) -> WindowOut[Union[U, V], Tuple[Optional[U], Optional[V]]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[Union[U, V, W], Any],
    windower: Windower[Any],
    side1: KeyedStream[U],
    side2: KeyedStream[V],
    side3: KeyedStream[W],
    /,
    *,
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode = ...,
    ordered: bool = ...,
) -> WindowOut[Union[U, V, W], Tuple[Optional[U], Optional[V], Optional[W]]]: ...


@overload
def join_window(
    step_id: str,
    clock: Clock[Any, Any],
    windower: Windower[Any],
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = ...,
    emit_mode: JoinEmitMode = ...,
    ordered: bool = ...,
) -> WindowOut[Any, Tuple[Any, ...]]: ...


@operator
def join_window(
    step_id: str,
    clock: Clock[Any, Any],
    windower: Windower[Any],
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "final",
    ordered: bool = True,
) -> WindowOut[Any, Tuple[Any, ...]]:
    """Join the values of each key across `sides`, window by window.

    Note the argument order: clock and windower come before the sides.
    Rows are tuples with one slot per side (`None` for a side with no value
    in the window).  `insert_mode` picks which values of a side are kept
    (`first`, `last` or `product` of all), `emit_mode` when rows go out:
    `final` (default) when the window closes, `complete` as soon as every
    side has a value (then the window's values are cleared), `running` on
    every value.  An `EventClock` sees each side's bare values; any other
    clock gets `(side_index, value)` items, as in Bytewax 0.21.1.

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
    flow = Dataflow("join_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    emails = op.input("emails", flow, TestingSource([("a", (T0 + timedelta(seconds=2), "ada@example.com"))]))
    joined = win.join_window("joined", clock, ten_s, keyed, emails)
    out = []
    shown = op.map_value("values", joined.down, lambda w: (w[0], tuple(side and side[1] for side in w[1])))
    op.output("out", shown, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, (5, "ada@example.com"))), ("a", (1, (2, None)))]
    ```
    """
    check_join_modes(insert_mode, emit_mode)
    side_count = len(sides)
    merged = _join_label_merge("add_names", *sides)
    side_clock: Clock[Any, Any] = SideValueClock(clock) if isinstance(clock, EventClock) else clock

    def shim_builder(resume_state: Optional[JoinState]) -> JoinWindowLogic:
        state = JoinState.for_side_count(side_count) if resume_state is None else resume_state
        return JoinWindowLogic(insert_mode, emit_mode, state)

    return window("window", merged, side_clock, windower, shim_builder, ordered=ordered)
