"""`flowspark.tracing` has Bytewax's API and sends real OTLP spans: one per run, one per micro-batch."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, List

import pytest
from support.oracle import ENGINES, Engine
from support.otlp_receiver import ReceivedSpan, grpc_receiver, http_receiver

from flowspark import tracing
from flowspark.testing import TestingSink, TestingSource, run_main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("engine", ENGINES)
def test_configs_have_bytewax_constructors_and_properties(engine: str) -> None:
    module = importlib.import_module(f"{engine}.tracing")
    otlp = module.OtlpTracingConfig("svc")
    assert (otlp.service_name, otlp.url, otlp.sampling_ratio) == ("svc", None, 1.0)
    otlp = module.OtlpTracingConfig("svc", url="http://collector:4318", sampling_ratio=0.5)
    assert (otlp.url, otlp.sampling_ratio) == ("http://collector:4318", 0.5)
    jaeger = module.JaegerConfig("svc", endpoint="jaeger:6831")
    assert (jaeger.service_name, jaeger.endpoint, jaeger.sampling_ratio) == ("svc", "jaeger:6831", 1.0)
    assert module.JaegerConfig("svc").endpoint is None
    assert isinstance(otlp, module.TracingConfig) and isinstance(jaeger, module.TracingConfig)
    with pytest.raises(TypeError):
        module.OtlpTracingConfig()


def _flow(items: int, out: List[str]) -> Any:
    flow = Engine("flowspark").Dataflow("traced")
    op = Engine("flowspark").op
    op.output(
        "out", op.map("show", op.input("inp", flow, TestingSource(range(items), batch_size=2)), str), TestingSink(out)
    )
    return flow


def _check_run_with_batches(spans: List[ReceivedSpan], service: str) -> None:
    (run,) = [s for s in spans if s.name == "flowspark.run"]
    batches = [s for s in spans if s.name == "flowspark.batch"]
    assert run.attributes["flowspark.flow_id"] == "traced"
    assert batches, [s.name for s in spans]
    assert all(b.parent_span_id == run.span_id and b.trace_id == run.trace_id for b in batches)
    assert sorted(b.attributes["flowspark.batch_id"] for b in batches) == sorted(
        {b.attributes["flowspark.batch_id"] for b in batches}
    )
    assert {s.service for s in spans} == {service}


def _has_run(spans: List[ReceivedSpan]) -> bool:
    return any(s.name == "flowspark.run" for s in spans)


def test_run_and_micro_batch_spans_reach_an_otlp_http_receiver(capsys: pytest.CaptureFixture[str]) -> None:
    with http_receiver() as (url, received):
        handle = tracing.setup_tracing(tracing.OtlpTracingConfig("flowspark-test", url=url), log_level="DEBUG")
        try:
            out: List[str] = []
            run_main(_flow(6, out))
            spans = received.wait_for(_has_run)
        finally:
            handle.shutdown()
    assert out == [str(i) for i in range(6)]
    _check_run_with_batches(spans, "flowspark-test")
    logged = capsys.readouterr().out
    assert "micro-batch" in logged


def test_grpc_url_exports_over_otlp_grpc() -> None:
    with grpc_receiver() as (url, received):
        handle = tracing.setup_tracing(tracing.OtlpTracingConfig("flowspark-grpc", url=url))
        try:
            run_main(_flow(3, []))
            spans = received.wait_for(_has_run)
        finally:
            handle.shutdown()
    _check_run_with_batches(spans, "flowspark-grpc")


def test_jaeger_config_sends_otlp_to_jaeger() -> None:
    assert tracing.JaegerConfig("svc").otlp_url() == "grpc://127.0.0.1:4317"
    assert tracing.JaegerConfig("svc", endpoint="jaeger:6831").otlp_url() == "grpc://jaeger:4317"
    with http_receiver() as (url, received):
        handle = tracing.setup_tracing(tracing.JaegerConfig("via-jaeger", endpoint=url))
        try:
            run_main(_flow(2, []))
            spans = received.wait_for(_has_run)
        finally:
            handle.shutdown()
    _check_run_with_batches(spans, "via-jaeger")


def test_dropping_the_handle_stops_tracing() -> None:
    with http_receiver() as (url, received):
        handle = tracing.setup_tracing(tracing.OtlpTracingConfig("gone", url=url))
        with tracing.traced_run("kept") as run:
            kept = run.span
        del handle
        gc.collect()
        with tracing.traced_run("dropped") as run:
            dropped = run.span
    assert kept is not None
    assert dropped is None
    assert [s.attributes["flowspark.flow_id"] for s in received.spans] == ["kept"]


def test_bad_log_level_and_url_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown log level 'bogus'"):
        tracing.setup_tracing(log_level="bogus")
    with pytest.raises(ValueError, match="must start with grpc://, http:// or https://"):
        tracing.setup_tracing(tracing.OtlpTracingConfig("svc", url="udp://127.0.0.1:6831"))
    with pytest.raises(ValueError, match="sampling_ratio must be between 0.0 and 1.0"):
        tracing.OtlpTracingConfig("svc", sampling_ratio=2.0)
    with pytest.raises(TypeError, match="use `OtlpTracingConfig` or `JaegerConfig`"):
        tracing.setup_tracing(tracing.TracingConfig())


def _run_example(engine: str, target: str, cwd: Path, url: str) -> List[str]:
    env = dict(os.environ, BYTEWAX_OTLP_URL=url, TRACING_EXAMPLE_ITEMS="6")
    done = subprocess.run(
        [sys.executable, "-m", f"{engine}.run", target],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("<dance>")]


def test_bytewax_tracing_example_runs_with_renamed_imports(tmp_path: Path) -> None:
    source = (ROOT / "flowspark" / "examples" / "tracing.py").read_text()
    (tmp_path / "bw_tracing.py").write_text(source.replace("flowspark", "bytewax"))
    with grpc_receiver() as (url, _):
        expected = _run_example("bytewax", "bw_tracing:flow", tmp_path, url)
    with http_receiver() as (url, received):
        got = _run_example("flowspark", "examples.tracing:flow", ROOT, url)
        spans = received.wait_for(_has_run)
    assert got == expected == [f"<dance>{2 * i - 1}</dance>" for i in range(6)]
    assert {s.service for s in spans} == {"Tracing-example"}
    assert any(s.name == "flowspark.batch" for s in spans)


def test_a_batch_span_ends_once_whichever_thread_ends_it(caplog: pytest.LogCaptureFixture) -> None:
    from flowspark.tracing import start_batch

    caplog.set_level(logging.DEBUG, logger="flowspark.tracing")
    batch = start_batch("untraced", 3)
    with batch.active():
        pass
    ender = threading.Thread(target=batch.end)
    ender.start()
    ender.join()
    batch.end(RuntimeError("late"))
    assert [r.getMessage().split(" written")[0] for r in caplog.records] == ["flow 'untraced': micro-batch 3"]
