"""Flow 4 (hook): the Kafka source into a no-op sink.

Reads every message of topic `FLOWBENCH_KAFKA_TOPIC` on
`FLOWBENCH_KAFKA_BROKERS` with `KafkaSource(..., tail=False)` (so the run
ends at the end offsets) and drops them in a sink that only counts; at
close each sink partition appends its count as one line to
`FLOWBENCH_OUTPUT`, and `benchmarks/run.py` sums the lines, so the run can
be checked for the number of messages.  Bytewax builds one partition per
worker for the run; flowspark builds them in each task that reads
messages, once per micro-batch, so its lines are per task and batch.
`benchmarks/run.py` runs it only when `flowspark.connectors.kafka` imports
and a tansu broker binary is installed.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, List

from benchmarks.flows import engine

api = engine()
kafka = importlib.import_module(f"{api.name}.connectors.kafka")
outputs = importlib.import_module(f"{api.name}.outputs")
out_path = os.environ["FLOWBENCH_OUTPUT"]


class _CountingPartition(outputs.StatelessSinkPartition):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        self.count = 0

    def write_batch(self, items: List[Any]) -> None:
        self.count += len(items)

    def close(self) -> None:
        with open(out_path, "a") as f:
            f.write(f"{self.count}\n")


class CountingSink(outputs.DynamicSink):  # type: ignore[misc,name-defined]
    # flowspark writes it in the tasks that read the messages; Bytewax ignores the attribute.
    lives_in_driver = False

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _CountingPartition:
        return _CountingPartition()


flow = api.dataflow.Dataflow("bench_kafka_noop")
messages = api.op.input(
    "inp",
    flow,
    kafka.KafkaSource([os.environ["FLOWBENCH_KAFKA_BROKERS"]], [os.environ["FLOWBENCH_KAFKA_TOPIC"]], tail=False),
)
api.op.output("out", messages, CountingSink())
