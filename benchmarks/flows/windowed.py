"""Flow 1: 60 s tumbling event-time sum per key, written as `key,window_id,sum` lines.

file of `key,second,value` -> parse -> key by key -> `fold_window` (EventClock,
30 s wait, TumblingWindower of 60 s aligned to ALIGN) -> lines -> file.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from benchmarks.flows import engine, io_paths, parse

ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)

api = engine()
inp, out = io_paths()


def keyed(line: str) -> tuple[str, tuple[int, int]]:
    key, second, value = parse(line)
    return key, (second, value)


def event_time(item: tuple[int, int]) -> datetime:
    return ALIGN + timedelta(seconds=item[0])


def add(total: int, item: tuple[int, int]) -> int:
    return total + item[1]


def merge(a: int, b: int) -> int:
    return a + b


def fmt(key_window_sum: tuple[str, tuple[int, int]]) -> tuple[str, str]:
    key, (window_id, total) = key_window_sum
    return key, f"{key},{window_id},{total}"


flow = api.dataflow.Dataflow("bench_windowed")
lines = api.op.input("inp", flow, api.files.FileSource(inp))
items = api.op.map("parse", lines, keyed)
clock = api.windowing.EventClock(event_time, wait_for_system_duration=timedelta(seconds=30))
windower = api.windowing.TumblingWindower(length=timedelta(seconds=60), align_to=ALIGN)
sums = api.windowing.fold_window("sum", items, clock, windower, int, add, merge)
api.op.output("out", api.op.map("fmt", sums.down, fmt), api.files.FileSink(out))
