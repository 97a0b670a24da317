"""A recovery directory on S3 (moto on loopback): flowspark's own files go there; Spark without hadoop-aws is named."""

from __future__ import annotations

from typing import Any, List

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.driver_fence import FENCE
from flowspark.engine.recovery.resume_check import META
from flowspark.engine.recovery.sink_ledger import RUN_ID
from flowspark.errors import FlowsparkRuntimeError
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main


def test_a_run_on_s3_records_its_shape_there_and_names_what_spark_lacks(s3_folder: str) -> None:
    out: List[Any] = []
    flow = Dataflow("on_s3")
    counted = op.stateful_map("count", op.input("inp", flow, TestingSource([("a", 1)])), lambda n, _: ((n or 0) + 1, n))
    op.output("out", counted, TestingSink(out))
    with pytest.raises(FlowsparkRuntimeError, match=r"s3a://.*/recovery/query.*hadoop-aws"):
        run_main(flow, recovery_config=RecoveryConfig(s3_folder))
    directory = storage.parse_location(s3_folder)
    assert sorted(storage.list_names(directory)) == sorted([META, RUN_ID, FENCE])
    assert b'"flow": "on_s3"' in storage.read_trusted(directory.join(META))
