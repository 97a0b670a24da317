"""The suite's own temporary folder: every process the tests start keeps its temporary files there, and it goes.

Spark, its JVMs and flowspark put temporary files in the system's
temporary folder and remove them when they end.  The tests SIGKILL
drivers, executors, brokers and servers on purpose, so what those leave
(Spark's local directories with the jars they fetched, unpacked native
libraries, checkpoints) would pile up run after run until the disk is
full.  So the session points `TMPDIR` (Python's `tempfile`, pytest's
`tmp_path`) and `java.io.tmpdir` (`SPARK_SUBMIT_OPTS` for the JVMs
spark-submit starts; `processes.jvm_options` for the others) at a folder
of its own in the system's, and removes it when the session passes.  A
folder is kept while a living process was started with it (a warm local
Spark server idles for minutes after its last run) and after a failed
session (to read what its tests left); a later session removes it once
neither holds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

PREFIX = "flowspark-suite-"
_SPARK_SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
_LOCK = ".session.lock"
"""A file in the folder its session holds locked while it runs: its own process's environment never names it."""
_FOLDER = pytest.StashKey[Path]()
_HELD = pytest.StashKey[int]()
_PASSED = pytest.StashKey[bool]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")  # a pytest-xdist worker: its controller made the folder


def _a_process_started_with(folder: Path) -> bool:
    """Whether a living process, other than this one, has `folder` as `TMPDIR` in its environment."""
    wanted = f"TMPDIR={folder}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if wanted in f.read().split(b"\0"):
                    return True
        except OSError:  # gone, a zombie, or another user's
            continue
    return False


def _session_runs(folder: Path) -> bool:
    try:
        fd = os.open(folder / _LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_unused(folder: Path) -> None:
    if not _session_runs(folder) and not _a_process_started_with(folder):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before anything asks `tempfile` or pytest for a temporary folder
def pytest_configure(config: pytest.Config) -> None:
    if _is_worker(config):
        return
    system = Path(tempfile.gettempdir())
    for earlier in system.glob(f"{PREFIX}*"):
        if earlier.is_dir() and earlier.stat().st_uid == os.getuid():
            _remove_unused(earlier)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=system))
    # Others may pass through, as through the system's own (the PostgreSQL
    # server runs as its own user; a test acts as another user), but not list it.
    folder.chmod(0o711)
    held = os.open(folder / _LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    config.stash[_HELD] = held
    os.environ["TMPDIR"] = str(folder)
    java_temp = f"-Djava.io.tmpdir={folder}"
    os.environ[_SPARK_SUBMIT_OPTS] = " ".join(filter(None, (os.environ.get(_SPARK_SUBMIT_OPTS), java_temp)))
    tempfile.tempdir = None  # `tempfile` reads `TMPDIR` again
    config.stash[_FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is None:
        return
    os.close(config.stash[_HELD])
    if config.stash.get(_PASSED, False):
        _remove_unused(folder)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_PASSED] = exitstatus == pytest.ExitCode.OK
