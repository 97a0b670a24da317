"""Which Spark a run uses: the warm local one unless the run needs a Spark of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flowspark.operators as op
from flowspark.connectors.spark import SparkSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.plan import build_plan
from flowspark.engine.run_spark import _may_run_warm
from flowspark.outputs import Sink
from flowspark.testing import TestingSink, TestingSource


def _flow_into(sink: Sink[Any]) -> Dataflow:
    flow = Dataflow("routed")
    op.output("out", op.input("inp", flow, TestingSource([{"line": "x"}])), sink)
    return flow


def test_a_plain_flow_may_run_on_the_warm_spark() -> None:
    assert _may_run_warm(build_plan(_flow_into(TestingSink([]))), None, False, None)


def test_a_flow_into_a_folder_of_files_may_run_on_the_warm_spark(tmp_path: Path) -> None:
    sink = SparkSink("json", {"path": str(tmp_path)}, "line string")
    assert _may_run_warm(build_plan(_flow_into(sink)), None, False, None)


def test_a_flow_into_a_catalog_table_runs_on_a_spark_of_its_own(tmp_path: Path) -> None:
    """The warm Spark's catalog is shared by every run and outlives each: a table there would outlive the run."""
    sink = SparkSink("json", {"path": str(tmp_path)}, "line string", table="sums")
    assert not _may_run_warm(build_plan(_flow_into(sink)), None, False, None)


def test_a_master_or_settings_of_the_runs_own_start_a_spark_of_its_own() -> None:
    plan = build_plan(_flow_into(TestingSink([])))
    assert not _may_run_warm(plan, "local[2]", False, None)
    assert not _may_run_warm(plan, None, True, None)
