"""Tiny OTLP trace receivers on 127.0.0.1, over HTTP (protobuf) and gRPC, for the tracing tests.

Each keeps the spans it was sent as `ReceivedSpan`s.  Request bodies are
only parsed as OTLP protobuf messages.
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    service: str
    attributes: Dict[str, Any]


def _attribute(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


@dataclass
class Received:
    """What a receiver got so far; thread-safe."""

    spans: List[ReceivedSpan] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: Any) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _attribute(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _attribute(a.value) for a in span.attributes}
                    found.append(
                        ReceivedSpan(
                            span.name,
                            span.trace_id,
                            span.span_id,
                            span.parent_span_id,
                            str(resource.get("service.name")),
                            attributes,
                        )
                    )
        with self.lock:
            self.spans.extend(found)

    def wait_for(self, ready: Callable[[List[ReceivedSpan]], bool], timeout: float = 30.0) -> List[ReceivedSpan]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                spans = list(self.spans)
            if ready(spans):
                return spans
            time.sleep(0.05)
        return spans


@contextlib.contextmanager
def http_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver, for the block: yields `(url, received)`, its URL and what it received."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.add(request)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver, for the block: yields `(url, received)`, its `grpc://...` URL and what it received."""
    received = Received()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            received.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None)
