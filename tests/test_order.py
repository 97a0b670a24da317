"""One worker's order: `run_main` gives whole output lists in Bytewax's order.

A Bytewax worker polls every source partition once per round; a stateful
step takes each round's values key by key in sorted key order, wakes due
keys before the next round, and calls `on_eof` in sorted key order.
flowspark reads many rounds per micro-batch in parallel Spark tasks and
must still give the same lists, item for item.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional, Tuple

import pytest
from support.oracle import Engine, Outputs, run_both


@pytest.mark.parametrize("shape", ["tap_output_tap", "deeper_step_created_first", "after_a_stateful_step", "merge"])
def test_a_round_reaches_the_flows_outputs_and_taps_in_the_order_the_flow_created_them(shape: str) -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("places")
        seen: List[Any] = []

        def tap(step_id: str, stream: Any) -> None:
            e.op.inspect(step_id, stream, lambda where, x: seen.append((where, x)))

        nums = e.op.input("inp", flow, e.TestingSource([1, 2, 3]))
        if shape == "tap_output_tap":
            tap("a", nums)
            e.op.output("out", e.op.map("tag", nums, lambda x: ("out", x)), e.TestingSink(seen))
            tap("b", nums)
        elif shape == "deeper_step_created_first":
            tap("c", e.op.map("m", nums, lambda x: x * 10))
            tap("a", nums)
        elif shape == "after_a_stateful_step":
            keyed = e.op.key_on("key", nums, lambda _: "k")
            tap("after", e.op.stateful_map("sum", keyed, lambda total, x: ((total or 0) + x,) * 2))
            tap("before", keyed)
        else:
            tens = e.op.map("tens", nums, lambda x: x * 10)
            tap("t", tens)
            hundreds = e.op.map("hundreds", nums, lambda x: x * 100)
            tap("h", hundreds)
            tap("merged", e.op.merge("both", tens, hundreds))
        return flow, {"seen": seen}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out


@pytest.mark.parametrize(
    "below",
    ["nothing", "redistribute", "branch", "merge", "map", "two_maps", "inspect_debug", "stateful_map", "max_final"],
)
def test_the_end_of_input_reaches_a_step_later_below_each_map_inspect_or_stateful_step(below: str) -> None:
    # Step "a" is created and inspected first; the steps between it and the
    # keyed stream decide whether its `on_eof` comes before or after "b"'s.
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("ends")
        seen: List[Any] = []
        keyed = e.op.key_on("key", e.op.input("inp", flow, e.TestingSource([1, 2, 3])), lambda _: "k")
        upstream = {
            "nothing": lambda: keyed,
            "redistribute": lambda: e.op.redistribute("r", keyed),
            "branch": lambda: e.op.branch("br", keyed, lambda _: True).trues,
            "merge": lambda: e.op.merge("mg", keyed),
            "map": lambda: e.op.map_value("m", keyed, lambda x: x),
            "two_maps": lambda: e.op.map_value("m2", e.op.map_value("m1", keyed, lambda x: x), lambda x: x),
            "inspect_debug": lambda: e.op.inspect_debug("dbg", keyed, inspector=lambda *_: None),
            "stateful_map": lambda: e.op.stateful_map("sm", keyed, lambda st, x: (st, x)),
            "max_final": lambda: e.op.max_final("first", keyed),
        }[below]()
        a = e.op.max_final("a", upstream)
        b = e.op.min_final("b", keyed)
        e.op.inspect("ia", a, lambda where, x: seen.append((where, x)))
        e.op.inspect("ib", b, lambda where, x: seen.append((where, x)))
        return flow, {"seen": seen}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out


def test_merge_takes_one_batch_of_each_source_per_round() -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("merge")
        a = e.op.input("a", flow, e.TestingSource([1, 3, 5]))
        b = e.op.input("b", flow, e.TestingSource([2, 4, 6]))
        c = e.op.input("c", flow, e.TestingSource([100, 200, 300]))
        out: List[Any] = []
        e.op.output("out", e.op.merge("all", a, b, c), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert bytewax_out["out"] == [1, 2, 100, 3, 4, 200, 5, 6, 300]
    assert flowspark_out == bytewax_out


def test_sources_of_different_lengths_and_batch_sizes_interleave_by_round() -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("rounds")
        a = e.op.input("a", flow, e.TestingSource(list(range(10)), batch_size=3))
        b = e.op.input("b", flow, e.TestingSource(["x", "y"], batch_size=1))
        out: List[Any] = []
        e.op.output("out", e.op.merge("both", a, b), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out


def test_a_round_follows_the_order_merge_takes_its_inputs_in() -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("merge_order")
        a = e.op.input("a", flow, e.TestingSource([1, 3, 5, 7, 9], batch_size=2))
        b = e.op.input("b", flow, e.TestingSource([2, 4, 6], batch_size=2))
        c = e.op.input("c", flow, e.TestingSource([100, 200, 300]))
        out: List[Any] = []
        e.op.output("out", e.op.merge("all", c, a, b), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert bytewax_out["out"] == [100, 1, 3, 2, 4, 200, 5, 7, 6, 300, 9]
    assert flowspark_out == bytewax_out


@pytest.mark.parametrize("min_first", [True, False], ids=["min-first", "max-first"])
def test_stateful_steps_merged_come_in_the_order_merge_takes_them(min_first: bool) -> None:
    items = [("a", 3), ("b", 5), ("a", 1), ("c", 2)]

    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("merged_steps")
        nums = e.op.input("inp", flow, e.TestingSource(items, batch_size=4))
        highest = e.op.map("tag_max", e.op.max_final("max", nums), lambda kv: ("max",) + kv)
        lowest = e.op.map("tag_min", e.op.min_final("min", nums), lambda kv: ("min",) + kv)
        sums = e.op.stateful_map("sum", nums, lambda total, v: ((total or 0) + v, ("sum", (total or 0) + v)))
        counts = e.op.stateful_map("count", nums, lambda n, v: ((n or 0) + 1, ("count", (n or 0) + 1)))
        finals: List[Any] = []
        running: List[Any] = []
        e.op.output(
            "finals",
            e.op.merge("ends", *((lowest, highest) if min_first else (highest, lowest))),
            e.TestingSink(finals),
        )
        e.op.output(
            "running", e.op.merge("runs", *((counts, sums) if min_first else (sums, counts))), e.TestingSink(running)
        )
        return flow, {"finals": finals, "running": running}

    bytewax_out, flowspark_out = run_both(build)
    first = "min" if min_first else "max"
    assert [tag for tag, _, _ in bytewax_out["finals"][:3]] == [first] * 3
    assert flowspark_out == bytewax_out


def test_end_of_input_emits_in_sorted_key_order() -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("count")
        words = e.op.input("inp", flow, e.TestingSource(list("cabzabqa")))
        out: List[Any] = []
        e.op.output("out", e.op.count_final("count", words, lambda w: w), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert bytewax_out["out"] == [("a", 3), ("b", 2), ("c", 1), ("q", 1), ("z", 1)]
    assert flowspark_out == bytewax_out


@pytest.mark.parametrize("batch_size", [1, 3])
def test_stateful_outputs_of_several_keys_come_round_by_round(batch_size: int) -> None:
    items = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("c", 5), ("d", 1), ("a", 3)]

    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("sums")
        nums = e.op.input("inp", flow, e.TestingSource(items, batch_size=batch_size))
        sums = e.op.stateful_map("sum", nums, lambda total, v: ((total or 0) + v, (total or 0) + v))
        out: List[Any] = []
        e.op.output("out", sums, e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out


def test_two_partitions_share_a_round_in_a_stateful_step_and_chained_steps_keep_the_order() -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("chain")
        a = e.op.input("a", flow, e.TestingSource([("b", 1), ("b", 2), ("a", 5)]))
        b = e.op.input("b", flow, e.TestingSource([("a", 1), ("c", 2)]))
        sums = e.op.stateful_map("sum", e.op.merge("both", a, b), lambda t, v: ((t or 0) + v, (t or 0) + v))
        parity = e.op.map("parity", sums, lambda kv: ("odd" if kv[1] % 2 else "even", f"{kv[0]}{kv[1]}"))
        joined = e.op.stateful_map("seen", parity, lambda s, v: ((s or "") + v, (s or "") + v))
        first: List[Any] = []
        second: List[Any] = []
        e.op.output("first", sums, e.TestingSink(first))
        e.op.output("second", joined, e.TestingSink(second))
        return flow, {"first": first, "second": second}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out


class _Waker:
    """Asks to be woken (in the past) after every batch; reports every call."""

    def __init__(self, engine: Engine) -> None:
        base = engine.op.StatefulBatchLogic

        class Logic(base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                self.due: Optional[datetime] = None

            def on_batch(self, values: List[int]) -> Tuple[List[Any], bool]:
                self.due = datetime.now(timezone.utc) - timedelta(seconds=1)
                return [("batch", list(values))], False

            def on_notify(self) -> Tuple[List[Any], bool]:
                self.due = None
                return [("notify",)], False

            def on_eof(self) -> Tuple[List[Any], bool]:
                return [("eof",)], False

            def notify_at(self) -> Optional[datetime]:
                return self.due

            def snapshot(self) -> None:
                return None

        self.logic = Logic


@pytest.mark.parametrize("batch_size", [1, 2])
def test_due_wake_ups_fire_between_source_batches_with_a_zero_epoch_interval(batch_size: int) -> None:
    items = [("k", 1), ("k", 2), ("j", 3), ("k", 4), ("j", 5)]

    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("wakes")
        nums = e.op.input("inp", flow, e.TestingSource(items, batch_size=batch_size))
        logic = _Waker(e).logic
        out: List[Any] = []
        e.op.output("out", e.op.stateful_batch("wake", nums, lambda _: logic()), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build, epoch_interval=timedelta(0))
    assert bytewax_out["out"][1] == ("k", ("notify",))
    assert flowspark_out == bytewax_out


@pytest.mark.parametrize("interval", [None, timedelta(0)])
def test_inspect_debug_epochs_count_from_one_as_bytewax_does(interval: Optional[timedelta]) -> None:
    def build(e: Engine) -> Tuple[Any, Outputs]:
        flow = e.Dataflow("epochs")
        nums = e.op.input("inp", flow, e.TestingSource(list(range(6)), batch_size=2))
        seen: List[Any] = []
        e.op.inspect_debug("look", nums, lambda step_id, item, epoch, worker: seen.append((item, epoch, worker)))
        return flow, {"seen": seen}

    kwargs = {} if interval is None else {"epoch_interval": interval}
    bytewax_out, flowspark_out = run_both(build, **kwargs)
    assert bytewax_out["seen"][0][1] == 1
    assert flowspark_out == bytewax_out


def test_inputs_rank_in_the_order_the_first_merge_takes_them() -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.engine.plan.plan import build_plan, input_ranks
    from flowspark.testing import TestingSink, TestingSource

    flow = Dataflow("ranks")
    a = op.input("a", flow, TestingSource([1]))
    b = op.input("b", flow, TestingSource([2]))
    c = op.input("c", flow, TestingSource([3]))
    unused = op.input("unused", flow, TestingSource([4]))
    op.output("out", op.merge("all", c, op.map("m", a, str), b), TestingSink([]))
    op.inspect("look", unused)
    assert input_ranks(build_plan(flow)) == [1, 2, 0, 3]


def test_the_writer_puts_runs_from_all_tasks_in_order(tmp_path: Any) -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.engine.plan import chunks
    from flowspark.engine.plan.plan import build_plan
    from flowspark.engine.plan.route import Collector
    from flowspark.engine.sinks.sink_writer import SinkWriter
    from flowspark.testing import TestingSink, TestingSource

    flow = Dataflow("writer")
    out: List[Any] = []
    op.output("out", op.input("inp", flow, TestingSource([])), TestingSink(out))
    plan = build_plan(flow)
    plan.ordered = True
    rows: List[chunks.Row] = []
    for origin, runs in (
        ("000.00001.000", [((0, 0, 1, ""), ["b0"]), ((1, 0, 1, ""), ["b1"])]),
        ("000.00000.000", [((0, 0, 0, ""), ["a0"]), ((2, 0, 0, ""), ["a2"])]),
        ("S0/3", [((1, 1, 0, "z"), ["z1"]), ((1, 1, 0, "k"), ["k1"])]),
    ):
        collector = Collector(origin, ordered=True)
        for order, items in runs:
            collector.outputs.setdefault(0, chunks.ItemChunk("writer.out")).extend(items)
            collector.end_run(order)
        rows.extend(collector.rows(iter(range(10))))
    SinkWriter(plan, str(tmp_path))._write(rows, 0, [], {})
    assert out == ["a0", "b0", "b1", "k1", "z1", "a2"]
