"""User code that returns or raises the unexpected fails naming the step (and partition or key), as in Bytewax."""

from __future__ import annotations

import logging
import sys
import tempfile
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable, List, Optional

import pytest
from support.partitions import OnePartSource

import flowspark.operators as op
from flowspark.connectors.files import FileSource
from flowspark.dataflow import Dataflow
from flowspark.errors import FlowsparkRuntimeError
from flowspark.inputs import StatefulSourcePartition
from flowspark.outputs import DynamicSink, FixedPartitionedSink, StatefulSinkPartition
from flowspark.testing import TestingSink, TestingSource, run_main


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


def test_keys_of_a_str_subclass_go_on_as_plain_str() -> None:
    out: List[Any] = []
    flow = Dataflow("enum_keys")
    keyed = op.input("inp", flow, TestingSource([(Color.RED, 1), (Color.BLUE, 1), (Color.RED, 1)]))
    op.output("out", op.stateful_map("count", keyed, lambda n, v: ((n or 0) + v, (n or 0) + v)), TestingSink(out))
    run_main(flow)
    assert out == [("red", 1), ("blue", 1), ("red", 2)]
    assert {type(key) for key, _ in out} == {str}


class _ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")


def _raise_api_error(x: int) -> int:
    raise _ApiError(503, "unavailable")


def _exit(x: int) -> int:
    sys.exit("config missing")


@pytest.mark.parametrize(
    ("mapper", "shown"),
    [(_raise_api_error, "_ApiError: HTTP 503: unavailable"), (_exit, "config missing")],
    ids=["exception-that-will-not-unpickle", "sys-exit"],
)
def test_any_error_a_step_raises_names_the_step(mapper: Callable[[int], int], shown: str) -> None:
    flow = Dataflow("raising")
    op.output("out", op.map("call", op.input("inp", flow, TestingSource([1])), mapper), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match="raising.call") as info:
        run_main(flow)
    assert shown in str(info.value.__cause__)


class _Part(StatefulSourcePartition[int, int]):
    def __init__(self, fault: str) -> None:
        self._fault = fault
        self._left = [1, 2, 3]

    def next_batch(self) -> List[int]:
        if not self._left:
            raise StopIteration()
        batch, self._left = self._left, []
        return batch

    def next_awake(self) -> Optional[datetime]:
        return datetime.now() if self._fault == "naive next_awake" else None  # noqa: DTZ005 - naive on purpose: the fault under test

    def snapshot(self) -> int:
        if self._fault == "snapshot":
            msg = "snapshot boom"
            raise ValueError(msg)
        return 0

    def close(self) -> None:
        if self._fault == "close":
            msg = "close boom"
            raise ValueError(msg)


def _source(fault: str) -> OnePartSource:
    return OnePartSource(lambda _: _Part(fault))


@pytest.mark.parametrize("fault", ["snapshot", "naive next_awake"])
def test_a_source_partition_that_misbehaves_names_the_step_and_partition(fault: str) -> None:
    flow = Dataflow("bad_source")
    op.output("out", op.input("inp", flow, _source(fault)), TestingSink([]))
    with pytest.raises(
        FlowsparkRuntimeError, match=f"`{fault.split()[-1]}` in step 'bad_source.inp' for partition 'p0'"
    ):
        run_main(flow)


def test_a_source_partition_whose_close_fails_keeps_the_run_going_as_in_bytewax() -> None:
    records: List[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("flowspark.engine.sources")
    level = logger.level
    logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    out: List[int] = []
    flow = Dataflow("closing")
    op.output("out", op.input("inp", flow, _source("close")), TestingSink(out))
    try:
        run_main(flow)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert out == [1, 2, 3]
    assert any("close boom" in r.getMessage() and "closing.inp" in r.getMessage() for r in records)


class _NoneSink(DynamicSink[Any]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        return None


class _LastPart(StatefulSinkPartition[Any, None]):
    def write_batch(self, items: List[Any]) -> None:
        pass

    def snapshot(self) -> None:
        return None


class _Parts(FixedPartitionedSink[Any, None]):
    def __init__(self, names: List[str], part_fn: Callable[[str], Any]) -> None:
        self._names = names
        self._part_fn = part_fn

    def list_parts(self) -> List[str]:
        return self._names

    def part_fn(self, item_key: str) -> Any:
        return self._part_fn(item_key)

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _LastPart:
        return _LastPart()


@pytest.mark.parametrize(
    ("sink", "expected"),
    [
        (_NoneSink(), "`build` returned `None`"),
        (_Parts(["a", "b"], lambda key: "a"), "`part_fn` must return an `int`"),
        (_Parts([], lambda key: 0), "returned no partitions"),
    ],
    ids=["build-returns-none", "part-fn-returns-str", "no-partitions"],
)
def test_a_sink_that_misbehaves_names_the_step(sink: Any, expected: str) -> None:
    flow = Dataflow("bad_sink")
    op.output("out", op.input("inp", flow, TestingSource([("k", 1)])), sink)
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(flow)
    assert "bad_sink.out" in str(info.value) and expected in f"{info.value} {info.value.__cause__}"


class _WakeAtNoon(op.StatefulLogic[Any, Any, Any]):  # type: ignore[misc]
    def on_item(self, value: Any) -> Any:
        return ([value], op.StatefulLogic.RETAIN)

    def on_notify(self) -> Any:
        return ([], op.StatefulLogic.DISCARD)

    def on_eof(self) -> Any:
        return ([], op.StatefulLogic.DISCARD)

    def notify_at(self) -> Any:
        return "noon"

    def snapshot(self) -> Any:
        return None


def test_a_notify_at_that_is_no_datetime_names_the_step_and_key() -> None:
    flow = Dataflow("bad_notify")
    keyed = op.input("inp", flow, TestingSource([("a", 1)]))
    op.output("out", op.stateful("wake", keyed, lambda resume: _WakeAtNoon()), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match="`notify_at` in step 'bad_notify.wake.stateful_batch' for key 'a'"):
        run_main(flow)


def test_a_negative_file_batch_size_is_refused_naming_the_step() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.txt"
        path.write_text("a\nb\n")
        flow = Dataflow("bad_batch")
        op.output("out", op.input("inp", flow, FileSource(path, batch_size=-1)), TestingSink([]))
        with pytest.raises(FlowsparkRuntimeError, match="bad_batch.inp") as info:
            run_main(flow)
        assert "batch_size" in str(info.value.__cause__)


def test_a_key_that_does_not_encode_as_utf8_is_a_type_error_naming_the_step() -> None:
    flow = Dataflow("surrogate")
    keyed = op.input("inp", flow, TestingSource([(b"caf\xe9".decode("utf-8", "surrogateescape"), 1)]))
    op.output("out", op.stateful_map("count", keyed, lambda n, v: (v, v)), TestingSink([]))
    with pytest.raises(TypeError, match="surrogate.count"):
        run_main(flow)


def test_a_step_whose_function_does_not_pickle_is_named_before_the_run() -> None:
    import threading

    lock = threading.Lock()

    def locked(x: int) -> int:
        with lock:
            return x

    flow = Dataflow("closure")
    op.output("out", op.map("locked", op.input("inp", flow, TestingSource([1])), locked), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match="step 'closure.locked.flat_map_batch' can't be pickled") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, TypeError)


class _WontLoad:
    def __reduce__(self) -> Any:
        return (_refuse, ())


def _refuse() -> Any:
    msg = "cannot restore"
    raise ValueError(msg)


@pytest.mark.parametrize("made_by_a_map", [False, True], ids=["from-the-source", "from-a-map"])
def test_an_item_that_does_not_unpickle_names_the_step_it_reached(made_by_a_map: bool) -> None:
    flow = Dataflow("unloadable")
    if made_by_a_map:
        keyed = op.map("make", op.input("inp", flow, TestingSource(["k"])), lambda k: (k, _WontLoad()))
        reached = "the items that reached step 'unloadable.keep"
    else:
        keyed = op.input("inp", flow, TestingSource([("k", _WontLoad())]))
        reached = "the items of step 'unloadable.inp'"
    op.output("out", op.stateful_map("keep", keyed, lambda s, v: (s, 1)), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match=f"error unpickling {reached}"):
        run_main(flow)


def test_a_sink_without_partitions_fails_only_when_an_item_reaches_it_as_in_bytewax() -> None:
    flow = Dataflow("no_parts")
    op.output("out", op.input("inp", flow, TestingSource([])), _Parts([], lambda key: 0))
    run_main(flow)
