"""The driver JVM's class-data-sharing archive: written by the first run, used by later ones."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from flowspark.engine.spark import class_archive

SCRIPT = """
from pathlib import Path

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.engine.spark.session import get_session
from flowspark.testing import TestingSource, run_main

flow = Dataflow("archived")
op.output("out", op.map("double", op.input("inp", flow, TestingSource([1, 2, 3])), lambda x: 2 * x), StdOutSink())
run_main(flow)
jvm = get_session().sparkContext._gateway.proc.pid
maps = Path(f"/proc/{jvm}/maps").read_text()
print("archive mapped" if "class-archives" in maps else "archive not mapped")
"""


def _archives(home: Path) -> list[str]:
    directory = home / ".cache" / "flowspark" / "class-archives"
    return sorted(os.listdir(directory)) if directory.is_dir() else []


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the JVM's memory map from /proc")
def test_first_run_writes_the_archive_and_the_next_run_maps_it(tmp_path: Path) -> None:
    script = tmp_path / "archived.py"
    script.write_text(SCRIPT)
    # The archive is the driver JVM's that a run starts in its own process.
    env = {**os.environ, "HOME": str(tmp_path), "FLOWSPARK_WARM_SPARK": "0"}
    env.pop("FLOWSPARK_CLASS_ARCHIVE", None)

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, str(script)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    # The JVM's own notes on skipped classes must not reach the user's stdout.
    assert run() == ["2", "4", "6", "archive not mapped"]
    written = _archives(tmp_path)
    assert len(written) == 2 and written[0].endswith(".jsa") and written[1] == f"{written[0]}.for", written
    # The record names the jars it was written for: it goes once they do (`install_cache`).
    record = tmp_path / ".cache" / "flowspark" / "class-archives" / written[1]
    assert record.read_text().endswith("/jars")
    assert run() == ["2", "4", "6", "archive mapped"]
    assert _archives(tmp_path) == written


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("FLOWSPARK_CLASS_ARCHIVE", raising=False)
    return tmp_path


def _spark_home() -> str:
    return os.path.dirname(pyspark.__file__)


def test_only_one_live_run_writes_and_a_dead_runs_lock_and_leftovers_are_taken_over(home: Path) -> None:
    options, hook = class_archive.java_options(_spark_home())
    assert "-XX:ArchiveClassesAtExit=" in options and "-Xlog:cds*=off" in options and hook is not None
    directory = home / ".cache" / "flowspark" / "class-archives"
    (lock,) = directory.glob("*.lock")
    assert lock.read_text() == f"{socket.gethostname()} {os.getpid()}"

    assert class_archive.java_options(_spark_home()) == ("", None), "a second writer while this one lives"

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    lock.write_text(f"{socket.gethostname()} {dead}")
    leftover = directory / (lock.name[: -len(".lock")] + f".{dead}.tmp")
    leftover.write_bytes(b"half an archive")
    options, hook = class_archive.java_options(_spark_home())
    assert "-XX:ArchiveClassesAtExit=" in options and hook is not None
    assert not leftover.exists(), "a killed run's partial archive must never be used or kept"


def test_a_finished_archive_is_used_and_the_switch_turns_it_off(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class_archive.java_options(_spark_home())
    directory = home / ".cache" / "flowspark" / "class-archives"
    (lock,) = directory.glob("*.lock")
    final = directory / (lock.name[: -len(".lock")] + ".jsa")
    final.write_bytes(b"archive")
    options, hook = class_archive.java_options(_spark_home())
    assert options == f"-XX:SharedArchiveFile={final} -Xlog:cds*=off" and hook is None
    monkeypatch.setenv("FLOWSPARK_CLASS_ARCHIVE", "0")
    assert class_archive.java_options(_spark_home()) == ("", None)


def test_each_spark_home_gets_its_own_archive(home: Path) -> None:
    # A JVM ignores an archive written with another class path, and the
    # class path names the jars under SPARK_HOME: two installations of the
    # same PySpark (two virtualenvs) must not share one.
    homes = [home / "spark-a", home / "spark-b"]
    for spark_home in homes:
        spark_home.mkdir()
        (spark_home / "jars").symlink_to(os.path.join(_spark_home(), "jars"))
    written = [class_archive.java_options(str(spark_home))[0] for spark_home in homes]
    assert all("-XX:ArchiveClassesAtExit=" in options for options in written), "each home writes its own"
    assert len({options.split()[0] for options in written}) == 2
