"""RocksDB's native library is unpacked once, privately, and runs no longer leave copies in the temporary directory."""

from __future__ import annotations

import glob
import os
import stat
import tempfile
from pathlib import Path

import pyspark
import pytest
from support.processes import run_module

from flowspark.engine.spark.native_libs import LIBRARY, rocksdb_library_dir

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))


def test_the_library_is_unpacked_once_into_a_folder_only_the_user_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = rocksdb_library_dir(SPARK_HOME)
    assert folder is not None and folder.startswith(str(tmp_path / ".cache" / "flowspark"))
    library = Path(folder) / LIBRARY
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(library.stat().st_mode) == 0o500
    assert library.read_bytes()[:4] == b"\x7fELF"
    unpacked_at = library.stat().st_mtime_ns
    assert rocksdb_library_dir(SPARK_HOME) == folder
    assert library.stat().st_mtime_ns == unpacked_at
    assert os.listdir(folder) == [LIBRARY]


def test_a_folder_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = rocksdb_library_dir(SPARK_HOME)
    assert folder is not None
    os.chmod(folder, 0o777)
    assert rocksdb_library_dir(SPARK_HOME) is None
    assert rocksdb_library_dir(None) is None
    assert rocksdb_library_dir(str(tmp_path)) is None  # no Spark jars there


def test_a_stateful_run_leaves_no_copy_of_the_library_in_the_temporary_directory(tmp_path: Path) -> None:
    pattern = os.path.join(tempfile.gettempdir(), "librocksdbjni*.so")
    before = set(glob.glob(pattern))
    done = run_module("flowspark.run", "flowspark.examples.wordcount:flow", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(glob.glob(pattern)) - before == set()
