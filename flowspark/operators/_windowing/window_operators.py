"""The window operators everything else is built on: `window`, `fold_window` and their `WindowOut`.

`window` is the one windowing step (a `stateful_batch` whose per-key logic
runs the clock, windower and window logics), unwrapping its events into the
`down`, `late`, `meta` (and, with flowspark's additions, `panes`) streams of
a `WindowOut`; `fold_window` runs it with a fold.  The other operators in
`fold_operators`, `aggregate_operators` and `join_operator` call these.
Users import them from `flowspark.operators.windowing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, Tuple

from typing_extensions import Unpack

from flowspark.dataflow import KeyedStream, operator
from flowspark.operators._core import S, V, W, W_co, stateful_batch
from flowspark.operators._stateless import filter_map_value
from flowspark.operators._windowing.base import ZERO_TD, Clock, Windower, WindowLogic, WindowMetadata
from flowspark.operators._windowing.firing import Firing, FiringKeywords, FiringWindowConfig, firing_of
from flowspark.operators._windowing.hopping import CountHoppingWindower, CountTumblingWindower
from flowspark.operators._windowing.logics import FoldBuilder
from flowspark.operators._windowing.panes import Pane
from flowspark.operators._windowing.per_key import Closed, Emitted, Fired, Late, WindowConfig, WindowEvent
from flowspark.operators._windowing.windowers import check_windower

__all__ = ["WindowOut", "fold_window", "window"]


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
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
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

    flowspark adds one keyword-only parameter, shared by every window
    operator: `firing`, a `Firing(emit=..., allowed_lateness=...,
    trigger=...)` (Beam's `Windowing`, without the window function).  Its
    fields may also be given as keywords of their own, `emit=`,
    `allowed_lateness=` and `trigger=`, as before `Firing` existed; giving
    both `firing` and a keyword raises `TypeError`.  With no firing (or
    `Firing()`) the step is exactly Bytewax's (same output, same step
    graph, same fast path).  Any other value also builds
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
      `PredicateTrigger`, or several combined as Beam's triggers combine
      (`AfterAny`, `AfterAll`, `AfterEach`, `Repeatedly`, `Once`), fires
      the window early (its running result, as an early pane); with
      `purge=True` the window then starts again empty.  A trigger that
      finished fires the window early no more.
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
    firing = firing_of(step_id, firing, keywords)
    firing.check(step_id)
    emit, allowed_lateness, trigger = firing.emit, firing.allowed_lateness, firing.trigger
    if allowed_lateness > ZERO_TD and isinstance(windower, (CountTumblingWindower, CountHoppingWindower)):
        msg = (
            f"step {step_id!r}: count windows close when full, not at a time, so "
            "`allowed_lateness` (a span of event time after a window's close) does not apply to them"
        )
        raise ValueError(msg)
    fires = not firing.is_plain
    config: WindowConfig[V, W, S]
    if fires:
        config = FiringWindowConfig(step_id, clock, windower, builder, ordered, emit, allowed_lateness, trigger)
    else:
        config = WindowConfig(step_id, clock, windower, builder, ordered)
    events = stateful_batch("stateful_batch", up, config)
    down = filter_map_value("unwrap_down", events, _down_of)
    late = filter_map_value("unwrap_late", events, _late_of)
    meta = filter_map_value("unwrap_meta", events, _meta_of)
    panes = filter_map_value("unwrap_panes", events, _panes_of) if fires else None
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
    firing: Optional[Firing] = None,
    **keywords: Unpack[FiringKeywords],
) -> WindowOut[V, S]:
    """Fold each window's values into an accumulator, emitted when the window closes.

    `builder()` makes a window's empty accumulator, `folder(acc, value)`
    adds a value (in timestamp order when `ordered`), and `merger(into,
    absorbed)` combines the accumulators of merging session windows.
    `firing` (or its keywords): see `window`; early and late
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
        firing=firing_of(step_id, firing, keywords),
    )
