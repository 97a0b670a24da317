"""Flow 3: `stateful_map` running count per key.

file of `key,second,value` -> parse -> key by key -> count so far -> each line
with its count appended (`key,second,value,count`) -> file.  The appended
count makes the output check each key's order, not only its size.
"""

from __future__ import annotations

from typing import Optional

from benchmarks.flows import engine, io_paths, parse

api = engine()
inp, out = io_paths()


def keyed(line: str) -> tuple[str, tuple[int, int]]:
    key, second, value = parse(line)
    return key, (second, value)


def count(seen: Optional[int], item: tuple[int, int]) -> tuple[int, tuple[int, int, int]]:
    seen = (seen or 0) + 1
    return seen, (item[0], item[1], seen)


def fmt(key_item: tuple[str, tuple[int, int, int]]) -> tuple[str, str]:
    key, (second, value, n) = key_item
    return key, f"{key},{second},{value},{n}"


flow = api.dataflow.Dataflow("bench_running_count")
lines = api.op.input("inp", flow, api.files.FileSource(inp))
items = api.op.map("parse", lines, keyed)
counts = api.op.stateful_map("count", items, count)
api.op.output("out", api.op.map("fmt", counts, fmt), api.files.FileSink(out))
