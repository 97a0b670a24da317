"""The state of a stateful layer that runs in a batch query: dicts in the task's memory.

A run that ends within its first read runs as one Spark batch query
(`batch_query`).  Each stateful layer's processor (`stateful.LayerProcessor`)
then handles each of its buckets once, after Spark's shuffle by bucket, and
nothing it stores outlives the task.  `MemoryHandle` stands in for the
`StatefulProcessorHandle` that `transformWithState` gives it: the value and
map states `keyed_state` declares, scoped to the bucket being handled, and timers
that no later micro-batch will ever fire.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Tuple

Key = Tuple[Any, ...]
"""A map state's key, as Spark's map state takes it: a tuple of its columns."""


class MemoryHandle:
    """The state variables of one task's buckets; `bucket` names the one being handled."""

    def __init__(self) -> None:
        self.bucket = ""

    def getValueState(self, name: str, schema: Any) -> ValueState:  # noqa: N802 - Spark's handle's name
        return ValueState(self)

    def getMapState(self, name: str, key_schema: Any, value_schema: Any) -> MapState:  # noqa: N802 - Spark's handle's name
        return MapState(self)

    def registerTimer(self, at_ms: int) -> None:  # noqa: N802 - Spark's handle's name
        """Nothing to do: the run ends with this query, so no later micro-batch could fire the timer."""


class ValueState:
    """One value per bucket, with the calls `keyed_state` makes on Spark's value state."""

    def __init__(self, handle: MemoryHandle) -> None:
        self._handle = handle
        self._values: Dict[str, Tuple[Any, ...]] = {}

    def get(self) -> Optional[Tuple[Any, ...]]:
        return self._values.get(self._handle.bucket)

    def update(self, value: Tuple[Any, ...]) -> None:
        self._values[self._handle.bucket] = value


class MapState:
    """One map per bucket, with the calls `keyed_state` makes on Spark's map state."""

    def __init__(self, handle: MemoryHandle) -> None:
        self._handle = handle
        self._maps: Dict[str, Dict[Key, Tuple[Any, ...]]] = {}

    def _map(self) -> Dict[Key, Tuple[Any, ...]]:
        return self._maps.setdefault(self._handle.bucket, {})

    def getValue(self, key: Key) -> Optional[Tuple[Any, ...]]:  # noqa: N802 - Spark's map state's name
        return self._map().get(key)

    def updateValue(self, key: Key, value: Tuple[Any, ...]) -> None:  # noqa: N802 - Spark's map state's name
        self._map()[key] = value

    def removeKey(self, key: Key) -> None:  # noqa: N802 - Spark's map state's name
        self._map().pop(key, None)

    def iterator(self) -> Iterator[Tuple[Key, Tuple[Any, ...]]]:
        return iter(list(self._map().items()))

    def keys(self) -> Iterator[Key]:
        return iter(list(self._map()))


class BatchTime:
    """The `TimerValues` of a batch query: the processing time it started at; no watermark."""

    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def getCurrentProcessingTimeInMs(self) -> int:  # noqa: N802 - Spark's timer values' name
        return self._now_ms

    def getCurrentWatermarkInMs(self) -> int:  # noqa: N802 - Spark's timer values' name
        return -1
