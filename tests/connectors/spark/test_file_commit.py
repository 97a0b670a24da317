"""Per-batch commits into a folder of files, cut short at each step and finished by the next process, on real Spark."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from flowspark.connectors.spark import file_commit
from flowspark.connectors.spark.file_commit import FolderCommits
from flowspark.engine.recovery.storage import parse_location
from flowspark.engine.spark.session import get_session
from flowspark.errors import FlowsparkRuntimeError

SCHEMA = "user string, n long"


def _frame(first: int, count: int) -> Any:
    rows = [(f"u{i % 2}", i) for i in range(first, first + count)]
    return get_session().createDataFrame(rows, SCHEMA).coalesce(1)


def _write(frame: Any, folder: str) -> None:
    frame.write.format("json").partitionBy("user").mode("overwrite").save(folder)


def _read(files: List[str], base: str) -> Any:
    return get_session().read.format("json").schema(SCHEMA).option("basePath", base).load(files)


def _commits(out: Path) -> FolderCommits:
    """The commits of a sink's run into `out`, as a new process (a resumed run) makes them."""
    return FolderCommits("s.out", parse_location(str(out)), "run1")


def _numbers(out: Path) -> List[int]:
    rows = get_session().read.format("json").schema(SCHEMA).load(str(out)).collect()
    return sorted(row.n for row in rows)


def _record(out: Path) -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads((out / "_flowspark" / "run1-s.out" / "record.json").read_text())
    return loaded


class Crash(Exception):
    """Stands for the process dying at that point."""


def _failing_after(calls: int, real: Callable[..., None]) -> Callable[..., None]:
    """`real`, that fails from its `calls + 1`-th call on."""
    made = []

    def call(*args: Any) -> None:
        if len(made) >= calls:
            raise Crash
        made.append(args)
        real(*args)

    return call


def test_a_crash_after_spark_wrote_the_staging_folder_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _commits(out).write(_frame(0, 4), 0, _write, _read, None)

    def write_then_die(frame: Any, folder: str) -> None:
        _write(frame, folder)
        raise Crash

    with pytest.raises(Crash):
        _commits(out).write(_frame(4, 4), 1, write_then_die, _read, None)
    assert _numbers(out) == list(range(4))
    _commits(out).write(_frame(4, 4), 1, _write, _read, None)
    assert _numbers(out) == list(range(8))
    assert not (out / "_flowspark" / "run1-s.out" / "staging").exists()


def test_a_crash_among_the_moves_is_finished_and_the_batch_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    monkeypatch.setattr(file_commit.storage, "move", _failing_after(1, file_commit.storage.move))
    with pytest.raises(Crash):
        _commits(out).write(_frame(0, 6), 0, _write, _read, None)
    monkeypatch.undo()
    assert _numbers(out) == [0, 2, 4], "one partition's file moved before the crash"
    assert _record(out)["done"] is False

    replayed = _commits(out)
    replayed.write(_frame(0, 6), 0, _write, _read, None)
    assert _numbers(out) == list(range(6))
    assert _record(out)["done"] is True
    replayed.write(_frame(6, 2), 1, _write, _read, None)
    assert _numbers(out) == list(range(8))


def test_a_crash_in_a_compaction_is_finished_without_doubles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    commits = _commits(out)
    commits.write(_frame(0, 4), 0, _write, _read, 2)
    monkeypatch.setattr(file_commit.storage, "remove", _failing_after(1, file_commit.storage.remove))
    with pytest.raises(Crash):
        commits.write(_frame(4, 4), 1, _write, _read, 2)
    monkeypatch.undo()
    assert _record(out)["removes"], "the crash hit the compaction's commit"

    _commits(out).write(_frame(4, 4), 1, _write, _read, 2)
    assert _numbers(out) == list(range(8))
    for user in ("u0", "u1"):
        (only,) = os.listdir(out / f"user={user}")
        assert only.startswith("part-run1-0000000001-compacted-")


def test_a_record_of_a_later_batch_stops_the_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _commits(out).write(_frame(0, 2), 5, _write, _read, None)
    with pytest.raises(FlowsparkRuntimeError, match=r"'s.out'.*holds micro-batch 5 .* later than batch 3"):
        _commits(out).write(_frame(0, 2), 3, _write, _read, None)


@pytest.mark.parametrize(
    ("record", "cause"),
    [
        ("not json", "is damaged"),
        ('{"batch": 1}', "is damaged"),
        (
            '{"batch": 1, "moves": [["_flowspark/x", "../../escape"]], "removes": [], "uncompacted": [], '
            '"batches_since_compaction": 1, "done": false}',
            "not a file inside its folder",
        ),
        (
            '{"batch": 1, "moves": [], "removes": ["/etc/passwd"], "uncompacted": [], '
            '"batches_since_compaction": 1, "done": false}',
            "not a file inside its folder",
        ),
    ],
)
def test_a_damaged_or_strange_record_is_refused(tmp_path: Path, record: str, cause: str) -> None:
    out = tmp_path / "out"
    _commits(out).write(_frame(0, 2), 0, _write, _read, None)
    (out / "_flowspark" / "run1-s.out" / "record.json").write_text(record)
    with pytest.raises(FlowsparkRuntimeError, match=cause):
        _commits(out).write(_frame(2, 2), 1, _write, _read, None)
    assert _numbers(out) == [0, 1]
