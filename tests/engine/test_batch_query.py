"""A run whose input ends within its first read runs as one batch query, with the streaming query's results."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from datetime import timedelta
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from support.event_time import ALIGN
from support.oracle import Engine, run_both, run_on

import flowspark.operators as op
from flowspark._launch import run_config
from flowspark.dataflow import Dataflow
from flowspark.engine.reports import progress
from flowspark.engine.reports.metrics import Count, FlowMetrics
from flowspark.engine.reports.progress import Progress
from flowspark.engine.runner import run_flow
from flowspark.testing import TestingSink, TestingSource

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


PAUSE = 0.04
"""Each item's pause in the slow steps: 50 items take a task about two seconds per step."""


def test_a_long_batch_run_moves_every_steps_counters_and_its_progress_line_as_it_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = Dataflow("slow")
    nums = op.input("inp", flow, TestingSource(range(50)))
    mapped = op.map("nap", nums, lambda n: time.sleep(PAUSE) or n)
    keyed = op.key_on("key", mapped, lambda n: "k")
    summed = op.stateful_map("sum", keyed, lambda total, n: (time.sleep(PAUSE) or (total or 0) + n,) * 2)
    out: List[Any] = []
    op.output("out", summed, TestingSink(out))
    seen: List[Dict[Tuple[Count, str, int], int]] = []

    @contextlib.contextmanager
    def watched(_: Any) -> Iterator[FlowMetrics]:
        metrics = FlowMetrics()
        stop = threading.Event()

        def look() -> None:
            while not stop.wait(0.1):
                seen.append(metrics.counts())

        watcher = threading.Thread(target=look)
        watcher.start()
        try:
            yield metrics
        finally:
            stop.set()
            watcher.join()

    caplog.set_level(logging.DEBUG, logger=progress.__name__)
    run_flow(flow, run_config(progress=Progress()), serve_api=watched)

    assert [total for _, total in out] == list(itertools.accumulate(range(50)))
    for step_id in ("slow.nap.flat_map_batch", "slow.sum.stateful_flat_map.stateful.stateful_batch"):
        moving = {counts.get((Count.ITEMS_IN, step_id, 0), 0) for counts in seen} - {0, 50}
        assert moving, f"{step_id}'s counter only ever showed nothing or everything"
    lines = [record.batch_report for record in caplog.records if hasattr(record, "batch_report")]
    assert len({line.items_in for line in lines if line.items_out == 0}) >= 2, lines
    assert lines[-1].items_out == 50
