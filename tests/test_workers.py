"""Dynamic sources and sinks are built once per worker, with Bytewax's worker index and count."""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Set, Tuple

from support.oracle import Engine

LINES = [f"line {n}" for n in range(10)]


def _build(e: Engine, built: Set[Tuple[str, int, int]]) -> Tuple[Any, Dict[str, List[Any]]]:
    """Bytewax's split-a-file-by-worker example: each worker reads every `worker_count`-th line."""
    inputs = importlib.import_module(f"{e.name}.inputs")
    outputs = importlib.import_module(f"{e.name}.outputs")

    class _Lines(inputs.StatelessSourcePartition):  # type: ignore[misc,name-defined]
        def __init__(self, worker_index: int, worker_count: int) -> None:
            self._lines = [(worker_index, line) for n, line in enumerate(LINES) if n % worker_count == worker_index]

        def next_batch(self) -> List[Any]:
            if not self._lines:
                raise StopIteration()
            batch, self._lines = self._lines, []
            return batch

    class SplitSource(inputs.DynamicSource):  # type: ignore[misc,name-defined]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Lines:
            built.add(("source", worker_index, worker_count))
            return _Lines(worker_index, worker_count)

    written: List[Any] = []

    class _Keep(outputs.StatelessSinkPartition):  # type: ignore[misc,name-defined]
        def write_batch(self, items: List[Any]) -> None:
            written.extend(items)

    class KeepSink(outputs.DynamicSink):  # type: ignore[misc,name-defined]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Keep:
            built.add(("sink", worker_index, worker_count))
            return _Keep()

    flow = e.Dataflow("split")
    e.op.output("out", e.op.input("inp", flow, SplitSource()), KeepSink())
    return flow, {"out": written}


def test_a_dynamic_source_and_sink_get_one_partition_per_worker_as_in_bytewax() -> None:
    results = {}
    for name in ("bytewax", "flowspark"):
        engine = Engine(name)
        built: Set[Tuple[str, int, int]] = set()
        flow, out = _build(engine, built)
        testing = importlib.import_module(f"{name}.testing")
        testing.cluster_main(flow, [], 0, worker_count_per_proc=2)
        results[name] = (sorted(out["out"]), built)
    assert results["flowspark"] == results["bytewax"]
    assert results["flowspark"][1] == {("source", 0, 2), ("source", 1, 2), ("sink", 0, 2), ("sink", 1, 2)}
    assert [line for _, line in results["flowspark"][0] if _ == 1] == [f"line {n}" for n in range(1, 10, 2)]
