"""The stateful processor on its own, driven by PySpark's `TwsTester` (no streaming query).

Rows are made as the source's fused pass makes them, fed to one bucket's
group, and what the processor emits for the sink is taken back from the
driver's stash, as the writer would.
"""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from typing import Any, List, Tuple

import pytest
from pyspark.sql import Row

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.plan import chunks
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.plan import Plan, build_plan, for_workers
from flowspark.engine.plan.route import Collector, Router
from flowspark.engine.plan.shipped_plan import ShippedPlan
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.sinks.sink_writer import OutputStash
from flowspark.engine.state.keyed_state import decoded
from flowspark.engine.state.stateful import LayerProcessor
from flowspark.testing import TestingSink, TestingSource

TwsTester = pytest.importorskip("pyspark.sql.streaming.tws_tester", reason="PySpark 4.2 on has it").TwsTester


def _running_sums() -> Tuple[Plan, Groups]:
    flow = Dataflow("sums")
    keyed = op.input("inp", flow, TestingSource([]))
    sums = op.stateful_map("sum", keyed, lambda state, v: ((state or 0) + v, (state or 0) + v))
    op.output("out", sums, TestingSink([]))
    plan = for_workers(build_plan(flow))
    return plan, Groups.balanced(len(plan.stateful), 4)


def _rows_for(plan: Plan, groups: Groups, items: List[Tuple[str, int]]) -> List[Tuple[str, List[Row]]]:
    """The chunk rows the source's pass makes for `items`, by the bucket group they go to."""
    out = Collector("000.00000.000")
    Router(plan, groups).push(plan.inputs[0].config.downs[0], items, out)
    rows = [Row(grp=g, seq=s, kind=k, payload=p) for g, s, k, p in out.rows(itertools.count())]
    return [
        (grp, list(group)) for grp, group in itertools.groupby(sorted(rows, key=lambda r: r.grp), key=lambda r: r.grp)
    ]


def _emitted(stash: OutputStash, rows: List[Row]) -> List[Any]:
    """What the rows carry for the sink; each call's last row is the bucket's wake-up report (`wake_ups`)."""
    *outputs, report = rows
    assert report.kind == chunks.WAKE_UPS
    items: List[Any] = []
    stashed = stash.detach()
    for row in outputs:
        for part in chunks.item_parts(stashed[row.payload]):
            items.extend(part)
    return items


def test_a_bucket_keeps_each_keys_running_state_across_micro_batches(server: DriverServer) -> None:
    plan, groups = _running_sums()
    stash = OutputStash(server)
    tester = TwsTester(LayerProcessor(ShippedPlan(plan), 1, groups, server.link), timeMode="ProcessingTime")
    first = [("a", 1), ("b", 10), ("a", 2)]
    emitted: List[Any] = []
    for grp, rows in _rows_for(plan, groups, first):
        emitted.extend(_emitted(stash, tester.test(grp, rows)))
    assert sorted(emitted) == [("a", 1), ("a", 3), ("b", 10)]
    emitted = []
    for grp, rows in _rows_for(plan, groups, [("a", 5)]):
        emitted.extend(_emitted(stash, tester.test(grp, rows)))
        (entries,) = tester.peekMapState("slots", grp).values()
        assert decoded(entries[0]) == ({}, {"a": 8})
    assert emitted == [("a", 8)]


def test_a_bucket_reports_its_earliest_wake_up_after_each_call(server: DriverServer) -> None:
    flow = Dataflow("waits")
    keyed = op.input("inp", flow, TestingSource([]))
    op.output("out", op.collect("collect", keyed, timedelta(hours=1), max_size=10), TestingSink([]))
    plan = for_workers(build_plan(flow))
    groups = Groups.balanced(len(plan.stateful), 4)
    tester = TwsTester(LayerProcessor(ShippedPlan(plan), 1, groups, server.link), timeMode="ProcessingTime")
    before = int(time.time() * 1000)
    for grp, rows in _rows_for(plan, groups, [("a", 1)]):
        report = tester.test(grp, rows)[-1]
        assert report.kind == chunks.WAKE_UPS
        ((bucket, at),) = chunks.loads(report.payload).items()
        assert bucket == grp
        assert before + 3_600_000 <= at <= int(time.time() * 1000) + 3_600_000
    for grp, _rows in _rows_for(plan, groups, [("b", 1)]):
        if grp not in {g for g, _ in _rows_for(plan, groups, [("a", 1)])}:
            assert chunks.loads(
                tester.test(grp, [Row(grp=grp, seq=chunks.LAST_SEQ, kind=chunks.PING, payload=b"")])[-1].payload
            ) == {grp: None}


def test_a_bucket_row_for_another_layer_passes_through_unchanged(server: DriverServer) -> None:
    plan, groups = _running_sums()
    tester = TwsTester(LayerProcessor(ShippedPlan(plan), 1, groups, server.link), timeMode="ProcessingTime")
    passing = Row(grp="O0@elsewhere", seq=7, kind=chunks.DATA, payload=b"opaque")
    assert tester.test("O0@elsewhere", [passing]) == [passing]
