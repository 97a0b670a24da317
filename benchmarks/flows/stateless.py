"""Flow 2: a stateless chain, file -> map -> filter -> flat_map -> map -> file.

parse `key,second,value`; drop values divisible by 10; odd values are emitted
twice (as `value` and `-value`); format as `key,second,value` lines.
"""

from __future__ import annotations

from benchmarks.flows import engine, io_paths, parse

api = engine()
inp, out = io_paths()


def keep(item: tuple[str, int, int]) -> bool:
    return item[2] % 10 != 0


def split(item: tuple[str, int, int]) -> list[tuple[str, int, int]]:
    key, second, value = item
    if value % 2:
        return [item, (key, second, -value)]
    return [item]


def fmt(item: tuple[str, int, int]) -> tuple[str, str]:
    return item[0], f"{item[0]},{item[1]},{item[2]}"


flow = api.dataflow.Dataflow("bench_stateless")
lines = api.op.input("inp", flow, api.files.FileSource(inp))
items = api.op.map("parse", lines, parse)
kept = api.op.filter("keep", items, keep)
split_items = api.op.flat_map("split", kept, split)
api.op.output("out", api.op.map("fmt", split_items, fmt), api.files.FileSink(out))
