"""The Spark groups that carry each stateful step's key buckets.

A key's state lives in one bucket of its step (`bucket_of`), and a bucket is
one group of Spark's `groupBy(grp).transformWithState`, named
`S<step>/<bucket>`.  Spark sends a group to shuffle partition
`pmod(murmur3(grp), P)`, so with plain names the buckets spread unevenly
over the `P` tasks of the state operator (9 and 7 of 16 buckets for the
first step at `P = 2`, 5/5/4/2 at `P = 4`), and the busiest task sets the
pace of every micro-batch.

Balanced names carry a suffix (`S0/3.517`) chosen so that Spark's hash is
congruent to the bucket modulo `BALANCED_MODULUS`: for every parallelism
that divides it (1-8, 10, 12, 14, 15, 16, ...), bucket `b` lands in
partition `b mod P`, as evenly as the bucket count allows.  A group's name
is part of the state Spark keeps for it, so the names are recorded in the
recovery directory and a resumed run uses the recorded ones.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, List, Tuple

from flowspark.engine.plan.destinations import stateful_group

if TYPE_CHECKING:
    from flowspark.engine.plan.plan import Plan

DEFAULT_BUCKETS = 16
"""Key buckets per stateful step, unless a run keeps one worker's order."""

BALANCED_MODULUS = 16 * 3 * 5 * 7
"""The names' hashes are congruent to their bucket modulo this (1680): every P dividing it balances."""


def bucket_of(key: str, buckets: int) -> int:
    """The bucket a key's state lives in; stable across processes and runs."""
    return zlib.crc32(key.encode()) % buckets


@dataclass(frozen=True)
class Groups:
    """The group name of every bucket of every stateful step (picklable, sent to the workers)."""

    buckets: int
    names: List[List[str]]

    @classmethod
    def balanced(cls, steps: int, buckets: int) -> Groups:
        """Names that spread buckets evenly over Spark's shuffle partitions (see the module doc)."""
        return cls(buckets, [list(_balanced_names(step, buckets)) for step in range(steps)])

    def name(self, step: int, bucket: int) -> str:
        return self.names[step][bucket]


@functools.lru_cache(maxsize=256)
def _balanced_names(step: int, buckets: int) -> Tuple[str, ...]:
    """A step's balanced bucket names; the search for each costs a thousand hashes, so each process does it once."""
    return tuple(_balanced_name(step, bucket, buckets) for bucket in range(buckets))


def _balanced_name(step: int, bucket: int, buckets: int) -> str:
    modulus = BALANCED_MODULUS if BALANCED_MODULUS % buckets == 0 else buckets
    for salt in count():
        name = stateful_group(step, bucket, salt)
        if spark_string_hash(name) % modulus == bucket % modulus:
            return name
    msg = "unreachable: some salt always matches"
    raise AssertionError(msg)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593) & 0xFFFFFFFF


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF


def spark_string_hash(text: str, seed: int = 42) -> int:
    """Spark's `hash()` of a string (Murmur3 x86-32 with Spark's byte-wise tail), as a signed int."""
    data = text.encode("utf-8")
    h1 = seed
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i : i + 4], "little")))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & 0xFFFFFFFF))
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def new_groups(plan: Plan, buckets: int = DEFAULT_BUCKETS) -> Groups:
    """The state groups of a run that starts afresh (and records them); a resumed run keeps the recorded ones.

    A run that keeps one Bytewax worker's order (`Plan.ordered`) gives each
    stateful step one bucket: one task then calls the step's logics for
    all keys, round by round in Bytewax's order, so that an object the
    logics share (a model every key updates) sees the calls in that order.
    """
    return Groups.balanced(len(plan.stateful), 1 if plan.ordered else buckets)
