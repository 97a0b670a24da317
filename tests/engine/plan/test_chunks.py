"""Chunk payloads: big values are pickled in pieces and come back equal, in order, with the user's classes by value."""

from __future__ import annotations

import importlib
import pickle
import sys
import types
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from flowspark.connectors.kafka import KafkaSourceMessage
from flowspark.engine.plan import chunks

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


@pytest.mark.parametrize(
    "pushes", [[], [[1]], [[i] * 10 for i in range(3)], [list(range(BIG))], [list(range(100))] * 200]
)
def test_an_item_chunk_gives_back_every_item_in_order(pushes: Any) -> None:
    chunk = chunks.ItemChunk("out")
    for items in pushes:
        chunk.extend(items)
    assert chunks.loads(chunk.dumps()) == [item for items in pushes for item in items]


MODULE_SOURCE = """
from dataclasses import dataclass

@dataclass(frozen=True)
class Event:
    key: str
    value: int

def double(x):
    return 2 * x
"""


@pytest.fixture
def plain_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next pickle tries the C pickler first, whatever earlier tests pickled."""
    monkeypatch.setattr(chunks, "_plain_skips", 0)


def test_classes_of_a_by_value_module_travel_with_their_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain_first: None
) -> None:
    (tmp_path / "shipped_events.py").write_text(MODULE_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("shipped_events")
    cloudpickle.register_pickle_by_value(module)
    try:
        payload = chunks.dumps([module.Event("a", 1), module.double])
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules["shipped_events"]
    (tmp_path / "shipped_events.py").unlink()
    event, double = chunks.loads(payload)
    assert (type(event).__name__, event.key, event.value, double(21)) == ("Event", "a", 1, 42)


def test_classes_of_the_main_module_travel_with_their_items(monkeypatch: pytest.MonkeyPatch, plain_first: None) -> None:
    main = types.ModuleType("__main__")
    exec(MODULE_SOURCE, main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    payload = chunks.dumps([main.Event("b", 2)] * 3)
    monkeypatch.undo()
    assert [(type(e).__name__, e.key, e.value) for e in chunks.loads(payload)] == [("Event", "b", 2)] * 3


def test_items_only_cloudpickle_can_pickle_still_travel(plain_first: None) -> None:
    offset = 5
    [add] = chunks.loads(chunks.dumps([lambda x: x + offset]))
    assert add(1) == 6


def test_installed_classes_come_back_equal(plain_first: None) -> None:
    messages = [KafkaSourceMessage(None, f"{i},x".encode(), "t", [("h", b"v")], None, i, 0, (1, i)) for i in range(BIG)]
    assert chunks.loads(chunks.dumps(messages)) == messages


def test_plain_data_that_names_no_class_or_function_is_never_searched_for_module_names() -> None:
    assert not chunks._needs_cloudpickle(pickle.dumps(("__main__", b"__main__", 7), pickle.HIGHEST_PROTOCOL))
    assert chunks._needs_cloudpickle(pickle.dumps([types.SimpleNamespace, "__main__"], pickle.HIGHEST_PROTOCOL))


def test_the_arrow_schema_has_the_columns_spark_is_given() -> None:
    from flowspark.engine.sources.data_source import SCHEMA_DDL

    arrow_of = {"string": "string", "long": "int64", "int": "int32", "binary": "binary"}
    given = [tuple(column.split()) for column in SCHEMA_DDL.split(",")]
    assert [(name, arrow_of[kind]) for name, kind in given] == [(f.name, str(f.type)) for f in chunks.ARROW_SCHEMA]
