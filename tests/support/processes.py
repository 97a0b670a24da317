"""The processes the tests start and look at: `python -m` runs, the JVMs' options, process trees from `/proc`.

Tests of the command line run flowspark's modules in a child Python
(`run_module`); tests that fault a Spark cluster or a Spark Connect server
find the processes under a pid and kill whole process groups.  Linux only:
the process tree is read from `/proc`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""The Java options of the JVMs the tests start, as flowspark's own driver has: C1 compiles alone and one thread
collects.  Their work is light and short (a test's application lives for seconds), and C2's compiler threads and a
parallel collector would take the suite's two cores from the runs under test."""


def jvm_options() -> Tuple[str, ...]:
    """The Java options of the JVMs the tests start themselves (the Kafka broker, the cluster's master, workers and
    executors): `SHORT_LIVED_JVM`, and the suite's temporary folder (`scratch`) as theirs."""
    return (*SHORT_LIVED_JVM, f"-Djava.io.tmpdir={tempfile.gettempdir()}")


def run_module(
    module: str, *args: str, cwd: Path, timeout: float, env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess[str]:
    """`python -m module args` run from `cwd` (with `env` for its environment, if given); its output captured as
    text, its exit status left to the caller."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[1])


def ancestor(pid: int, wanted: Callable[[int], bool]) -> int:
    """The nearest of `pid` and the processes above it that is `wanted`."""
    while not wanted(pid):
        if pid <= 1:
            msg = "no such process above it"
            raise LookupError(msg)
        pid = _parent(pid)
    return pid


def command_line(pid: int) -> str:
    """The command line of process `pid`, its arguments joined by spaces."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


def children(pid: int) -> List[int]:
    """The processes `pid` started that still run, from `/proc`."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: List[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(child) for child in f.read().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> List[int]:
    """Every process below `pid`, from `/proc`."""
    found: List[int] = []
    todo = [pid]
    while todo:
        below = children(todo.pop())
        found.extend(below)
        todo.extend(below)
    return found


def kill_group(proc: "subprocess.Popen[bytes]", sig: int) -> None:
    """Send `sig` to the process group `proc` leads (started with `start_new_session`), if it is still there."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
