"""A run whose input ends within its first read runs as one batch query, with the streaming query's results."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterator, List

import pytest
from support.oracle import Engine, run_both, run_on

from conftest import ALIGN

STALL = timedelta(seconds=0.05)
"""A pause before the end: the first read stops there, so the run is a streaming query."""


def _windows_and_chains(stall: bool) -> Any:
    """Counts per key, a running sum of them per key, windowed sums and a tap, over 1,500 keys (several slots per bucket)."""

    def build(e: Engine) -> Any:
        flow = e.Dataflow("df")
        items: List[Any] = [(f"k{i % 1500}", i) for i in range(6000)]
        if stall:
            items.append(e.TestingSource.PAUSE(STALL))
        nums = e.op.input("inp", flow, e.TestingSource(items, batch_size=500))
        counts = e.op.count_final("count", nums, lambda kv: kv[0])
        keyed = e.op.key_on("again", e.op.map("key", counts, lambda kc: kc[1]), lambda n: f"n{n % 7}")
        sums = e.op.stateful_map("sum", keyed, lambda total, n: ((total or 0) + n, (total or 0) + n))
        clock = e.win.EventClock(
            lambda kv: ALIGN + timedelta(seconds=kv[1] % 100), wait_for_system_duration=timedelta(0)
        )
        windowed = e.win.count_window(
            "win", nums, clock, e.win.TumblingWindower(timedelta(seconds=10), ALIGN), lambda kv: kv[0][:2]
        )
        taps: List[Any] = []
        e.op.inspect_debug("tap", sums, lambda step_id, item, epoch, worker: taps.append((step_id, item, epoch)))
        sums_out: List[Any] = []
        windows_out: List[Any] = []
        e.op.output("sums", sums, e.TestingSink(sums_out))
        e.op.output("windows", windowed.down, e.TestingSink(windows_out))
        return flow, {"sums": sums_out, "windows": windows_out, "taps": taps}

    return build


@pytest.mark.quick
def test_a_run_that_ends_in_its_first_read_gives_bytewaxs_output() -> None:
    bytewax_out, flowspark_out = run_both(_windows_and_chains(stall=False))
    assert flowspark_out == bytewax_out


@pytest.mark.quick
def test_the_batch_query_and_the_streaming_query_give_the_same_output() -> None:
    batch = run_on("flowspark", _windows_and_chains(stall=False))
    streaming = run_on("flowspark", _windows_and_chains(stall=True))
    assert batch["sums"] == streaming["sums"]
    assert batch["windows"] == streaming["windows"]
    assert [(step, item) for step, item, _ in batch["taps"]] == [(step, item) for step, item, _ in streaming["taps"]]


def test_a_generator_read_before_spark_started_is_not_read_again() -> None:
    def items(pause: Any) -> Iterator[Any]:
        yield from range(5)
        yield pause
        yield from range(5, 10)

    def build(e: Engine) -> Any:
        flow = e.Dataflow("df")
        out: List[Any] = []
        nums = e.op.input("inp", flow, e.TestingSource(items(e.TestingSource.PAUSE(STALL)), batch_size=2))
        e.op.output("out", e.op.map("double", nums, lambda n: 2 * n), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out == {"out": [2 * n for n in range(10)]}


@pytest.mark.parametrize("stall", [False, True], ids=["batch", "streaming"])
@pytest.mark.quick
def test_a_failing_step_names_its_step_either_way(stall: bool) -> None:
    def build(e: Engine) -> Any:
        flow = e.Dataflow("df")
        items: List[Any] = [("a", 1), ("a", 0)] + ([e.TestingSource.PAUSE(STALL)] if stall else [])
        nums = e.op.input("inp", flow, e.TestingSource(items))
        e.op.output("out", e.op.map_value("invert", nums, lambda n: 1 / n), e.TestingSink([]))
        return flow, {}

    with pytest.raises(Engine("flowspark").BytewaxRuntimeError, match="step 'df.invert"):
        run_on("flowspark", build)
