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
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

SLOT_KEYS = 256
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


def _encoded(entries: Dict[str, bytes]) -> bytes:
    return pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)


def decoded(blob: bytes) -> Dict[str, bytes]:
    """A slot's entries, from the bytes flowspark stored for it in the run's own state store."""
    entries: Dict[str, bytes] = pickle.loads(blob)
    return entries


def _earliest(entries: Dict[str, bytes]) -> Optional[int]:
    wakes = [at for at in map(wake_of, entries.values()) if at is not None]
    return min(wakes, default=None)


class SlottedState:
    """One bucket's keys' stored values during one handler call, over three of Spark's state variables.

    `layout` (value state: slot count and key count), `slots` (map state:
    slot → its keys' values) and `wakes` (map state: slot → its earliest
    wake-up).  Reads are cached for the call; writes are kept until `save`.
    """

    def __init__(self, layout: Any, slots: Any, wakes: Any) -> None:
        self._layout = layout
        self._slots = slots
        self._wakes = wakes
        stored = layout.get()
        self._slot_count, self._key_count = (1, 0) if stored is None else (int(stored[0]), int(stored[1]))
        self._stored_layout = (self._slot_count, self._key_count)
        self._loaded: Dict[int, Dict[str, bytes]] = {}
        self._earliest_before: Dict[int, Optional[int]] = {}
        self._put_wakes: Dict[int, Dict[str, int]] = {}
        """Per slot, the wake-ups put since it was read (enough for its earliest when it held none then)."""
        self._dirty: Set[int] = set()

    @property
    def slot_count(self) -> int:
        return self._slot_count

    def _slot(self, slot: int) -> Dict[str, bytes]:
        entries = self._loaded.get(slot)
        if entries is None:
            stored = self._slots.getValue((slot,))
            entries = self._keep(slot, None if stored is None else stored[0])
        return entries

    def _keep(self, slot: int, blob: Optional[bytes]) -> Dict[str, bytes]:
        entries = {} if blob is None else decoded(blob)
        self._loaded[slot] = entries
        self._earliest_before[slot] = _earliest(entries)
        return entries

    def get(self, key: str) -> Optional[bytes]:
        """`key`'s stored value, or None if it has none."""
        return self._slot(slot_of(key, self._slot_count)).get(key)

    def put(self, key: str, value: Optional[bytes]) -> None:
        """Replace `key`'s stored value (None removes it), to be written by `save`."""
        slot = slot_of(key, self._slot_count)
        entries = self._slot(slot)
        had = key in entries
        if value is None:
            if not had:
                return
            del entries[key]
            self._key_count -= 1
        else:
            entries[key] = value
            self._key_count += 0 if had else 1
            at = wake_of(value)
            if at is not None:
                self._put_wakes.setdefault(slot, {})[key] = at
        self._dirty.add(slot)

    def items(self) -> Iterator[Tuple[str, bytes]]:
        """Every key's stored value, in one scan of the slots (changes not yet saved included)."""
        seen: Set[int] = set()
        for (slot,), (blob,) in self._slots.iterator():
            seen.add(slot)
            entries = self._loaded.get(slot)
            yield from (decoded(blob) if entries is None else entries).items()
        for slot, entries in self._loaded.items():
            if slot not in seen:
                yield from entries.items()

    def due(self, now_ms: int) -> List[str]:
        """The keys whose wake-up is at or before `now_ms`, sorted."""
        due_slots = [slot for (slot,), (at,) in self._wakes.iterator() if at <= now_ms]
        due: List[str] = []
        for slot in due_slots:
            due.extend(key for key, value in self._slot(slot).items() if (at := wake_of(value)) is not None and at <= now_ms)
        return sorted(due)

    def slot_ids(self) -> List[int]:
        """The bucket's slots that hold keys, in order (saved changes included)."""
        return sorted({slot for (slot,) in self._slots.keys()} | {slot for slot, entries in self._loaded.items() if entries})

    def entries_of(self, slot: int) -> Dict[str, bytes]:
        """The stored values of one slot's keys."""
        return dict(self._slot(slot))

    def save(self, register_timer: Callable[[int], None]) -> None:
        """Write the slots that changed, their earliest wake-ups and timers; then drop what was read.

        If the slots now hold more than `SLOT_KEYS` keys on average, they
        are doubled until they do not.
        """
        registered: Set[int] = set()
        for slot in self._dirty:
            self._write(slot, self._loaded[slot], registered, register_timer)
        self._dirty.clear()
        self._loaded.clear()
        self._earliest_before.clear()
        self._put_wakes.clear()
        while self._key_count > self._slot_count * SLOT_KEYS:
            self._double(registered, register_timer)
        if (self._slot_count, self._key_count) != self._stored_layout:
            self._layout.update((self._slot_count, self._key_count))
            self._stored_layout = (self._slot_count, self._key_count)

    def _write(self, slot: int, entries: Dict[str, bytes], registered: Set[int],
               register_timer: Callable[[int], None], scan: bool = False) -> None:
        """Store one slot's entries and, if it changed, its earliest wake-up (`scan`: look at every entry for it)."""
        if entries:
            self._slots.updateValue((slot,), (_encoded(entries),))
        else:
            self._slots.removeKey((slot,))
        before = self._earliest_before.get(slot)
        if before is None and not scan:
            # No key of the slot had a wake-up when it was read: only those put since can have one.
            put = [at for key, at in self._put_wakes.get(slot, {}).items() if entries.get(key) is not None and wake_of(entries[key]) == at]
            earliest = min(put, default=None)
        else:
            earliest = _earliest(entries)
        if earliest == before:
            return
        if earliest is None:
            self._wakes.removeKey((slot,))
            return
        self._wakes.updateValue((slot,), (earliest,))
        if earliest not in registered:
            register_timer(earliest)
            registered.add(earliest)

    def _double(self, registered: Set[int], register_timer: Callable[[int], None]) -> None:
        """Split every slot `s` of `n` into slots `s` and `s + n` of `2n`, one slot in memory at a time.

        `slot_of` takes one more bit of the key's hash for `2n` slots, so
        each key either stays or moves up by exactly `n`.
        """
        n = self._slot_count
        for slot in range(n):
            entries = self._slot(slot)
            moved = {key: value for key, value in entries.items() if slot_of(key, 2 * n) != slot}
            if moved:
                kept = {key: value for key, value in entries.items() if key not in moved}
                self._write(slot, kept, registered, register_timer)
                self._earliest_before[slot + n] = None
                self._write(slot + n, moved, registered, register_timer, scan=True)
            self._loaded.clear()
            self._earliest_before.clear()
            self._put_wakes.clear()
        self._slot_count = 2 * n
