"""The executor partitions' snapshot store: write-once records, the newest one before a batch, pruning, private files, S3."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flowspark.engine.recovery.storage import parse_location
from flowspark.engine.sources.snapshot_store import PartRecord, SnapshotStore, part_folder
from flowspark.errors import FlowsparkRuntimeError


def test_a_batch_keeps_its_first_record(tmp_path: Path) -> None:
    store = SnapshotStore(str(tmp_path / "store"))
    part = part_folder(0, "fs::a.txt")
    assert store.write_once(part, 1, PartRecord(10, 3, 1))
    assert not store.write_once(part, 1, PartRecord(99, 7, 2))
    assert store.read(part, 1) == PartRecord(10, 3, 1)
    assert [n for n in os.listdir(tmp_path / "store" / part)] == ["1"]  # no temporary file left behind


def test_latest_is_the_newest_record_up_to_a_batch(tmp_path: Path) -> None:
    store = SnapshotStore(str(tmp_path))
    part = part_folder(1, "p")
    assert store.latest(part, 5) is None
    for batch in (1, 2, 4):
        store.write_once(part, batch, PartRecord(batch * 10, 1, 1))
    assert store.latest(part, 3) == (2, PartRecord(20, 1, 1))
    assert store.latest(part, 9) == (4, PartRecord(40, 1, 1))
    assert store.latest(part, 0) is None


def test_pruning_keeps_the_newest_committed_record_and_later_ones(tmp_path: Path) -> None:
    store = SnapshotStore(str(tmp_path))
    part = part_folder(0, "p")
    for batch in (1, 2, 3, 6):
        store.write_once(part, batch, PartRecord(batch, 1, 1))
    for batch in (4, 7):  # left by tasks killed while writing
        (tmp_path / part / f".{batch}.0123.tmp").write_bytes(b"")
    store.prune(part, 5)
    assert store.batches(part) == [3, 6]
    assert sorted(os.listdir(tmp_path / part)) == [".7.0123.tmp", "3", "6"]
    store.prune(part, 9)
    assert store.batches(part) == [6]


def test_partition_folders_differ_by_input_and_name() -> None:
    names = {part_folder(i, name) for i in (0, 1) for name in ("a", "b", "a/../b", "x::y")}
    assert len(names) == 8
    assert all(os.sep not in name for name in names)


def test_records_are_private_and_refused_once_others_can_write_them(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = SnapshotStore(str(tmp_path / "store"))
        part = part_folder(0, "p")
        store.write_once(part, 1, PartRecord(1, 1, 1))
    finally:
        os.umask(old)
    record = tmp_path / "store" / part / "1"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "store" / part).stat().st_mode) == 0o700
    record.chmod(0o666)
    with pytest.raises(FlowsparkRuntimeError, match="can be written by other users"):
        store.read(part, 1)


def test_the_store_works_the_same_on_s3(s3_folder: str) -> None:
    store = SnapshotStore(parse_location(s3_folder).join("query", "flowspark-inputs"))
    part = part_folder(0, "fs::a.txt")
    assert store.latest(part, 5) is None
    for batch in (1, 2, 3, 6):
        assert store.write_once(part, batch, PartRecord(batch * 10, batch, 1))
    assert not store.write_once(part, 2, PartRecord(99, 7, 2))
    assert store.read(part, 2) == PartRecord(20, 2, 1)
    assert store.latest(part, 5) == (3, PartRecord(30, 3, 1))
    store.prune(part, 5)
    assert store.batches(part) == [3, 6]
    assert store.read(part, 1) is None
