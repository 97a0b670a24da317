"""The plan a flow runs as on Spark, step by step: `physical_plan` and its text, `to_physical`.

It is made by the runner's own planning functions: the source stage, one
`transformWithState` stage per stateful layer with the shuffle in front of
it (and the Spark group of every key bucket), and the driver's
`foreachBatch` with each output's sink partitions and where they are
written.  `python -m flowspark.visualize my_module:flow -p` prints it.

    >>> import flowspark.operators as op
    >>> from flowspark.dataflow import Dataflow
    >>> from flowspark.testing import TestingSink, TestingSource
    >>> flow = Dataflow("plan_eg")
    >>> op.output("out", op.input("inp", flow, TestingSource([1, 2])), TestingSink([]))
    >>> to_physical(flow).splitlines()[0].startswith("Physical plan of 'plan_eg': one Spark Structured Streaming query")
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set

from flowspark._step_config import STATELESS_KINDS, CoreConfig, StepKind
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.destinations import CONTROL_GROUP, output_group, sink_parts_pattern, tap_group
from flowspark.engine.plan.groups import DEFAULT_BUCKETS, Groups, new_groups
from flowspark.engine.plan.plan import CoreStep, Plan, SinkLayout, SinkRouting, build_plan, for_workers, source_parts
from flowspark.inputs import DynamicSource, FixedPartitionedSource
from flowspark.outputs import DynamicSink, FixedPartitionedSink, MicroBatchSink

SOURCE = "source"
"""Stage label of the flowspark streaming source (inputs and what is fused after them)."""

PASS = "<pass>"
"""Stands for the pass that made a row (a source piece or a stateful group) in an output's or tap's group name."""


def layer_stage(layer: int) -> str:
    """Stage label of stateful layer `layer`'s `transformWithState` operator."""
    return f"layer {layer}"


@dataclass(frozen=True)
class PhysicalRun:
    """A step that starts a fused pass, and the stateless core steps the pass runs after it.

    `head` is an input's or a stateful step's id; `fused` lists, in flow
    order, the stateless core steps its items pass through before they reach
    a stateful step, an output or a tap.  `fed_by` names the stages whose
    rows reach `head` (empty for inputs).  `groups` are a stateful step's
    Spark groups, one per key bucket (empty for inputs).
    """

    head: str
    kind: StepKind
    fused: List[str]
    fed_by: List[str] = field(default_factory=list)
    groups: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class PhysicalInput:
    """An input, its source and, if listed, its partitions."""

    run: PhysicalRun
    source: str
    """The source's class and the flowspark base class it subclasses."""
    partitioned: bool
    """A `FixedPartitionedSource`; else a `DynamicSource`, with one partition per worker."""
    parts: Optional[List[str]]
    """A partitioned source's `list_parts()`, when asked for; None otherwise."""


@dataclass(frozen=True)
class PhysicalTap:
    """An `inspect_debug` tap, run on the driver from the rows of group `group`."""

    step_id: str
    group: str
    """The group name of its rows, with `PASS` for the pass that made them."""
    fed_by: List[str]


@dataclass(frozen=True)
class PhysicalOutput(PhysicalTap):
    """An output: the group(s) of its rows, and how and where its items are written.

    `group` is empty for an output written by the passes that make its
    items: it has no rows.
    """

    sink: str
    """The sink's class and the flowspark base class it subclasses."""
    layout: SinkLayout
    """How the items reach the sink's partitions (the plan's `sinks`)."""


@dataclass(frozen=True)
class PhysicalPlan:
    """The runtime's plan of a flow, laid out stage by stage.

    `plan` is what `build_plan` gives the runner and `groups` what a fresh
    run records (`groups.new_groups`).  `layers[i]` has one run per
    stateful step of layer `i + 1`, in the order of `plan.steps_in_layer`,
    as that layer's `transformWithState` processor runs them.
    """

    plan: Plan
    groups: Groups
    inputs: List[PhysicalInput]
    layers: List[List[PhysicalRun]]
    outputs: List[PhysicalOutput]
    taps: List[PhysicalTap]
    kinds: Dict[str, StepKind]
    """Each core step's kind."""

    @property
    def flow_id(self) -> str:
        """The flow's id."""
        return self.plan.flow_id


def _stage_order(stages: Set[str]) -> List[str]:
    def rank(stage: str) -> int:
        return 0 if stage == SOURCE else int(stage.split()[-1])

    return sorted(stages, key=rank)


def _class_of(connector: Any, bases: Sequence[type]) -> str:
    base = next(b for b in bases if isinstance(connector, b))
    name = type(connector).__name__
    return name if name == base.__name__ else f"{name} ({base.__name__})"


def physical_plan(flow: Dataflow, buckets: int = DEFAULT_BUCKETS, list_parts: bool = False) -> PhysicalPlan:
    """The plan the runner makes for `flow`, laid out over the stages of its Spark query.

    The steps, layers, sinks' layouts and group names come from the
    runtime's own planner (`build_plan`, `for_workers`, `new_groups`); the
    fused passes follow the workers' plan as `route.Router` does.  A
    stateless step belongs to the source stage when an input reaches it
    without crossing a stateful step, and to layer L's stage when a stateful
    step of layer L reaches it likewise; a step reached both ways runs in
    both.  `buckets` is the number of key buckets per stateful step.  With
    `list_parts`, partitioned sources list their partitions (which may
    reach an external system, as Kafka's do).  Raises as `build_plan` does
    for a flow that can't run (no input, no output, a wrong source or sink).
    """
    plan = build_plan(flow)
    workers = for_workers(plan)
    groups = new_groups(plan, buckets)
    order = {step.step_id: i for i, step in enumerate(flow.core_steps())}
    stages_of: Dict[str, Set[str]] = {}

    def fused_after(head: CoreStep[CoreConfig], stage: str) -> List[str]:
        """Stateless steps reached from `head` before any stateful step or output; taps pass items on."""
        seen: Set[str] = set()
        todo = list(head.config.downs)
        while todo:
            stream_id = todo.pop()
            for consumer in workers.consumers.get(stream_id, ()):
                step = consumer.step
                stages_of.setdefault(step.step_id, set()).add(stage)
                if step.config.kind in STATELESS_KINDS and step.step_id not in seen:
                    seen.add(step.step_id)
                    todo.extend(step.config.downs)
        return sorted(seen, key=order.__getitem__)

    parts: Dict[int, List[str]] = {}
    if list_parts:
        for index, name in source_parts(plan):
            parts.setdefault(index, []).append(name)
    inputs = []
    for index, step in enumerate(plan.inputs):
        partitioned = isinstance(step.config.source, FixedPartitionedSource)
        inputs.append(
            PhysicalInput(
                PhysicalRun(step.step_id, StepKind.INPUT, fused_after(step, SOURCE)),
                _class_of(step.config.source, (FixedPartitionedSource, DynamicSource)),
                partitioned,
                parts.get(index, []) if list_parts and partitioned else None,
            )
        )
    fused = {
        index: fused_after(step, layer_stage(layer))
        for index, (step, layer) in enumerate(zip(workers.stateful, workers.layers))
    }
    layers = [
        [
            PhysicalRun(
                workers.stateful[index].step_id,
                StepKind.STATEFUL_BATCH,
                fused[index],
                _stage_order(stages_of.get(workers.stateful[index].step_id, set())),
                groups.names[index],
            )
            for index in workers.steps_in_layer(layer)
        ]
        for layer in range(1, workers.depth + 1)
    ]
    outputs = [
        PhysicalOutput(
            step.step_id,
            _output_group(index, layout),
            _stage_order(stages_of.get(step.step_id, set())),
            _class_of(step.config.sink, (FixedPartitionedSink, DynamicSink, MicroBatchSink)),
            layout,
        )
        for index, (step, layout) in enumerate(zip(plan.outputs, plan.sinks))
    ]
    taps = [
        PhysicalTap(step.step_id, tap_group(index, PASS), _stage_order(stages_of.get(step.step_id, set())))
        for index, step in enumerate(plan.taps)
    ]
    kinds = {step.step_id: step.config.kind for step in flow.core_steps() if step.config is not None}
    return PhysicalPlan(plan, groups, inputs, layers, outputs, taps, kinds)


def _fed(stages: Sequence[str]) -> str:
    return ", ".join(stages) if stages else "nothing"


def _output_group(index: int, layout: SinkLayout) -> str:
    """The group of an output's rows, as `PhysicalOutput.group` shows it."""
    if layout.in_making_task:
        return ""
    return sink_parts_pattern(index, PASS) if layout.in_executors else output_group(index, PASS)


def _layout_text(layout: SinkLayout) -> str:
    if layout.in_executors:
        where = (
            "; written in Spark's tasks, one per partition (in the driver when the run keeps one worker's order, "
            "or on a local master when the sink has one partition)"
        )
    elif layout.in_making_task:
        where = (
            "; written in the Spark task whose pass made the items, with no shuffle "
            "(in the driver when the run keeps one worker's order)"
        )
    else:
        where = "; written in the driver"
    return _routing_text(layout) + where


def _routing_text(layout: SinkLayout) -> str:
    names = ", ".join(repr(name) for name in layout.parts) or "none"
    if layout.routing is SinkRouting.ONE_PART:
        return f"partition {names}; the workers check the keys and send bare values"
    if layout.routing is SinkRouting.BY_KEY:
        return f"partitions {names}, picked by part_fn(key)"
    if layout.routing is SinkRouting.BY_PASS:
        return "one partition per worker, picked by the pass that made the items"
    return "the whole micro-batch in one call"


def to_physical(flow: Dataflow, buckets: int = DEFAULT_BUCKETS, list_parts: bool = False) -> str:
    """Describe, as text, the runtime's plan: which core steps run in which stage of the Spark query.

    The query reads: the source stage (every input, with the stateless steps
    fused after it, inside the flowspark data source's `read()`), then per
    stateful layer a shuffle (`groupBy("grp")`, one group per key bucket of
    each of the layer's steps, named as the runtime names them; rows bound
    elsewhere pass through) and a `transformWithState` stage running the
    layer's steps and the stateless steps fused after them, and last the
    driver's `foreachBatch`, which runs the outputs (each with its sink's
    partitions, and whether they are written in the driver, in the tasks
    of the job it starts per micro-batch, or in the tasks whose passes made
    the items) and the `inspect_debug` taps.
    The plan is shown for a run of several workers on a cluster; one that
    keeps one worker's order (`run_main`, `-w 1`) writes every sink in the
    driver, and so does a local master for a sink of one partition
    (`placed_for_machines`).
    `list_parts` is as for `physical_plan`.
    """
    pp = physical_plan(flow, buckets, list_parts)

    def named(step_id: str, kind: StepKind) -> str:
        return f"{step_id} ({kind.value})"

    def fused(run: PhysicalRun) -> List[str]:
        return [f"    fused {named(step_id, pp.kinds[step_id])}" for step_id in run.fused]

    depth = len(pp.layers)
    lines = [
        f"Physical plan of {pp.flow_id!r}: one Spark Structured Streaming query, "
        f"{depth} stateful layer(s), {depth} shuffle(s), {pp.groups.buckets} key buckets per stateful step",
        "",
        "Stage source: flowspark streaming source; read() runs the inputs and the steps fused after them",
    ]
    for inp in pp.inputs:
        if inp.parts is not None:
            shown = ", ".join(repr(name) for name in inp.parts) or "none"
            where = f"partitions {shown}"
        elif not inp.partitioned:
            where = "one partition per worker"
        else:
            where = "partitions listed at the start"
        lines.append(f"  input {named(inp.run.head, inp.run.kind)}: {inp.source}, {where}")
        lines.extend(fused(inp.run))
    for number, runs in enumerate(pp.layers, start=1):
        lines.append("")
        lines.append(f"Shuffle {number}: groupBy(grp), one group per key bucket; other rows pass through")
        for run in runs:
            lines.append(f"  {run.head}: {' '.join(run.groups)}")
        lines.append(
            f"Stage {layer_stage(number)}: transformWithState runs these stateful steps and the steps fused after them"
        )
        for run in runs:
            lines.append(f"  stateful {named(run.head, run.kind)} <- {_fed(run.fed_by)}")
            lines.extend(fused(run))
    lines.append("")
    lines.append(
        f"Driver: foreachBatch runs the outputs and inspect_debug taps, once per micro-batch; "
        f"group {CONTROL_GROUP} ends the run; partitioned outputs written in Spark's tasks get one job per "
        "micro-batch, repartitioned by sink partition"
    )
    lines.extend(
        f"  output {out.step_id} <- {_fed(out.fed_by)} {f'as {out.group}' if out.group else 'with no rows'}: "
        f"{out.sink}, {_layout_text(out.layout)}"
        for out in pp.outputs
    )
    lines.extend(f"  tap {tap.step_id} <- {_fed(tap.fed_by)} as {tap.group}" for tap in pp.taps)
    return "\n".join(lines)
