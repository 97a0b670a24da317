"""What a stateful step keeps between runs: snapshots that did not change, and every key's state at the end of input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.inspect_state import snapshot_of
from flowspark.operators import StatefulLogic
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main


def _highest(top: Optional[int], value: int) -> Tuple[int, int]:
    new_top = value if top is None else max(top, value)
    return new_top, new_top


def test_a_snapshot_that_did_not_change_is_still_there_on_resume(tmp_path: Path) -> None:
    items = [("a", 5), ("b", 1), TestingSource.EOF(), ("a", 3), ("b", 2), TestingSource.EOF(), ("a", 7), ("b", 0)]
    config = RecoveryConfig(tmp_path)
    runs: List[List[Any]] = []
    for _ in range(3):
        out: List[Any] = []
        flow = Dataflow("highest")
        up = op.input("inp", flow, TestingSource(items))
        op.output("out", op.stateful_map("top", up, _highest), TestingSink(out))
        run_main(flow, recovery_config=config)
        runs.append(sorted(out))
        if len(runs) == 2:
            assert snapshot_of(str(tmp_path), "highest.top", "a") == 5
    assert runs == [[("a", 5), ("b", 1)], [("a", 5), ("b", 2)], [("a", 7), ("b", 2)]]


class _Total(StatefulLogic[int, Tuple[str, int], int]):
    """Sums a key's values; at the end of input emits `("total", sum)` and keeps the sum."""

    def __init__(self, total: Optional[int]) -> None:
        self.total = total or 0

    def on_item(self, value: int) -> Tuple[List[Tuple[str, int]], bool]:
        self.total += value
        return [], StatefulLogic.RETAIN

    def on_eof(self) -> Tuple[List[Tuple[str, int]], bool]:
        return [("total", self.total)], StatefulLogic.RETAIN

    def snapshot(self) -> int:
        return self.total


def test_every_stored_key_ends_input_from_its_own_snapshot(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(300)]
    first = [(k, i) for i, k in enumerate(keys)]
    later = [(k, 1000) for k in keys[::7]]
    items: List[Any] = [*first, TestingSource.EOF(), *later]
    config = RecoveryConfig(tmp_path)
    totals: List[List[Any]] = []
    for _ in range(2):
        out: List[Any] = []
        flow = Dataflow("totals")
        up = op.input("inp", flow, TestingSource(items))
        op.output("out", op.stateful("total", up, _Total), TestingSink(out))
        run_main(flow, recovery_config=config)
        totals.append(sorted(out))
    assert totals[0] == sorted((k, ("total", i)) for i, k in enumerate(keys))
    bumped = set(keys[::7])
    assert totals[1] == sorted((k, ("total", i + (1000 if k in bumped else 0))) for i, k in enumerate(keys))
