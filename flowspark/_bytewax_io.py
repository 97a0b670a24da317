"""Run Bytewax's own sources and sinks (and connector packages built on them).

Connector packages such as bytewax-redis subclass `bytewax.inputs` and
`bytewax.outputs`.  Their classes are plain Python objects with the same
methods as flowspark's, so `op.input` and `op.output` wrap them in the
adapters below instead of refusing them.  Nothing here imports Bytewax: an
object can only be one of its sources or sinks if the user's code already
imported `bytewax.inputs` or `bytewax.outputs`.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, Iterable, List, Optional

from flowspark.inputs import (
    AbortExecution,
    DynamicSource,
    FixedPartitionedSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from flowspark.outputs import DynamicSink, FixedPartitionedSink, StatefulSinkPartition, StatelessSinkPartition


def _bytewax_class(module: str, name: str) -> Optional[type]:
    """Bytewax's class `module.name` if that module is loaded, else `None`."""
    loaded = sys.modules.get(f"bytewax.{module}")
    found = getattr(loaded, name, None)
    return found if isinstance(found, type) else None


def _is_bytewax(value: Any, module: str, name: str) -> bool:
    cls = _bytewax_class(module, name)
    return cls is not None and isinstance(value, cls)


def _next_batch(partition: Any) -> Iterable[Any]:
    """The partition's next batch, with Bytewax's `AbortExecution` turned into flowspark's."""
    try:
        batch: Iterable[Any] = partition.next_batch()
    except RuntimeError as ex:
        if _is_bytewax(ex, "inputs", "AbortExecution"):
            raise AbortExecution(*ex.args) from ex
        raise
    return batch


class _StatefulSourcePartition(StatefulSourcePartition[Any, Any]):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def next_batch(self) -> Iterable[Any]:
        return _next_batch(self.inner)

    def next_awake(self) -> Optional[datetime]:
        awake: Optional[datetime] = self.inner.next_awake()
        return awake

    def snapshot(self) -> Any:
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


class BytewaxFixedPartitionedSource(FixedPartitionedSource[Any, Any]):
    """A Bytewax `FixedPartitionedSource`, resumable as in Bytewax."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def list_parts(self) -> List[str]:
        parts: List[str] = self.inner.list_parts()
        return parts

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[Any]) -> _StatefulSourcePartition:
        return _StatefulSourcePartition(self.inner.build_part(step_id, for_part, resume_state))


class _StatelessSourcePartition(StatelessSourcePartition[Any]):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def next_batch(self) -> Iterable[Any]:
        return _next_batch(self.inner)

    def next_awake(self) -> Optional[datetime]:
        awake: Optional[datetime] = self.inner.next_awake()
        return awake

    def close(self) -> None:
        self.inner.close()


class BytewaxDynamicSource(DynamicSource[Any]):
    """A Bytewax `DynamicSource`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _StatelessSourcePartition:
        return _StatelessSourcePartition(self.inner.build(step_id, worker_index, worker_count))


class _StatefulSinkPartition(StatefulSinkPartition[Any, Any]):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write_batch(self, values: List[Any]) -> None:
        self.inner.write_batch(values)

    def snapshot(self) -> Any:
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


class BytewaxFixedPartitionedSink(FixedPartitionedSink[Any, Any]):
    """A Bytewax `FixedPartitionedSink`; keys go to the partition its `part_fn` picks."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def list_parts(self) -> List[str]:
        parts: List[str] = self.inner.list_parts()
        return parts

    def part_fn(self, item_key: str) -> int:
        index: int = self.inner.part_fn(item_key)
        return index

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[Any]) -> _StatefulSinkPartition:
        return _StatefulSinkPartition(self.inner.build_part(step_id, for_part, resume_state))


class _StatelessSinkPartition(StatelessSinkPartition[Any]):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write_batch(self, items: List[Any]) -> None:
        self.inner.write_batch(items)

    def close(self) -> None:
        self.inner.close()


class BytewaxDynamicSink(DynamicSink[Any]):
    """A Bytewax `DynamicSink`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _StatelessSinkPartition:
        return _StatelessSinkPartition(self.inner.build(step_id, worker_index, worker_count))


def adapt_source(source: Any) -> Any:
    """`source` itself, or an adapter if it is one of Bytewax's sources."""
    if _is_bytewax(source, "inputs", "FixedPartitionedSource"):
        return BytewaxFixedPartitionedSource(source)
    if _is_bytewax(source, "inputs", "DynamicSource"):
        return BytewaxDynamicSource(source)
    return source


def adapt_sink(sink: Any) -> Any:
    """`sink` itself, or an adapter if it is one of Bytewax's sinks."""
    if _is_bytewax(sink, "outputs", "FixedPartitionedSink"):
        return BytewaxFixedPartitionedSink(sink)
    if _is_bytewax(sink, "outputs", "DynamicSink"):
        return BytewaxDynamicSink(sink)
    return sink
