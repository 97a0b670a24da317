"""Benchmark flows, each written once against the Bytewax API.

FileSink is a partitioned sink: every flow ends in `(key, line)` pairs.

A flow module imports its dataflow API through `engine()`, so the same module
runs on Bytewax (`python -m bytewax.run benchmarks.flows.windowed:flow`) and
on flowspark (`python -m flowspark.run ...`).  The engine is taken from
`FLOWBENCH_ENGINE` (`bytewax` or `flowspark`) or, when that is unset, from
the `run` module that is executing.  Input and output paths come from
`FLOWBENCH_INPUT` and `FLOWBENCH_OUTPUT`.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import NamedTuple

ENGINES = ("bytewax", "flowspark")


class Api(NamedTuple):
    """The modules of one engine's dataflow API, under Bytewax's names."""

    name: str
    op: ModuleType
    windowing: ModuleType
    files: ModuleType
    dataflow: ModuleType


def engine_name() -> str:
    """`bytewax` or `flowspark`: from `FLOWBENCH_ENGINE`, else from the running `<engine>.run`."""
    name = os.environ.get("FLOWBENCH_ENGINE")
    if name is None:
        main = sys.argv[0].replace("\\", "/") if sys.argv else ""
        name = next((e for e in ENGINES if f"/{e}/run.py" in main), "bytewax")
    if name not in ENGINES:
        msg = f"FLOWBENCH_ENGINE must be one of {ENGINES}; got {name!r}"
        raise ValueError(msg)
    return name


def engine() -> Api:
    """Import the chosen engine's `operators`, `operators.windowing`, `connectors.files`, `dataflow`."""
    name = engine_name()
    return Api(
        name,
        importlib.import_module(f"{name}.operators"),
        importlib.import_module(f"{name}.operators.windowing"),
        importlib.import_module(f"{name}.connectors.files"),
        importlib.import_module(f"{name}.dataflow"),
    )


def module(name: str) -> ModuleType:
    """The chosen engine's module `name` (`inputs`, `testing`, `connectors.stdio`, ...), for what `Api` leaves out."""
    return importlib.import_module(f"{engine_name()}.{name}")


def io_paths() -> tuple[str, str]:
    """The input and output paths of this run (`FLOWBENCH_INPUT`, `FLOWBENCH_OUTPUT`)."""
    try:
        return os.environ["FLOWBENCH_INPUT"], os.environ["FLOWBENCH_OUTPUT"]
    except KeyError as ex:
        msg = f"set {ex.args[0]} (benchmarks/run.py does)"
        raise RuntimeError(msg) from None


def parse(line: str) -> tuple[str, int, int]:
    """`key,second,value` -> `(key, second, value)`."""
    key, second, value = line.split(",")
    return key, int(second), int(value)
