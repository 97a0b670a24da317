"""What each of the eight core steps records for the planner.

A core operator puts one of these frozen values on its step
(`Operator.config`): the ids of the streams it reads (`ups`) and writes
(`downs`), and the user's source, sink or function it runs.  The planner
tells the kinds apart by class, and makes changed copies for Spark's
workers with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, ClassVar, Iterable, List, Optional, Tuple

from typing_extensions import Self

from flowspark._batch_logic import StatefulBatchLogic
from flowspark.inputs import Source
from flowspark.outputs import Sink

__all__ = [
    "BranchConfig",
    "CoreConfig",
    "FlatMapBatchConfig",
    "InputConfig",
    "InspectDebugConfig",
    "MergeConfig",
    "OutputConfig",
    "RedistributeConfig",
    "StatefulBatchConfig",
    "StepKind",
]


class StepKind(Enum):
    """The core step kinds, valued by their operator's name."""

    INPUT = "input"
    OUTPUT = "output"
    FLAT_MAP_BATCH = "flat_map_batch"
    STATEFUL_BATCH = "stateful_batch"
    BRANCH = "branch"
    MERGE = "merge"
    REDISTRIBUTE = "redistribute"
    INSPECT_DEBUG = "inspect_debug"


@dataclass(frozen=True)
class CoreConfig:
    """What every core step has: the ids of the streams it reads and of those it writes, in port order."""

    ups: Tuple[str, ...]
    downs: Tuple[str, ...]
    kind: ClassVar[StepKind]

    def for_workers(self) -> Self:
        """The copy Spark's workers get: without what runs only on the driver (sources, sinks, inspectors).

        That keeps unpicklable connections and in-process lists out of what Spark ships.
        """
        return self


@dataclass(frozen=True)
class InputConfig(CoreConfig):
    """`input`: the items of a source, read on the driver or in Spark's tasks (`Source.lives_in_driver`)."""

    source: Optional[Source[Any]]
    """The flow's source (the planner checks its type); None in the copy Spark's workers get."""

    kind: ClassVar[StepKind] = StepKind.INPUT

    def for_workers(self) -> Self:
        """The copy Spark's workers get: without the source."""
        return dataclasses.replace(self, source=None)


@dataclass(frozen=True)
class OutputConfig(CoreConfig):
    """`output`: items written to a sink, in the driver or in Spark's tasks (`Sink.lives_in_driver`)."""

    sink: Optional[Sink[Any]]
    """The flow's sink (the planner checks its type and lays out its partitions); in the copy Spark's workers get,
    None unless it is written in their tasks (`plan.for_workers`)."""

    kind: ClassVar[StepKind] = StepKind.OUTPUT

    def for_workers(self) -> Self:
        """The copy Spark's workers get: without the sink."""
        return dataclasses.replace(self, sink=None)


@dataclass(frozen=True)
class FlatMapBatchConfig(CoreConfig):
    """`flat_map_batch`: each batch replaced by what `mapper` returns for it."""

    mapper: Callable[[List[Any]], Iterable[Any]]

    kind: ClassVar[StepKind] = StepKind.FLAT_MAP_BATCH


@dataclass(frozen=True)
class StatefulBatchConfig(CoreConfig):
    """`stateful_batch`: one logic per key, its state kept by Spark."""

    builder: Callable[[Optional[Any]], StatefulBatchLogic[Any, Any, Any]]
    """Builds a key's logic from its snapshot (None for a new key)."""

    kind: ClassVar[StepKind] = StepKind.STATEFUL_BATCH


@dataclass(frozen=True)
class BranchConfig(CoreConfig):
    """`branch`: each item sent to `trues` or `falses`."""

    predicate: Callable[[Any], bool]
    """Sends an item to the first of `downs` (`trues`) or the second (`falses`)."""

    kind: ClassVar[StepKind] = StepKind.BRANCH


@dataclass(frozen=True)
class MergeConfig(CoreConfig):
    """`merge`: the items of every upstream stream, in one stream."""

    kind: ClassVar[StepKind] = StepKind.MERGE


@dataclass(frozen=True)
class RedistributeConfig(CoreConfig):
    """`redistribute`: items passed on unchanged (the fused pass has nothing to move)."""

    kind: ClassVar[StepKind] = StepKind.REDISTRIBUTE


@dataclass(frozen=True)
class InspectDebugConfig(CoreConfig):
    """`inspect_debug`: each item shown to `inspector` on the driver, and passed on."""

    inspector: Optional[Callable[[str, Any, int, int], None]]
    """Called on the driver with each item; None in the copy Spark's workers get."""

    kind: ClassVar[StepKind] = StepKind.INSPECT_DEBUG

    def for_workers(self) -> Self:
        """The copy Spark's workers get: without the inspector."""
        return dataclasses.replace(self, inspector=None)


STATELESS_KINDS = (
    StepKind.FLAT_MAP_BATCH,
    StepKind.BRANCH,
    StepKind.MERGE,
    StepKind.REDISTRIBUTE,
    StepKind.INSPECT_DEBUG,
)
"""The kinds the fused pass carries batches through (`engine.plan.route`)."""


def port_ids(step_id: str, *ports: str) -> Tuple[str, ...]:
    """The ids of the streams a core step writes: `<step id>.<port name>`, in port order."""
    return tuple(f"{step_id}.{port}" for port in ports)
