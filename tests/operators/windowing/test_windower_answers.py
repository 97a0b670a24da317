"""The questions the per-key window logic asks windower and window logics instead of checking their classes.

Each windower logic answers for itself how values are placed, whether new
windows are seeded, how late values meet its windows and how long closed
ones are kept; a user's own `WindowerLogic` gets the defaults, which treat
it as Bytewax does.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, List, Optional, Tuple

import pytest

from flowspark.operators._windowing.base import WindowerLogic, WindowLogic, WindowMetadata
from flowspark.operators._windowing.dynamic_sessions import DynamicSessionWindower
from flowspark.operators._windowing.logics import FinishingFoldBuilder, FoldBuilder
from flowspark.operators._windowing.record_sliding import RecordSlidingWindower
from flowspark.operators._windowing.windowers import SessionWindower, SlidingWindower, TumblingWindower

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
SEC = timedelta(seconds=1)


class _OneWindow(WindowerLogic[None]):
    """A user's windower: every value in window 0, never closed before end of input."""

    def open_for(self, timestamp: datetime) -> Iterable[int]:
        return (0,)

    def late_for(self, timestamp: datetime) -> Iterable[int]:
        return (-1,)

    def merged(self) -> Iterable[Tuple[int, int]]:
        return ()

    def close_for(self, watermark: datetime) -> Iterable[Tuple[int, WindowMetadata]]:
        return ()

    def notify_at(self) -> Optional[datetime]:
        return None

    def is_empty(self) -> bool:
        return False

    def snapshot(self) -> None:
        return None


def test_a_users_windower_gets_the_defaults() -> None:
    logic = _OneWindow()
    assert list(logic.place("v", T0)) == [0]
    assert logic.places_by_timestamp()
    assert (logic.seed_span(0), logic.memory(), logic.tumbling_window(T0)) == (None, None, None)
    assert (logic.session_spans(), logic.late_window(3)) == (None, None)
    assert not logic.names_late_windows()
    assert logic.late_windows(T0, [0, 1]) == [-1]
    assert logic.reach_of("v", T0) == T0
    assert logic.kept_until(T0, SEC) == T0 + SEC
    with pytest.raises(TypeError, match="_OneWindow opens no sessions"):
        logic.new_id()
    with pytest.raises(TypeError, match="_OneWindow cannot open window 3"):
        logic.reopen(3, WindowMetadata(T0, T0), T0)


def test_fixed_windows_name_their_late_windows_and_may_open_them() -> None:
    logic = SlidingWindower(10 * SEC, 5 * SEC, T0).build(None)
    assert logic.names_late_windows() and logic.places_by_timestamp()
    assert logic.tumbling_window(T0) is None
    assert logic.late_window(-1) == WindowMetadata(T0 - 5 * SEC, T0 + 5 * SEC)
    assert logic.kept_until(T0, SEC) == T0 + SEC
    logic.reopen(-1, WindowMetadata(T0, T0), T0)
    assert logic.state.opened == {-1: WindowMetadata(T0 - 5 * SEC, T0 + 5 * SEC)}
    tumbling = TumblingWindower(10 * SEC, T0).build(None)
    assert tumbling.tumbling_window(T0 + 12 * SEC) == (1, T0 + 10 * SEC, T0 + 20 * SEC)
    assert list(tumbling.state.opened) == [1]


@pytest.mark.parametrize(
    ("windower", "reach"),
    [(SessionWindower(5 * SEC), T0 + 5 * SEC), (DynamicSessionWindower(lambda v: v * SEC), T0 + 3 * SEC)],
)
def test_sessions_answer_for_their_spans_reach_and_lateness(windower: Any, reach: datetime) -> None:
    logic = windower.build(None)
    assert list(logic.place(3, T0)) == [0]
    assert logic.session_spans() == {0: (T0, reach)}
    assert logic.reach_of(3, T0) == reach
    # A session stays open while the watermark is at its reach, so it is kept one instant longer.
    assert logic.kept_until(T0, SEC) == T0 + SEC + timedelta(microseconds=1)
    assert logic.new_id() == 1
    logic.reopen(7, WindowMetadata(T0, T0), reach)
    assert 7 in logic.session_spans()


def test_a_value_placed_windower_and_a_seeded_one_leave_the_shortest_path() -> None:
    dynamic = DynamicSessionWindower(lambda v: v * SEC).build(None)
    assert not dynamic.places_by_timestamp()
    record = RecordSlidingWindower(10 * SEC).build(None)
    assert not record.places_by_timestamp() and record.names_late_windows()
    window_id = record.late_for(T0)[0]
    assert record.seed_span(window_id) == record.span(window_id)
    assert record.memory() == record.history()
    assert record.late_windows(T0, []) == sorted(record.late_for(T0))


def test_folds_emit_their_running_result_without_a_rebuild_and_fold_quietly() -> None:
    def never(resume: Any) -> Any:
        msg = "a fold's running result needs no rebuilt copy"
        raise AssertionError(msg)

    fold = FoldBuilder(list, lambda acc, v: [*acc, v], list.__add__)(None)
    assert fold.fold_quietly(iter([1, 2]))
    assert list(fold.running(never)) == [[1, 2]]
    mean = FinishingFoldBuilder(lambda: (0, 0), lambda a, v: (a[0] + v, a[1] + 1), max, lambda a: a[0] / a[1])(None)
    mean.on_value(4)
    assert list(mean.running(never)) == [4.0]


def test_a_window_logic_rebuilds_a_copy_for_its_running_result_and_takes_values_one_by_one() -> None:
    built: List[Any] = []

    def rebuild(resume: Any) -> Any:
        built.append(resume)
        own = Own()
        own.values = resume
        return own

    class Own(WindowLogic[int, List[int], List[int]]):
        def __init__(self) -> None:
            self.values: List[int] = []

        def on_value(self, value: int) -> Iterable[List[int]]:
            self.values.append(value)
            return ()

        def on_merge(self, original: Any) -> Iterable[List[int]]:
            return ()

        def on_close(self) -> Iterable[List[int]]:
            return (self.values,)

        def snapshot(self) -> List[int]:
            return list(self.values)

    own = Own()
    own.on_value(5)
    assert not own.fold_quietly([6])
    assert list(own.running(rebuild)) == [[5]]
    assert built == [[5]]
