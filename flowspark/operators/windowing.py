"""Time-based windowing operators, with Bytewax 0.21.1's API.

Pick a clock (how values are stamped and how the watermark advances), a
windower (which windows a timestamp falls in and when they close) and an
operator.  Every operator returns a `WindowOut` of three keyed streams:
`down` with `(window_id, result)`, `late` with `(window_id, value)` for
values that came after the watermark had passed them, and `meta` with
`(window_id, WindowMetadata)` once per closed window.

Each operator is one `stateful_batch` step: clock, watermark, windower and
open windows are kept per key, and a key's watermark only moves with that
key's values (and with system time, for `EventClock`).

Unlike Bytewax 0.21.1, a key whose windows have all closed keeps its clock
and watermark (a small tombstone), so a straggler for a closed window goes
to `late` instead of reopening that window and emitting it a second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Literal,
    Optional,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from flowspark.dataflow import KeyedStream, Stream, operator
from flowspark.operators._core import S, V, W, W_co, X, stateful_batch
from flowspark.operators._join import JoinEmitMode, JoinInsertMode, JoinState, _join_label_merge, check_join_modes
from flowspark.operators._stateless import filter_map_value, key_on
from flowspark.operators._windowing.base import (
    LATE_SESSION_ID,
    SC,
    SW,
    UTC_MAX,
    UTC_MIN,
    ZERO_TD,
    Clock,
    ClockLogic,
    Windower,
    WindowerLogic,
    WindowLogic,
    WindowMetadata,
)
from flowspark.operators._windowing.clocks import EventClock, SystemClock
from flowspark.operators._windowing.join import JoinWindowLogic, SideValueClock
from flowspark.operators._windowing.logics import FoldBuilder, collect_callbacks
from flowspark.operators._windowing.per_key import Closed, Emitted, Late, WindowConfig, WindowEvent
from flowspark.operators._windowing.windowers import (
    SessionWindower,
    SlidingWindower,
    TumblingWindower,
    check_windower,
)

__all__ = [
    "LATE_SESSION_ID",
    "SC",
    "SW",
    "UTC_MAX",
    "UTC_MIN",
    "ZERO_TD",
    "Clock",
    "ClockLogic",
    "EventClock",
    "SessionWindower",
    "SlidingWindower",
    "SystemClock",
    "TumblingWindower",
    "WindowLogic",
    "WindowMetadata",
    "WindowOut",
    "Windower",
    "WindowerLogic",
    "collect_window",
    "count_window",
    "fold_window",
    "join_window",
    "max_window",
    "min_window",
    "reduce_window",
    "window",
]

U = TypeVar("U")
"""Type of the values of another join side."""
DK = TypeVar("DK")
"""Type of the keys of a collected `dict`."""
DV = TypeVar("DV")
"""Type of the values of a collected `dict`."""


@dataclass(frozen=True)
class WindowOut(Generic[V, W_co]):
    """The three streams of a window operator, each keyed and tagged with the window id."""

    down: KeyedStream[Tuple[int, W_co]]
    """What the window logics emitted, as `(window_id, item)`."""

    late: KeyedStream[Tuple[int, V]]
    """Values that came after the watermark, as `(window_id, value)`.

    The ids are those the value would have fallen in; they may never appear
    on `down` or `meta`.
    """

    meta: KeyedStream[Tuple[int, WindowMetadata]]
    """`(window_id, metadata)` once per closed window.

    Windows merged into another are not reported; the surviving window's
    `merged_ids` lists them.
    """


def _down_of(event: WindowEvent[Any, W]) -> Optional[Tuple[int, W]]:
    return (event.window_id, event.value) if isinstance(event, Emitted) else None


def _late_of(event: WindowEvent[V, Any]) -> Optional[Tuple[int, V]]:
    return (event.window_id, event.value) if isinstance(event, Late) else None


def _meta_of(event: WindowEvent[Any, Any]) -> Optional[Tuple[int, WindowMetadata]]:
    return (event.window_id, event.meta) if isinstance(event, Closed) else None


@operator
def window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    builder: Callable[[Optional[S]], WindowLogic[V, W, S]],
    ordered: bool = True,
) -> WindowOut[V, W]:
    """The general window operator: run a `WindowLogic` per window of each key.

    For each batch of a key's values, the clock stamps every value and
    updates the watermark; a value stamped before the watermark goes to
    `late` for every window `windower.late_for` names.  The others are
    applied to their windows (`open_for`) by calling `on_value` on the
    window's logic, built with `builder(None)` when the window opens.  With
    `ordered=True` values wait until the watermark reaches them and are
    applied in timestamp order; with `ordered=False` they are applied at
    once, in arrival order.  Then merges are applied (`on_merge` on the
    surviving window) and every window the watermark has passed closes:
    its `on_close` items go to `down`, then its metadata to `meta`.  The
    same happens, without values, when the clock's wake-up time comes and
    at end of input, which closes every window.

    `builder` is also called with a window's snapshot to rebuild it; it must
    take its configuration from its closure, not from the snapshot.
    """
    check_windower(step_id, windower)
    config: WindowConfig[V, W, S] = WindowConfig(step_id, clock, windower, builder, ordered)
    events = stateful_batch("stateful_batch", up, config)
    return WindowOut(
        filter_map_value("unwrap_down", events, _down_of),
        filter_map_value("unwrap_late", events, _late_of),
        filter_map_value("unwrap_meta", events, _meta_of),
    )


@operator
def fold_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
    merger: Callable[[S, S], S],
    ordered: bool = True,
) -> WindowOut[V, S]:
    """Fold each window's values into an accumulator, emitted when the window closes.

    `builder()` makes a window's empty accumulator, `folder(acc, value)`
    adds a value (in timestamp order when `ordered`), and `merger(into,
    absorbed)` combines the accumulators of merging session windows.
    """

    return window("window", up, clock, windower, FoldBuilder(builder, folder, merger), ordered)


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
) -> WindowOut[V, List[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[List[Any]],
    ordered: bool = ...,
) -> WindowOut[V, List[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Set[Any]],
    ordered: bool = ...,
) -> WindowOut[V, Set[V]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[Tuple[DK, DV]],
    clock: Clock[Tuple[DK, DV], Any],
    windower: Windower[Any],
    into: Type[Dict[Any, Any]],
    ordered: bool = ...,
) -> WindowOut[Tuple[DK, DV], Dict[DK, DV]]: ...


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Any] = ...,
    ordered: bool = ...,
) -> WindowOut[V, Any]: ...


@operator
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: Type[Any] = list,
    ordered: bool = True,
) -> WindowOut[V, Any]:
    """Collect each window's values into a `list` (default), `set` or `dict`.

    Lists keep timestamp order (arrival order with `ordered=False`); a
    `dict` needs `(key, value)` values, later ones winning.  Other container
    types raise `TypeError` when the flow is built.
    """
    coll_builder, coll_folder, coll_merger = collect_callbacks(step_id, into)
    return fold_window("fold_window", up, clock, windower, coll_builder, coll_folder, coll_merger, ordered)


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
) -> WindowOut[X, int]:
    """Count the items of each window per `key(item)`; emits `(key, (window_id, count))`.

    The input need not be keyed.  Items are counted in arrival order.
    """
    keyed = key_on("keyed", up, key)
    return fold_window("sum", keyed, clock, windower, _zero, _plus_one, _sum, ordered=False)


def _nothing() -> Any:
    return None


@operator
def reduce_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    reducer: Callable[[V, V], V],
) -> WindowOut[V, V]:
    """Combine each window's values pairwise with `reducer(acc, value)`, in arrival order.

    The first value is the starting accumulator; `reducer` also merges
    sessions.  A `None` accumulator counts as "no value yet".
    """

    def shim_folder(acc: Optional[V], value: V) -> V:
        return value if acc is None else reducer(acc, value)

    return fold_window("fold_window", up, clock, windower, _nothing, shim_folder, reducer, ordered=False)


def _identity(value: V) -> V:
    return value


@operator
def max_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """Emit each window's largest value, compared by `by(value)`; ties keep the earlier value."""

    def bigger(acc: V, value: V) -> V:
        return max(acc, value, key=by)

    return reduce_window("reduce_window", up, clock, windower, bigger)


@operator
def min_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """Emit each window's smallest value, compared by `by(value)`; ties keep the earlier value."""

    def smaller(acc: V, value: V) -> V:
        return min(acc, value, key=by)

    return reduce_window("reduce_window", up, clock, windower, smaller)


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
    """
    check_join_modes(insert_mode, emit_mode)
    side_count = len(sides)
    merged = _join_label_merge("add_names", *sides)
    side_clock: Clock[Any, Any] = SideValueClock(clock) if isinstance(clock, EventClock) else clock

    def shim_builder(resume_state: Optional[JoinState]) -> JoinWindowLogic:
        state = JoinState.for_side_count(side_count) if resume_state is None else resume_state
        return JoinWindowLogic(insert_mode, emit_mode, state)

    return window("window", merged, side_clock, windower, shim_builder, ordered=ordered)
