"""The slots a Python worker read or wrote, kept for its next micro-batch.

Reading a slot from Spark's state store is a round trip to the JVM, which
also unpickles the slot's key and pickles its value there.  A Python worker
that handled a bucket in one micro-batch often handles it again in the
next, so it keeps the decoded slots it saved (or read unchanged), and a
later call takes a slot from here instead of reading it.

A kept slot is used only if the bucket's layout (read at the start of every
call, in the same task that reads the slots) still names the version the
slot was kept with.  Every write of a slot gives it a new random version,
so a slot written since by another worker, a micro-batch that Spark ran
again from an earlier state, a resumed run or another run in the same
worker all miss, and read the store.  A slot is taken out while a call
uses it and put back only when the call saves: a call that fails or is cut
short leaves nothing it changed behind.

The worker keeps at most `CAPACITY_KEYS` keys' values: beyond that it keeps
no more slots until some are taken, so memory stays bounded however many
keys the state holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

CAPACITY_KEYS = 500_000
"""The most keys whose stored values one Python worker keeps."""

Entries = Dict[str, bytes]
"""A slot's keys and their stored values (`slots.packed`)."""


def new_version() -> int:
    """A version for the slots one save writes: random, never 0 (the version of a slot never written).

    Spark forks its Python workers from one daemon, so `random`'s state is
    the same in all of them; the OS's randomness is not.
    """
    return int.from_bytes(os.urandom(8), "little") >> 1 | 1


@dataclass
class _KeptBucket:
    slot_count: int
    slots: Dict[int, Tuple[int, Optional[int], Entries]] = field(default_factory=dict)
    """slot -> (version, earliest wake-up, entries)."""


class SlotCache:
    """Decoded slots by bucket, each with the version it was stored with."""

    def __init__(self, capacity_keys: int = CAPACITY_KEYS) -> None:
        self._capacity = capacity_keys
        self._buckets: Dict[str, _KeptBucket] = {}
        self._keys = 0

    @property
    def keys(self) -> int:
        """How many keys' values are kept now."""
        return self._keys

    def take(self, bucket: str, slot_count: int, slot: int, version: int) -> Optional[Tuple[Optional[int], Entries]]:
        """The slot's earliest wake-up and entries if kept at `version`, removed from the cache; else None."""
        kept = self._bucket(bucket, slot_count)
        found = kept.slots.pop(slot, None)
        if found is None:
            return None
        self._keys -= len(found[2])
        at_version, earliest, entries = found
        return (earliest, entries) if at_version == version else None

    def keep(self, bucket: str, slot_count: int, slot: int, version: int, earliest: Optional[int], entries: Entries) -> None:
        """Keep a slot as stored at `version`, unless that would pass the capacity.

        The cache owns `entries` from now on: the caller must not change it.
        """
        kept = self._bucket(bucket, slot_count)
        old = kept.slots.pop(slot, None)
        if old is not None:
            self._keys -= len(old[2])
        if self._keys + len(entries) > self._capacity:
            return
        kept.slots[slot] = (version, earliest, entries)
        self._keys += len(entries)

    def _bucket(self, bucket: str, slot_count: int) -> _KeptBucket:
        """The bucket's kept slots; none if its slot count changed (its keys moved to other slots)."""
        kept = self._buckets.get(bucket)
        if kept is None or kept.slot_count != slot_count:
            if kept is not None:
                self._keys -= sum(len(entries) for _, _, entries in kept.slots.values())
            kept = self._buckets[bucket] = _KeptBucket(slot_count)
        return kept


WORKER_CACHE = SlotCache()
"""This Python worker's cache: a worker runs one task at a time."""
