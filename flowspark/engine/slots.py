"""A bucket's key state, stored in slots of many keys each.

Every call to Spark's state store from a Python worker is a round trip to
the JVM, which costs far more than pickling a few hundred small snapshots.
So a bucket does not store one map entry per key: its keys are spread over
`slots` map entries, each holding the stored values of all its keys, and a
micro-batch reads and writes only the slots of the keys it touches.  A
bucket starts with one slot and doubles its slots whenever they hold more
than `SLOT_KEYS` keys on average, so a slot stays about as cheap to rewrite
as one round trip, whether the bucket holds ten keys or ten million.

The earliest wake-up of each slot's keys is a second map (`wakes`), so that
a timer finds its due keys by reading only the slots that are due.

The layout also records each slot's version, new at every write, so that a
Python worker can keep the slots it saved and use them in a later call
instead of reading them again, while they are still current (`slot_cache`).
"""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from flowspark.engine.slot_cache import WORKER_CACHE, SlotCache, new_version

SLOT_KEYS = 512
"""The average number of keys per slot above which a bucket doubles its slots."""

_SLOT_BITS_SKIPPED = 12
"""`slot_of` uses the CRC's bits above these, which `groups.bucket_of` does not use for power-of-two bucket counts."""

_WAKE_PREFIX = b"FSW"
_NO_WAKE = -1


def slot_of(key: str, slots: int) -> int:
    """The slot (of `slots`, a power of two) that holds `key`; stable across processes and runs."""
    return (zlib.crc32(key.encode()) >> _SLOT_BITS_SKIPPED) & (slots - 1)


def packed(snapshot: bytes, at_ms: Optional[int]) -> bytes:
    """A key's stored value: its wake-up (so reading the key reads both) and its pickled snapshot."""
    return _WAKE_PREFIX + (_NO_WAKE if at_ms is None else at_ms).to_bytes(8, "little", signed=True) + snapshot


def wake_of(stored: bytes) -> Optional[int]:
    """The wake-up (epoch ms) a stored value carries, or None."""
    at = int.from_bytes(stored[3:11], "little", signed=True)
    return None if at == _NO_WAKE else at


def snapshot_bytes(stored: bytes) -> bytes:
    """The pickled snapshot a stored value carries."""
    return stored[11:]


class StateVariables(NamedTuple):
    """The state variables of a bucket (see `SlottedState`), as a processor's handle declares them."""

    layout: Any
    slots: Any
    wakes: Any


def state_variables(handle: Any) -> StateVariables:
    """Declare a processor's state variables on its `StatefulProcessorHandle`."""
    return StateVariables(
        handle.getValueState("layout", "slots int, keys long, versions binary"),
        handle.getMapState("slots", "slot int", "entries binary"),
        handle.getMapState("wakes", "slot int", "at long"),
    )


def _versions_of(blob: bytes, slot_count: int) -> List[int]:
    """Each slot's version from the layout's bytes (0: never written)."""
    stored = list(struct.unpack(f"<{len(blob) // 8}q", blob))
    return stored + [0] * (slot_count - len(stored))


def _versions_blob(versions: List[int]) -> bytes:
    return struct.pack(f"<{len(versions)}q", *versions)


def _encoded(earliest: Optional[int], entries: Dict[str, bytes]) -> bytes:
    return pickle.dumps((earliest, entries), protocol=pickle.HIGHEST_PROTOCOL)


def decoded(blob: bytes) -> Tuple[Optional[int], Dict[str, bytes]]:
    """A slot's earliest wake-up and entries, from the bytes flowspark stored for it in the run's own state store."""
    earliest, entries = pickle.loads(blob)
    return earliest, entries


def _earliest(entries: Dict[str, bytes]) -> Optional[int]:
    wakes = [at for at in map(wake_of, entries.values()) if at is not None]
    return min(wakes, default=None)


class _Slot:
    """One slot read during a call: its entries, its earliest wake-up as read, and what changed it since."""

    __slots__ = ("entries", "earliest_before", "stored", "put_wakes", "lost_earliest")

    def __init__(self, stored: bytes) -> None:
        self.earliest_before, self.entries = decoded(stored) if stored else (None, {})
        self.stored = stored
        """The slot's bytes as read (empty: no keys)."""
        self.put_wakes: Dict[str, int] = {}
        self.lost_earliest = False
        """A key that held the earliest wake-up changed it: only a scan finds the new earliest."""

    def put(self, key: str, value: Optional[bytes]) -> None:
        """Set `key`'s value, or remove it (None)."""
        old = self.entries.get(key)
        if old is not None and self.earliest_before is not None and wake_of(old) == self.earliest_before:
            self.lost_earliest = True
        if value is None:
            self.entries.pop(key, None)
        else:
            self.entries[key] = value
            at = wake_of(value)
            if at is not None:
                self.put_wakes[key] = at

    def earliest(self) -> Optional[int]:
        """The earliest wake-up of the slot's keys now, scanning them only when it cannot be told otherwise."""
        if self.lost_earliest:
            return _earliest(self.entries)
        put = [at for key, at in self.put_wakes.items() if key in self.entries and wake_of(self.entries[key]) == at]
        candidates = put if self.earliest_before is None else [self.earliest_before, *put]
        return min(candidates, default=None)


class SlottedState:
    """One bucket's keys' stored values during one handler call, over three of Spark's state variables.

    `layout` (value state: slot count, key count and each slot's version),
    `slots` (map state: slot → its earliest wake-up and its keys' values)
    and `wakes` (map state: slot → its earliest wake-up, for timers).
    Reads are cached until `save`, which writes what changed; the slots
    read or saved are then kept in the worker's `cache`, for the bucket's
    next call.
    """

    def __init__(self, variables: StateVariables, bucket: str, cache: SlotCache = WORKER_CACHE) -> None:
        self._layout = variables.layout
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
        self._loaded: Dict[int, _Slot] = {}
        self._dirty: Set[int] = set()

    @property
    def slot_count(self) -> int:
        return self._slot_count

    def _slot(self, slot: int) -> _Slot:
        found = self._loaded.get(slot)
        if found is None:
            found = self._loaded[slot] = _Slot(self._read(slot))
        return found

    def _read(self, slot: int) -> bytes:
        """A slot's bytes as saved (empty: no keys): from the worker's cache if it kept them, else from the store."""
        kept = self._cache.get(self._bucket, self._slot_count, slot, self._versions[slot])
        if kept is not None:
            return kept
        stored = self._slots.getValue((slot,))
        return b"" if stored is None else bytes(stored[0])

    def get(self, key: str) -> Optional[bytes]:
        """`key`'s stored value, or None if it has none."""
        return self.get_in(slot_of(key, self._slot_count), key)

    def get_in(self, slot: int, key: str) -> Optional[bytes]:
        """`get` for a key whose slot (`slot_of`) the caller knows."""
        return self._slot(slot).entries.get(key)

    def put(self, key: str, value: Optional[bytes]) -> None:
        """Replace `key`'s stored value (None removes it), to be written by `save`."""
        self.put_in(slot_of(key, self._slot_count), key, value)

    def put_in(self, slot: int, key: str, value: Optional[bytes]) -> None:
        """`put` for a key whose slot (`slot_of`) the caller knows."""
        target = self._slot(slot)
        had = key in target.entries
        if value is None and not had:
            return
        target.put(key, value)
        self._key_count += (value is not None) - had
        self._dirty.add(slot)

    def items(self) -> Iterator[Tuple[str, bytes]]:
        """Every key's stored value, in one scan of the slots (changes not yet saved included)."""
        seen: Set[int] = set()
        for (slot,), (blob,) in self._slots.iterator():
            seen.add(slot)
            loaded = self._loaded.get(slot)
            yield from (decoded(blob)[1] if loaded is None else loaded.entries).items()
        for slot, loaded in self._loaded.items():
            if slot not in seen:
                yield from loaded.entries.items()

    def slot_ids(self) -> List[int]:
        """The bucket's slots that hold keys, in order (saved changes included)."""
        stored = {slot for (slot,) in self._slots.keys()}
        return sorted(stored | {slot for slot, loaded in self._loaded.items() if loaded.entries})

    def entries_of(self, slot: int) -> Dict[str, bytes]:
        """The stored values of one slot's keys."""
        return dict(self._slot(slot).entries)

    def due(self, now_ms: int) -> List[str]:
        """The keys whose wake-up is at or before `now_ms`, sorted."""
        due_slots = [slot for (slot,), (at,) in self._wakes.iterator() if at <= now_ms]
        due: List[str] = []
        for slot in due_slots:
            entries = self._slot(slot).entries
            due.extend(key for key, value in entries.items() if (at := wake_of(value)) is not None and at <= now_ms)
        return sorted(due)

    def save(self, register_timer: Callable[[int], None]) -> None:
        """Write the slots that changed, their earliest wake-ups, timers and versions; then keep what was read.

        If the slots now hold more than `SLOT_KEYS` keys on average, the
        bucket is spread over enough slots, in one pass (`_grow`).
        """
        registered: Set[int] = set()
        version = new_version()
        for slot, loaded in self._loaded.items():
            stored = loaded.stored
            if slot in self._dirty:
                stored = self._write(slot, loaded.entries, loaded.earliest(), loaded.earliest_before, registered, register_timer)
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

    def _write(self, slot: int, entries: Dict[str, bytes], earliest: Optional[int], before: Optional[int],
               registered: Set[int], register_timer: Callable[[int], None]) -> bytes:
        """Store one slot, and its earliest wake-up (with a timer for it) if that changed; the slot's bytes (empty: no keys)."""
        stored = _encoded(earliest, entries) if entries else b""
        if stored:
            self._slots.updateValue((slot,), (stored,))
        else:
            self._slots.removeKey((slot,))
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
            before, entries = decoded(stored)
            parts: Dict[int, Dict[str, bytes]] = {}
            for key, value in entries.items():
                parts.setdefault(slot_of(key, grown), {})[key] = value
            if slot not in parts:
                self._write(slot, {}, None, before, registered, register_timer)
            for target, part in parts.items():
                self._write(target, part, _earliest(part), before if target == slot else None, registered, register_timer)
        self._slot_count = grown
        self._versions = [version] * grown
