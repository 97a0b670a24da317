"""Keyed chunks: what a pass sends a stateful bucket comes back by key, in order, with its batches."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from flowspark.engine import chunks
from flowspark.engine.keyed_chunks import Arrivals, KeyedChunk


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
        chunk.end_batch()
    return chunk.dumps()


def test_values_come_back_by_key_in_arrival_order_across_chunks() -> None:
    arrivals = Arrivals()
    arrivals.add(_chunk([[("b", 1), ("a", 2), ("b", 3)], [("a", 4)]]))
    arrivals.add(_chunk([[("c", 5), ("b", 6)]]))
    assert arrivals.keys() == ["a", "b", "c"]
    assert arrivals.merged("a") == [2, 4]
    assert arrivals.merged("b") == [1, 3, 6]
    assert arrivals.merged("c") == [5]


def test_batches_are_cut_where_pushed_batches_ended() -> None:
    arrivals = Arrivals()
    arrivals.add(_chunk([[("a", 1), ("b", 2), ("a", 3)], [("b", 4)], [("a", 5), ("a", 6)]]))
    arrivals.add(_chunk([[("a", 7)]]))
    assert arrivals.batches("a") == [[1, 3], [5, 6], [7]]
    assert arrivals.batches("b") == [[2], [4]]


def test_a_batch_that_brought_nothing_leaves_no_mark() -> None:
    chunk = KeyedChunk("step")
    chunk.end_batch()
    add_id, add_value, key_id = chunk.slot("a")
    add_id(key_id)
    add_value("x")
    chunk.end_batch()
    chunk.end_batch()
    assert chunk.ends == [1]


def test_many_values_and_keys_survive_the_trip() -> None:
    items = [(f"k{i % 300}", (i, str(i))) for i in range(chunks.PIECE_ITEMS * 3)]
    arrivals = Arrivals()
    arrivals.add(_chunk([items[i : i + 1000] for i in range(0, len(items), 1000)]))
    for key in arrivals.keys():
        assert arrivals.merged(key) == [v for k, v in items if k == key]
    assert sum(len(b) for b in arrivals.batches("k7")) == len(arrivals.merged("k7"))

