"""Chunk payloads: big values are pickled in pieces and come back equal, in order."""

from __future__ import annotations

from typing import Any

import pytest

from flowspark.engine import chunks

BIG = chunks.PIECE_ITEMS * 3 + 7


@pytest.mark.parametrize(
    "value",
    [
        [("k", i) for i in range(BIG)],
        [[i] * 1000 for i in range(20)],
        {f"k{i}": [[i] * 300, [-i] * 10] for i in range(100)},
        {i: i for i in range(BIG)},
        {i: [i, i] for i in range(BIG)},
        [[]] * BIG,
        [1, 2, 3],
        {},
        [],
        "not a container",
    ],
)
def test_round_trip(value: Any) -> None:
    assert chunks.loads(chunks.dumps(value)) == value


def test_big_values_are_cut_into_pieces() -> None:
    assert chunks.dumps([("k", i) for i in range(BIG)]).startswith(b"FSP")
    assert not chunks.dumps([("k", i) for i in range(10)]).startswith(b"FSP")


@pytest.mark.parametrize("pushes", [[], [[1]], [[i] * 10 for i in range(3)], [list(range(BIG))], [list(range(100))] * 200])
def test_an_item_chunk_gives_back_every_item_in_order(pushes: Any) -> None:
    chunk = chunks.ItemChunk()
    for items in pushes:
        chunk.extend(items)
    assert chunks.loads(chunk.dumps()) == [item for items in pushes for item in items]
