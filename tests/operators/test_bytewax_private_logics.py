"""Bytewax's private logic and state classes, built directly under their names, answer as Bytewax's do."""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta, timezone
from typing import List

from support.oracle import ENGINES

NOW = datetime(2023, 1, 1, tzinfo=timezone.utc)


def _answers(engine: str) -> List[str]:
    """What each logic returns, written down when it returns it (a snapshot may be the live state, as the engine
    pickles it at once)."""
    ops = importlib.import_module(f"{engine}.operators")
    answers: List[str] = []
    collect = ops._CollectLogic("step", lambda: NOW, timedelta(seconds=10), 2, ops._CollectState())
    answers.append(repr(collect.on_item(1)))
    answers.append(repr((collect.snapshot().acc, collect.snapshot().timeout_at, collect.notify_at())))
    answers.append(repr(collect.on_item(2)))
    join = ops._JoinState.for_side_count(3)
    join.add_val(0, 1)
    join.add_val(0, 2)
    join.set_val(2, 3)
    join.set_val(2, 4)
    answers.append(repr((join.astuples(), join.is_set(1), join.all_set())))
    flat = ops._StatefulFlatMapLogic("step", lambda state, v: (None if v == 0 else (state or 0) + v, [v]), None)
    answers.append(repr([flat.on_item(v) for v in (3, 4)] + [flat.snapshot(), flat.on_item(0)]))
    fold = ops._FoldFinalLogic("step", lambda acc, v: acc + [v], [])
    answers.append(repr([fold.on_item(1), fold.on_item(2), fold.on_eof()]))
    return answers


def test_private_logics_answer_as_bytewax_s() -> None:
    answers = {engine: _answers(engine) for engine in ENGINES}
    assert answers["flowspark"] == answers["bytewax"]
