"""Bytewax's dataflow API: a running flow's shape and metrics over HTTP.

With `FLOWSPARK_DATAFLOW_API_ENABLED` (or Bytewax's
`BYTEWAX_DATAFLOW_API_ENABLED`) set, a run serves, for as long as it runs:

- `/dataflow`: the flow as JSON, exactly as `flowspark.visualize.to_json`
  (and Bytewax) renders it;
- `/metrics`: Prometheus text: the per-step metrics under Bytewax's names
  (`flowspark.engine.reports.metrics`), then everything in `prometheus_client`'s
  default registry (the process's metrics and the user's own).

The port is `FLOWSPARK_DATAFLOW_API_PORT` (or `BYTEWAX_DATAFLOW_API_PORT`),
3030 by default.  Bytewax listens on every interface; flowspark listens on
loopback unless `FLOWSPARK_DATAFLOW_API_HOST` (or
`BYTEWAX_DATAFLOW_API_HOST`) names a wider address, such as `0.0.0.0`.
The server only answers GETs of these two routes and reads nothing else
from a request.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from flowspark import _settings as settings
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.metrics import BOUNDS, COUNT_HELP, TIMING_HELP, Count, Durations, FlowMetrics, Timing
from flowspark.errors import FlowsparkRuntimeError

__all__ = ["ApiSettings", "DataflowApi", "serving_api", "settings_from_env"]

ENABLED = (settings.DATAFLOW_API_ENABLED.name, "BYTEWAX_DATAFLOW_API_ENABLED")
PORT = (settings.DATAFLOW_API_PORT.name, "BYTEWAX_DATAFLOW_API_PORT")
HOST = (settings.DATAFLOW_API_HOST.name, "BYTEWAX_DATAFLOW_API_HOST")
DEFAULT_PORT = 3030
DEFAULT_HOST = "127.0.0.1"
REQUEST_SECONDS = 10.0
"""How long a connection may take to send its request: a silent one is dropped, alone."""

OFF = ("", "0", "false", "no", "off")
"""Values of the enabling variable that leave the API off (Bytewax turns it on for any value)."""


@dataclass(frozen=True)
class ApiSettings:
    """Where the API listens."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


def _first(environ: Mapping[str, str], names: Tuple[str, ...]) -> Optional[Tuple[str, str]]:
    """The first of `names` that is set, with its value: flowspark's name wins over Bytewax's."""
    for name in names:
        if name in environ:
            return name, environ[name]
    return None


def settings_from_env(environ: Mapping[str, str] = os.environ) -> Optional[ApiSettings]:
    """The API's settings if the environment enables it, else None; a bad port raises `ValueError`."""
    enabled = _first(environ, ENABLED)
    if enabled is None or enabled[1].strip().lower() in OFF:
        return None
    port = DEFAULT_PORT
    given = _first(environ, PORT)
    if given is not None:
        name, value = given
        if not (value.strip().isascii() and value.strip().isdigit()) or int(value) > 65535:
            msg = f"{name}={value!r} is not a port number (0 to 65535)"
            raise ValueError(msg)
        port = int(value)
    host = _first(environ, HOST)
    return ApiSettings(DEFAULT_HOST if host is None or not host[1].strip() else host[1].strip(), port)


PREFIX = "bytewax_"
"""Bytewax's prefix of step metrics, kept so that dashboards built for Bytewax keep working."""

SCOPE = ("otel_scope_name", "bytewax")
"""The constant label Bytewax's OpenTelemetry exporter puts on every step metric."""

LABELS = ["step_id", "worker_index", SCOPE[0]]

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text format `generate_latest` writes."""


class _StepMetrics(Collector):
    """A run's `FlowMetrics` as Prometheus families: Bytewax's step metrics, then flowspark's gauges."""

    def __init__(self, metrics: FlowMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        counts = sorted(self._metrics.counts().items(), key=lambda e: (e[0][1], e[0][2]))
        for count in Count:
            counter = CounterMetricFamily(PREFIX + count.value, COUNT_HELP[count], labels=LABELS)
            for (c, step_id, worker), items in counts:
                if c is count:
                    counter.add_metric([step_id, str(worker), SCOPE[1]], items)
            yield counter
        timings = sorted(self._metrics.timings().items(), key=lambda e: (e[0][1], e[0][2]))
        for timing in Timing:
            histogram = HistogramMetricFamily(PREFIX + timing.value, TIMING_HELP[timing], labels=LABELS)
            for (t, step_id, worker), durations in timings:
                if t is timing:
                    histogram.add_metric([step_id, str(worker), SCOPE[1]], _cumulative(durations), durations.total)
            if histogram.samples:
                yield histogram
        gauges: Dict[str, GaugeMetricFamily] = {}
        for gauge in self._metrics.gauges():
            family = gauges.get(gauge.name)
            if family is None:
                family = gauges[gauge.name] = GaugeMetricFamily(
                    gauge.name, gauge.help, labels=[k for k, _ in gauge.labels]
                )
            family.add_metric([v for _, v in gauge.labels], gauge.value)
        yield from gauges.values()


def _cumulative(durations: Durations) -> List[Tuple[str, float]]:
    """Prometheus buckets: the count of observations at or below each bound."""
    bounds = [f"{b:g}" for b in BOUNDS] + ["+Inf"]
    running = 0
    buckets = []
    for bound, n in zip(bounds, durations.per_bucket):
        running += n
        buckets.append((bound, float(running)))
    return buckets


def _metrics_text(own: CollectorRegistry) -> bytes:
    """The run's step metrics, then the default registry's (as Bytewax serves the user's own there)."""
    return generate_latest(own) + generate_latest(REGISTRY)


def _handler(routes: Mapping[str, Tuple[str, Callable[[], bytes]]]) -> type:
    """A request handler class that answers GETs of `routes` (path to content type and body) and 404 otherwise."""

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_SECONDS

        def do_GET(self) -> None:
            route = routes.get(urlsplit(self.path).path)
            if route is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            content_type, body = route[0], route[1]()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - Spark's option name
            pass  # scrapes every few seconds would flood stderr

    return Handler


class DataflowApi:
    """Serves `/dataflow` and `/metrics` of one run from a daemon thread, until `close`."""

    def __init__(self, settings: ApiSettings, flow_json: str, metrics: FlowMetrics) -> None:
        own = CollectorRegistry(auto_describe=False)
        own.register(_StepMetrics(metrics))
        dataflow = flow_json.encode()
        routes = {
            "/dataflow": ("application/json", lambda: dataflow),
            "/metrics": (METRICS_TYPE, lambda: _metrics_text(own)),
        }
        try:
            self._server = ThreadingHTTPServer((settings.host, settings.port), _handler(routes))
        except OSError as ex:
            msg = (
                f"can't serve the dataflow API on {settings.host}:{settings.port} ({ex}); "
                f"set {PORT[0]} to a free port, or unset {ENABLED[0]} and {ENABLED[1]}"
            )
            raise FlowsparkRuntimeError(msg) from None
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        threading.Thread(target=self._server.serve_forever, name="flowspark-dataflow-api", daemon=True).start()
        print(f"flowspark: dataflow API at {self.url}/dataflow and {self.url}/metrics", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serving_api(flow: Dataflow, environ: Mapping[str, str] = os.environ) -> Iterator[Optional[FlowMetrics]]:
    """Serve `flow`'s API for the block if `environ` asks for it; yield the run's metrics to feed (None if not)."""
    settings = settings_from_env(environ)
    if settings is None:
        yield None
        return
    from flowspark.visualize import to_json

    metrics = FlowMetrics()
    api = DataflowApi(settings, to_json(flow), metrics)
    try:
        yield metrics
    finally:
        api.close()
