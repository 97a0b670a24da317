"""Flow 5: a partitioned stateless flow, 8 input files -> parse -> format -> 8 output files.

Input is a directory of `key,second,value` files read with `DirSource`
(one partition per file); each item is formatted as a `(key, line)` pair
and written with `DirSink`, whose 8 files are partitions chosen by key.
It shows what the driver does per event when a flow's partitions are read
and written in Spark's tasks.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.flows import engine, io_paths, parse

api = engine()
inp, out = io_paths()
FILES = 8


def fmt(item: tuple[str, int, int]) -> tuple[str, str]:
    return item[0], f"{item[0]},{item[1]},{item[2]}"


flow = api.dataflow.Dataflow("bench_partitioned")
lines = api.op.input("inp", flow, api.files.DirSource(Path(inp)))
items = api.op.map("parse", lines, parse)
api.op.output("out", api.op.map("fmt", items, fmt), api.files.DirSink(Path(out), FILES))
