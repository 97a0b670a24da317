"""`flowspark.visualize` against Bytewax 0.21.1's `bytewax.visualize`.

Each flow is built once per engine from the same code; Mermaid, JSON and
PlantUML text must then be identical, character for character (flow and
step ids carry no module names, so nothing needs rewriting).  The physical
plan is flowspark's own: it is checked against the runtime's plan and
groups, and against text written out here.
"""

import dataclasses
import json
import subprocess
from datetime import timedelta
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from support.event_time import ALIGN
from support.oracle import ENGINES, Engine
from support.processes import run_module

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.destinations import output_group, tap_group
from flowspark.engine.plan.groups import DEFAULT_BUCKETS, Groups, new_groups
from flowspark.engine.plan.physical_plan import PASS
from flowspark.engine.plan.plan import build_plan
from flowspark.engine.recovery.resume_check import META
from flowspark.errors import FlowsparkRuntimeError
from flowspark.inputs import DynamicSource
from flowspark.outputs import DynamicSink, MicroBatchSink, StatelessSinkPartition
from flowspark.recovery import RecoveryConfig, init_db_dir
from flowspark.run import cli_main
from flowspark.testing import TestingSink, TestingSource
from flowspark.visualize import physical_plan, to_mermaid, to_physical

ROOT = Path(__file__).resolve().parent.parent


def stateless_flow(e: Engine) -> Any:
    flow = e.Dataflow("stateless")
    nums = e.op.input("inp", flow, e.TestingSource([1, 2, 3]))
    doubled = e.op.map("double", nums, lambda x: x * 2)
    kept = e.op.filter("keep", doubled, lambda x: x > 1)
    pairs = e.op.flat_map("pairs", kept, lambda x: [x, x])
    halves = e.op.filter_map("halves", pairs, lambda x: x // 2 or None)
    nested = e.op.map("nest", halves, lambda x: [x])
    flat = e.op.flatten("flat", nested)
    split = e.op.branch("split", flat, lambda x: x % 2 == 0)
    evens = e.op.redistribute("spread", split.trues)
    both = e.op.merge("both", evens, split.falses, split.trues)
    seen = e.op.inspect("look", both)
    debugged = e.op.inspect_debug("debug", seen)
    keyed = e.op.key_on("key", debugged, str)
    valued = e.op.map_value("mv", keyed, lambda v: v + 1)
    fm = e.op.flat_map_value("fmv", valued, lambda v: [v])
    fv = e.op.filter_value("fv", fm, lambda v: v > 0)
    fmv = e.op.filter_map_value("fmapv", fv, lambda v: v)
    unkeyed = e.op.key_rm("unkey", fmv)
    e.op.output("out", unkeyed, e.TestingSink([]))
    e.op.output("out_falses", split.falses, e.TestingSink([]))
    return flow


def stateful_flow(e: Engine) -> Any:
    flow = e.Dataflow("stateful")
    nums = e.op.input("inp", flow, e.TestingSource([1, 2, 3]))
    keyed = e.op.key_on("key", nums, lambda x: str(x % 2))
    sm = e.op.stateful_map("sm", keyed, lambda s, v: (v, v))
    sfm = e.op.stateful_flat_map("sfm", sm, lambda s, v: (v, [v]))
    coll = e.op.collect("coll", sfm, timeout=timedelta(seconds=1), max_size=3)
    folded = e.op.fold_final("fold", keyed, lambda: 0, lambda a, v: a + v)
    reduced = e.op.reduce_final("red", keyed, lambda a, b: a + b)
    counted = e.op.count_final("cnt", nums, str)
    biggest = e.op.max_final("max", keyed)
    smallest = e.op.min_final("min", keyed)
    joined = e.op.join("join", folded, reduced, biggest, insert_mode="product", emit_mode="running")
    enriched = e.op.enrich_cached("enrich", smallest, lambda k: k, lambda cache, kv: (kv, cache.get(kv[0])))
    e.op.output("out1", coll, e.TestingSink([]))
    e.op.output("out2", joined, e.TestingSink([]))
    e.op.output("out3", counted, e.TestingSink([]))
    e.op.output("out4", enriched, e.TestingSink([]))
    return flow


def windowed_flow(e: Engine) -> Any:
    flow = e.Dataflow("windowed")
    events = e.op.input("inp", flow, e.TestingSource([("a", ALIGN)]))
    clock = e.win.EventClock(lambda v: v, wait_for_system_duration=timedelta(0))
    windower = e.win.TumblingWindower(timedelta(seconds=10), ALIGN)
    session = e.win.SessionWindower(timedelta(seconds=3))
    coll = e.win.collect_window("coll", events, clock, windower)
    counted = e.win.count_window("cnt", events, clock, session, lambda kv: kv[0])
    folded = e.win.fold_window("fold", events, clock, windower, list, lambda a, v: a + [v], lambda a, b: a + b)
    reduced = e.win.reduce_window("red", events, clock, windower, max)
    biggest = e.win.max_window("max", events, clock, windower)
    joined = e.win.join_window("join", clock, windower, events, coll.down, insert_mode="first")
    e.op.output("down", coll.down, e.TestingSink([]))
    e.op.output("late", coll.late, e.TestingSink([]))
    e.op.output("meta", coll.meta, e.TestingSink([]))
    merged = e.op.merge("all", counted.down, folded.down, reduced.down, biggest.down, joined.down)
    e.op.output("rest", merged, e.TestingSink([]))
    return flow


def custom_flow(e: Engine) -> Any:
    """A user-defined operator with `*args` and `**kwargs` stream ports and a dataclass result."""
    dataflow = import_module(f"{e.name}.dataflow")
    ops = e.op

    @dataclasses.dataclass(frozen=True)
    class Pair:
        left: dataflow.Stream
        right: dataflow.Stream
        label: str

    @dataflow.operator
    def fan(step_id: str, first: dataflow.Stream, *more: dataflow.Stream, **named: dataflow.Stream) -> Pair:
        everything = ops.merge("everything", first, *more, *named.values())
        split = ops.branch("split", everything, lambda x: bool(x))
        return Pair(ops.map("left", split.trues, str), split.falses, "not a stream")

    flow = e.Dataflow("custom")
    a = ops.input("a", flow, e.TestingSource([1]))
    b = ops.input("b", flow, e.TestingSource([2]))
    c = ops.input("c", flow, e.TestingSource([3]))
    pair = fan("fan", a, b, extra=c)
    ops.output("left_out", pair.left, e.TestingSink([]))
    ops.output("right_out", pair.right, e.TestingSink([]))
    return flow


FLOWS: Dict[str, Callable[[Engine], Any]] = {
    "stateless": stateless_flow,
    "stateful": stateful_flow,
    "windowed": windowed_flow,
    "custom": custom_flow,
}


def _views(engine_name: str, build: Callable[[Engine], Any]) -> Dict[str, str]:
    viz = import_module(f"{engine_name}.visualize")
    flow = build(Engine(engine_name))
    return {
        "mermaid": viz.to_mermaid(flow),
        "json": viz.to_json(flow),
        "plantuml": viz.to_plantuml(flow),
        "plantuml_recursive": viz.to_plantuml(flow, recursive=True),
    }


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_same_text_as_bytewax(name: str) -> None:
    bytewax_views, flowspark_views = (_views(engine, FLOWS[name]) for engine in ENGINES)
    for view, text in bytewax_views.items():
        assert flowspark_views[view] == text, view


def test_mermaid_text() -> None:
    flow = Dataflow("df")
    nums = op.input("inp", flow, TestingSource([1, 2]))
    split = op.branch("br", nums, lambda x: x > 1)
    keyed = op.key_on("key", split.trues, str)
    counts = op.stateful_map("sm", keyed, lambda s, v: (v, v))
    joined = op.join("j", counts, keyed)
    op.output("out", op.merge("mg", joined, split.falses), TestingSink([]))
    assert to_mermaid(flow) == "\n".join(
        [
            "flowchart TD",
            'subgraph "df (Dataflow)"',
            'df.inp["inp (input)"]',
            'df.br["br (branch)"]',
            'df.inp -- "down → up" --> df.br',
            'df.key["key (key_on)"]',
            'df.br -- "trues → up" --> df.key',
            'df.sm["sm (stateful_map)"]',
            'df.key -- "down → up" --> df.sm',
            'df.j["j (join)"]',
            'df.sm -- "down → sides" --> df.j',
            'df.key -- "down → sides" --> df.j',
            'df.mg["mg (merge)"]',
            'df.j -- "down → ups" --> df.mg',
            'df.br -- "falses → ups" --> df.mg',
            'df.out["out (output)"]',
            'df.mg -- "down → up" --> df.out',
            "end",
        ]
    )


def _two_layers() -> Dataflow:
    """input -> key -> first (stateful) -> branch -> second (stateful) / small map; a tap."""
    flow = Dataflow("two")
    nums = op.input("inp", flow, TestingSource([1, 2, 3]))
    keyed = op.key_on("key", nums, lambda x: str(x % 2))
    first = op.stateful_map("first", keyed, lambda s, v: ((s or 0) + v, (s or 0) + v))
    split = op.branch("big", first, lambda kv: kv[1] > 2)
    second = op.stateful_map("second", split.trues, lambda s, v: (v, -v))
    small = op.map_value("small", split.falses, lambda v: v * 10)
    watched = op.inspect_debug("watch", small)
    op.output("out_big", second, TestingSink([]))
    op.output("out_small", watched, TestingSink([]))
    op.output("out_raw", keyed, TestingSink([]))
    return flow


def test_physical_plan_is_the_runtimes_plan() -> None:
    flow = _two_layers()
    pp = physical_plan(flow)
    plan = build_plan(flow)
    assert plan.layers == [1, 2]
    assert [[run.head for run in runs] for runs in pp.layers] == [
        [plan.stateful[index].step_id for index in plan.steps_in_layer(layer)] for layer in range(1, plan.depth + 1)
    ]
    assert [run.groups for runs in pp.layers for run in runs] == Groups.balanced(
        len(plan.stateful), DEFAULT_BUCKETS
    ).names
    assert pp.groups == new_groups(plan)
    assert [out.step_id for out in pp.outputs] == [step.step_id for step in plan.outputs]
    assert [out.layout for out in pp.outputs] == plan.sinks
    assert [out.group for out in pp.outputs] == [output_group(i, PASS) for i in range(len(plan.outputs))]
    assert [tap.group for tap in pp.taps] == [tap_group(0, PASS)]
    assert {end.step_id: end.fed_by for end in [*pp.outputs, *pp.taps]} == {
        "two.out_big": ["layer 2"],
        "two.out_small": ["layer 1"],
        "two.out_raw": ["source"],
        "two.watch": ["layer 1"],
    }


def test_physical_text_of_two_chained_stateful_steps_and_a_branch() -> None:
    first, second = (" ".join(names) for names in Groups.balanced(2, DEFAULT_BUCKETS).names)
    dynamic = "TestingSink (DynamicSink), one partition per worker, picked by the pass that made the items"
    assert to_physical(_two_layers()) == "\n".join(
        [
            "Physical plan of 'two': one Spark Structured Streaming query, 2 stateful layer(s), 2 shuffle(s), "
            f"{DEFAULT_BUCKETS} key buckets per stateful step",
            "",
            "Stage source: flowspark streaming source; read() runs the inputs and the steps fused after them",
            "  input two.inp (input): TestingSource (FixedPartitionedSource), partitions listed at the start",
            "    fused two.key.map.flat_map_batch (flat_map_batch)",
            "",
            "Shuffle 1: groupBy(grp), one group per key bucket; other rows pass through",
            f"  two.first.stateful_flat_map.stateful.stateful_batch: {first}",
            "Stage layer 1: transformWithState runs these stateful steps and the steps fused after them",
            "  stateful two.first.stateful_flat_map.stateful.stateful_batch (stateful_batch) <- source",
            "    fused two.big (branch)",
            "    fused two.small.map.flat_map_batch (flat_map_batch)",
            "    fused two.watch (inspect_debug)",
            "",
            "Shuffle 2: groupBy(grp), one group per key bucket; other rows pass through",
            f"  two.second.stateful_flat_map.stateful.stateful_batch: {second}",
            "Stage layer 2: transformWithState runs these stateful steps and the steps fused after them",
            "  stateful two.second.stateful_flat_map.stateful.stateful_batch (stateful_batch) <- layer 1",
            "",
            "Driver: foreachBatch runs the outputs and inspect_debug taps, once per micro-batch; group C ends the run; "
            "partitioned outputs written in Spark's tasks get one job per micro-batch, repartitioned by sink partition",
            f"  output two.out_big <- layer 2 as O0@<pass>: {dynamic}; written in the driver",
            f"  output two.out_small <- layer 1 as O1@<pass>: {dynamic}; written in the driver",
            f"  output two.out_raw <- source as O2@<pass>: {dynamic}; written in the driver",
            "  tap two.watch <- layer 1 as T0@<pass>",
        ]
    )


def test_physical_plan_names_the_groups_a_run_records(tmp_path: Path) -> None:
    """The group names shown are those the runner gives Spark (and keeps in the recovery directory) with several
    workers; a run that keeps one worker's order gives each stateful step one bucket."""
    flow = _two_layers()
    for workers, expected in ((2, physical_plan(flow).groups.names), (1, Groups.balanced(2, 1).names)):
        recovery = tmp_path / str(workers)
        recovery.mkdir()
        init_db_dir(recovery, 1)
        cli_main(flow, workers_per_process=workers, recovery_config=RecoveryConfig(str(recovery)))
        (meta,) = recovery.rglob(META)
        assert json.loads(meta.read_text())["groups"] == expected


class _Polled(DynamicSource[Any]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        msg = "never built to show the plan"
        raise AssertionError(msg)


class _Batches(MicroBatchSink[Any]):
    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[Any]) -> None:
        pass


class _Remote(DynamicSink[Any]):
    lives_in_driver = False

    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSinkPartition[Any]:
        msg = "never built to show the plan"
        raise AssertionError(msg)


def test_physical_plan_shows_sources_and_where_outputs_are_written(tmp_path: Path) -> None:
    flow = Dataflow("io")
    fixed = op.input("fixed", flow, TestingSource([("k", "v")]))
    polled = op.input("polled", flow, _Polled())
    op.output("file", fixed, FileSink(tmp_path / "out.txt"))
    op.output("dir", fixed, DirSink(tmp_path, 2))
    op.output("batches", polled, _Batches())
    op.output("remote", fixed, _Remote())
    lines = to_physical(flow, list_parts=True).splitlines()
    assert "  input io.fixed (input): TestingSource (FixedPartitionedSource), partitions 'iterable'" in lines
    assert "  input io.polled (input): _Polled (DynamicSource), one partition per worker" in lines
    in_tasks = (
        "written in Spark's tasks, one per partition (in the driver when the run keeps one worker's order, "
        "or on a local master when the sink has one partition)"
    )
    assert (
        f"  output io.file <- source as P0/<part>@<pass>: FileSink (FixedPartitionedSink), partition "
        f"{str(tmp_path / 'out.txt')!r}; "
        f"the workers check the keys and send bare values; {in_tasks}"
    ) in lines
    assert (
        "  output io.dir <- source as P1/<part>@<pass>: DirSink (FixedPartitionedSink), partitions 'part_0', 'part_1', "
        f"picked by part_fn(key); {in_tasks}"
    ) in lines
    assert (
        "  output io.batches <- source as O2@<pass>: _Batches (MicroBatchSink), the whole micro-batch in one call; "
        "written in the driver"
    ) in lines
    assert (
        "  output io.remote <- source with no rows: _Remote (DynamicSink), one partition per worker, picked by the pass "
        "that made the items; written in the Spark task whose pass made the items, with no shuffle "
        "(in the driver when the run keeps one worker's order)"
    ) in lines
    assert physical_plan(flow).outputs[3].group == ""


def test_physical_plan_step_in_two_stages_and_bucket_count() -> None:
    """A merge fed by the source and by a stateful step runs in both stages."""
    flow = Dataflow("mix")
    nums = op.input("inp", flow, TestingSource([("a", 1)]))
    summed = op.stateful_map("sum", nums, lambda s, v: (v, v))
    both = op.merge("both", nums, summed)
    op.output("out", both, TestingSink([]))
    plan = physical_plan(flow, buckets=4)
    assert plan.inputs[0].run.fused == ["mix.both"]
    assert "mix.both" in plan.layers[0][0].fused
    assert plan.outputs[0].fed_by == ["source", "layer 1"]
    assert plan.layers[0][0].groups == Groups.balanced(1, 4).names[0]
    groups = " ".join(Groups.balanced(1, 4).names[0])
    assert f"  mix.sum.stateful_flat_map.stateful.stateful_batch: {groups}" in to_physical(flow, buckets=4)


def test_physical_plan_of_a_flow_that_cannot_run() -> None:
    flow = Dataflow("empty")
    op.input("inp", flow, TestingSource([1]))
    with pytest.raises(FlowsparkRuntimeError, match="at least one output"):
        to_physical(flow)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("flowspark.visualize", *args, cwd=ROOT, timeout=120)


def _bytewax_wordcount() -> Any:
    """flowspark/examples/wordcount.py with its imports pointed at Bytewax."""
    path = ROOT / "flowspark" / "examples" / "wordcount.py"
    code = path.read_text().replace("flowspark", "bytewax")
    namespace: Dict[str, Any] = {"__file__": str(path), "__name__": "bytewax_wordcount"}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace["flow"]


def test_cli_on_wordcount() -> None:
    from bytewax.visualize import to_json as bytewax_json
    from bytewax.visualize import to_mermaid as bytewax_mermaid
    from bytewax.visualize import to_plantuml as bytewax_plantuml

    bytewax_flow = _bytewax_wordcount()
    mermaid = _cli("examples.wordcount:flow")
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout == bytewax_mermaid(bytewax_flow) + "\n"
    as_json = _cli("examples.wordcount:flow", "-o", "json")
    assert as_json.stdout == bytewax_json(bytewax_flow) + "\n"
    plantuml = _cli("flowspark/examples/wordcount.py", "-o", "plantuml", "-r")
    assert plantuml.stdout == bytewax_plantuml(bytewax_flow, recursive=True) + "\n"
    physical = _cli("examples.wordcount:flow", "--physical")
    assert physical.returncode == 0, physical.stderr
    lines: List[str] = physical.stdout.splitlines()
    assert any(line.startswith("  input wordcount.inp (input): ") for line in lines)
    groups = " ".join(Groups.balanced(1, DEFAULT_BUCKETS).names[0])
    assert f"  wordcount.count.sum.fold_final.stateful.stateful_batch: {groups}" in lines
    assert any(line.startswith("  output wordcount.out <- layer 1 as O0@<pass>: ") for line in lines)
    bad = _cli("examples.wordcount:flow", "-o", "dot")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.parametrize("example", ["wordcount", "user_sessions", "live_windows", "kafka_windowed", "file_to_parquet"])
def test_every_example_renders_all_its_steps(example: str) -> None:
    flow = import_module(f"examples.{example}").flow
    mermaid = to_mermaid(flow)
    for step in flow.substeps:
        assert f'{step.step_id}["{step.step_name} ({step.op_type})"]' in mermaid
    physical = to_physical(flow)
    for core in flow.core_steps():
        kind = core.config.kind.value
        shown = f"output {core.step_id} <- " if kind == "output" else f"{core.step_id} ({kind})"
        assert shown in physical
