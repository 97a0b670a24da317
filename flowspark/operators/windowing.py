"""Time-based windowing operators, with Bytewax 0.21.1's API.

Pick a clock (how values are stamped and how the watermark advances), a
windower (which windows a timestamp falls in and when they close) and an
operator.  Every operator returns a `WindowOut` of three keyed streams:
`down` with `(window_id, result)`, `late` with `(window_id, value)` for
values that came after the watermark had passed them, and `meta` with
`(window_id, WindowMetadata)` once per closed window (with
`allowed_lateness`, again for a window a late value creates or stretches).

Each operator is one `stateful_batch` step: clock, watermark, windower and
open windows are kept per key, and a key's watermark only moves with that
key's values (and with system time, for `EventClock`).

Unlike Bytewax 0.21.1, a key whose windows have all closed keeps its clock
and watermark (a small tombstone), so a straggler for a closed window goes
to `late` instead of reopening that window and emitting it a second time.

flowspark additions (a flow that uses none of them is unchanged, step graph
included): every operator (but `join_window`, which has its own modes) takes
keyword-only `emit=` (`"final"`, `"current"` or `"current_and_final"`: when
results go out), `allowed_lateness=` (keep closed windows for late values
and re-emit corrected results; late values within it also create windows
and merge sessions) and `trigger=` (`CountTrigger`,
`ProcessingTimeTrigger`, `PredicateTrigger`: fire early, optionally
purging).  With any of them, `WindowOut.panes` also carries every emission
as a `Pane` saying whether it was early, on time or late.  `sum_window`,
`mean_window` and `aggregate_window` (several aggregations in one pass, with
Quix Streams' `Sum`, `Count`, `Mean`, `Min`, `Max`, `First`, `Last`,
`Collect`) are new operators.  See `window` for the rules.

New windowers: `HoppingWindower` (`SlidingWindower` under Quix Streams'
name), `CountTumblingWindower` and `CountHoppingWindower` (windows of a
number of values), `RecordSlidingWindower` (Kafka Streams' record-aligned
sliding windows, exact only with `ordered=True`) and
`DynamicSessionWindower` (sessions whose gap each value sets).  They work
with every operator, emit mode and trigger, and with `allowed_lateness`
except for the count windowers, which refuse it: their windows close when
full, not at an event time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Literal,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
    overload,
)

from flowspark.batch_logic import StatefulBatchLogic  # noqa: F401  (Bytewax has it here)
from flowspark.dataflow import KeyedStream, Stream, operator
from flowspark.operators._core import S, V, W, W_co, X, stateful_batch
from flowspark.operators._join import JoinEmitMode, JoinInsertMode, JoinState, _join_label_merge, check_join_modes
from flowspark.operators._stateless import filter_map_value, key_on

# flowspark's additions: emit modes, panes, allowed lateness, triggers, aggregations.
from flowspark.operators._windowing.aggregations import (  # noqa: E402
    Aggregation,
    AggregationSet,
    Collect,
    Count,
    First,
    Last,
    Max,
    Mean,
    Min,
    Sum,
    mean_builder,
    sum_builder,
)
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
from flowspark.operators._windowing.clocks import (
    EventClock,
    EventClockLogic,
    EventClockState,
    SystemClock,
    SystemClockLogic,
)

# flowspark's additional windowers: hopping, count, record sliding, dynamic sessions.
from flowspark.operators._windowing.dynamic_sessions import DynamicSessionWindower  # noqa: E402
from flowspark.operators._windowing.firing import FiringWindowConfig  # noqa: E402
from flowspark.operators._windowing.hopping import (  # noqa: E402
    CountHoppingWindower,
    CountTumblingWindower,
    HoppingWindower,
)
from flowspark.operators._windowing.join import JoinWindowLogic, SideValueClock
from flowspark.operators._windowing.logics import FoldBuilder, collect_callbacks
from flowspark.operators._windowing.panes import (  # noqa: E402
    EmitMode,
    Pane,
    PaneTiming,
    check_allowed_lateness,
    check_emit,
)
from flowspark.operators._windowing.per_key import (
    Closed,
    Emitted,
    Fired,  # noqa: E402
    Late,
    WindowConfig,
    WindowEvent,
)
from flowspark.operators._windowing.record_sliding import RecordSlidingWindower  # noqa: E402
from flowspark.operators._windowing.triggers import (  # noqa: E402
    CountTrigger,
    PredicateTrigger,
    ProcessingTimeTrigger,
    Trigger,
    check_trigger,
)
from flowspark.operators._windowing.windowers import (
    SessionWindower,
    SessionWindowerLogic,
    SessionWindowerState,
    SlidingWindower,
    SlidingWindowerLogic,
    SlidingWindowerState,
    TumblingWindower,
    _merge_sessions,
    check_windower,
)

__all__ = [
    "LATE_SESSION_ID",
    "SC",
    "SW",
    "UTC_MAX",
    "UTC_MIN",
    "ZERO_TD",
    "Aggregation",
    "Clock",
    "ClockLogic",
    "Collect",
    "Count",
    "CountHoppingWindower",
    "CountTrigger",
    "CountTumblingWindower",
    "DynamicSessionWindower",
    "EmitMode",
    "EventClock",
    "First",
    "HoppingWindower",
    "Last",
    "Max",
    "Mean",
    "Min",
    "Pane",
    "PaneTiming",
    "PredicateTrigger",
    "ProcessingTimeTrigger",
    "RecordSlidingWindower",
    "SessionWindower",
    "SlidingWindower",
    "Sum",
    "SystemClock",
    "Trigger",
    "TumblingWindower",
    "WindowLogic",
    "WindowMetadata",
    "WindowOut",
    "Windower",
    "WindowerLogic",
    "aggregate_window",
    "collect_window",
    "count_window",
    "fold_window",
    "join_window",
    "max_window",
    "mean_window",
    "min_window",
    "reduce_window",
    "sum_window",
    "window",
]

# Bytewax 0.21.1's private names for the built-in clock and windower logics,
# for code (and Bytewax's own unit tests) that builds them directly.  Not in
# `__all__`.  The windower logics and `_session_find_merges` have the same
# signatures; the clock logics take Bytewax's constructor arguments.
_SlidingWindowerState = SlidingWindowerState
_SlidingWindowerLogic = SlidingWindowerLogic
_SessionWindowerState = SessionWindowerState
_SessionWindowerLogic = SessionWindowerLogic
_session_find_merges = _merge_sessions
_EventClockState = EventClockState


class _SystemClockLogic(SystemClockLogic):
    """`SystemClockLogic` with Bytewax 0.21.1's constructor: `(now_getter)`."""

    def __init__(self, now_getter: Callable[[], datetime], last_now: Optional[datetime] = None) -> None:
        super().__init__(now_getter, last_now)


class _EventClockLogic(EventClockLogic[V]):
    """`EventClockLogic` with Bytewax 0.21.1's constructor.

    `(now_getter, timestamp_getter, to_system, wait_for_system_duration,
    state=None)`; `state`, if given, is flowspark's `EventClockState`.
    """

    def __init__(
        self,
        now_getter: Callable[[], datetime],
        timestamp_getter: Callable[[V], datetime],
        to_system: Callable[[datetime], Optional[datetime]],
        wait_for_system_duration: timedelta,
        state: Optional[EventClockState] = None,
    ) -> None:
        config = EventClock(timestamp_getter, wait_for_system_duration, now_getter, to_system)
        super().__init__(config, state)


U = TypeVar("U")
"""Type of the values of another join side."""
DK = TypeVar("DK")
"""Type of the keys of a collected `dict`."""
DV = TypeVar("DV")
"""Type of the values of a collected `dict`."""
N = TypeVar("N", int, float)
"""Type of the numbers `sum_window` adds."""


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
    `merged_ids` lists them.  With `allowed_lateness`, a window a late value
    creates already closed is reported then, and a kept session a late
    value merges or stretches is reported again with its new metadata.
    """

    _panes: Optional[KeyedStream[Tuple[int, Pane[W_co]]]] = None
    """The stream behind `panes`; `None` when the step was built without it."""

    _step_id: str = ""
    """The window step, for the message when `panes` was not built."""

    @property
    def panes(self) -> KeyedStream[Tuple[int, Pane[W_co]]]:
        """Every emission of `down` again, as `(window_id, Pane)`: value, timing, index.

        A flowspark addition, built (as step `unwrap_panes`) only when the
        operator is given `emit="current"`/`"current_and_final"`, a positive
        `allowed_lateness` or a `trigger`, so that other flows keep
        Bytewax's exact step graph.  Otherwise reading it raises
        `AttributeError`, saying so.
        """
        if self._panes is None:
            msg = (
                f"step {self._step_id!r} has no `panes` stream: it is built only when the window "
                'operator gets `emit="current"` or `emit="current_and_final"`, a positive '
                "`allowed_lateness` or a `trigger` (without them the step is wired as in Bytewax)"
            )
            raise AttributeError(msg)
        return self._panes


def _down_of(event: WindowEvent[Any, W]) -> Optional[Tuple[int, W]]:
    return (event.window_id, event.value) if isinstance(event, Emitted) else None


def _late_of(event: WindowEvent[V, Any]) -> Optional[Tuple[int, V]]:
    return (event.window_id, event.value) if isinstance(event, Late) else None


def _meta_of(event: WindowEvent[Any, Any]) -> Optional[Tuple[int, WindowMetadata]]:
    return (event.window_id, event.meta) if isinstance(event, Closed) else None


def _panes_of(event: WindowEvent[Any, W]) -> Optional[Tuple[int, Pane[W]]]:
    return (event.window_id, event.pane) if isinstance(event, Fired) else None


@operator
def window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    builder: Callable[[Optional[S]], WindowLogic[V, W, S]],
    ordered: bool = True,
    *,
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
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

    flowspark adds three keyword-only parameters, shared by every window
    operator; with their defaults the step is exactly Bytewax's (same
    output, same step graph, same fast path).  Any other value also builds
    `panes` (step `unwrap_panes`): each emission of `down` again, as a
    `Pane` with its `timing` (`"early"`, `"on_time"` or `"late"`) and
    `index` (0, 1, ... per window), and makes the step handle values one by
    one (no batch merging).

    * `emit`: `"final"` (default) emits when the window closes.  `"current"`
      (Quix Streams' `.current()`) emits the window's running result after
      every value it takes in (once for a value that merges sessions) and
      nothing extra when it closes; `"current_and_final"` does both.  For
      fold-based operators the running result is a copy of the accumulator
      (finished, e.g. divided for `mean_window`); for a custom
      `WindowLogic` it is the `on_close()` items of a copy rebuilt from
      `snapshot()` (the live logic is not closed).
    * `allowed_lateness` (Flink's allowed lateness, Kafka Streams' grace):
      a closed window still emits its result (on time) and its metadata,
      but is kept until the watermark passes `close_time +
      allowed_lateness` (for sessions, where they close: `close_time +
      gap`, or a dynamic session's furthest reach).  A late value for a
      kept window updates it and immediately emits the corrected result (a
      `"late"` pane, on `down` too); a late value for a window still open
      joins it at once; a late value for a built-in windower's window that
      does not exist yet creates it if it is within the lateness (emitting
      at once, with its metadata, if it has ended); kept sessions a late
      value touches merge and stretch as open ones do (opening again if the
      value reaches past the watermark), reporting new metadata; anything
      later goes to `late`.  Kept windows are in the key's snapshot and
      wake the key up to be dropped.  Must be a
      non-negative `timedelta`; zero (default) is Bytewax's behaviour.
      Count windowers refuse a positive one.
    * `trigger`: a `CountTrigger`, `ProcessingTimeTrigger` or
      `PredicateTrigger` fires the window early (its running result, as an
      early pane); with `purge=True` the window then starts again empty.
      The window still emits when it closes, unless it was purged and took
      in nothing since.  Firing once per value at most: with
      `emit="current"` a fire does not add a second emission.  A value that
      bridges sessions merges them before the trigger sees it, so a
      `CountTrigger` counts the merged session's values (as Flink does).

    Bad values fail here, naming the step.  See
    `flowspark.operators._windowing.firing` for the complete rules.

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
    flow = Dataflow("window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))


    class Values(win.WindowLogic):
        def __init__(self, resume_state):
            self.values = resume_state or []

        def on_value(self, value):
            self.values.append(value[1])
            return []

        def on_merge(self, original):
            self.values += original.values
            return []

        def on_close(self):
            return [self.values]

        def snapshot(self):
            return list(self.values)


    windows = win.window("values", keyed, clock, ten_s, Values)
    out = []
    op.output("out", windows.down, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, [3, 5])), ("a", (1, [2]))]
    ```
    """
    check_windower(step_id, windower)
    check_emit(step_id, emit)
    check_allowed_lateness(step_id, allowed_lateness)
    if allowed_lateness > ZERO_TD and isinstance(windower, (CountTumblingWindower, CountHoppingWindower)):
        msg = (
            f"step {step_id!r}: count windows close when full, not at a time, so "
            "`allowed_lateness` (a span of event time after a window's close) does not apply to them"
        )
        raise ValueError(msg)
    check_trigger(step_id, trigger)
    firing = emit != "final" or allowed_lateness > ZERO_TD or trigger is not None
    config: WindowConfig[V, W, S]
    if firing:
        config = FiringWindowConfig(step_id, clock, windower, builder, ordered, emit, allowed_lateness, trigger)
    else:
        config = WindowConfig(step_id, clock, windower, builder, ordered)
    events = stateful_batch("stateful_batch", up, config)
    down = filter_map_value("unwrap_down", events, _down_of)
    late = filter_map_value("unwrap_late", events, _late_of)
    meta = filter_map_value("unwrap_meta", events, _meta_of)
    panes = filter_map_value("unwrap_panes", events, _panes_of) if firing else None
    return WindowOut(down, late, meta, panes, step_id)


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
    *,
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[V, S]:
    """Fold each window's values into an accumulator, emitted when the window closes.

    `builder()` makes a window's empty accumulator, `folder(acc, value)`
    adds a value (in timestamp order when `ordered`), and `merger(into,
    absorbed)` combines the accumulators of merging session windows.
    `emit`, `allowed_lateness`, `trigger`: see `window`; early and late
    results are deep copies of the accumulator.

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
    flow = Dataflow("fold_window_eg")
    keyed = op.input("inp", flow, TestingSource(readings))

    sums = win.fold_window("sum", keyed, clock, ten_s, lambda: 0, lambda acc, v: acc + v[1], lambda a, b: a + b)
    out = []
    op.output("out", sums.down, TestingSink(out))
    run_main(flow)
    assert out == [("a", (0, 8)), ("a", (1, 2))]
    ```
    """

    fold = FoldBuilder(builder, folder, merger)
    return window(
        "window",
        up,
        clock,
        windower,
        fold,
        ordered,
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
    )


@overload
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    *,
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[V, Any]:
    """Collect each window's values into a `list` (default), `set` or `dict`.

    Lists keep timestamp order (arrival order with `ordered=False`); a
    `dict` needs `(key, value)` values, later ones winning.  Other container
    types raise `TypeError` when the flow is built.  `emit`,
    `allowed_lateness`, `trigger`: see `window`; each early or late result
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
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[X, int]:
    """Count the items of each window per `key(item)`; emits `(key, (window_id, count))`.

    The input need not be keyed.  Items are counted in arrival order.
    `emit`, `allowed_lateness`, `trigger`: see `window`.

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
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[V, V]:
    """Combine each window's values pairwise with `reducer(acc, value)`, in arrival order.

    The first value is the starting accumulator; `reducer` also merges
    sessions.  A `None` accumulator counts as "no value yet".  `emit`,
    `allowed_lateness`, `trigger`: see `window`.

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
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[V, V]:
    """Emit each window's largest value, compared by `by(value)`; ties keep the earlier value.

    `emit`, `allowed_lateness`, `trigger`: see `window`.

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
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
    )


@operator
def min_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
    *,
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[V, V]:
    """Emit each window's smallest value, compared by `by(value)`; ties keep the earlier value.

    `emit`, `allowed_lateness`, `trigger`: see `window`.

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
        emit=emit,
        allowed_lateness=allowed_lateness,
        trigger=trigger,
    )


@overload
def sum_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], N],
    ordered: bool = ...,
    *,
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[Any, Any]:
    """Add up each window's numbers; emits `(key, (window_id, total))`.

    A flowspark addition, shaped like `count_window` but for a keyed stream
    of numbers, or of values whose number is `by(value)` (handy when an
    `EventClock` needs a timestamp from the same value).  Any values that
    add to `0` work at run time.  A `None` is skipped, as Quix Streams'
    `Sum` does (a window of `None`s sums to `0`).  With `ordered` (default)
    numbers are added in timestamp order, so float sums are reproducible.
    `emit`, `allowed_lateness`, `trigger`: see `window`.

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
    kw: Dict[str, Any] = {"emit": emit, "allowed_lateness": allowed_lateness, "trigger": trigger}
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = ...,
    allowed_lateness: timedelta = ...,
    trigger: Optional[Trigger] = ...,
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
) -> WindowOut[Any, float]:
    """Average each window's numbers (or `by(value)`s); emits `(key, (window_id, mean))`.

    A flowspark addition.  The window keeps a running `(sum, count)`; every
    emission (early ones with `emit="current"` included) is `sum / count`,
    as Quix Streams' `Mean`, which skips `None`s (a window of `None`s emits
    `None`).  `emit`, `allowed_lateness`, `trigger`: see `window`.

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
    kw: Dict[str, Any] = {"emit": emit, "allowed_lateness": allowed_lateness, "trigger": trigger}
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
    emit: EmitMode = "final",
    allowed_lateness: timedelta = ZERO_TD,
    trigger: Optional[Trigger] = None,
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
    (refused here otherwise).  `emit`, `allowed_lateness`, `trigger`: see
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
    kw: Dict[str, Any] = {"emit": emit, "allowed_lateness": allowed_lateness, "trigger": trigger}
    out = window("window", up, clock, windower, aggs.builder(), ordered, **kw)
    return cast(WindowOut[V, Dict[str, Any]], out)


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
