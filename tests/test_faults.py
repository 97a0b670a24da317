"""Faults a user meets: what the error says, and that nothing already accepted is lost."""

from __future__ import annotations

import errno
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import DynamicSink, StatelessSinkPartition
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main


@pytest.mark.parametrize(
    ("make", "type_name"),
    [(lambda x: threading.Lock(), "_thread.lock"), (lambda x: (i for i in range(x)), "builtins.generator")],
)
def test_an_unpicklable_item_names_the_step_it_was_headed_for_and_its_type(
    make: Callable[[int], Any], type_name: str
) -> None:
    flow = Dataflow("unpicklable")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([1, 2])), lambda _: "k")
    odd = op.map_value("wrap", keyed, make)
    op.output("out", op.stateful_map("keep", odd, lambda state, v: (v, 1)), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(flow)
    message = str(info.value)
    assert "unpicklable.keep" in message and type_name in message and "can't be pickled" in message
    assert len(message.splitlines()) <= 3


def test_a_state_that_does_not_pickle_names_the_step_and_key_and_says_why_it_must() -> None:
    flow = Dataflow("unpicklable_state")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(["a", "b"])), lambda v: v)
    op.output(
        "out", op.stateful_map("keep_lock", keyed, lambda state, v: (state or threading.Lock(), v)), TestingSink([])
    )
    with pytest.raises(
        FlowsparkRuntimeError,
        match=r"error pickling the state of step 'unpicklable_state\.keep_lock[^']*' for key '[ab]'",
    ) as info:
        run_main(flow)
    cause = info.value.__cause__
    assert isinstance(cause, TypeError) and "_thread.lock" in str(cause)
    assert any("must pickle" in note for note in getattr(cause, "__notes__", []))


class _FullDisk(StatelessSinkPartition[Any]):
    """Fails like a file on a full disk: the write, then the close that flushes again."""

    def write_batch(self, items: List[Any]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


class FullDiskSink(DynamicSink[Any]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _FullDisk:
        return _FullDisk()


def test_a_full_disk_is_reported_by_the_write_that_hit_it() -> None:
    flow = Dataflow("full")
    op.output("out", op.input("inp", flow, TestingSource([1, 2])), FullDiskSink())
    with pytest.raises(FlowsparkRuntimeError, match="`write_batch` in step 'full.out'") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
    assert any("close" in note for note in getattr(info.value, "__notes__", []))


def _summing_flow(out: List[Any]) -> Dataflow:
    flow = Dataflow("sums")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 2), ("a", 3)]))
    op.output("out", op.stateful_map("sum", keyed, lambda s, v: ((s or 0) + v, (s or 0) + v)), TestingSink(out))
    return flow


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recovery directory of a finished run, copied by each test before it damages it."""
    directory = tmp_path_factory.mktemp("finished") / "rec"
    run_main(_summing_flow([]), recovery_config=RecoveryConfig(directory))
    return directory


def _truncate(path: Path, keep: int, crc: Optional[bool] = None) -> None:
    path.write_bytes(path.read_bytes()[:keep])
    if crc is False:
        (path.parent / f".{path.name}.crc").unlink()


@pytest.mark.parametrize(
    ("damaged", "keep_crc"),
    [
        ("query/commits/0", False),
        ("query/offsets/0", False),
        ("query/commits/0", True),
        ("query/offsets/0", True),
        ("query/state/0/0/1.zip", False),
        ("flowspark-sinks.pkl", None),
    ],
)
def test_a_damaged_checkpoint_file_is_named_and_not_retried(
    finished_run: Path, tmp_path: Path, damaged: str, keep_crc: Optional[bool]
) -> None:
    directory = tmp_path / "rec"
    shutil.copytree(finished_run, directory)
    _truncate(directory / damaged, 10, keep_crc)
    out: List[Any] = []
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(_summing_flow(out), recovery_config=RecoveryConfig(directory))
    assert str(directory / damaged) in str(info.value)
    assert "damaged" in str(info.value)
    assert out == []
