"""How a stateful step's keys are stored: their snapshots and wake-ups, in slots of many keys pickled whole."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

import pytest

from flowspark.engine.plan import chunks
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.state.keyed_state import (
    SLOT_KEYS,
    SlottedState,
    Stored,
    decoded,
    slot_keys,
    slot_of,
    state_variables,
)
from flowspark.engine.state.keyed_state_cache import SlotCache
from flowspark.engine.state.stateful import SLOT_GROUP
from flowspark.engine.state.stateful import _Bucket as BucketKeys

_InMemoryStatefulProcessorHandle = pytest.importorskip(
    "pyspark.sql.streaming.tws_tester", reason="PySpark 4.2 on has it"
)._InMemoryStatefulProcessorHandle


class _Bucket:
    """One bucket's state variables in PySpark's in-memory state handle (the one `TwsTester` uses)."""

    def __init__(self) -> None:
        self.handle = _InMemoryStatefulProcessorHandle(timeMode="ProcessingTime")
        self.handle.setGroupingKey(("S0/0",))
        self.variables = state_variables(self.handle)
        self.layout, self.slots, self.wakes = self.variables
        self.cache = SlotCache()
        """The Python worker's cache; `open(cache=SlotCache())` is a call in another worker."""
        self.slot_calls = 0
        self._count_calls_of(self.slots)

    def _count_calls_of(self, state: Any) -> None:
        """Count the slot reads and writes, each of which is a round trip to the JVM in a real run."""
        for name in ("getValue", "updateValue", "removeKey", "iterator"):
            call = getattr(state, name)

            def counted(*args: Any, _call: Any = call) -> Any:
                self.slot_calls += 1
                return _call(*args)

            setattr(state, name, counted)

    def open(self, cache: Optional[SlotCache] = None) -> SlottedState:
        return SlottedState(self.variables, "S0/0", "flow.step", self.cache if cache is None else cache)

    def slot_count_and_keys(self) -> Tuple[int, int]:
        slots, keys, _versions = self.layout.get()
        return slots, keys

    def save(self, state: SlottedState) -> None:
        state.save(self.handle.registerTimer)

    def stored_slots(self) -> Dict[int, Dict[str, Any]]:
        return {slot: decoded(blob)[1] for (slot,), (blob,) in self.slots.iterator()}

    def timers(self) -> List[int]:
        return sorted(self.handle.listTimers())


def _refuse_to_load() -> None:
    msg = "the snapshot's class is not importable here"
    raise ImportError(msg)


class _Unloadable:
    """A snapshot whose class a reader cannot load, as when the user's module is missing."""

    def __reduce__(self) -> Tuple[Any, Tuple[()]]:
        return _refuse_to_load, ()


def test_a_slot_carries_its_keys_snapshots_and_wake_ups() -> None:
    bucket = _Bucket()
    state = bucket.open()
    snap = {"windows": [1, 2]}
    big = list(range(chunks.PIECE_ITEMS * 2))
    state.put("waking", snap, 1_700_000_000_123)
    state.put("resting", snap, None)
    state.put("big", big, 5)
    state.put("none", None, None)
    bucket.save(state)
    state = bucket.open(cache=SlotCache())
    assert state.get("waking") == Stored(snap, 1_700_000_000_123)
    assert state.get("resting") == Stored(snap, None)
    assert state.get("big") == Stored(big, 5)
    assert state.get("none") == Stored(None, None)  # a snapshot of None is still held
    assert state.get("absent") is None


def test_a_snapshot_that_does_not_pickle_is_named_by_its_key_and_nothing_is_stored() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("fine", 1, None)
    state.put("locked", threading.Lock(), None)
    state.put("also fine", 2, None)
    with pytest.raises(StepFailure, match="error pickling the state of step 'flow.step' for key 'locked'") as info:
        bucket.save(state)
    assert isinstance(info.value.cause, TypeError)
    assert any("must pickle" in note for note in getattr(info.value.cause, "__notes__", []))
    assert bucket.stored_slots() == {}


def test_a_stored_snapshot_that_does_not_unpickle_names_the_step_and_the_slots_keys() -> None:
    bucket = _Bucket()
    state = bucket.open()
    for key in ("k1", "k2", "k3", "k4", "k5"):
        state.put(key, _Unloadable() if key == "k3" else 1, None)
    bucket.save(state)
    with pytest.raises(
        StepFailure, match=r"error unpickling the state of step 'flow.step' for keys '\w+', '\w+', '\w+' and 2 more"
    ) as info:
        bucket.open(cache=SlotCache()).get("k1")
    assert isinstance(info.value.cause, ImportError)
    assert any("empty recovery directory" in note for note in getattr(info.value.cause, "__notes__", []))


def test_a_slots_keys_are_listed_without_loading_their_snapshots() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", _Unloadable(), None)
    bucket.save(state)
    ((blob,),) = [value for _key, value in bucket.slots.iterator()]
    assert slot_keys(bytes(blob)) == ["k"]
    with pytest.raises(ImportError):
        decoded(bytes(blob))


def test_keys_written_in_one_call_are_read_back_in_the_next() -> None:
    bucket = _Bucket()
    state = bucket.open()
    for i in range(10):
        state.put(f"k{i}", b"s", None)
    bucket.save(state)
    again = bucket.open()
    assert [again.get(f"k{i}") for i in range(10)] == [Stored(b"s", None)] * 10
    assert again.get("other") is None
    assert len(bucket.stored_slots()) == 1  # ten keys fit one slot: one read for all of them


def test_a_bucket_doubles_its_slots_as_keys_grow_and_keeps_every_key() -> None:
    bucket = _Bucket()
    keys = [f"user{i}" for i in range(SLOT_KEYS * 5)]
    for start in range(0, len(keys), SLOT_KEYS // 2):
        state = bucket.open()
        for key in keys[start : start + SLOT_KEYS // 2]:
            state.put(key, key.encode(), None)
        bucket.save(state)
    assert bucket.slot_count_and_keys() == (8, len(keys))
    assert sum(len(entries) for entries in bucket.stored_slots().values()) == len(keys)
    state = bucket.open()
    assert all(state.get(key) == Stored(key.encode(), None) for key in keys)
    assert dict(state.items()) == {key: Stored(key.encode(), None) for key in keys}
    assert all(slot_of(key, 8) == slot for slot, entries in bucket.stored_slots().items() for key in entries)


def test_a_call_reads_and_writes_only_the_slots_of_the_keys_it_touches() -> None:
    bucket = _Bucket()
    state = bucket.open()
    for i in range(SLOT_KEYS * 4):
        state.put(f"k{i}", b"0", None)
    bucket.save(state)
    bucket.slot_calls = 0
    state = bucket.open(cache=SlotCache())
    state.put("k1", b"1", None)
    bucket.save(state)
    assert bucket.slot_calls == 2  # one read and one write of k1's slot


def test_removed_keys_leave_the_bucket_and_an_empty_slot_is_dropped() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("a", b"1", None)
    state.put("b", b"2", None)
    bucket.save(state)
    state = bucket.open()
    state.remove("a")
    state.remove("b")
    state.remove("never stored")
    bucket.save(state)
    assert bucket.stored_slots() == {}
    assert bucket.slot_count_and_keys() == (1, 0)


def test_due_keys_come_from_the_slots_whose_earliest_wake_up_passed() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("late", b"", 5_000)
    state.put("soon", b"", 1_000)
    state.put("never", b"", None)
    bucket.save(state)
    assert bucket.timers() == [1_000]
    assert [bucket.open().get(key) for key in ("late", "soon", "never")] == [
        Stored(b"", 5_000),
        Stored(b"", 1_000),
        Stored(b"", None),
    ]
    assert bucket.open().due(999) == []
    assert bucket.open().due(1_000) == ["soon"]
    assert bucket.open().due(9_999) == ["late", "soon"]
    state = bucket.open()
    state.put("soon", b"", None)
    bucket.save(state)
    assert bucket.timers() == [1_000, 5_000]  # the slot's earliest wake-up moved on
    assert bucket.open().due(9_999) == ["late"]


def test_doubling_the_slots_keeps_each_keys_wake_up_due() -> None:
    bucket = _Bucket()
    state = bucket.open()
    for i in range(SLOT_KEYS * 3):
        state.put(f"k{i}", b"", 1_000 + i)
    bucket.save(state)
    assert bucket.slot_count_and_keys() == (4, SLOT_KEYS * 3)
    assert bucket.open().due(1_000 + 9) == sorted(f"k{i}" for i in range(10))
    assert bucket.timers()[0] == 1_000
    assert len(bucket.open().due(10**9)) == SLOT_KEYS * 3


def test_a_worker_uses_the_slots_it_saved_without_reading_them_again() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", b"1", None)
    bucket.save(state)
    bucket.slot_calls = 0
    state = bucket.open()
    assert state.get("k") == Stored(b"1", None)
    state.put("k", b"2", None)
    bucket.save(state)
    assert bucket.slot_calls == 1  # the write only
    assert bucket.open(cache=SlotCache()).get("k") == Stored(b"2", None)


def test_a_slot_written_by_another_worker_since_is_read_from_the_store() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", b"mine", None)
    bucket.save(state)
    elsewhere = bucket.open(cache=SlotCache())
    elsewhere.put("k", b"theirs", None)
    bucket.save(elsewhere)
    assert bucket.open().get("k") == Stored(b"theirs", None)


def test_a_call_that_is_not_saved_leaves_no_change_in_the_cache() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", b"saved", None)
    bucket.save(state)
    failed = bucket.open()
    failed.put("k", b"lost", None)  # the user function raised: no save
    assert bucket.open().get("k") == Stored(b"saved", None)


def test_a_snapshot_changed_in_place_by_a_call_that_is_not_saved_stays_as_saved() -> None:
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", [1], None)
    bucket.save(state)
    failed = bucket.open()
    held = failed.get("k")
    assert held is not None
    held.snapshot.append(2)  # the user function grew its state, then raised: no save
    assert bucket.open().get("k") == Stored([1], None)


def test_state_rolled_back_to_an_earlier_version_is_read_as_stored() -> None:
    """Spark runs a failed micro-batch again from the state before it: what the worker kept since is stale."""
    bucket = _Bucket()
    state = bucket.open()
    state.put("k", b"before", None)
    bucket.save(state)
    layout, (blob,) = bucket.layout.get(), bucket.slots.getValue((0,))
    state = bucket.open()
    state.put("k", b"after", None)
    bucket.save(state)
    bucket.layout.update(layout)
    bucket.slots.updateValue((0,), (blob,))
    assert bucket.open().get("k") == Stored(b"before", None)


def test_a_grown_bucket_is_read_alike_by_the_worker_that_grew_it_and_by_another() -> None:
    bucket = _Bucket()
    keys = [f"user{i}" for i in range(SLOT_KEYS * 3)]
    state = bucket.open()
    for key in keys:
        state.put(key, key.encode(), None)
    bucket.save(state)
    for cache in (None, SlotCache()):
        state = bucket.open(cache=cache)
        assert dict(state.items()) == {key: Stored(key.encode(), None) for key in keys}
        assert all(state.get(key) == Stored(key.encode(), None) for key in keys)


def test_a_micro_batch_goes_through_its_keys_a_group_of_slots_at_a_time_in_slot_order() -> None:
    bucket = _Bucket()
    state = bucket.open()
    keys = sorted(f"user{i}" for i in range(SLOT_KEYS * SLOT_GROUP * 3))
    for key in keys:
        state.put(key, 1, None)
    bucket.save(state)
    state = bucket.open()
    slot_count = state.slot_count
    assert slot_count > SLOT_GROUP
    groups = list(BucketKeys("flow.step", lambda resume: None, state).slot_groups(keys))
    flat = [pair for group in groups for pair in group]
    assert flat == sorted((slot_of(key, slot_count), key) for key in keys)
    assert all(len({slot for slot, _ in group}) <= SLOT_GROUP for group in groups)
    assert len(groups) == -(-len({slot for slot, _ in flat}) // SLOT_GROUP)
