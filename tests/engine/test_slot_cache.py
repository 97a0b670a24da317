"""A Python worker's kept slots: used only at the version they were kept with, and bounded."""

from __future__ import annotations

from flowspark.engine.slot_cache import SlotCache, new_version


def test_a_kept_slot_is_taken_once_at_its_version() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, earliest=None, entries={"a": b"1"})
    assert cache.take("S0/0", 4, 1, version=7) == (None, {"a": b"1"})
    assert cache.take("S0/0", 4, 1, version=7) is None  # the call that took it owns it now
    assert cache.keys == 0


def test_a_slot_kept_at_another_version_is_not_used_and_is_let_go() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, earliest=5, entries={"a": b"1"})
    assert cache.take("S0/0", 4, 1, version=8) is None
    assert cache.keys == 0
    assert cache.take("S0/0", 4, 1, version=7) is None


def test_slots_of_another_bucket_or_slot_count_are_apart() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, earliest=None, entries={"a": b"1"})
    assert cache.take("S0/1", 4, 1, version=7) is None
    assert cache.take("S0/0", 8, 1, version=7) is None  # the bucket grew: its keys moved
    assert cache.keys == 0


def test_the_cache_keeps_no_more_keys_than_its_capacity() -> None:
    cache = SlotCache(capacity_keys=10)
    for slot in range(5):
        cache.keep("S0/0", 8, slot, version=1, earliest=None, entries={f"{slot}-{i}": b"" for i in range(4)})
    assert cache.keys == 8
    assert [cache.take("S0/0", 8, slot, version=1) is not None for slot in range(5)] == [True, True, False, False, False]
    cache.keep("S0/0", 8, 4, version=1, earliest=None, entries={"x": b""})
    assert cache.keys == 1


def test_versions_differ_and_are_never_zero() -> None:
    versions = {new_version() for _ in range(1000)}
    assert len(versions) == 1000 and 0 not in versions and all(v > 0 for v in versions)
