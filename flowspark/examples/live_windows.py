"""Count readings per sensor in 2-second tumbling windows of system time.

A slow source emits one reading every 0.25 s; `SystemClock` stamps each
reading with the time it is processed, and every window is emitted soon
after it closes, even when no new reading arrives for that sensor (the
runtime wakes the key at the window's close).  Each output line says when
the window closed and when it was emitted.

    python -m flowspark.run flowspark.examples.live_windows:flow
"""

import os
from datetime import datetime, timedelta, timezone
from typing import Tuple

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.inputs import SimplePollingSource

READINGS = int(os.environ.get("LIVE_READINGS", "24"))
ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)
LENGTH = timedelta(seconds=2)


class SlowSensors(SimplePollingSource[Tuple[str, int], int]):
    """`READINGS` readings, one every 0.25 s, alternating between two sensors."""

    def __init__(self) -> None:
        super().__init__(timedelta(seconds=0.25))
        self._sent = 0

    def next_item(self) -> Tuple[str, int]:
        if self._sent >= READINGS:
            raise StopIteration()
        self._sent += 1
        return (f"sensor-{self._sent % 2}", self._sent)

    def snapshot(self) -> int:
        return self._sent

    def resume(self, resume_state: int) -> None:
        self._sent = resume_state


def describe(item: Tuple[str, Tuple[int, int]]) -> str:
    sensor, (window_id, count) = item
    closed = ALIGN + LENGTH * (window_id + 1)
    now = datetime.now(timezone.utc)
    return f"{sensor} window {window_id}: {count} readings; closed {closed.isoformat()} emitted {now.isoformat()}"


flow = Dataflow("live_windows")
readings = op.input("sensors", flow, SlowSensors())
counts = win.count_window("count", readings, win.SystemClock(), win.TumblingWindower(LENGTH, ALIGN), lambda r: r[0])
op.output("out", op.map("describe", counts.down, describe), StdOutSink())
