"""The eight core operators and the runtime's error paths, on both engines."""

from __future__ import annotations

import importlib
from typing import Any, List, Tuple

import pytest
from support.oracle import Engine, assert_same_by_key, cause_chain, run_both, run_on


@pytest.mark.quick
def test_branch_merge_flat_map_batch_keep_order() -> None:
    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        nums = e.op.input("inp", flow, e.TestingSource(range(20), batch_size=3))
        doubled = e.op.flat_map_batch("double", nums, lambda batch: [x * 2 for x in batch])
        b = e.op.branch("even_tens", doubled, lambda x: x % 10 == 0)
        tens: List[Any] = []
        rest: List[Any] = []
        e.op.output("tens", b.trues, e.TestingSink(tens))
        merged = e.op.merge("merge", b.trues, e.op.redistribute("spread", b.falses))
        both: List[Any] = []
        e.op.output("both", merged, e.TestingSink(both))
        e.op.output("rest", b.falses, e.TestingSink(rest))
        return flow, {"tens": tens, "rest": rest, "both": both}

    bw, fs = run_both(build)
    assert fs["tens"] == bw["tens"] == [0, 10, 20, 30]
    assert fs["rest"] == bw["rest"]
    assert sorted(fs["both"]) == sorted(bw["both"]) == list(range(0, 40, 2))


def _sum_logic(e: Engine) -> Any:
    """A `stateful_batch` logic class of engine `e` with an EOF flush and discards."""

    class Summer(e.op.StatefulBatchLogic):  # type: ignore[misc,name-defined]
        def __init__(self, state: Any) -> None:
            self.total = state or 0

        def on_batch(self, values: List[int]) -> Any:
            self.total += sum(values)
            if self.total > 100:
                return [("big", self.total)], self.DISCARD
            return [("sum", self.total)], self.RETAIN

        def on_eof(self) -> Any:
            return [("eof", self.total)], self.DISCARD

        def snapshot(self) -> int:
            return self.total

    return Summer


@pytest.mark.quick
def test_stateful_batch_chained_layers_with_eof() -> None:
    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        items = [("a", 1), ("b", 50), ("a", 2), ("b", 60), ("c", 5), ("b", 1), ("a", 3)]
        s = e.op.input("inp", flow, e.TestingSource(items, batch_size=2))
        first = e.op.stateful_batch("first", s, _sum_logic(e))
        counted = e.op.flat_map_batch("rekey", first, lambda b: [(k, len(str(v))) for k, v in b])
        second = e.op.stateful_batch("second", counted, _sum_logic(e))
        out1: List[Any] = []
        out2: List[Any] = []
        e.op.output("out1", first, e.TestingSink(out1))
        e.op.output("out2", second, e.TestingSink(out2))
        return flow, {"out1": out1, "out2": out2}

    bw, fs = run_both(build)
    assert_same_by_key(bw, fs)
    assert ("a", ("eof", 6)) in fs["out1"]
    assert ("b", ("big", 110)) in fs["out1"]


def test_inspect_debug_runs_in_the_callers_process() -> None:
    seen: List[Any] = []
    flow_out: List[Any] = []

    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        s = e.op.input("inp", flow, e.TestingSource(["x", "y"]))
        s = e.op.inspect_debug("peek", s, lambda step, item, epoch, worker: seen.append((step, item, worker)))
        e.op.output("out", s, e.TestingSink(flow_out))
        return flow, {}

    run_on("flowspark", build)
    assert seen == [("df.peek", "x", 0), ("df.peek", "y", 0)]
    assert flow_out == ["x", "y"]


@pytest.mark.quick
def test_mapper_error_names_step_and_keeps_cause() -> None:
    def boom(batch: List[int]) -> List[int]:
        msg = "boom"
        raise KeyError(msg)

    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        s = e.op.input("inp", flow, e.TestingSource([1, 2]))
        e.op.output("out", e.op.flat_map_batch("explode", s, boom), e.TestingSink([]))
        return flow, {}

    for name in ("bytewax", "flowspark"):
        engine = Engine(name)
        with pytest.raises(engine.BytewaxRuntimeError) as info:
            run_on(name, build)
        assert "df.explode" in str(info.value)
        assert any(isinstance(c, KeyError) and c.args == ("boom",) for c in cause_chain(info.value))


def test_stateful_step_fed_bare_items_is_a_type_error() -> None:
    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        s = e.op.input("inp", flow, e.TestingSource([1]))
        e.op.output("out", e.op.stateful_batch("sum", s, _sum_logic(e)), e.TestingSink([]))
        return flow, {}

    for name in ("bytewax", "flowspark"):
        with pytest.raises(TypeError) as info:
            run_on(name, build)
        chain = " ".join(str(c) for c in cause_chain(info.value))
        assert "df.sum" in chain and "2-tuple" in chain and "int" in chain


@pytest.mark.parametrize(("items", "problem"), [([1], "2-tuple"), ([(1, "a")], "`str` keys")])
def test_partitioned_sink_fed_unkeyed_items_is_a_type_error(tmp_path: Any, items: List[Any], problem: str) -> None:
    def build(e: Engine) -> Tuple[Any, dict]:
        files = importlib.import_module(f"{e.name}.connectors.files")
        flow = e.Dataflow("df")
        s = e.op.input("inp", flow, e.TestingSource(items))
        e.op.output("out", s, files.FileSink(tmp_path / f"{e.name}.txt"))
        return flow, {}

    for name in ("bytewax", "flowspark"):
        with pytest.raises(TypeError) as info:
            run_on(name, build)
        chain = " ".join(str(c) for c in cause_chain(info.value))
        assert "df.out" in chain and problem in chain and "int" in chain


def test_flow_without_input_or_output_fails_at_run() -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.errors import FlowsparkRuntimeError
    from flowspark.testing import TestingSink, TestingSource, run_main

    with pytest.raises(FlowsparkRuntimeError, match="at least one input"):
        run_main(Dataflow("empty"))
    flow = Dataflow("no_out")
    op.input("inp", flow, TestingSource([1]))
    with pytest.raises(FlowsparkRuntimeError, match="at least one output"):
        run_main(flow)
    bad = Dataflow("bad_source")
    op.output("out", op.input("inp", bad, [1, 2]), TestingSink([]))  # type: ignore[arg-type]
    with pytest.raises(FlowsparkRuntimeError, match="source must subclass") as info:
        run_main(bad)
    assert isinstance(info.value.__cause__, TypeError)


def test_source_failure_names_step() -> None:
    def items() -> Any:
        yield 1
        msg = "disk on fire"
        raise ValueError(msg)

    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        s = e.op.input("inp", flow, e.TestingSource(items()))
        e.op.output("out", s, e.TestingSink([]))
        return flow, {}

    with pytest.raises(Engine("flowspark").BytewaxRuntimeError) as info:
        run_on("flowspark", build)
    assert "df.inp" in str(info.value)
    assert any(isinstance(c, ValueError) and "disk on fire" in str(c) for c in cause_chain(info.value))


def test_eof_marker_then_resume_continues_after_it(tmp_path: Any) -> None:
    from flowspark.recovery import RecoveryConfig

    def build(e: Engine) -> Tuple[Any, dict]:
        flow = e.Dataflow("df")
        src = e.TestingSource([("a", 1), ("a", 2), e.TestingSource.EOF(), ("a", 3), ("b", 4)])
        out: List[Any] = []

        def running(state: Any, v: int) -> Tuple[int, int]:
            total = (state or 0) + v
            return total, total

        s = e.op.stateful_map("sum", e.op.input("inp", flow, src), running)
        e.op.output("out", s, e.TestingSink(out))
        return flow, {"out": out}

    engine = Engine("flowspark")
    flow, outputs = build(engine)
    config = RecoveryConfig(tmp_path)
    engine.run_main(flow, recovery_config=config)
    assert outputs["out"] == [("a", 1), ("a", 3)]
    outputs["out"].clear()
    engine.run_main(flow, recovery_config=config)
    assert sorted(outputs["out"]) == [("a", 6), ("b", 4)]
    outputs["out"].clear()
    engine.run_main(flow, recovery_config=config)
    assert outputs["out"] == []
