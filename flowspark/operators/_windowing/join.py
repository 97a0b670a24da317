"""The pieces of `join_window`: the per-window join logic and the clock adapter.

`join_window` tags each side's values as `(side_index, value)` before they
reach the window step.  An `EventClock`'s `ts_getter` expects the bare
value, so the clock is wrapped in `SideValueClock`, which hands it the value
and otherwise delegates everything (Bytewax 0.21.1 instead rebuilt a plain
`EventClock` from the user's fields).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, List, Optional, Tuple

from typing_extensions import Self, override

from flowspark.operators._core import S, V
from flowspark.operators._join import JoinEmitMode, JoinInsertMode, JoinState
from flowspark.operators._windowing.base import Clock, ClockLogic, WindowLogic

__all__ = ["JoinWindowLogic", "SideValueClock"]


class JoinWindowLogic(WindowLogic[Tuple[int, Any], Tuple[Any, ...], JoinState]):
    """Joins the sides' values within one window; see `join_window` for the modes."""

    def __init__(self, insert_mode: JoinInsertMode, emit_mode: JoinEmitMode, state: JoinState) -> None:
        self.insert_mode = insert_mode
        self.emit_mode = emit_mode
        self.state = state

    def _rows_now(self) -> List[Tuple[Any, ...]]:
        if self.emit_mode == "complete" and self.state.all_set():
            rows = self.state.astuples()
            self.state.clear()
            return rows
        if self.emit_mode == "running":
            return self.state.astuples()
        return []

    @override
    def on_value(self, value: Tuple[int, Any]) -> Iterable[Tuple[Any, ...]]:
        side, side_value = value
        self.state.insert(side, side_value, self.insert_mode)
        return self._rows_now()

    @override
    def on_merge(self, original: Self) -> Iterable[Tuple[Any, ...]]:
        pairs = zip(self.state.seen, original.state.seen)
        if self.insert_mode == "product":
            self.state.seen = [mine + theirs for mine, theirs in pairs]
        elif self.insert_mode == "first":
            # As in Bytewax 0.21.1, a side set in the absorbed (later-opening)
            # window wins, although it is not the first value seen.
            self.state.seen = [theirs or mine for mine, theirs in pairs]
        else:
            self.state.seen = [mine or theirs for mine, theirs in pairs]
        return self._rows_now()

    @override
    def on_close(self) -> Iterable[Tuple[Any, ...]]:
        return self.state.astuples() if self.emit_mode == "final" else []

    @override
    def snapshot(self) -> JoinState:
        return copy.deepcopy(self.state)


class _SideValueClockLogic(ClockLogic[Tuple[int, V], S]):
    def __init__(self, inner: ClockLogic[V, S]) -> None:
        self._inner = inner

    @override
    def before_batch(self) -> None:
        self._inner.before_batch()

    @override
    def on_item(self, value: Tuple[int, V]) -> Tuple[datetime, datetime]:
        _side, side_value = value
        return self._inner.on_item(side_value)

    @override
    def on_notify(self) -> datetime:
        return self._inner.on_notify()

    @override
    def on_eof(self) -> datetime:
        return self._inner.on_eof()

    @override
    def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
        return self._inner.to_system_utc(timestamp)

    @override
    def snapshot(self) -> S:
        return self._inner.snapshot()


@dataclass(frozen=True)
class SideValueClock(Clock[Tuple[int, V], S]):
    """Runs `inner` on the value part of `(side_index, value)` items."""

    inner: Clock[V, S]

    @override
    def build(self, resume_state: Optional[S]) -> ClockLogic[Tuple[int, V], S]:
        return _SideValueClockLogic(self.inner.build(resume_state))
