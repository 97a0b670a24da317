"""How keyed items travel to a bucket of a stateful step.

A pass sends each bucket one chunk per micro-batch: the items' keys and
values as two parallel sequences in arrival order (a small key id per item,
into the chunk's table of distinct keys), and where each run of items (a
source batch, or what one logic call emitted) ended, with its `Order`.
The receiving side groups them by key, or by tick and key.

Grouping on the sending side instead would pickle each key's values in
turn: objects scattered across memory, which the pickler (and later the
allocator, freeing them) visits with a cache miss each, five times slower
than in the order they were made (0.35 s against 0.07 s per million
`(int, int)` values on the benchmark machine).
"""

from __future__ import annotations

import pickle
from array import array
from itertools import groupby
from typing import Any, Callable, Dict, List, Tuple

from flowspark.engine.plan import chunks
from flowspark.engine.plan.order import Order, Tick

Slot = Tuple[Callable[[int], None], Callable[[Any], None], int]
"""How the router adds an item of one key: append its key id, append its value, the key id."""


class KeyedChunk:
    """The items one pass sends to one bucket of stateful step `step_id`.

    Values are pickled a few thousand at a time, as the pass goes
    (`flush`), while they are still in the processor's cache: pickling and
    freeing a whole micro-batch's values at the end visited each one with a
    cache miss (another factor of three on the benchmark machine).
    """

    __slots__ = ("step_id", "keys", "ids", "ends", "orders", "_pending", "_pieces")

    def __init__(self, step_id: str) -> None:
        self.step_id = step_id
        self.keys: List[str] = []
        self.ids = array("I")
        self.ends: List[int] = []
        self.orders: List[Order] = []
        self._pending: List[Any] = []
        self._pieces: List[bytes] = []

    def slot(self, key: str) -> Slot:
        """Register `key` in this chunk; what the router needs to add its items."""
        self.keys.append(key)
        return self.ids.append, self._pending.append, len(self.keys) - 1

    def end_run(self, order: Order) -> None:
        """Mark the end of a run of items (a source batch, a logic call's output), if it brought this chunk anything."""
        if len(self.ids) > (self.ends[-1] if self.ends else 0):
            self.ends.append(len(self.ids))
            self.orders.append(order)

    def flush(self) -> None:
        """Pickle the values added since the last flush, and let them go."""
        if self._pending:
            self._pieces.append(chunks.dumps_items(self.step_id, self._pending))
            self._pending.clear()

    def dumps(self) -> bytes:
        self.flush()
        return pickle.dumps(
            (self.keys, self.ids.tobytes(), self.ends, self.orders, self._pieces), pickle.HIGHEST_PROTOCOL
        )


_Chunk = Tuple[List[str], "array[int]", List[int], List[Order], List[Any]]


class Arrivals:
    """A bucket's items of one micro-batch, by key, in arrival order.

    `by_key()` gives each key's values in one list; `by_tick()` gives each
    tick's values by key, ticks in order, for handling the micro-batch
    round by round as one Bytewax worker does.  Each view is computed on
    first use.
    """

    def __init__(self) -> None:
        self._values: Dict[str, List[Any]] = {}
        self._chunks: List[_Chunk] = []

    def add(self, payload: bytes) -> None:
        """Take in one chunk (chunks must come in sequence order)."""
        keys, id_bytes, ends, orders, pieces = pickle.loads(payload)
        ids = array("I")
        ids.frombytes(id_bytes)
        values: List[Any] = []
        for piece in pieces:
            values.extend(chunks.loads(piece))
        # Kept so that values are freed in the order they were made.
        self._chunks.append((keys, ids, ends, orders, values))

    def _group(self) -> None:
        if self._values or not self._chunks:
            return
        for keys, ids, _, _, values in self._chunks:
            per_key: List[List[Any]] = [[] for _ in keys]
            appends = [lst.append for lst in per_key]
            for key_id, value in zip(ids, values):
                appends[key_id](value)
            for key, more in zip(keys, per_key):
                known = self._values.get(key)
                if known is None:
                    self._values[key] = more
                else:
                    known.extend(more)

    def keys(self) -> List[str]:
        self._group()
        return sorted(self._values)

    def by_key(self) -> Dict[str, List[Any]]:
        """Each key's values, in arrival order."""
        self._group()
        return self._values

    def by_tick(self) -> List[Tuple[Tick, Dict[str, List[Any]]]]:
        """Each tick's values by key, ticks in order; within a key, values in their runs' order."""
        runs: List[Tuple[Order, int, int, int]] = []
        for index, (_, ids, ends, orders, _) in enumerate(self._chunks):
            start = 0
            for end, order in zip(ends, orders):
                runs.append((order, index, start, end))
                start = end
            if start < len(ids):  # items after the last marked run belong to it
                runs.append((orders[-1] if orders else (0, 0, 0, ""), index, start, len(ids)))
        runs.sort(key=lambda run: (run[0], run[1]))
        ticks: List[Tuple[Tick, Dict[str, List[Any]]]] = []
        for tick, group in groupby(runs, key=lambda run: (run[0][0], run[0][1])):
            per_key: Dict[str, List[Any]] = {}
            for _, index, start, end in group:
                keys, ids, _, _, values = self._chunks[index]
                for key_id, value in zip(ids[start:end], values[start:end]):
                    found = per_key.get(keys[key_id])
                    if found is None:
                        per_key[keys[key_id]] = [value]
                    else:
                        found.append(value)
            ticks.append((tick, per_key))
        return ticks
