"""Bytewax's tracing example with flowspark's imports: spans of the run go to an OTLP receiver.

Run it with `python -m flowspark.run flowspark.examples.tracing:flow` beside an
OpenTelemetry collector or Jaeger listening for OTLP on 127.0.0.1:4317, or
point `BYTEWAX_OTLP_URL` elsewhere (`http://host:4318` for OTLP/HTTP).
Needs `pip install "flowspark[tracing]"`.
"""

import os
import time
from typing import Iterator

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource
from flowspark.tracing import OtlpTracingConfig, setup_tracing

tracer = setup_tracing(
    tracing_config=OtlpTracingConfig(
        url=os.getenv("BYTEWAX_OTLP_URL", "grpc://127.0.0.1:4317"),
        service_name="Tracing-example",
    ),
    log_level="TRACE",
)


def numbers() -> Iterator[int]:
    for i in range(int(os.getenv("TRACING_EXAMPLE_ITEMS", "50"))):
        time.sleep(0.05)
        yield i


def double(x: int) -> int:
    return x * 2


def minus_one(x: int) -> int:
    return x - 1


def stringy(x: int) -> str:
    return f"<dance>{x}</dance>"


flow = Dataflow("tracing")
stream = op.input("inp", flow, TestingSource(numbers()))
stream = op.map("double", stream, double)
stream = op.map("minus_one", stream, minus_one)
strings = op.map("stringy", stream, stringy)
op.output("out", strings, StdOutSink())
