"""A bucket's key state, stored in slots of many keys each.

Every call to Spark's state store from a Python worker is a round trip to
the JVM, which costs far more than pickling a few hundred small snapshots.
So a bucket does not store one map entry per key: its keys are spread over
`keyed_state` map entries, each holding the snapshots and wake-ups of all its
keys as one pickle, and a micro-batch reads and writes only the slots of
the keys it touches.  A bucket starts with one slot and doubles its slots
whenever they hold more than `SLOT_KEYS` keys on average, so a slot stays
about as cheap to rewrite as one round trip, whether the bucket holds ten
keys or ten million.

A slot is pickled whole rather than key by key: one call of the C pickler
per slot instead of one per key, which is most of what a key costs when its
state is a few numbers.  So a slot that any key changed is written again.

The earliest wake-up of each slot's keys is a second map (`wakes`), so that
a timer finds its due keys by reading only the slots that are due.

The layout also records each slot's version, new at every write, so that a
Python worker can keep the slots it saved and use them in a later call
instead of reading them again, while they are still current (`keyed_state_cache`).
"""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from pyspark.sql.types import BinaryType, DataType, IntegerType, LongType, StructField, StructType

from flowspark.engine.plan import chunks
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.state.keyed_state_cache import WORKER_CACHE, SlotCache, new_version

SLOT_KEYS = 512
"""The average number of keys per slot above which a bucket doubles its slots."""

_SLOT_BITS_SKIPPED = 12
"""`slot_of` uses the CRC's bits above these, which `groups.bucket_of` does not use for power-of-two bucket counts."""


def slot_of(key: str, slots: int) -> int:
    """The slot (of `keyed_state`, a power of two) that holds `key`; stable across processes and runs."""
    return (zlib.crc32(key.encode()) >> _SLOT_BITS_SKIPPED) & (slots - 1)


class Stored(NamedTuple):
    """What a bucket holds for one key: its snapshot and its wake-up (epoch ms, None for none)."""

    snapshot: Any
    wake_ms: Optional[int]


class StateVariables(NamedTuple):
    """The state variables of a bucket (see `SlottedState`), as a processor's handle declares them."""

    layout: Any
    slots: Any
    wakes: Any


def _schema(*columns: Tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns])


LAYOUT_SCHEMA = _schema(("slots", IntegerType()), ("keys", LongType()), ("versions", BinaryType()))
SLOT_SCHEMA = _schema(("slot", IntegerType()))
ENTRIES_SCHEMA = _schema(("entries", BinaryType()))
AT_SCHEMA = _schema(("at", LongType()))


def state_variables(handle: Any) -> StateVariables:
    """Declare a processor's state variables on its `StatefulProcessorHandle`.

    The schemas are Spark types, not DDL strings: a worker would send each
    string to the JVM to be parsed, five more round trips per task.
    """
    return StateVariables(
        handle.getValueState("layout", LAYOUT_SCHEMA),
        handle.getMapState("slots", SLOT_SCHEMA, ENTRIES_SCHEMA),
        handle.getMapState("wakes", SLOT_SCHEMA, AT_SCHEMA),
    )


def _versions_of(blob: bytes, slot_count: int) -> List[int]:
    """Each slot's version from the layout's bytes (0: never written)."""
    stored = list(struct.unpack(f"<{len(blob) // 8}q", blob))
    return stored + [0] * (slot_count - len(stored))


def _versions_blob(versions: List[int]) -> bytes:
    return struct.pack(f"<{len(versions)}q", *versions)


UNPICKLABLE_STATE = (
    "flowspark keeps every key's state in Spark's state store after each micro-batch, so a state must pickle"
    " (Bytewax pickles it only for recovery): keep open files, locks and connections out of it"
)
"""The note on a state that does not pickle: why flowspark needs what a Bytewax run without recovery does not."""

UNLOADABLE_STATE = (
    "a state saved after one micro-batch is loaded again for the next, and by a resumed run: keep the classes it"
    " is made of importable under the same names, or start with an empty recovery directory"
)
"""The note on a stored state that does not unpickle."""


def _encoded(step_id: str, wakes: Dict[str, int], snapshots: Dict[str, Any]) -> bytes:
    try:
        pickled = chunks.dumps(list(snapshots.values()))
    except Exception as error:
        raise _unpicklable(step_id, snapshots, error) from error
    return pickle.dumps((wakes, list(snapshots), pickled), pickle.HIGHEST_PROTOCOL)


def _unpicklable(step_id: str, snapshots: Dict[str, Any], error: Exception) -> StepFailure:
    """The failure for a slot that does not pickle, naming the first key whose snapshot does not pickle on its own."""
    culprit: Optional[str] = None
    cause = error
    for key, snapshot in snapshots.items():
        try:
            chunks.dumps(snapshot)
        except Exception as alone:
            culprit, cause = key, alone
            break
    cause.add_note(UNPICKLABLE_STATE)
    where = "" if culprit is None else f" for key {culprit!r}"
    return StepFailure(f"error pickling the state of step {step_id!r}{where}", cause)


def _unloadable(step_id: str, blob: bytes, error: Exception) -> StepFailure:
    """The failure for a stored slot whose snapshots do not unpickle, naming (some of) its keys."""
    keys = slot_keys(blob)
    shown = ", ".join(repr(key) for key in keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
    error.add_note(UNLOADABLE_STATE)
    return StepFailure(f"error unpickling the state of step {step_id!r} for keys {shown}", error)


def slot_keys(blob: bytes) -> List[str]:
    """The keys a slot holds, from the bytes flowspark stored for it in the run's own state store.

    The snapshots are a pickle of their own inside, so that listing keys
    needs none of the classes they are made of.
    """
    keys: List[str] = pickle.loads(blob)[1]
    return keys


def decoded(blob: bytes) -> Tuple[Dict[str, int], Dict[str, Any]]:
    """A slot's wake-ups and snapshots by key, from the bytes flowspark stored for it in the run's own state store."""
    wakes, keys, snapshots = pickle.loads(blob)
    return wakes, dict(zip(keys, chunks.loads(snapshots)))


class KeySlot:
    """One slot read during a call: its keys' snapshots and wake-ups, and its earliest wake-up as read."""

    __slots__ = ("snapshots", "wakes", "stored", "earliest_before")

    def __init__(self, stored: bytes) -> None:
        self.wakes, self.snapshots = decoded(stored) if stored else ({}, {})
        self.stored = stored
        """The slot's bytes as read (empty: no keys)."""
        self.earliest_before = min(self.wakes.values(), default=None)


class SlottedState:
    """One bucket's keys' snapshots and wake-ups during one handler call, over three of Spark's state variables.

    `layout` (value state: slot count, key count and each slot's version),
    `keyed_state` (map state: slot → its keys' wake-ups and snapshots) and
    `wakes` (map state: slot → its earliest wake-up, for timers).  Reads
    are cached until `save`, which writes the slots that changed; the slots
    read or saved are then kept in the worker's `cache`, for the bucket's
    next call.
    """

    def __init__(self, variables: StateVariables, bucket: str, step_id: str, cache: SlotCache = WORKER_CACHE) -> None:
        self._layout = variables.layout
        self._step_id = step_id
        """The stateful step the bucket belongs to, which a state that fails to pickle or unpickle names."""
        self._slots = variables.slots
        self._wakes = variables.wakes
        self._bucket = bucket
        self._cache = cache
        stored = self._layout.get()
        if stored is None:
            self._slot_count, self._key_count, self._versions = 1, 0, [0]
        else:
            self._slot_count, self._key_count = int(stored[0]), int(stored[1])
            self._versions = _versions_of(bytes(stored[2]), self._slot_count)
        self._stored_layout = (self._slot_count, self._key_count, list(self._versions))
        self._loaded: Dict[int, KeySlot] = {}
        self._dirty: Set[int] = set()

    @property
    def slot_count(self) -> int:
        return self._slot_count

    @property
    def bucket(self) -> str:
        """The bucket's Spark group."""
        return self._bucket

    def key_slot(self, slot: int) -> KeySlot:
        """A slot's keys as read in this call (with the changes not yet saved); read at most once per call."""
        found = self._loaded.get(slot)
        if found is None:
            found = self._loaded[slot] = self._key_slot_of(self._read(slot))
        return found

    def _key_slot_of(self, stored: bytes) -> KeySlot:
        try:
            return KeySlot(stored)
        except Exception as error:
            raise _unloadable(self._step_id, stored, error) from error

    def _read(self, slot: int) -> bytes:
        """A slot's bytes as saved (empty: no keys): from the worker's cache if it kept them, else from the store."""
        kept = self._cache.get(self._bucket, self._slot_count, slot, self._versions[slot])
        if kept is not None:
            return kept
        stored = self._slots.getValue((slot,))
        return b"" if stored is None else bytes(stored[0])

    def get(self, key: str) -> Optional[Stored]:
        """What the bucket holds for `key`, or None if nothing."""
        target = self.key_slot(slot_of(key, self._slot_count))
        if key not in target.snapshots:
            return None
        return Stored(target.snapshots[key], target.wakes.get(key))

    def put(self, key: str, snapshot: Any, wake_ms: Optional[int]) -> None:
        """Replace `key`'s snapshot and wake-up, to be written by `save`."""
        self.put_in(slot_of(key, self._slot_count), key, snapshot, wake_ms)

    def put_in(self, slot: int, key: str, snapshot: Any, wake_ms: Optional[int]) -> None:
        """`put` for a key whose slot (`slot_of`) the caller knows."""
        target = self.key_slot(slot)
        self._key_count += key not in target.snapshots
        target.snapshots[key] = snapshot
        if wake_ms is not None:
            target.wakes[key] = wake_ms
        elif target.wakes:
            target.wakes.pop(key, None)
        self._dirty.add(slot)

    def remove(self, key: str) -> None:
        """Drop `key` from the bucket (nothing if it holds nothing for it)."""
        self.remove_in(slot_of(key, self._slot_count), key)

    def remove_in(self, slot: int, key: str) -> None:
        """`remove` for a key whose slot (`slot_of`) the caller knows."""
        target = self.key_slot(slot)
        if key not in target.snapshots:
            return
        del target.snapshots[key]
        target.wakes.pop(key, None)
        self._key_count -= 1
        self._dirty.add(slot)

    def items(self) -> Iterator[Tuple[str, Stored]]:
        """What the bucket holds for every key, in one scan of the slots (changes not yet saved included)."""
        seen: Set[int] = set()
        for (slot,), (blob,) in self._slots.iterator():
            seen.add(slot)
            loaded = self._loaded.get(slot)
            yield from _stored_items(self._key_slot_of(bytes(blob)) if loaded is None else loaded)
        for slot, loaded in self._loaded.items():
            if slot not in seen:
                yield from _stored_items(loaded)

    def slot_ids(self) -> List[int]:
        """The bucket's slots that hold keys, in order (saved changes included)."""
        stored = {slot for (slot,) in self._slots.keys()}
        return sorted(stored | {slot for slot, loaded in self._loaded.items() if loaded.snapshots})

    def earliest(self) -> Optional[int]:
        """The bucket's earliest wake-up as saved (epoch ms), None if no key asks to be woken."""
        return min((at for _, (at,) in self._wakes.iterator()), default=None)

    def due(self, now_ms: int) -> List[str]:
        """The keys whose wake-up is at or before `now_ms`, sorted."""
        due_slots = [slot for (slot,), (at,) in self._wakes.iterator() if at <= now_ms]
        due: List[str] = []
        for slot in due_slots:
            due.extend(key for key, at in self.key_slot(slot).wakes.items() if at <= now_ms)
        return sorted(due)

    def save(self, register_timer: Callable[[int], None]) -> None:
        """Write the slots that changed, their earliest wake-ups, timers and versions; then keep what was read.

        If the slots now hold more than `SLOT_KEYS` keys on average, the
        bucket is spread over enough slots, in one pass (`_grow`).  A
        snapshot that does not pickle fails naming the step and its key.
        """
        registered: Set[int] = set()
        version = new_version()
        for slot, loaded in self._loaded.items():
            stored = loaded.stored
            if slot in self._dirty:
                stored = self._write(
                    slot, loaded.wakes, loaded.snapshots, loaded.earliest_before, registered, register_timer
                )
                self._versions[slot] = version
            self._cache.keep(self._bucket, self._slot_count, slot, self._versions[slot], stored)
        self._dirty.clear()
        self._loaded.clear()
        if self._key_count > self._slot_count * SLOT_KEYS:
            self._grow(version, registered, register_timer)
        layout = (self._slot_count, self._key_count, self._versions)
        if layout != self._stored_layout:
            self._layout.update((self._slot_count, self._key_count, _versions_blob(self._versions)))
            self._stored_layout = (self._slot_count, self._key_count, list(self._versions))

    def _write(
        self,
        slot: int,
        wakes: Dict[str, int],
        snapshots: Dict[str, Any],
        before: Optional[int],
        registered: Set[int],
        register_timer: Callable[[int], None],
    ) -> bytes:
        """Store one slot, and its earliest wake-up (with a timer for it) if that changed; the slot's bytes (empty: no keys)."""
        stored = _encoded(self._step_id, wakes, snapshots) if snapshots else b""
        if stored:
            self._slots.updateValue((slot,), (stored,))
        else:
            self._slots.removeKey((slot,))
        earliest = min(wakes.values(), default=None)
        if earliest != before:
            if earliest is None:
                self._wakes.removeKey((slot,))
            else:
                self._wakes.updateValue((slot,), (earliest,))
                if earliest not in registered:
                    register_timer(earliest)
                    registered.add(earliest)
        return stored

    def _grow(self, version: int, registered: Set[int], register_timer: Callable[[int], None]) -> None:
        """Spread the keys over enough slots for `SLOT_KEYS` each, one old slot in memory at a time.

        Slot counts are powers of two and `slot_of` takes the low bits of
        the key's hash, so a key of slot `s` of `n` lands in a slot
        `s + j * n` of the new count: each old slot splits on its own.
        Every slot gets `version`; none is kept by the cache, which keeps a
        bucket's slots for one slot count.
        """
        n = self._slot_count
        grown = n
        while self._key_count > grown * SLOT_KEYS:
            grown *= 2
        for slot in range(n):
            stored = self._read(slot)
            if not stored:
                continue
            old = self._key_slot_of(stored)
            parts: Dict[int, Tuple[Dict[str, int], Dict[str, Any]]] = {}
            for key, snapshot in old.snapshots.items():
                wakes, snapshots = parts.setdefault(slot_of(key, grown), ({}, {}))
                snapshots[key] = snapshot
                if key in old.wakes:
                    wakes[key] = old.wakes[key]
            if slot not in parts:
                self._write(slot, {}, {}, old.earliest_before, registered, register_timer)
            for target, (wakes, snapshots) in parts.items():
                before = old.earliest_before if target == slot else None
                self._write(target, wakes, snapshots, before, registered, register_timer)
        self._slot_count = grown
        self._versions = [version] * grown


def _stored_items(slot: KeySlot) -> Iterator[Tuple[str, Stored]]:
    wakes = slot.wakes
    return ((key, Stored(snapshot, wakes.get(key))) for key, snapshot in slot.snapshots.items())
