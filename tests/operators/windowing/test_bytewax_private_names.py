"""Bytewax's private names for the clock and windower logics build logics that answer as Bytewax's do.

Bytewax's own unit tests (and some users' code) build these directly.
"""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta, timezone
from typing import Any, List

from support.oracle import ENGINES

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)


def _windowing(engine: str) -> Any:
    return importlib.import_module(f"{engine}.operators.windowing")


def _session_answers(engine: str) -> List[Any]:
    w = _windowing(engine)
    logic = w._SessionWindowerLogic(timedelta(seconds=10), w._SessionWindowerState())
    answers: List[Any] = [list(logic.open_for(T0 + timedelta(seconds=s))) for s in (0, 30, 5, 18, 24, 45)]
    answers.append(sorted(logic.merged()))
    answers.append({k: (m.open_time, m.close_time) for k, m in logic.state.sessions.items()})
    sessions = {0: w.WindowMetadata(T0, T0), 1: w.WindowMetadata(T0 + timedelta(seconds=5), T0 + timedelta(seconds=5))}
    answers.append(w._session_find_merges(sessions, timedelta(seconds=10)))
    answers.append({k: (m.open_time, m.close_time, m.merged_ids) for k, m in sessions.items()})
    return answers


def _sliding_answers(engine: str) -> List[Any]:
    w = _windowing(engine)
    logic = w._SlidingWindowerLogic(timedelta(seconds=10), timedelta(seconds=5), T0, w._SlidingWindowerState())
    return [list(logic.intersects(T0 + timedelta(seconds=s))) for s in (-7, 0, 4, 5, 12, 99)]


def _clock_answers(engine: str) -> List[Any]:
    w = _windowing(engine)
    now = [T0]
    event = w._EventClockLogic(lambda: now[0], lambda v: v, lambda t: t, timedelta(seconds=3))
    answers: List[Any] = []
    event.before_batch()
    answers.append(event.on_item(T0 + timedelta(seconds=20)))
    now[0] += timedelta(seconds=2)
    event.before_batch()
    answers.append(event.on_item(T0 + timedelta(seconds=10)))
    answers.append(event.on_notify())
    answers.append(event.on_eof())
    system = w._SystemClockLogic(lambda: now[0])
    answers.append(system.on_eof())
    return answers


def test_session_logic_and_merges_under_bytewax_private_names() -> None:
    answers = {engine: _session_answers(engine) for engine in ENGINES}
    assert answers["flowspark"] == answers["bytewax"]


def test_sliding_logic_under_bytewax_private_names() -> None:
    answers = {engine: _sliding_answers(engine) for engine in ENGINES}
    assert answers["flowspark"] == answers["bytewax"]


def test_clock_logics_take_bytewax_constructor_arguments() -> None:
    answers = {engine: _clock_answers(engine) for engine in ENGINES}
    assert answers["flowspark"] == answers["bytewax"]
