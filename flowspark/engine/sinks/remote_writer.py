"""The `foreachBatch` callback of a query run through Spark Connect.

Through Spark Connect, Spark calls a streaming query's `foreachBatch`
function in a Python process of its server, not in the user's: the
`SinkWriter`, which holds the sinks that live in the user's process
(`TestingSink` lists, prints), can't go there.  `ForwardedBatches` goes
instead.  For each micro-batch it asks the user's process to begin the
batch (which plans the sink job, if outputs are written in Spark's tasks),
runs that job or takes the rows bound for the user's process, and hands
them over the driver link, where the writer writes and commits them as it
would a batch Spark called it with (`SinkWriter.begin`, `SinkWriter.take`).
"""

from __future__ import annotations

from typing import Any, List, Optional

import pyarrow as pa

from flowspark.engine.reports.driver_link import DriverLink, DriverServer
from flowspark.engine.sinks.sink_tasks import PartWritten, SinkJob
from flowspark.engine.sinks.sink_writer import SinkWriter

BEGIN_CALL = "batch_begin"
TAKE_CALL = "batch_take"


class ForwardedBatches:
    """`foreachBatch`'s function in Spark's server: each micro-batch's job run there, its result written by the user's process."""

    def __init__(self, link: DriverLink) -> None:
        self._link = link

    def __call__(self, frame: Any, batch_id: int) -> None:
        job: Optional[SinkJob] = self._link.call(BEGIN_CALL, batch_id)
        table, written = job.run(frame) if job is not None else (frame.toArrow(), [])
        self._link.call(TAKE_CALL, batch_id, _to_bytes(table), written)


def serve_writer(server: DriverServer, writer: SinkWriter) -> None:
    """Let `ForwardedBatches` reach `writer` through the driver's server."""

    def take(batch_id: int, table: bytes, written: List[PartWritten]) -> None:
        writer.take(batch_id, pa.ipc.open_stream(table).read_all(), written)

    server.register(BEGIN_CALL, writer.begin)
    server.register(TAKE_CALL, take)


def _to_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
