"""The rows that travel between Spark stages.

A row is one *chunk* bound for one destination: for a bucket of a
stateful step, its items' keys and values in arrival order
(`keyed_chunks`); for an output or a tap, a pickled list of items.  `grp`
names the destination and is what Spark groups by (`destinations`).
`seq` orders the chunks of one origin; `kind` tells data, end-of-input
markers and control rows apart.  Pickling whole batches keeps the number of
JVM rows in the hundreds, whatever the number of items.
"""

from __future__ import annotations

import pickle
from typing import Any, Dict, Iterator, List, Optional, Tuple

import cloudpickle
import pyarrow as pa

from flowspark.engine.plan.order import Order
from flowspark.engine.reports.failures import StepFailure

# The same columns as `data_source.SCHEMA_DDL`, which Spark is given (kept there, away from pyarrow).
ARROW_SCHEMA = pa.schema([("grp", pa.string()), ("seq", pa.int64()), ("kind", pa.int32()), ("payload", pa.binary())])

DATA = 0
EOF = 1
CONTROL = 2
ABORT = 3
"""Marker of a micro-batch cut short by `AbortExecution`: its state changes are not kept."""
PING = 4
"""Marker that only asks a stateful bucket to report its earliest wake-up (`wake_ups`)."""
WAKE_UPS = 5
"""A control row: stateful buckets' earliest wake-ups, for the driver (`wake_ups`)."""

LAST_SEQ = 1 << 62
"""Sequence number of end-of-input markers: after every data chunk."""

Row = Tuple[str, int, int, bytes]


PIECE_ITEMS = 4096
"""About how many items one pickle holds; larger values are pickled in pieces."""

_PIECES = b"FSP"
"""Prefix of a payload made of pieces (a pickle never starts with it)."""


def _size(entry: Any) -> int:
    """Items in one entry of a big value: a batch (list) counts its items, a key's batches all of theirs."""
    batches = entry[1] if type(entry) is tuple and len(entry) == 2 else entry
    if type(batches) is not list:
        return 1
    return sum(len(b) if type(b) is list else 1 for b in batches) if type(entry) is tuple else len(batches)


def _pieces(value: Any) -> List[Any]:
    """Cut a big list or dict into parts of about `PIECE_ITEMS` items, in order.

    A flat list of items is sliced; a list of batches, or a dict of each
    key's batches, is cut between entries.
    """
    if type(value) is list and type(value[0]) is not list:
        return [value[i : i + PIECE_ITEMS] for i in range(0, len(value), PIECE_ITEMS)]
    entries = list(value.items()) if type(value) is dict else value
    parts: List[Any] = []
    current: List[Any] = []
    size = 0
    for entry in entries:
        current.append(entry)
        size += _size(entry)
        if size >= PIECE_ITEMS:
            parts.append(current)
            current, size = [], 0
    if current:
        parts.append(current)
    return [dict(part) for part in parts] if type(value) is dict else parts


RETRY_PLAIN_EVERY = 64
"""After a pickle that needed cloudpickle, how many pickles go straight to it before plain pickle is tried again."""


_plain_skips = 0
"""How many more pickles go straight to cloudpickle (see `_dump_one`)."""


_STACK_GLOBAL = pickle.STACK_GLOBAL
"""The opcode with which protocols 4 and 5 refer to a module's class or function."""


def _needs_cloudpickle(blob: bytes) -> bool:
    """Whether a plain pickle names a module whose code must travel by value.

    Those are `__main__` and the user's modules registered with cloudpickle
    (`shipping`): a plain pickle refers to their classes and functions by
    name, which a Spark worker cannot import.  A module name only shows up
    in a pickle as its UTF-8 text, so a byte search finds every reference;
    data that merely contains such text just takes the slower path.  The
    C pickler (at `HIGHEST_PROTOCOL`) names every class and function with
    a `STACK_GLOBAL` opcode, so a pickle without that byte names none:
    small snapshots and items of plain data skip the search.
    """
    if _STACK_GLOBAL not in blob:
        return False
    if b"__main__" in blob:
        return True
    for name in cloudpickle.list_registry_pickle_by_value():
        if name.encode() in blob:
            return True
    return False


def _dump_one(value: Any) -> bytes:
    """One pickle: the C pickler's when it is enough, cloudpickle's otherwise.

    cloudpickle calls back into Python for every object that is not plain
    data (a dataclass item, a Kafka message), which made pickling such items
    two to three times slower.  The C pickler either writes the same bytes
    cloudpickle would, or fails (a lambda, a class made inside a function, a
    class a worker rebuilt from a by-value pickle: pickle checks that a name
    leads back to the very same object), or names a by-value module, which
    `_needs_cloudpickle` catches.  Flows whose items are the user's own
    classes need cloudpickle for every pickle: after one such pickle the
    next `RETRY_PLAIN_EVERY` skip the plain attempt.
    """
    global _plain_skips
    if _plain_skips == 0:
        try:
            blob: bytes = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # any failure means: let cloudpickle do it
            pass
        else:
            if not _needs_cloudpickle(blob):
                return blob
        _plain_skips = RETRY_PLAIN_EVERY
    else:
        _plain_skips -= 1
    blob = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return blob


def dumps(value: Any) -> bytes:
    """Pickle items and snapshots.

    cloudpickle where needed, so that instances of classes from the
    user's modules travel by value like the modules themselves; the C
    pickler otherwise (`_dump_one`).  A list or dict of many items is
    pickled in pieces of about `PIECE_ITEMS`: the pickler remembers every
    object it has written, and on millions of items that memo alone costs
    five times the pickling.  Objects shared between pieces arrive as copies.
    """
    if type(value) in (list, dict) and len(value) > 1:
        parts = _pieces(value)
        if len(parts) > 1:
            return _PIECES + pickle.dumps([_dump_one(part) for part in parts], protocol=pickle.HIGHEST_PROTOCOL)
    return _dump_one(value)


def loads(payload: bytes) -> Any:
    """Unpickle what `dumps` made, joining pieces back into one list or dict."""
    if not payload.startswith(_PIECES):
        return pickle.loads(payload)
    parts = list(item_parts(payload))
    if type(parts[0]) is dict:
        joined: Dict[Any, Any] = {}
        for part in parts:
            joined.update(part)
        return joined
    entries: List[Any] = []
    for part in parts:
        entries.extend(part)
    return entries


def _pickles(item: Any) -> bool:
    try:
        cloudpickle.dumps(item)
    except Exception:
        return False
    return True


def dumps_items(step_id: str, items: List[Any]) -> bytes:
    """`dumps` of items bound for step `step_id`, failing with a `StepFailure` that names the step and the item's type.

    Items cross process boundaries on their way to a stateful step, an
    output or an inspect step, so one that won't pickle (a lock, a
    generator, an open file) stops the run there.
    """
    try:
        return dumps(items)
    except Exception as ex:
        culprit = next((item for item in items if not _pickles(item)), None)
        kind = type(culprit)
        msg = (
            f"step {step_id!r} got an item that can't be pickled: a `{kind.__module__}.{kind.__qualname__}` "
            f"({ex}); flowspark moves items between Spark's Python processes, so items that reach a stateful "
            "step, an output or an inspect step must pickle with cloudpickle"
        )
        raise StepFailure(msg, TypeError(msg)) from ex


class ItemChunk:
    """The items one pass sends to one output or tap (step `step_id`), pickled a few thousand at a time as they come.

    Pickling (and then freeing) items while they are still in the
    processor's cache is several times faster than doing it for a whole
    micro-batch at the end; the parts are joined as `dumps` joins pieces.
    """

    def __init__(self, step_id: str) -> None:
        self.step_id = step_id
        self._pending: List[Any] = []
        self._parts: List[bytes] = []
        self._count = 0
        self.runs: List[Tuple[Order, int]] = []
        """Where each run of items ended, with its order (kept by ordered collectors only)."""

    def extend(self, items: List[Any]) -> None:
        self._pending.extend(items)
        self._count += len(items)
        if len(self._pending) >= PIECE_ITEMS:
            self._flush()

    def end_run(self, order: Order) -> None:
        """Mark the end of a run of items placed at `order`, if it brought anything."""
        if self._count > (self.runs[-1][1] if self.runs else 0):
            self.runs.append((order, self._count))

    def take(self) -> None:
        """Pickle the items added since the last pickling: they are taken as they are now, as Bytewax's downstream
        steps see an emitted value at the end of the batch that emitted it, whatever the step does to it later."""
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._parts.extend(
            dumps_items(self.step_id, pending[i : i + PIECE_ITEMS]) for i in range(0, len(pending), PIECE_ITEMS)
        )

    def dumps(self) -> bytes:
        """All the items so far, in order, in the format `loads` reads."""
        if self._pending or not self._parts:
            self._parts.append(dumps_items(self.step_id, self._pending))
            self._pending = []
        if len(self._parts) == 1:
            return self._parts[0]
        return _PIECES + pickle.dumps(self._parts, protocol=pickle.HIGHEST_PROTOCOL)


_ORDERED = b"FSO"
"""Prefix of an output or tap chunk that carries its runs' orders (a pickle never starts with it)."""


def ordered(runs: List[Tuple[Order, int]], payload: bytes) -> bytes:
    """An output or tap chunk with where its runs end and their orders."""
    return _ORDERED + pickle.dumps((runs, payload), protocol=pickle.HIGHEST_PROTOCOL)


def runs_of(payload: bytes) -> Tuple[Optional[List[Tuple[Order, int]]], bytes]:
    """The runs an `ordered` chunk carries (None for a plain chunk) and its items' payload."""
    if not payload.startswith(_ORDERED):
        return None, payload
    runs, inner = pickle.loads(payload[len(_ORDERED) :])
    return runs, inner


def to_arrow(rows: List[Row]) -> pa.RecordBatch:
    """Rows as one Arrow record batch in the chunk schema."""
    grp, seq, kind, payload = (list(col) for col in zip(*rows)) if rows else ([], [], [], [])
    return pa.RecordBatch.from_arrays(
        [
            pa.array(grp, pa.string()),
            pa.array(seq, pa.int64()),
            pa.array(kind, pa.int32()),
            pa.array(payload, pa.binary()),
        ],
        schema=ARROW_SCHEMA,
    )


def item_parts(payload: bytes) -> Iterator[Any]:
    """What `dumps` pickled, a part (of about `PIECE_ITEMS` items) at a time, in order.

    For an output or tap chunk each part is a list of its items, so the
    driver never holds a whole chunk's items at once.
    """
    if not payload.startswith(_PIECES):
        yield pickle.loads(payload)
        return
    for blob in pickle.loads(payload[len(_PIECES) :]):
        yield pickle.loads(blob)
