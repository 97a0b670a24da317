"""Turn a `Dataflow` into the tables the runtime needs.

Only core steps matter here.  Stateful steps are numbered and given a
*layer*: one more than the deepest stateful step upstream of them.  Each
layer becomes one `transformWithState` operator, so a flow needs as many
shuffles as its longest chain of stateful steps.  Outputs and
`inspect_debug` taps are numbered too.  How each output's items reach its
sink's partitions, and where those are written (`SinkLayout`), is decided
here as well, from the sink's type, partitions and `lives_in_driver`, so
the plan is complete before the runtime builds any partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Dict, Generic, List, Optional, Sequence, Set, Tuple, TypeVar

from flowspark._step_config import (
    CoreConfig,
    FlatMapBatchConfig,
    InputConfig,
    InspectDebugConfig,
    OutputConfig,
    StatefulBatchConfig,
)
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.encoded_lines import LineFormat, line_format
from flowspark.inputs import DynamicSource, FixedPartitionedSource, Source
from flowspark.outputs import DynamicSink, FixedPartitionedSink, MicroBatchSink, Sink, WorkerPartitionedSink

C_co = TypeVar("C_co", bound=CoreConfig, covariant=True)
"""The configuration type of a core step."""


@dataclass(frozen=True)
class CoreStep(Generic[C_co]):
    """A core step as the runtime sees it: its id and its configuration."""

    step_id: str
    config: C_co


class SinkRouting(Enum):
    """How the driver hands an output's items to its sink's partitions."""

    BY_KEY = "by key"
    """A `FixedPartitionedSink` of several partitions (or none): `part_fn` of each item's key picks one."""
    ONE_PART = "one partition"
    """A `FixedPartitionedSink` of one partition: the workers check the keys and send bare values."""
    BY_PASS = "by pass"
    """A `DynamicSink`: one partition per worker, picked by the pass that made the items."""
    BY_WORKER = "by worker"
    """A `WorkerPartitionedSink`: as `BY_PASS`, but each partition keeps a snapshot, as a fixed one does."""
    MICRO_BATCH = "micro-batch"
    """A `MicroBatchSink`: the whole micro-batch in one call."""


class SinkPlace(Enum):
    """Where an output's sink partitions are built and written."""

    DRIVER = "driver"
    """In the user's process, by the `foreachBatch` callback (`sink_writer`)."""
    EXECUTORS = "executors"
    """In Spark's tasks: each micro-batch, one task per partition that has items (`sink_tasks`)."""
    MAKING_TASK = "making task"
    """In the Spark task whose pass made the items, as it makes them, with no row and no shuffle (`task_sinks`).

    For a `DynamicSink`: it keeps no snapshot and is written at least once,
    so no partition needs a single owner per micro-batch.
    """


@dataclass(frozen=True)
class SinkLayout:
    """Where an output's items go: the routing, for a `FixedPartitionedSink` its partitions, and where they are written."""

    routing: SinkRouting
    parts: Tuple[str, ...] = ()
    """The sink's `list_parts()`, in order; empty for other sinks."""
    place: SinkPlace = SinkPlace.DRIVER
    lines: Optional[LineFormat] = None
    """How the workers encode the values of each sink partition (`encoded_lines`), if they may."""

    @property
    def in_executors(self) -> bool:
        """Written by the job the driver starts per micro-batch (`sink_tasks`)."""
        return self.place is SinkPlace.EXECUTORS

    @property
    def in_making_task(self) -> bool:
        """Written by the pass that made the items (`task_sinks`)."""
        return self.place is SinkPlace.MAKING_TASK

    @property
    def drop_keys(self) -> bool:
        """The workers check the `(key, value)` items and send only the values: a key can't change where they go."""
        return self.routing is SinkRouting.ONE_PART


@dataclass
class Consumer:
    """A core step reading a stream; `index` numbers stateful steps, outputs and taps."""

    step: CoreStep[CoreConfig]
    index: int = -1


@dataclass
class Plan:
    """Everything the runtime needs to know about a flow, picklable to workers."""

    flow_id: str
    inputs: List[CoreStep[InputConfig]] = field(default_factory=list)
    stateful: List[CoreStep[StatefulBatchConfig]] = field(default_factory=list)
    layers: List[int] = field(default_factory=list)
    outputs: List[CoreStep[OutputConfig]] = field(default_factory=list)
    sinks: List[SinkLayout] = field(default_factory=list)
    """Each output's `SinkLayout`, in output order."""
    taps: List[CoreStep[InspectDebugConfig]] = field(default_factory=list)
    consumers: Dict[str, List[Consumer]] = field(default_factory=dict)
    ordered: bool = False
    """One Bytewax worker's order is kept (`order`): a run of `run_main`, or with one worker."""
    workers: int = 1
    """Bytewax's worker count: a `DynamicSink` has one partition per worker."""
    eof_delays: List[int] = field(default_factory=list)
    """For each stateful step, how many of a Bytewax worker's steps after the input's end its `on_eof` runs (`_eof_delays`)."""
    positions: Dict[str, int] = field(default_factory=dict)
    """Each core step's place in the order the flow created them: within a round, one Bytewax worker runs its steps
    in that order."""

    @property
    def depth(self) -> int:
        """How many stateful layers (and so `transformWithState` operators) the flow has."""
        return max(self.layers, default=0)

    def steps_in_layer(self, layer: int) -> List[int]:
        """Indexes of the stateful steps of `layer`."""
        return [i for i, step_layer in enumerate(self.layers) if step_layer == layer]


def _flow_error(flow_id: str, cause: Exception) -> Exception:
    from flowspark.errors import FlowsparkRuntimeError

    err = FlowsparkRuntimeError(f"flow {flow_id!r} can't run: {cause}")
    err.__cause__ = cause
    return err


def _check_io(step: CoreStep[CoreConfig]) -> None:
    config = step.config
    if isinstance(config, InputConfig):
        source = config.source
        if not isinstance(source, Source):
            msg = f"step {step.step_id!r}: source must subclass `flowspark.inputs.Source`; got a {type(source)!r}"
            raise TypeError(msg)
        if not isinstance(source, (FixedPartitionedSource, DynamicSource)):
            msg = (
                f"step {step.step_id!r}: unknown source type {type(source)!r}; subclass "
                f"`FixedPartitionedSource` or `DynamicSource`"
            )
            raise TypeError(msg)
    if isinstance(config, OutputConfig):
        sink = config.sink
        if not isinstance(sink, Sink):
            msg = f"step {step.step_id!r}: sink must subclass `flowspark.outputs.Sink`; got a {type(sink)!r}"
            raise TypeError(msg)
        if not isinstance(sink, (FixedPartitionedSink, DynamicSink, MicroBatchSink, WorkerPartitionedSink)):
            msg = (
                f"step {step.step_id!r}: unknown sink type {type(sink)!r}; "
                "subclass `FixedPartitionedSink`, `DynamicSink` or `MicroBatchSink`"
            )
            raise TypeError(msg)


def _written(step_id: str, config: OutputConfig) -> OutputConfig:
    """`config` with the sink the run writes: a `DynamicSink`'s `transactional()` form, if it has one."""
    sink = config.sink
    if not isinstance(sink, DynamicSink):
        return config
    try:
        form = sink.transactional()
    except Exception as ex:
        from flowspark.errors import FlowsparkRuntimeError

        msg = f"error calling `transactional` in step {step_id!r}"
        raise FlowsparkRuntimeError(msg) from ex
    return config if form is None else replace(config, sink=form)


def build_plan(flow: Dataflow, ordered: bool = False, workers: int = 1) -> Plan:
    """Number the flow's core steps and compute stateful layers; check the flow's shape.

    `ordered` keeps one Bytewax worker's order (`Plan.ordered`), `workers`
    is Bytewax's worker count.
    """
    plan = Plan(flow.flow_id, ordered=ordered, workers=workers)
    steps = [CoreStep(s.step_id, s.config) for s in flow.core_steps() if s.config is not None]
    plan.positions = {step.step_id: i for i, step in enumerate(steps)}
    producers: Dict[str, CoreStep[CoreConfig]] = {}
    for step in steps:
        for down in step.config.downs:
            producers[down] = step
    try:
        for step in steps:
            _check_io(step)
            config = step.config
            index = -1
            if isinstance(config, InputConfig):
                plan.inputs.append(CoreStep(step.step_id, config))
            elif isinstance(config, StatefulBatchConfig):
                index = len(plan.stateful)
                plan.stateful.append(CoreStep(step.step_id, config))
            elif isinstance(config, OutputConfig):
                index = len(plan.outputs)
                plan.outputs.append(CoreStep(step.step_id, _written(step.step_id, config)))
            elif isinstance(config, InspectDebugConfig):
                index = len(plan.taps)
                plan.taps.append(CoreStep(step.step_id, config))
            for up in config.ups:
                plan.consumers.setdefault(up, []).append(Consumer(step, index))
        if not plan.inputs:
            msg = "Dataflow needs to contain at least one input step; add an `op.input`"
            raise ValueError(msg)
        if not plan.outputs and not plan.taps:
            msg = "Dataflow needs to contain at least one output or inspect step; add an `op.output` or `op.inspect`"
            raise ValueError(msg)
    except (TypeError, ValueError) as ex:
        raise _flow_error(flow.flow_id, ex) from ex
    plan.layers = _layers(plan, producers)
    plan.eof_delays = _eof_delays(plan, producers)
    plan.sinks = [sink_layout(step, ordered, workers) for step in plan.outputs]
    return plan


def sink_layout(step: CoreStep[OutputConfig], ordered: bool = False, workers: int = 1) -> SinkLayout:
    """How `step`'s items reach its sink, from the sink's type and, if it has fixed partitions, their names.

    The partitions are written in Spark's tasks when the sink need not
    live in the user's process (`Sink.lives_in_driver`), has partitions to
    route to, and the run does not keep one worker's order (`ordered`):
    that order is made on the driver, across all tasks' items.  A
    `FixedPartitionedSink`'s are written by one task per partition, which
    owns its snapshot, and so are a `WorkerPartitionedSink`'s, one per
    worker; a `DynamicSink`'s by the tasks that made the items.
    Calls a `FixedPartitionedSink`'s `list_parts`; an error there is named
    after the step.
    """
    sink = step.config.sink
    away = sink is not None and not sink.lives_in_driver and not ordered
    place = SinkPlace.EXECUTORS if away else SinkPlace.DRIVER
    if isinstance(sink, FixedPartitionedSink):
        try:
            parts = tuple(sink.list_parts())
        except Exception as ex:
            from flowspark.errors import FlowsparkRuntimeError

            msg = f"error calling `list_parts` in step {step.step_id!r}"
            raise FlowsparkRuntimeError(msg) from ex
        routing = SinkRouting.ONE_PART if len(parts) == 1 else SinkRouting.BY_KEY
        # The workers know each value's partition when there is one, or when they route them.
        encodable = not ordered and (routing is SinkRouting.ONE_PART or place is SinkPlace.EXECUTORS)
        lines = line_format(sink) if encodable else None
        return SinkLayout(routing, parts, place if parts else SinkPlace.DRIVER, lines)
    if isinstance(sink, WorkerPartitionedSink):
        return SinkLayout(SinkRouting.BY_WORKER, tuple(str(index) for index in range(workers)), place)
    if isinstance(sink, MicroBatchSink):
        return SinkLayout(SinkRouting.MICRO_BATCH)
    return SinkLayout(SinkRouting.BY_PASS, place=SinkPlace.MAKING_TASK if away else SinkPlace.DRIVER)


def placed_for_machines(plan: Plan, one_machine: bool) -> Plan:
    """`plan` with its outputs placed for where Spark runs: `one_machine` for a local master.

    On a cluster, every sink that may leave the user's process is written
    in the executors, so that the driver carries no items.  On one machine,
    a sink of a single partition gains nothing from a task of its own: its
    items would cross a shuffle to one task, on the same cores the driver
    uses, so the driver writes it (as it writes sinks that live there).
    """
    if not one_machine:
        return plan
    sinks = [
        replace(layout, place=SinkPlace.DRIVER) if layout.routing is SinkRouting.ONE_PART else layout
        for layout in plan.sinks
    ]
    return replace(plan, sinks=sinks)


_HOLDS_THE_END = (FlatMapBatchConfig, InspectDebugConfig, StatefulBatchConfig)
"""Core steps that pass the end of input on one of a Bytewax worker's steps after it reached them."""


def _eof_delays(plan: Plan, producers: Dict[str, CoreStep[CoreConfig]]) -> List[int]:
    """For each stateful step, how many worker steps after the input's end its `on_eof` runs.

    In a Bytewax worker the end of input moves on by one worker step at
    each `flat_map_batch`, `inspect_debug` or `stateful_batch` it crosses
    (not at `branch`, `merge` or `redistribute`), along the longest way
    from an input.  So a stateful step two maps below the input calls
    `on_eof` after one a single map below it, whatever order the flow
    created them in; the outputs and taps that one worker step's `on_eof`s
    reach get them in the flow's creation order (`order`).
    """
    leaves: Dict[str, int] = {}

    def arrives(step: CoreStep[CoreConfig]) -> int:
        return max((left(producers[up]) for up in step.config.ups if up in producers), default=0)

    def left(step: CoreStep[CoreConfig]) -> int:
        if step.step_id not in leaves:
            leaves[step.step_id] = arrives(step) + isinstance(step.config, _HOLDS_THE_END)
        return leaves[step.step_id]

    return [arrives(step) for step in plan.stateful]


def _layers(plan: Plan, producers: Dict[str, CoreStep[CoreConfig]]) -> List[int]:
    """Layer of each stateful step: 1 + the deepest stateful step upstream of it."""
    depth_of: Dict[str, int] = {}
    stateful_ids = {s.step_id: i for i, s in enumerate(plan.stateful)}

    def depth(step: CoreStep[CoreConfig]) -> int:
        if step.step_id in depth_of:
            return depth_of[step.step_id]
        ups = [producers[u] for u in step.config.ups if u in producers]
        below = max((depth(u) for u in ups), default=0)
        mine = below + 1 if step.step_id in stateful_ids else below
        depth_of[step.step_id] = mine
        return mine

    return [depth(s) for s in plan.stateful]


def input_ranks(plan: Plan) -> List[int]:
    """Each input's place in a round of one Bytewax worker: the order `merge` steps take their inputs in.

    A `merge` hands on what a round brought in its arguments' order; the
    inputs are ranked as a walk up from the outputs, taps and stateful
    steps (in flow order) first reaches them, through each step's upstream
    streams in order.  Inputs nothing reaches keep their own order after.
    """
    return _merge_ranks(plan, plan.inputs)


def stateful_ranks(plan: Plan) -> List[int]:
    """Each stateful step's place among what one activation of its layer emits: the order `merge` steps take them in.

    Ranked as `input_ranks` ranks inputs: a walk up from the outputs, taps
    and stateful steps stops at the first stateful step of each path.
    """
    return _merge_ranks(plan, plan.stateful)


def core_steps(plan: Plan) -> List[CoreStep[CoreConfig]]:
    """Every core step of the plan: its inputs, then every step that consumes a stream."""
    return [*plan.inputs, *(c.step for consumers in plan.consumers.values() for c in consumers)]


def _merge_ranks(plan: Plan, ranked: Sequence[CoreStep[CoreConfig]]) -> List[int]:
    """The rank of each of `ranked` in the order a walk up from the flow's ends, upstream streams in order, first reaches them."""
    producers: Dict[str, CoreStep[CoreConfig]] = {}
    for step in core_steps(plan):
        for down in step.config.downs:
            producers[down] = step
    position = {step.step_id: i for i, step in enumerate(ranked)}
    order: List[int] = []
    visited: Set[str] = set()

    def walk(step: CoreStep[CoreConfig]) -> None:
        if step.step_id in visited:
            return
        visited.add(step.step_id)
        if step.step_id in position:
            order.append(position[step.step_id])
            return
        for up in step.config.ups:
            if up in producers:
                walk(producers[up])

    ends: List[CoreStep[CoreConfig]] = [*plan.outputs, *plan.taps]
    for step in ends:
        walk(step)
    for step in plan.stateful:
        for up in step.config.ups:
            if up in producers:
                walk(producers[up])
        if step.step_id in position and position[step.step_id] not in order:
            order.append(position[step.step_id])
    order.extend(i for i in range(len(ranked)) if i not in order)
    ranks = [0] * len(ranked)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def source_parts(plan: Plan) -> List[Tuple[int, str]]:
    """Every `(input index, partition name)` of the flow's fixed-partitioned sources."""
    parts: List[Tuple[int, str]] = []
    for i, step in enumerate(plan.inputs):
        source = step.config.source
        if isinstance(source, FixedPartitionedSource):
            parts.extend((i, name) for name in source.list_parts())
    return parts


def for_workers(plan: Plan) -> Plan:
    """A copy without sources, sinks and inspectors: what Spark's workers need (`CoreConfig.for_workers`).

    Sinks written in Spark's tasks stay: the workers route items by their
    `part_fn`, or write them.
    """
    kept = {step.step_id for step, layout in zip(plan.outputs, plan.sinks) if layout.place is not SinkPlace.DRIVER}

    def strip(step: CoreStep[C_co]) -> CoreStep[C_co]:
        return step if step.step_id in kept else CoreStep(step.step_id, step.config.for_workers())

    return replace(
        plan,
        inputs=[strip(s) for s in plan.inputs],
        stateful=[strip(s) for s in plan.stateful],
        outputs=[strip(s) for s in plan.outputs],
        taps=[strip(s) for s in plan.taps],
        consumers={k: [Consumer(strip(c.step), c.index) for c in v] for k, v in plan.consumers.items()},
    )


def reads_in_executors(source: Optional[Source[Any]]) -> bool:
    """Whether `source`'s partitions are read in Spark's tasks rather than in the driver."""
    return isinstance(source, FixedPartitionedSource) and not source.lives_in_driver
