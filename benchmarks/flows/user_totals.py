"""Flow 5: running count and sum per user, the high-cardinality shape.

file of `key,second,value` -> parse -> key by user -> `stateful_map` count
and sum so far -> every 10th event of a user written as
`key,count,sum` -> file.  Run it with many keys (`--keys 200000`): every key
touched in a micro-batch costs the engine a state read and write, so this
flow measures state access rather than user code.
"""

from __future__ import annotations

from typing import Optional

from benchmarks.flows import engine, io_paths, parse

api = engine()
inp, out = io_paths()

EVERY = 10


def keyed(line: str) -> tuple[str, int]:
    key, _second, value = parse(line)
    return key, value


def totals(seen: Optional[tuple[int, int]], value: int) -> tuple[tuple[int, int], tuple[int, int]]:
    count, total = seen or (0, 0)
    now = (count + 1, total + value)
    return now, now


def tenth(key_totals: tuple[str, tuple[int, int]]) -> bool:
    return key_totals[1][0] % EVERY == 0


def fmt(key_totals: tuple[str, tuple[int, int]]) -> tuple[str, str]:
    key, (count, total) = key_totals
    return key, f"{key},{count},{total}"


flow = api.dataflow.Dataflow("bench_user_totals")
lines = api.op.input("inp", flow, api.files.FileSource(inp))
items = api.op.map("parse", lines, keyed)
running = api.op.stateful_map("totals", items, totals)
api.op.output("out", api.op.map("fmt", api.op.filter("tenth", running, tenth), fmt), api.files.FileSink(out))
