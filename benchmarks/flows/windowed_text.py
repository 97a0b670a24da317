"""Flow 7: a windowed flow of another shape, with its event times given as text.

file of `key,ISO 8601 time,value` -> split -> parse the time and the value
-> `fold_window` (EventClock, 30 s wait, TumblingWindower of 60 s) keeping a
count and a sum -> mean per window as `key,window_id,count,mean` lines ->
file.  Several maps and a `datetime.fromisoformat` per item: the per-item
cost sits in user code and the window step, not in the arithmetic of one
`timedelta`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from benchmarks.data import TIME_ORIGIN
from benchmarks.flows import engine, io_paths

api = engine()
inp, out = io_paths()

Stats = tuple[int, int]
"""Count and sum of a window's values."""


def split(line: str) -> tuple[str, str, str]:
    key, at, value = line.split(",")
    return key, at, value


def parsed(fields: tuple[str, str, str]) -> tuple[str, tuple[datetime, int]]:
    key, at, value = fields
    return key, (datetime.fromisoformat(at), int(value))


def event_time(item: tuple[datetime, int]) -> datetime:
    return item[0]


def empty() -> Stats:
    return (0, 0)


def add(stats: Stats, item: tuple[datetime, int]) -> Stats:
    return (stats[0] + 1, stats[1] + item[1])


def merge(a: Stats, b: Stats) -> Stats:
    return (a[0] + b[0], a[1] + b[1])


def fmt(key_window_stats: tuple[str, tuple[int, Stats]]) -> tuple[str, str]:
    key, (window_id, (count, total)) = key_window_stats
    return key, f"{key},{window_id},{count},{total / count:.3f}"


flow = api.dataflow.Dataflow("bench_windowed_text")
lines = api.op.input("inp", flow, api.files.FileSource(inp))
fields = api.op.map("split", lines, split)
items = api.op.map("parse", fields, parsed)
clock = api.windowing.EventClock(event_time, wait_for_system_duration=timedelta(seconds=30))
windower = api.windowing.TumblingWindower(length=timedelta(seconds=60), align_to=TIME_ORIGIN)
stats = api.windowing.fold_window("stats", items, clock, windower, empty, add, merge)
api.op.output("out", api.op.map("fmt", stats.down, fmt), api.files.FileSink(out))
