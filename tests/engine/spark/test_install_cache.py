"""flowspark's cache keeps what it made for an installation of PySpark only while that installation is there."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pyspark
import pytest

from flowspark.engine.spark import class_archive, session
from flowspark.engine.spark.install_cache import UNRECORDED_SECONDS, record
from flowspark.engine.spark.native_libs import LIBRARY, rocksdb_library_dir


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("FLOWSPARK_CLASS_ARCHIVE", raising=False)
    return tmp_path / ".cache" / "flowspark"


def _aged(path: Path) -> None:
    then = time.time() - UNRECORDED_SECONDS - 60
    os.utime(path, (then, then))


def test_archives_of_removed_installations_go_when_another_is_written(cache: Path, tmp_path: Path) -> None:
    directory = cache / "class-archives"
    directory.mkdir(parents=True)
    kept_jars = tmp_path / "venv-kept" / "jars"
    kept_jars.mkdir(parents=True)
    removed = directory / "driver-removed.jsa"
    kept = directory / "driver-kept.jsa"
    for archive, jars in ((removed, tmp_path / "venv-removed" / "jars"), (kept, kept_jars)):
        archive.write_bytes(b"archive")
        record(str(archive), str(jars))
    unrecorded_old, unrecorded_new = directory / "driver-old.jsa", directory / "driver-new.jsa"
    for archive in (unrecorded_old, unrecorded_new):
        archive.write_bytes(b"archive of an earlier flowspark")
    _aged(unrecorded_old)
    other_half_written = directory / "driver-other.123.tmp"
    other_half_written.write_bytes(b"half an archive")
    _aged(other_half_written)

    options, _ = class_archive.java_options(os.path.dirname(pyspark.__file__))

    assert "-XX:ArchiveClassesAtExit=" in options, "this run writes its installation's archive"
    left = {path.name for path in directory.iterdir() if not path.name.endswith(".lock")}
    assert left == {"driver-kept.jsa", "driver-kept.jsa.for", "driver-new.jsa"}


def test_an_archive_in_use_is_recorded_for_its_installation(cache: Path) -> None:
    spark_home = os.path.dirname(pyspark.__file__)
    class_archive.java_options(spark_home)
    directory = cache / "class-archives"
    (lock,) = directory.glob("*.lock")
    final = directory / (lock.name[: -len(".lock")] + ".jsa")
    final.write_bytes(b"archive of an earlier flowspark")

    options, _ = class_archive.java_options(spark_home)

    assert options.startswith(f"-XX:SharedArchiveFile={final} ")
    assert Path(f"{final}.for").read_text() == os.path.join(os.path.abspath(spark_home), "jars")


def _spark_home_with_rocksdb(root: Path, library: bytes) -> Path:
    jars = root / "jars"
    jars.mkdir(parents=True)
    with zipfile.ZipFile(jars / "rocksdbjni-9.0.0.jar", "w") as jar:
        jar.writestr(LIBRARY, library)
    return root


@pytest.mark.skipif(rocksdb_library_dir(os.path.dirname(pyspark.__file__)) is None, reason="x86-64 glibc Linux only")
def test_a_library_unpacked_for_a_removed_installation_goes_when_another_is_unpacked(
    cache: Path, tmp_path: Path
) -> None:
    first = rocksdb_library_dir(str(_spark_home_with_rocksdb(tmp_path / "venv-a", b"\x7fELF a")))
    assert first is not None and Path(first, LIBRARY).read_bytes() == b"\x7fELF a"
    (tmp_path / "venv-a" / "jars" / "rocksdbjni-9.0.0.jar").unlink()

    second = rocksdb_library_dir(str(_spark_home_with_rocksdb(tmp_path / "venv-b", b"\x7fELF b")))

    assert second is not None and Path(second, LIBRARY).read_bytes() == b"\x7fELF b"
    assert sorted(os.listdir(cache / "native")) == sorted([os.path.basename(second), f"{os.path.basename(second)}.for"])


def test_a_spark_home_of_links_goes_once_its_pyspark_is_gone(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    gone = cache / "spark-home-4.0.0-0123456789ab"
    gone.mkdir(parents=True)
    (gone / "jars").symlink_to(cache / "no-such-venv" / "pyspark" / "jars")

    home = session.spark_home()

    assert Path(home).parent == cache and Path(home, "jars").is_dir()
    assert not gone.exists()
