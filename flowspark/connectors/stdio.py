"""The console: `StdOutSink` (as in Bytewax) and `StdInSource` (flowspark's own)."""

from __future__ import annotations

import queue
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional, TextIO, Union

from typing_extensions import override

from flowspark.inputs import DynamicSource, StatelessSourcePartition
from flowspark.outputs import DynamicSink, StatelessSinkPartition

__all__ = ["StdInSource", "StdOutSink"]

_IDLE_POLL = timedelta(milliseconds=50)
"""How long an idle stdin partition waits before looking for new lines."""


class _PrintPartition(StatelessSinkPartition[Any]):
    @override
    def write_batch(self, items: List[Any]) -> None:
        for item in items:
            sys.stdout.write(str(item))
            sys.stdout.write("\n")
        sys.stdout.flush()


class StdOutSink(DynamicSink[Any]):
    """Print `str(item)` of every item on its own line; flush after each batch.

    Not resumable: after a resume, items of the replayed batch show again.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.stdio import StdOutSink
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSource, run_main

    flow = Dataflow("stdout_eg")
    op.output("out", op.input("inp", flow, TestingSource(["hello", "world"])), StdOutSink())
    run_main(flow)  # prints hello, then world
    ```
    """

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSinkPartition[Any]:
        return _PrintPartition()


@dataclass(frozen=True)
class _End:
    """Queued by the reader thread last: input ended, or reading failed with `error`."""

    error: Optional[Exception]


class _StdInPartition(StatelessSourcePartition[str]):
    """Hand out lines that a daemon thread reads from `stream`; none if `stream` is None."""

    def __init__(self, stream: Optional[TextIO], batch_size: int) -> None:
        self._batch_size = batch_size
        self._queue: queue.SimpleQueue[Union[str, _End]] = queue.SimpleQueue()
        self._end: Optional[_End] = None if stream is not None else _End(None)
        self._awake: Optional[datetime] = None
        if stream is not None:
            threading.Thread(target=self._read, args=(stream,), name="flowspark-stdin", daemon=True).start()

    def _read(self, stream: TextIO) -> None:
        try:
            for line in iter(stream.readline, ""):
                self._queue.put(line.removesuffix("\n").removesuffix("\r"))
        except Exception as err:  # handed to the polling thread, which raises it
            self._queue.put(_End(err))
        else:
            self._queue.put(_End(None))

    @override
    def next_batch(self) -> List[str]:
        lines: List[str] = []
        while self._end is None and len(lines) < self._batch_size:
            try:
                got = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(got, _End):
                self._end = got
            else:
                lines.append(got)
        if not lines and self._end is not None:
            if self._end.error is not None:
                raise self._end.error
            raise StopIteration
        self._awake = None if lines else datetime.now(timezone.utc) + _IDLE_POLL
        return lines

    @override
    def next_awake(self) -> Optional[datetime]:
        return self._awake


class StdInSource(DynamicSource[str]):
    r"""Read standard input line by line, each line without its `\n` or `\r\n`.

    Only worker 0 reads; every other worker's partition ends at once.  The
    stream is `sys.stdin` of the process that polls the sources, taken when
    the partition is built.  A background thread does the blocking reads,
    so `next_batch` never waits: it returns the lines read so far (at most
    `batch_size`), or an empty batch and a wake-up 50 ms later.  The
    partition ends at end of input (Ctrl-D on a terminal).  Not resumable:
    lines read before a crash are not read again.

    :arg batch_size: most lines per batch.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.stdio import StdInSource, StdOutSink
    from flowspark.dataflow import Dataflow

    # echo.py; run it with: printf 'a\nb\n' | python -m flowspark.run echo:flow
    flow = Dataflow("echo")
    lines = op.input("inp", flow, StdInSource())
    op.output("out", op.map("upper", lines, str.upper), StdOutSink())
    ```
    """

    def __init__(self, batch_size: int = 1000) -> None:
        self._batch_size = batch_size

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSourcePartition[str]:
        return _StdInPartition(sys.stdin if worker_index == 0 else None, self._batch_size)
