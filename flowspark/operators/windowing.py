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
keyword-only `firing=`, a `Firing` (as Beam's `Windowing`) of `emit`
(`"final"`, `"current"` or `"current_and_final"`: when results go out),
`allowed_lateness` (keep closed windows for late values and re-emit
corrected results; late values within it also create windows and merge
sessions) and `trigger` (`CountTrigger`, `ProcessingTimeTrigger`,
`PredicateTrigger`, combined with `AfterAny`, `AfterAll`, `AfterEach`,
`Repeatedly` and `Once` as Beam's triggers combine: fire early, optionally
purging); the three are also accepted as keywords of their own.  With any of them, `WindowOut.panes` also carries every emission
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

from datetime import datetime, timedelta
from typing import Callable, Iterable, Optional, TypeVar

from flowspark._batch_logic import _EMPTY as _EMPTY
from flowspark._batch_logic import StatefulBatchLogic  # noqa: F401  (Bytewax has it here)
from flowspark.dataflow import KeyedStream, Stream, operator  # noqa: F401  (Bytewax has them here)
from flowspark.operators._core import S, V, W, W_co, X  # noqa: F401  (Bytewax has them here)
from flowspark.operators._join import JoinEmitMode as JoinEmitMode
from flowspark.operators._join import JoinInsertMode as JoinInsertMode

# The parts live in `_windowing`: interfaces, clocks and windowers (with flowspark's hopping, count,
# record sliding and dynamic-session windowers), flowspark's emit modes, panes, triggers and
# aggregations, and (imported below) the operators.  The `X as X` imports keep importable from here
# the names this module defined before its operators moved out (issue 32): their type variables
# and private helpers (`_identity` is Bytewax's name too).
from flowspark.operators._windowing.aggregate_operators import N as N
from flowspark.operators._windowing.aggregations import (
    Aggregation,
    Collect,
    Count,
    First,
    Last,
    Max,
    Mean,
    Min,
    Sum,
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
from flowspark.operators._windowing.composite_triggers import (
    AfterAll,
    AfterAny,
    AfterEach,
    AfterFirst,
    Once,
    Repeatedly,
)
from flowspark.operators._windowing.dynamic_sessions import DynamicSessionWindower
from flowspark.operators._windowing.firing import Firing
from flowspark.operators._windowing.fold_operators import DK as DK
from flowspark.operators._windowing.fold_operators import DV as DV
from flowspark.operators._windowing.fold_operators import _identity as _identity
from flowspark.operators._windowing.fold_operators import _nothing as _nothing
from flowspark.operators._windowing.fold_operators import _plus_one as _plus_one
from flowspark.operators._windowing.fold_operators import _sum as _sum
from flowspark.operators._windowing.fold_operators import _zero as _zero
from flowspark.operators._windowing.hopping import (
    CountHoppingWindower,
    CountTumblingWindower,
    HoppingWindower,
)
from flowspark.operators._windowing.join_operator import U as U
from flowspark.operators._windowing.panes import EmitMode, Pane, PaneTiming
from flowspark.operators._windowing.record_sliding import RecordSlidingWindower
from flowspark.operators._windowing.triggers import (
    CountTrigger,
    PredicateTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from flowspark.operators._windowing.window_operators import _down_of as _down_of
from flowspark.operators._windowing.window_operators import _late_of as _late_of
from flowspark.operators._windowing.window_operators import _meta_of as _meta_of
from flowspark.operators._windowing.window_operators import _panes_of as _panes_of
from flowspark.operators._windowing.windowers import (
    SessionWindower,
    SessionWindowerLogic,
    SessionWindowerState,
    SlidingWindower,
    SlidingWindowerLogic,
    SlidingWindowerState,
    TumblingWindower,
    _merge_sessions,
)

# isort: off
# The operators, in the order the API reference lists them (it follows this file's): the general
# `window` and `fold_window` first, then the operators built on them.
from flowspark.operators._windowing.window_operators import WindowOut, window, fold_window
from flowspark.operators._windowing.fold_operators import (
    collect_window,
    count_window,
    reduce_window,
    max_window,
    min_window,
)
from flowspark.operators._windowing.aggregate_operators import sum_window, mean_window, aggregate_window
from flowspark.operators._windowing.join_operator import join_window
# isort: on

C = TypeVar("C", bound=Iterable)  # type: ignore[type-arg]  # as Bytewax's
"""Type of downstream containers (Bytewax's name, for code that imports it)."""

__all__ = [
    "LATE_SESSION_ID",
    "SC",
    "SW",
    "UTC_MAX",
    "UTC_MIN",
    "ZERO_TD",
    "AfterAll",
    "AfterAny",
    "AfterEach",
    "AfterFirst",
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
    "Firing",
    "First",
    "HoppingWindower",
    "Last",
    "Max",
    "Mean",
    "Min",
    "Once",
    "Pane",
    "PaneTiming",
    "PredicateTrigger",
    "ProcessingTimeTrigger",
    "RecordSlidingWindower",
    "Repeatedly",
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
