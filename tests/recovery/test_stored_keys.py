"""What a stateful step keeps between runs: snapshots that did not change, and every key's state at the end of input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.state.inspect_state import snapshot_of
from flowspark.operators import StatefulLogic
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main


def _builder(name: str, items: List[Any], step: Callable[[Any], Any]) -> Callable[[List[Any]], Dataflow]:
    """What builds the flow `name`: `items` from a `TestingSource`, through `step`, into a `TestingSink` on `out`."""

    def build(out: List[Any]) -> Dataflow:
        flow = Dataflow(name)
        op.output("out", step(op.input("inp", flow, TestingSource(items))), TestingSink(out))
        return flow

    return build


def _runs(tmp_path: Path, times: int, build: Callable[[List[Any]], Dataflow]) -> List[List[Any]]:
    """Run the flow `build(out)` makes `times` times on one recovery directory; each run's output, sorted."""
    outputs: List[List[Any]] = []
    for _ in range(times):
        out: List[Any] = []
        run_main(build(out), recovery_config=RecoveryConfig(tmp_path))
        outputs.append(sorted(out))
    return outputs


def _highest(top: Optional[int], value: int) -> Tuple[int, int]:
    new_top = value if top is None else max(top, value)
    return new_top, new_top


def test_a_snapshot_that_did_not_change_is_still_there_on_resume(tmp_path: Path) -> None:
    items = [("a", 5), ("b", 1), TestingSource.EOF(), ("a", 3), ("b", 2), TestingSource.EOF(), ("a", 7), ("b", 0)]
    build = _builder("highest", items, lambda up: op.stateful_map("top", up, _highest))
    runs = _runs(tmp_path, 2, build)
    assert snapshot_of(str(tmp_path), "highest.top", "a") == 5  # "a" saw 3 and kept 5
    runs += _runs(tmp_path, 1, build)
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
    build = _builder("totals", items, lambda up: op.stateful("total", up, _Total))
    totals = _runs(tmp_path, 2, build)
    assert totals[0] == sorted((k, ("total", i)) for i, k in enumerate(keys))
    bumped = set(keys[::7])
    assert totals[1] == sorted((k, ("total", i + (1000 if k in bumped else 0))) for i, k in enumerate(keys))
