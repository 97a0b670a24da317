"""Python objects live as on Bytewax: what steps capture, what they emit, the order their functions are called in.

Patterns that real Bytewax projects lean on, in flows of our own, on both
engines with one worker, the input in one micro-batch or spread over many:
an object whose bound method is a mapper (a running imputer), a closure
over a model the mapper updates, a `stateful_map` that emits its state
object and changes it later, one model shared by every key's logic
(whose results depend on the order of the calls), a generator, numpy
values, a dataclass state.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest
from support.oracle import Engine, Outputs, by_key, run_on

import flowspark.operators as op
from flowspark._launch import launch, run_config
from flowspark.dataflow import Dataflow
from flowspark.run import cli_main
from flowspark.testing import TestingSink, TestingSource

ITEMS = [(f"k{i % 3}", float(i * 7 % 11)) for i in range(15)]
"""`(key, reading)` pairs: three keys, readings in no particular order."""


class Imputer:
    """Fills a missing reading with the mean of the last readings it saw (a bound method is the mapper)."""

    def __init__(self) -> None:
        self.window: List[float] = []

    def impute(self, item: Tuple[str, float]) -> Tuple[str, float, float]:
        key, value = item
        self.window = (self.window + [value])[-5:]
        return key, value, statistics.fmean(self.window)


@dataclass
class Total:
    """A key's running total, emitted as is by the mapper that updates it."""

    count: int = 0
    amount: float = 0.0
    history: List[float] = field(default_factory=list)


def add_to_total(total: Optional[Total], value: float) -> Tuple[Total, Total]:
    total = total if total is not None else Total()
    total.count += 1
    total.amount += value
    total.history.append(value)
    return total, total


class SharedModel:
    """One online model that every key's logic updates: its answers depend on the order of the calls."""

    def __init__(self) -> None:
        self.mean = 0.0
        self.seen = 0

    def score(self, value: float) -> float:
        self.seen += 1
        self.mean += (value - self.mean) / self.seen
        return round(value - self.mean, 6)


def build(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("python_objects")
    imputer = Imputer()
    counts: Dict[str, int] = {}
    model = SharedModel()
    array_state: Dict[str, Any] = {}

    def count(item: Tuple[str, float]) -> Tuple[str, int]:
        counts[item[0]] = counts.get(item[0], 0) + 1
        return item[0], counts[item[0]]

    def scored(state: Optional[int], value: float) -> Tuple[int, Tuple[int, float]]:
        seen = (state or 0) + 1
        return seen, (seen, model.score(value))

    def pairs(item: Tuple[str, float]) -> Iterator[Tuple[str, float]]:
        yield item
        if item[1] > 5:
            yield item[0], item[1] / 2

    def running_array(state: Optional[Any], value: float) -> Tuple[Any, Any]:
        arr = state if state is not None else np.zeros(2)
        arr += np.array([1.0, value])  # changed in place: the emitted array is the state
        array_state["last"] = arr
        return arr, arr

    readings = e.op.input("inp", flow, e.TestingSource(ITEMS))
    outs: Outputs = {name: [] for name in ("imputed", "counted", "totals", "scores", "pairs", "arrays", "batch_totals")}
    e.op.output("out_imputed", e.op.map("impute", readings, imputer.impute), e.TestingSink(outs["imputed"]))
    e.op.output("out_counted", e.op.map("count", readings, count), e.TestingSink(outs["counted"]))
    totals = e.op.map(
        "totals_seen",
        e.op.stateful_map("total", readings, add_to_total),
        lambda kv: (kv[0], kv[1].count, kv[1].amount, list(kv[1].history)),
    )
    e.op.output("out_totals", totals, e.TestingSink(outs["totals"]))
    e.op.output("out_scores", e.op.stateful_map("score", readings, scored), e.TestingSink(outs["scores"]))
    e.op.output("out_pairs", e.op.flat_map("pairs", readings, pairs), e.TestingSink(outs["pairs"]))
    arrays = e.op.stateful_map("array", readings, running_array)
    e.op.output(
        "out_arrays", e.op.map("as_list", arrays, lambda kv: (kv[0], kv[1].tolist())), e.TestingSink(outs["arrays"])
    )
    # Two items a batch: within one of Bytewax's batches, a key's emitted state object shows the state the batch left.
    paired = e.op.input("inp_paired", flow, e.TestingSource([("one", v) for _, v in ITEMS], batch_size=2))
    batch_totals = e.op.map(
        "batch_totals_seen", e.op.stateful_map("batch_total", paired, add_to_total), lambda kv: (kv[0], kv[1].count)
    )
    e.op.output("out_batch_totals", batch_totals, e.TestingSink(outs["batch_totals"]))
    return flow, outs


def run_flowspark(max_items: int) -> Outputs:
    flow, outs = build(Engine("flowspark"))
    launch(flow, run_config(max_items_per_batch=max_items, ordered=True))
    return outs


@pytest.fixture(scope="module")
def bytewax_outputs() -> Outputs:
    return run_on("bytewax", build)


@pytest.mark.parametrize("max_items", [1, 7, 100])
def test_objects_calls_and_emitted_values_are_bytewaxs_with_one_worker(
    bytewax_outputs: Outputs, max_items: int
) -> None:
    """Captured objects live the whole run, emitted values are taken when emitted, a shared model sees the calls in
    Bytewax's order: the same outputs whether the input is one micro-batch or one per item."""
    got = run_flowspark(max_items)
    for name, expected in bytewax_outputs.items():
        assert got[name] == expected, name


def test_a_later_run_starts_its_objects_afresh(bytewax_outputs: Outputs) -> None:
    """Objects belong to a run: a second run of the same flow, on the same warm Spark, does not see the first's."""
    run_flowspark(7)
    assert run_flowspark(7)["imputed"] == bytewax_outputs["imputed"]


def test_with_several_workers_a_step_that_changes_what_it_captures_is_named_once(
    bytewax_outputs: Outputs, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each Spark Python worker changes its own copy of such objects, where Bytewax's threads share one: a notice
    names the step (once), and steps that change nothing they capture are not named.  A `stateful_map` that emits
    its state object gives each key's values as emitted, though a key's values of a micro-batch come in one call."""
    flow, outs = build(Engine("flowspark"))
    capsys.readouterr()
    cli_main(flow, workers_per_process=2)
    for name in ("totals", "arrays"):
        keyed = [(item[0], item[1:]) for item in outs[name]]
        assert by_key(keyed) == by_key((item[0], item[1:]) for item in bytewax_outputs[name]), name
    named = [line for line in capsys.readouterr().err.splitlines() if "changes objects its functions capture" in line]
    steps = sorted(line.split("'")[1] for line in named)
    assert steps == ["python_objects.array", "python_objects.count", "python_objects.impute", "python_objects.score"]


class _OpensALock:
    """A mapper whose object stops pickling at its first call (it makes a lock), as one opening a connection does."""

    def __init__(self) -> None:
        self.lock: Optional[threading.Lock] = None

    def __call__(self, x: int) -> int:
        self.lock = self.lock or threading.Lock()
        return x


def test_with_one_worker_objects_that_stop_pickling_stay_in_their_worker_with_a_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out: List[int] = []
    flow = Dataflow("locks")
    op.output(
        "out", op.map("lock", op.input("inp", flow, TestingSource(list(range(6)))), _OpensALock()), TestingSink(out)
    )
    capsys.readouterr()
    launch(flow, run_config(max_items_per_batch=2, ordered=True))
    assert out == list(range(6))
    assert "the steps' captured objects no longer pickle (TypeError: cannot pickle '_thread.lock' object)" in (
        capsys.readouterr().err
    )
