"""A Python worker's kept slots: used only at the version they were kept with, and bounded."""

from __future__ import annotations

from flowspark.engine.state.keyed_state_cache import SlotCache, new_version


def test_a_kept_slot_is_found_at_its_version() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, blob=b"slot")
    assert cache.get("S0/0", 4, 1, version=7) == b"slot"
    assert cache.get("S0/0", 4, 1, version=7) == b"slot"
    assert cache.size == 4


def test_a_slot_kept_at_another_version_is_not_used_and_is_let_go() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, blob=b"slot")
    assert cache.get("S0/0", 4, 1, version=8) is None
    assert cache.size == 0
    assert cache.get("S0/0", 4, 1, version=7) is None


def test_a_slot_kept_again_replaces_its_older_bytes() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, blob=b"old")
    cache.keep("S0/0", 4, 1, version=9, blob=b"newer")
    assert cache.get("S0/0", 4, 1, version=9) == b"newer"
    assert cache.size == 5


def test_slots_of_another_bucket_or_slot_count_are_apart() -> None:
    cache = SlotCache()
    cache.keep("S0/0", 4, 1, version=7, blob=b"slot")
    assert cache.get("S0/1", 4, 1, version=7) is None
    assert cache.get("S0/0", 8, 1, version=7) is None  # the bucket grew: its keys moved
    assert cache.size == 0


def test_the_cache_keeps_no_more_bytes_than_its_capacity() -> None:
    cache = SlotCache(capacity_bytes=10)
    for slot in range(5):
        cache.keep("S0/0", 8, slot, version=1, blob=b"abcd")
    assert cache.size == 8
    assert [cache.get("S0/0", 8, slot, version=1) is not None for slot in range(5)] == [True, True, False, False, False]
    cache.keep("S0/0", 8, 0, version=2, blob=b"")  # an emptied slot is kept, and frees its bytes
    assert cache.get("S0/0", 8, 0, version=2) == b""
    assert cache.size == 4


def test_versions_differ_and_are_never_zero() -> None:
    versions = {new_version() for _ in range(1000)}
    assert len(versions) == 1000 and 0 not in versions and all(v > 0 for v in versions)
