"""The Java check: no Java, or one too old, ends a run at once with what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowspark.engine.spark.java_check import check_java, major_version
from flowspark.errors import FlowsparkRuntimeError

ROOT = Path(__file__).resolve().parents[3]
INSTALL = "Install a Java 17 or later runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"


def _fake_java(folder: Path, version_line: str) -> Path:
    """A `java` in `folder`/bin that prints `version_line` on stderr, as `java -version` does."""
    binary = folder / "bin" / "java"
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    binary.chmod(0o700)
    return binary


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('java version "1.8.0_381"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "11.0.2" 2019-01-15', 11),
        ('openjdk version "25-ea" 2025-09-16', 25),
        ("something else entirely", None),
    ],
)
def test_major_version_reads_java_version_output(output: str, major: int) -> None:
    assert major_version(output) == major


def test_no_java_on_path_and_no_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FlowsparkRuntimeError, match="JAVA_HOME is not set and there is no `java` on PATH") as caught:
        check_java()
    assert INSTALL in str(caught.value)


def test_java_home_without_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(FlowsparkRuntimeError, match="which has no bin/java"):
        check_java()


def test_old_java_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_java(tmp_path, 'java version "1.8.0_381"')
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(FlowsparkRuntimeError, match=f"{fake} is Java 8") as caught:
        check_java()
    assert INSTALL in str(caught.value)


def test_old_java_in_java_home_wins_over_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(FlowsparkRuntimeError, match="is Java 11"):
        check_java()


def test_the_java_on_this_machine_passes() -> None:
    check_java()


def _run_wordcount(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples.wordcount:flow"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(params=["own process", "warm server"])
def spark_start(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Where the run starts Spark: in its own process, or as a new warm server (`connect_server`)."""
    if request.param == "own process":
        return {"FLOWSPARK_WARM_SPARK": "0"}
    return {"FLOWSPARK_WARM_SPARK_DIR": str(tmp_path / "servers")}


def test_cli_without_java_says_what_to_install(tmp_path: Path, spark_start: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(spark_start, PATH=str(tmp_path))
    started = time.monotonic()
    done = _run_wordcount(env)
    assert done.returncode == 1
    assert "FlowsparkRuntimeError: Spark needs Java 17 or later, and none was found" in done.stderr
    assert INSTALL in done.stderr
    assert "JAVA_GATEWAY_EXITED" not in done.stderr
    assert time.monotonic() - started < 60


def test_cli_with_an_old_java_says_what_to_install(tmp_path: Path, spark_start: dict[str, str]) -> None:
    fake = _fake_java(tmp_path, 'java version "1.8.0_381"')
    env = dict(os.environ, JAVA_HOME=str(tmp_path), **spark_start)
    done = _run_wordcount(env)
    assert done.returncode == 1
    assert f"{fake} is Java 8" in done.stderr
    assert "JAVA_GATEWAY_EXITED" not in done.stderr
