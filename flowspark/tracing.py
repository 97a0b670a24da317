"""Logging and tracing, with Bytewax's API, sent to OpenTelemetry.

`setup_tracing(tracing_config, log_level)` returns a handle; keep a
reference to it, as in Bytewax: once it is garbage collected (or its
`shutdown` is called) tracing stops.  While it lives, every run of a flow
exports one `flowspark.run` span and, as its children, one
`flowspark.batch` span per micro-batch written on the driver.  Spans go
through the OpenTelemetry SDK's OTLP exporters (`pip install
"flowspark[tracing]"`):

- `OtlpTracingConfig(url=...)`: `grpc://host:port` (the default,
  `grpc://127.0.0.1:4317`, as in Bytewax) exports OTLP over gRPC;
  `http://` or `https://` URLs export OTLP/HTTP protobuf (to
  `/v1/traces` when the URL has no path).
- `JaegerConfig(endpoint=...)`: Jaeger (1.35 and later) receives OTLP
  itself, so spans go over OTLP/gRPC to the endpoint's host on Jaeger's
  OTLP port 4317; Bytewax's agent port (`6831`, UDP) is not used.  The host
  defaults to `OTEL_EXPORTER_JAEGER_AGENT_HOST`, then `127.0.0.1`.  An
  endpoint written as a URL (`http://jaeger:4318`) is used as is.

`log_level` (`"ERROR"` by default, then `"WARN"`, `"INFO"`, `"DEBUG"`,
`"TRACE"`) sets what the `flowspark` logger prints to standard output: run
starts and ends at `INFO`, each micro-batch at `DEBUG`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import weakref
from abc import ABC, abstractmethod
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ContextManager, Dict, Iterator, Optional
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "JaegerConfig",
    "OtlpTracingConfig",
    "TracingConfig",
    "setup_tracing",
]

LOGGER = logging.getLogger("flowspark")
_runs_log = logging.getLogger(__name__)

TRACE = 5
"""Level of Bytewax's `TRACE`, below `logging.DEBUG`."""

_LEVELS: Dict[str, int] = {
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}

JAEGER_OTLP_PORT = 4317
"""Where Jaeger receives OTLP over gRPC."""


class TracingConfig:
    """Base class of the tracing backends; use a subclass."""


class _ExportingConfig(TracingConfig, ABC):
    """A backend spans are exported to: a service name and a sampling ratio."""

    def __init__(self, service_name: str, sampling_ratio: float) -> None:
        if not 0.0 <= sampling_ratio <= 1.0:
            msg = f"sampling_ratio must be between 0.0 and 1.0; got {sampling_ratio!r}"
            raise ValueError(msg)
        self._service_name = service_name
        self._sampling_ratio = sampling_ratio

    @property
    def service_name(self) -> str:
        """Names this dataflow in the traces."""
        return self._service_name

    @property
    def sampling_ratio(self) -> float:
        """Fraction of traces to send, between 0.0 and 1.0."""
        return self._sampling_ratio

    @abstractmethod
    def otlp_url(self) -> str:
        """The OTLP URL spans go to."""


class JaegerConfig(_ExportingConfig):
    """Send spans to Jaeger (over OTLP; see the module docstring)."""

    def __init__(self, service_name: str, endpoint: Optional[str] = None, sampling_ratio: float = 1.0) -> None:
        super().__init__(service_name, sampling_ratio)
        self._endpoint = endpoint

    @property
    def endpoint(self) -> Optional[str]:
        """`host:port` of Bytewax's Jaeger agent, or an OTLP URL; `None` for the default."""
        return self._endpoint

    def otlp_url(self) -> str:
        """OTLP/gRPC on the Jaeger host's port 4317, or the endpoint itself if it is a URL."""
        if self._endpoint is not None and "://" in self._endpoint:
            return self._endpoint
        host = os.environ.get("OTEL_EXPORTER_JAEGER_AGENT_HOST", "127.0.0.1")
        if self._endpoint is not None:
            host = self._endpoint.rsplit(":", 1)[0] if ":" in self._endpoint else self._endpoint
        return f"grpc://{host}:{JAEGER_OTLP_PORT}"


class OtlpTracingConfig(_ExportingConfig):
    """Send spans to an OpenTelemetry collector (or any OTLP receiver)."""

    def __init__(self, service_name: str, url: Optional[str] = None, sampling_ratio: float = 1.0) -> None:
        super().__init__(service_name, sampling_ratio)
        self._url = url

    @property
    def url(self) -> Optional[str]:
        """The receiver's URL; `None` for `grpc://127.0.0.1:4317`."""
        return self._url

    def otlp_url(self) -> str:
        """The receiver's URL, or OTLP/gRPC on this machine's port 4317."""
        return self._url or "grpc://127.0.0.1:4317"


def _exporter(url: str) -> "SpanExporter":
    parts = urlsplit(url)
    if parts.scheme == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=parts.netloc, insecure=True)
    if parts.scheme in ("http", "https"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        path = parts.path if parts.path not in ("", "/") else "/v1/traces"
        return HttpExporter(endpoint=parts._replace(path=path).geturl())
    msg = f"tracing URL {url!r} must start with grpc://, http:// or https://"
    raise ValueError(msg)


def _provider(config: TracingConfig) -> "TracerProvider":
    if not isinstance(config, _ExportingConfig):
        msg = f"unknown tracing config {type(config)!r}; use `OtlpTracingConfig` or `JaegerConfig`"
        raise TypeError(msg)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as ex:
        msg = 'tracing needs the OpenTelemetry SDK: pip install "flowspark[tracing]"'
        raise ImportError(msg) from ex
    provider = TracerProvider(
        resource=Resource.create({"service.name": config.service_name}),
        sampler=ParentBased(TraceIdRatioBased(config.sampling_ratio)),
    )
    provider.add_span_processor(BatchSpanProcessor(_exporter(config.otlp_url())))
    return provider


class BytewaxTracer:
    """The handle `setup_tracing` returns; tracing lasts as long as it is referenced."""

    def __init__(self, provider: Optional["TracerProvider"], handler: logging.Handler) -> None:
        self._provider = provider
        self._handler = handler
        self.tracer: Optional["Tracer"] = provider.get_tracer("flowspark") if provider is not None else None

    def flush(self) -> None:
        """Export the spans ended so far."""
        if self._provider is not None:
            self._provider.force_flush()

    def shutdown(self) -> None:
        """Export what is left and stop tracing and logging."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None
            self.tracer = None
        LOGGER.removeHandler(self._handler)
        if not LOGGER.handlers:
            LOGGER.setLevel(logging.NOTSET)

    def __del__(self) -> None:
        self.shutdown()


_active: Optional["weakref.ReferenceType[BytewaxTracer]"] = None


def _current() -> Optional[BytewaxTracer]:
    return _active() if _active is not None else None


def setup_tracing(tracing_config: Optional[TracingConfig] = None, log_level: Optional[str] = None) -> BytewaxTracer:
    """Log at `log_level` to standard output and, with a config, export spans; keep the result referenced.

    Calling it again replaces the previous set-up.
    """
    global _active
    level_name = (log_level or "ERROR").upper()
    if level_name not in _LEVELS:
        msg = f"unknown log level {log_level!r}; use one of {', '.join(_LEVELS)}"
        raise ValueError(msg)
    provider = _provider(tracing_config) if tracing_config is not None else None
    previous = _current()
    if previous is not None:
        previous.shutdown()
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(_LEVELS[level_name])
    tracer = BytewaxTracer(provider, handler)
    _active = weakref.ref(tracer)
    return tracer


@dataclass
class RunTrace:
    """The span of one run, parent of its batches' spans."""

    tracer: Optional["Tracer"]
    span: Optional["Span"]
    flow_id: str


class BatchTrace:
    """The `flowspark.batch` span of one micro-batch: from its callback's start to the end of its write.

    The write may end in another thread than the one that started the
    span (`engine/sinks/async_write.py`), so the span is started and ended by
    hand, and made current only around the write (`active`).
    """

    def __init__(self, run: RunTrace, batch_id: int) -> None:
        self._run = run
        self._batch_id = batch_id
        self._started = time.monotonic()
        self._span: Optional["Span"] = None
        self._ended = False
        if run.tracer is not None and run.span is not None:
            from opentelemetry import trace

            parent = trace.set_span_in_context(run.span)
            self._span = run.tracer.start_span(
                "flowspark.batch", context=parent, attributes={"flowspark.batch_id": batch_id}
            )

    def active(self) -> ContextManager[Any]:
        """The span as the current one, for spans the write makes (a sink's own, say)."""
        if self._span is None:
            return nullcontext()
        from opentelemetry import trace

        return trace.use_span(self._span, end_on_exit=False)

    def end(self, error: Optional[BaseException] = None) -> None:
        """End the span (once), with `error` if the batch failed."""
        if self._ended:
            return
        self._ended = True
        if self._span is not None:
            if error is not None:
                from opentelemetry.trace import Status, StatusCode

                self._span.record_exception(error)
                self._span.set_status(Status(StatusCode.ERROR, str(error)))
            self._span.end()
        _runs_log.debug(
            "flow %r: micro-batch %d written in %.3f s",
            self._run.flow_id,
            self._batch_id,
            time.monotonic() - self._started,
        )


_runs: Dict[str, RunTrace] = {}
"""The runs in progress, by flow id, for the per-batch hook."""


@contextmanager
def traced_run(flow_id: str) -> Iterator[RunTrace]:
    """Wrap one run of `flow_id` in a `flowspark.run` span (when tracing is set up)."""
    handle = _current()
    tracer = handle.tracer if handle is not None else None
    span_scope = (
        tracer.start_as_current_span("flowspark.run", attributes={"flowspark.flow_id": flow_id})
        if tracer is not None
        else nullcontext(None)
    )
    _runs_log.debug("flow %r: run started", flow_id)
    try:
        with span_scope as span:
            run = RunTrace(tracer, span, flow_id)
            _runs[flow_id] = run
            yield run
    finally:
        _runs.pop(flow_id, None)
        _runs_log.debug("flow %r: run ended", flow_id)
        if handle is not None:
            handle.flush()


def start_batch(flow_id: str, batch_id: int) -> BatchTrace:
    """Start the span of micro-batch `batch_id` in the run of `flow_id` (a log line only, when tracing is off)."""
    return BatchTrace(_runs.get(flow_id) or RunTrace(None, None, flow_id), batch_id)
