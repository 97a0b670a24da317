"""Keyed chunks: what a pass sends a stateful bucket comes back by key, in order, with its batches."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from flowspark.engine.plan import chunks
from flowspark.engine.plan.keyed_chunks import Arrivals, KeyedChunk


def _chunk(batches: List[List[Tuple[str, Any]]]) -> bytes:
    chunk = KeyedChunk("step")
    slots: Dict[str, Any] = {}
    for batch in batches:
        for key, value in batch:
            if key not in slots:
                slots[key] = chunk.slot(key)
            add_id, add_value, key_id = slots[key]
            add_id(key_id)
            add_value(value)
        chunk.end_run((0, 0, 0, ""))
    return chunk.dumps()


def test_values_come_back_by_key_in_arrival_order_across_chunks() -> None:
    arrivals = Arrivals()
    arrivals.add(_chunk([[("b", 1), ("a", 2), ("b", 3)], [("a", 4)]]))
    arrivals.add(_chunk([[("c", 5), ("b", 6)]]))
    assert arrivals.keys() == ["a", "b", "c"]
    assert arrivals.by_key()["a"] == [2, 4]
    assert arrivals.by_key()["b"] == [1, 3, 6]
    assert arrivals.by_key()["c"] == [5]


def test_a_batch_that_brought_nothing_leaves_no_mark() -> None:
    chunk = KeyedChunk("step")
    chunk.end_run((0, 0, 0, ""))
    add_id, add_value, key_id = chunk.slot("a")
    add_id(key_id)
    add_value("x")
    chunk.end_run((0, 0, 0, ""))
    chunk.end_run((0, 0, 0, ""))
    assert chunk.ends == [1]


def test_many_values_and_keys_survive_the_trip() -> None:
    items = [(f"k{i % 300}", (i, str(i))) for i in range(chunks.PIECE_ITEMS * 3)]
    arrivals = Arrivals()
    arrivals.add(_chunk([items[i : i + 1000] for i in range(0, len(items), 1000)]))
    for key in arrivals.keys():
        assert arrivals.by_key()[key] == [v for k, v in items if k == key]
    assert sum(len(per_key.get("k7", [])) for _, per_key in arrivals.by_tick()) == len(arrivals.by_key()["k7"])


def _ordered_chunk(runs: List[Tuple[Any, List[Tuple[str, Any]]]]) -> bytes:
    chunk = KeyedChunk("step")
    slots: Dict[str, Any] = {}
    for order, batch in runs:
        for key, value in batch:
            if key not in slots:
                slots[key] = chunk.slot(key)
            add_id, add_value, key_id = slots[key]
            add_id(key_id)
            add_value(value)
        chunk.end_run(order)
    return chunk.dumps()


def test_ticks_come_in_order_across_chunks_each_with_its_values_by_key() -> None:
    arrivals = Arrivals()
    # Two partitions' pieces (ranks 1 and 0) arrive in no particular order.
    arrivals.add(_ordered_chunk([((0, 0, 1, ""), [("b", "b0"), ("a", "a1")]), ((2, 0, 1, ""), [("a", "a3")])]))
    arrivals.add(_ordered_chunk([((0, 0, 0, ""), [("a", "a0")]), ((1, 0, 0, ""), [("c", "c1"), ("c", "c2")])]))
    assert arrivals.by_tick() == [
        ((0, 0), {"a": ["a0", "a1"], "b": ["b0"]}),
        ((1, 0), {"c": ["c1", "c2"]}),
        ((2, 0), {"a": ["a3"]}),
    ]
    assert arrivals.by_key()["a"] == ["a1", "a3", "a0"]  # merged keeps chunk order: for order-free logics only
