"""Bytewax's own sources and sinks (what connector packages subclass) run in flowspark flows."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

from bytewax.connectors.files import FileSink, FileSource
from bytewax.inputs import DynamicSource, StatelessSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import TestingSink, TestingSource
from support.oracle import Engine, run_both, run_on


class Countdown(DynamicSource[int]):
    """A connector-package style source: each worker counts down from `start`."""

    def __init__(self, start: int) -> None:
        self.start = start

    def build(self, step_id: str, worker_index: int, worker_count: int) -> "CountdownPartition":
        return CountdownPartition(self.start)


class CountdownPartition(StatelessSourcePartition[int]):
    def __init__(self, start: int) -> None:
        self.left = start
        self.closed = False

    def next_batch(self) -> List[int]:
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return [self.left]

    def next_awake(self) -> Optional[datetime]:
        return None


class Collect(DynamicSink[str]):
    """A connector-package style sink writing into a shared list."""

    def __init__(self, into: List[str]) -> None:
        self.into = into

    def build(self, step_id: str, worker_index: int, worker_count: int) -> "CollectPartition":
        return CollectPartition(self.into)


class CollectPartition(StatelessSinkPartition[str]):
    def __init__(self, into: List[str]) -> None:
        self.into = into

    def write_batch(self, items: List[str]) -> None:
        self.into.extend(items)


def test_bytewax_testing_source_and_sink() -> None:
    def build(e: Engine) -> Any:
        flow = e.Dataflow("bytewax_testing")
        out: List[Any] = []
        nums = e.op.input("inp", flow, TestingSource([1, 2, 3, 4], batch_size=2))
        keyed = e.op.key_on("parity", nums, lambda n: str(n % 2))
        sums = e.op.stateful_map("sum", keyed, lambda total, n: ((total or 0) + n,) * 2)
        e.op.output("out", sums, TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert sorted(flowspark_out["out"]) == sorted(bytewax_out["out"]) == [("0", 2), ("0", 6), ("1", 1), ("1", 4)]


def test_connector_style_dynamic_source_and_sink() -> None:
    def build(e: Engine) -> Any:
        flow = e.Dataflow("bytewax_dynamic")
        out: List[str] = []
        words = e.op.map("say", e.op.input("inp", flow, Countdown(3)), lambda n: f"n={n}")
        e.op.output("out", words, Collect(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out == {"out": ["n=2", "n=1", "n=0"]}


def test_bytewax_file_source_and_sink(tmp_path: Path) -> None:
    lines = tmp_path / "in.txt"
    lines.write_text("".join(f"line {i}\n" for i in range(7)))

    def build_writing_to(target: Path) -> Any:
        def build(e: Engine) -> Any:
            flow = e.Dataflow("bytewax_files")
            read = e.op.input("inp", flow, FileSource(lines, batch_size=3))
            upper = e.op.map("upper", read, lambda line: ("all", line.upper()))
            e.op.output("out", upper, FileSink(target))
            return flow, {}

        return build

    outputs: Dict[str, str] = {}
    for engine in ("bytewax", "flowspark"):
        target = tmp_path / f"{engine}.txt"
        run_on(engine, build_writing_to(target))
        outputs[engine] = target.read_text()
    assert outputs["flowspark"] == outputs["bytewax"] == "".join(f"LINE {i}\n" for i in range(7))


def test_bytewax_abort_stops_the_run_where_it_is() -> None:
    def build(e: Engine) -> Any:
        flow = e.Dataflow("bytewax_abort")
        out: List[int] = []
        e.op.output("out", e.op.input("inp", flow, TestingSource([1, TestingSource.ABORT(), 2])), TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out == {"out": [1]}
