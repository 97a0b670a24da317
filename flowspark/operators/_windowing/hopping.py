"""Hopping windows under Quix Streams' names: by time, and by count of values.

`HoppingWindower` is `SlidingWindower` spelled as Quix Streams spells it
(`duration` and `step`): it builds the very same logic, so windows, ids and
the batch-merging fast path are identical.

`CountTumblingWindower` and `CountHoppingWindower` (Quix Streams'
`tumbling_count_window` and `hopping_count_window`) cut a key's values into
windows by position instead of time: the `n`-th value applied to a key
(0-based; timestamp order with `ordered=True`, arrival order otherwise)
belongs to every window `k` with `k * step <= n < k * step + count`, and a
window closes as soon as it holds `count` values.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.operators._windowing.base import LATE_SESSION_ID, UTC_MAX, Windower, WindowerLogic, WindowMetadata
from flowspark.operators._windowing.windowers import (
    SelfCheckingWindower,
    SlidingWindowerLogic,
    SlidingWindowerState,
    _aware,
    _positive,
)

__all__ = [
    "CountHoppingWindower",
    "CountTumblingWindower",
    "CountWindowState",
    "CountWindowerLogic",
    "CountWindowerState",
    "HoppingWindower",
]


@dataclass
class HoppingWindower(Windower[SlidingWindowerState], SelfCheckingWindower):
    """Windows of fixed `length` starting every `step`, aligned to `align_to` (Quix Streams' hopping windows).

    Window `k` covers `[align_to + k*step, align_to + k*step + length)`: open
    time inclusive, close time exclusive.  This is exactly
    `SlidingWindower(length, step, align_to)` (same windows, same ids, same
    snapshots), offered under the name Quix Streams and Kafka Streams use so
    that flows ported from them read naturally.  `step` must not exceed
    `length` (the gaps would silently drop values).
    """

    length: timedelta
    step: timedelta
    align_to: datetime

    def __post_init__(self) -> None:
        self._refuse_problems()

    @override
    def problems(self) -> List[str]:
        found = [
            _positive("length", self.length),
            _positive("step", self.step),
            _aware("align_to", self.align_to),
        ]
        problems = [problem for problem in found if problem is not None]
        if not problems and self.step > self.length:
            problems.append(f"`step` {self.step!r} can't be longer than `length` {self.length!r}")
        return problems

    @override
    def build(self, resume_state: Optional[SlidingWindowerState]) -> SlidingWindowerLogic:
        state = SlidingWindowerState() if resume_state is None else resume_state
        return SlidingWindowerLogic(self.length, self.step, self.align_to, state)


@dataclass
class CountWindowState:
    """One open count window: how many values it holds and their timestamp range."""

    values: int
    earliest: datetime
    latest: datetime


@dataclass
class CountWindowerState:
    """A key's value counter and its open count windows, by id."""

    applied: int = 0
    """How many values the key has applied; the position of the next one."""
    opened: Dict[int, CountWindowState] = field(default_factory=dict)


class CountWindowerLogic(WindowerLogic[CountWindowerState]):
    """Count windows of `count` values starting every `step` values; see `CountHoppingWindower`."""

    def __init__(self, count: int, step: int, state: CountWindowerState) -> None:
        self.count = count
        self.step = step
        self.state = state

    @override
    def open_for(self, timestamp: datetime) -> List[int]:
        position = self.state.applied
        self.state.applied += 1
        # Windows k with k*step <= position < k*step + count, in ascending order.
        first = max(0, (position - self.count) // self.step + 1)
        ids = list(range(first, position // self.step + 1))
        for window_id in ids:
            window = self.state.opened.get(window_id)
            if window is None:
                self.state.opened[window_id] = CountWindowState(1, timestamp, timestamp)
            else:
                window.values += 1
                window.earliest = min(window.earliest, timestamp)
                window.latest = max(window.latest, timestamp)
        return ids

    @override
    def late_for(self, timestamp: datetime) -> Iterable[int]:
        # A late value has no position, so no window: report it with the sentinel id.
        return (LATE_SESSION_ID,)

    @override
    def merged(self) -> Iterable[Tuple[int, int]]:
        return ()

    @override
    def close_for(self, watermark: datetime) -> List[Tuple[int, WindowMetadata]]:
        at_end = watermark >= UTC_MAX
        closed = [
            (window_id, WindowMetadata(window.earliest, window.latest))
            for window_id, window in self.state.opened.items()
            if at_end or window.values >= self.count
        ]
        for window_id, _meta in closed:
            del self.state.opened[window_id]
        return closed

    @override
    def notify_at(self) -> Optional[datetime]:
        return None

    @override
    def is_empty(self) -> bool:
        # The counter places the next value and numbers the next window:
        # forgetting it would reuse ids and restart the windows.
        return False

    @override
    def snapshot(self) -> CountWindowerState:
        return copy.deepcopy(self.state)


def _count_problem(name: str, value: Any) -> Optional[str]:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return None
    return f"`{name}` must be a positive `int`; got {value!r}"


@dataclass
class CountHoppingWindower(Windower[CountWindowerState], SelfCheckingWindower):
    """Windows of `count` values, a new one starting every `step` values (Quix Streams' `hopping_count_window`).

    Values are numbered per key in the order they are applied: timestamp
    order with `ordered=True` (the default), arrival order with
    `ordered=False` (which `count_window` and `reduce_window` use).  Value
    `n` (from 0) belongs to every window `k` (from 0) with
    `k * step <= n < k * step + count`, and window `k` is the window id.  A
    window closes, and its result goes out, as soon as it holds `count`
    values; end of input (the `UTC_MAX` watermark that `EventClock` and
    `SystemClock` give at the end) also closes the windows not yet full, so
    nothing is lost.  Quix Streams never emits a window that did not fill
    up (it has no end of input); check the window's size if you need only
    full ones.

    The metadata's `open_time` and `close_time` are the earliest and the
    latest timestamp among the window's values (the first and the last one
    with `ordered=True`), as Quix Streams reports `start` and `end`.  Time
    plays no other part: `notify_at` is never set, and a value behind the
    watermark has no position, so it goes to `late` with the id
    `LATE_SESSION_ID`.  `step` must not exceed `count` (values between
    windows would be dropped); unlike Quix Streams, a `count` of 1 is
    allowed.  The key keeps its value counter for good, as session keys keep
    theirs.
    """

    count: int
    step: int

    def __post_init__(self) -> None:
        self._refuse_problems()

    @override
    def problems(self) -> List[str]:
        found = [_count_problem("count", self.count), _count_problem("step", self.step)]
        problems = [problem for problem in found if problem is not None]
        if not problems and self.step > self.count:
            problems.append(f"`step` {self.step!r} can't be larger than `count` {self.count!r}")
        return problems

    @override
    def build(self, resume_state: Optional[CountWindowerState]) -> CountWindowerLogic:
        state = CountWindowerState() if resume_state is None else resume_state
        return CountWindowerLogic(self.count, self.step, state)


@dataclass
class CountTumblingWindower(Windower[CountWindowerState], SelfCheckingWindower):
    """Back-to-back windows of `count` values each (Quix Streams' `tumbling_count_window`).

    Values `0 .. count-1` of a key form window 0, the next `count` window 1,
    and so on; each value is in exactly one window.  It is
    `CountHoppingWindower(count, count)`: see there for the order values are
    counted in, closing (full, or at end of input), metadata and late values.
    """

    count: int

    def __post_init__(self) -> None:
        self._refuse_problems()

    @override
    def problems(self) -> List[str]:
        problem = _count_problem("count", self.count)
        return [] if problem is None else [problem]

    @override
    def build(self, resume_state: Optional[CountWindowerState]) -> CountWindowerLogic:
        state = CountWindowerState() if resume_state is None else resume_state
        return CountWindowerLogic(self.count, self.count, state)
