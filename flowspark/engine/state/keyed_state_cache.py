"""The slots a Python worker read or wrote, kept for its next micro-batch.

Reading a slot from Spark's state store is a round trip to the JVM, which
also unpickles the slot's key and pickles its value there.  A Python worker
that handled a bucket in one micro-batch often handles it again in the
next, so it keeps the bytes of the slots it saved (or read unchanged), and
a later call decodes a slot from here instead of reading it.

A kept slot is used only if the bucket's layout (read at the start of every
call, in the same task that reads the slots) still names the version the
slot was kept with.  Every write of a slot gives it a new random version,
so a slot written since by another worker, a micro-batch that Spark ran
again from an earlier state, a resumed run or another run in the same
worker all miss, and read the store.

The cache holds the slots' bytes as stored, one object per slot rather than
a decoded dictionary per slot: the worker's memory then stays bounded by
`CAPACITY_BYTES` plus what a micro-batch needs, instead of pinning the
allocator's pages that a micro-batch's short-lived objects share with a
cached key's objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

CAPACITY_BYTES = 64 << 20
"""The most bytes of slots one Python worker keeps."""


def new_version() -> int:
    """A version for the slots one save writes: random, never 0 (the version of a slot never written).

    Spark forks its Python workers from one daemon, so `random`'s state is
    the same in all of them; the OS's randomness is not.
    """
    return int.from_bytes(os.urandom(8), "little") >> 1 | 1


@dataclass
class _KeptBucket:
    slot_count: int
    slots: Dict[int, Tuple[int, bytes]] = field(default_factory=dict)
    """slot -> (version, the slot's bytes as stored; empty for a slot without keys)."""


class SlotCache:
    """The bytes of slots by bucket, each with the version it was stored with."""

    def __init__(self, capacity_bytes: int = CAPACITY_BYTES) -> None:
        self._capacity = capacity_bytes
        self._buckets: Dict[str, _KeptBucket] = {}
        self._size = 0

    @property
    def size(self) -> int:
        """How many bytes of slots are kept now."""
        return self._size

    def get(self, bucket: str, slot_count: int, slot: int, version: int) -> Optional[bytes]:
        """The slot's bytes if kept at `version` (empty: no keys); None if not, and a stale copy is let go."""
        kept = self._bucket(bucket, slot_count)
        found = kept.slots.get(slot)
        if found is None:
            return None
        if found[0] != version:
            self._drop(kept, slot)
            return None
        return found[1]

    def keep(self, bucket: str, slot_count: int, slot: int, version: int, blob: bytes) -> None:
        """Keep a slot's bytes as stored at `version` (empty: no keys), unless that would pass the capacity."""
        kept = self._bucket(bucket, slot_count)
        self._drop(kept, slot)
        if self._size + len(blob) > self._capacity:
            return
        kept.slots[slot] = (version, blob)
        self._size += len(blob)

    def _drop(self, kept: _KeptBucket, slot: int) -> None:
        old = kept.slots.pop(slot, None)
        if old is not None:
            self._size -= len(old[1])

    def _bucket(self, bucket: str, slot_count: int) -> _KeptBucket:
        """The bucket's kept slots; none if its slot count changed (its keys moved to other slots)."""
        kept = self._buckets.get(bucket)
        if kept is None or kept.slot_count != slot_count:
            if kept is not None:
                self._size -= sum(len(blob) for _, blob in kept.slots.values())
            kept = self._buckets[bucket] = _KeptBucket(slot_count)
        return kept


WORKER_CACHE = SlotCache()
"""This Python worker's cache: a worker runs one task at a time."""
