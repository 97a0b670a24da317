"""The fused pass's handling of outputs, driven directly (no Spark)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, List, Tuple

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.dataflow import Dataflow
from flowspark.engine import chunks
from flowspark.engine.failures import StepFailure
from flowspark.engine.groups import Groups
from flowspark.engine.plan import Plan, build_plan, for_workers
from flowspark.engine.route import Collector, Router
from flowspark.testing import TestingSource


def _plan(tmp_path: Path) -> Plan:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource[Tuple[str, str]]([]))
    op.output("one_file", items, FileSink(tmp_path / "out.txt"))
    op.output("two_files", items, DirSink(tmp_path, 2))
    return build_plan(flow)


def _push(plan: Plan, batch: List[Any]) -> Collector:
    out = Collector("000.00000.000")
    Router(plan, Groups.balanced(len(plan.stateful), 2)).push(plan.inputs[0].config.downs[0], batch, out)
    return out


def test_a_single_partition_sink_gets_bare_values_from_the_workers(tmp_path: Path) -> None:
    out = _push(for_workers(_plan(tmp_path)), [("a", "x"), ("b", "y")])
    rows = out.rows(itertools.count())
    assert [chunks.loads(payload) for _, _, _, payload in rows] == [["x", "y"], [("a", "x"), ("b", "y")]]


@pytest.mark.parametrize(("item", "problem"), [("bare", "2-tuple"), ((1, "x"), "`str` keys")])
def test_dropping_keys_checks_them_first(tmp_path: Path, item: Any, problem: str) -> None:
    workers = for_workers(_plan(tmp_path))
    with pytest.raises(StepFailure, match=f"step 'df.one_file' requires .*{problem}"):
        _push(workers, [("a", "x"), item])


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([("a", 1), "bare"], "2-tuple"),
        ([("a", 1), ("a", 2, 3)], "2-tuple"),
        ([("a", 1), (1, "x")], "`str` keys.*`int`"),
        ([("a", 1), (["a"], "x")], "`str` keys.*`list`"),
    ],
)
def test_a_stateful_step_checks_every_item_as_bytewax_does(items: List[Any], problem: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource[Any]([]))
    op.output("out", op.stateful_map("count", up, lambda s, v: (s, v)), DirSink(Path("."), 1))
    plan = build_plan(flow)
    with pytest.raises(StepFailure, match=f"step 'df.count.*' requires .*{problem}"):
        _push(for_workers(plan), items)
