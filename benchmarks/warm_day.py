"""A working day on one warm local Spark: a few hundred mixed runs, and what the server holds as they come.

    python -m benchmarks.warm_day [--runs 300] [--projects 5] [--every 30] [--minutes 0]

The runs go to a warm server of their own (a fresh `FLOWSPARK_WARM_SPARK_DIR`,
stopped at the end), from `--projects` folders, each with a flow module of
its own that `python -m` and the scripts find from the working directory,
as runs of different projects and test suites are.  They come in rounds of
every kind below, one at a time (but for `pair`), and each run's output is
checked:

| kind | what |
|---|---|
| `cli` | `python -m flowspark.run PROJECT:bounded`: a bounded word count (one batch query) |
| `cli_w1` | the same with `-w 1` (a parallelism of its own) |
| `script` | `python PROJECT.py`: `run_main` of the same flow from a program |
| `live` | `python -m flowspark.run PROJECT:live`: a source that trickles for about a second (a streaming query) |
| `failing` | a step that raises: the run fails with the step's error |
| `sigterm` | an endless streaming run, stopped with SIGTERM once it wrote (exit 143, saying so) |
| `sigkill` | the same, killed with SIGKILL |
| `pair` | two `cli` runs at once, from two folders |

After every `--every` runs it prints a row: runs so far, minutes, the
server's processes, their memory (PSS), threads and open files, its
folder's size, and the wall time of the last `cli` run (what a small run
takes at that moment).  The last line compares the end with the row after
the first round.  `--minutes M` keeps going in rounds until M minutes
passed (at least `--runs` runs).  Progress goes to stderr, the table to
stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

from flowspark._settings import WARM_SPARK_DIR
from flowspark.engine.connect.connect_server import read_record
from flowspark.engine.connect.server_usage import ServerUsage, usage_of

WORDS = 40
"""How often the bounded flows' input repeats its three lines."""
LINES = ["a b", "b c", "c a b"] * WORDS
LIVE_LINES = 12
"""The trickling flow's lines: the first of `LINES`."""

PROJECT = '''\
"""Project {index}'s flows: a word count, bounded, trickling, endless and failing."""

from datetime import datetime, timedelta, timezone

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.inputs import DynamicSource, StatelessSourcePartition
from flowspark.testing import TestingSource, run_main

LINES = ["a b", "b c", "c a b"] * {words}


def counted(name, source):
    flow = Dataflow(name)
    words = op.flat_map("split", op.input("inp", flow, source), str.split)
    op.output("out", op.count_final("count", words, lambda word: word), StdOutSink())
    return flow


class _Trickle(StatelessSourcePartition):
    def __init__(self, lines, pause):
        self._lines = lines
        self._pause = pause
        self._awake = datetime.now(timezone.utc)

    def next_batch(self):
        line = next(self._lines)  # its StopIteration ends the partition
        self._awake = datetime.now(timezone.utc) + timedelta(seconds=self._pause)
        return [line]

    def next_awake(self):
        # Asleep between lines, so the first read ends at once and the run is a streaming query.
        return self._awake


class Trickle(DynamicSource):
    """`lines` (none for `endless`: "x" for ever) on worker 0, a line every `pause` seconds."""

    def __init__(self, lines, pause):
        self._lines = lines
        self._pause = pause

    def build(self, step_id, worker_index, worker_count):
        lines = iter(self._lines) if self._lines is not None else iter(lambda: "x", None)
        return _Trickle(lines if worker_index == 0 else iter(()), self._pause)


def boom(line):
    raise ValueError("project {index} fails on purpose")


bounded = counted("bounded_{index}", TestingSource(LINES))
live = counted("live_{index}", Trickle(LINES[:{live}], 0.08))
endless = Dataflow("endless_{index}")
op.output("out", op.input("inp", endless, Trickle(None, 0.05)), StdOutSink())
failing = Dataflow("failing_{index}")
op.output("out", op.map("boom", op.input("inp", failing, TestingSource(LINES)), boom), StdOutSink())

if __name__ == "__main__":
    run_main(bounded)
'''

KINDS = ("cli", "cli_w1", "script", "live", "failing", "sigterm", "sigkill", "pair")


def _counts(lines: List[str]) -> List[str]:
    """The word count's output lines for `lines`, sorted."""
    words: Dict[str, int] = {}
    for line in lines:
        for word in line.split():
            words[word] = words.get(word, 0) + 1
    return sorted(f"({word!r}, {n})" for word, n in words.items())


@dataclass(frozen=True)
class Row:
    """The server's figures after `runs` runs."""

    runs: int
    minutes: float
    usage: ServerUsage
    small_run_seconds: float


class Day:
    """Mixed runs against one warm server in `folder` (`FLOWSPARK_WARM_SPARK_DIR`), from `projects` folders."""

    def __init__(self, folder: Path, projects: int, say: Callable[[str], None] = lambda _: None) -> None:
        self._folder = folder
        self._say = say
        self._env = {**os.environ, WARM_SPARK_DIR.name: str(folder / "servers")}
        self._env.pop("PYTHONPATH", None)
        self._projects: List[Path] = []
        for index in range(projects):
            project = folder / f"project{index}"
            project.mkdir(parents=True, exist_ok=True)
            (project / f"project{index}.py").write_text(
                textwrap.dedent(PROJECT.format(index=index, words=WORDS, live=LIVE_LINES))
            )
            self._projects.append(project)
        self.runs = 0
        self.last_small_run = 0.0
        self._started = time.monotonic()

    def _module(self, project: Path) -> str:
        return project.name

    def _python(self, project: Path, args: List[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=project,
            env=self._env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def _finished(
        self, proc: subprocess.Popen[str], what: str, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            msg = f"{what} did not end within {timeout:g} s: {err[-2000:]}"
            raise AssertionError(msg) from None
        self.runs += 1
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def _check(self, done: subprocess.CompletedProcess[str], want: List[str], what: str) -> None:
        if done.returncode != 0 or sorted(done.stdout.splitlines()) != want:
            msg = f"{what}: exit {done.returncode}, stdout {done.stdout[-500:]!r}, {done.stderr[-2000:]}"
            raise AssertionError(msg)

    def cli(self, project: Path, *extra: str) -> None:
        start = time.monotonic()
        module = self._module(project)
        done = self._finished(self._python(project, ["-m", "flowspark.run", f"{module}:bounded", *extra]), "cli")
        self._check(done, _counts(LINES), f"{module}:bounded {' '.join(extra)}")
        if not extra:
            self.last_small_run = time.monotonic() - start

    def script(self, project: Path) -> None:
        module = self._module(project)
        done = self._finished(self._python(project, [f"{module}.py"]), "script")
        self._check(done, _counts(LINES), f"python {module}.py")

    def live(self, project: Path) -> None:
        module = self._module(project)
        done = self._finished(self._python(project, ["-m", "flowspark.run", f"{module}:live"]), "live")
        self._check(done, _counts(LINES[:LIVE_LINES]), f"{module}:live")

    def failing(self, project: Path) -> None:
        module = self._module(project)
        done = self._finished(self._python(project, ["-m", "flowspark.run", f"{module}:failing"]), "failing")
        if done.returncode == 0 or "fails on purpose" not in done.stderr or "boom" not in done.stderr:
            msg = f"{module}:failing: exit {done.returncode}, {done.stderr[-2000:]}"
            raise AssertionError(msg)

    def stopped(self, project: Path, stop: signal.Signals) -> None:
        module = self._module(project)
        proc = self._python(project, ["-m", "flowspark.run", f"{module}:endless"])
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "x":
            proc.kill()
            msg = f"{module}:endless wrote {line!r} first: {proc.communicate()[1][-2000:]}"
            raise AssertionError(msg)
        os.killpg(proc.pid, stop) if stop is signal.SIGKILL else proc.send_signal(stop)
        done = self._finished(proc, f"{module}:endless stopped with {stop.name}", timeout=120)
        if stop is signal.SIGTERM and (
            done.returncode != 128 + signal.SIGTERM or "stopped on SIGTERM" not in done.stderr
        ):
            msg = f"{module}:endless after SIGTERM: exit {done.returncode}, {done.stderr[-2000:]}"
            raise AssertionError(msg)

    def pair(self, first: Path, second: Path) -> None:
        procs = [
            (project, self._python(project, ["-m", "flowspark.run", f"{self._module(project)}:bounded"]))
            for project in (first, second)
        ]
        for project, proc in procs:
            self._check(self._finished(proc, "pair"), _counts(LINES), f"{self._module(project)}:bounded (pair)")

    def round(self, number: int) -> None:
        """One run of every kind, each from the next project's folder."""
        projects = self._projects
        for offset, kind in enumerate(KINDS):
            project = projects[(number + offset) % len(projects)]
            self._say(f"run {self.runs + 1}: {kind} from {project.name}")
            if kind == "cli":
                self.cli(project)
            elif kind == "cli_w1":
                self.cli(project, "-w", "1")
            elif kind == "script":
                self.script(project)
            elif kind == "live":
                self.live(project)
            elif kind == "failing":
                self.failing(project)
            elif kind == "sigterm":
                self.stopped(project, signal.SIGTERM)
            elif kind == "sigkill":
                self.stopped(project, signal.SIGKILL)
            else:
                self.pair(project, projects[(number + offset + 1) % len(projects)])

    def server_root(self) -> Optional[int]:
        """The warm server's supervisor, if one runs in the day's folder."""
        directory = self.server_directory()
        record = read_record(directory) if directory else None
        return None if record is None else record.supervisor

    def server_directory(self) -> Optional[str]:
        found = list((self._folder / "servers").glob("*/server.json"))
        return str(found[0].parent) if len(found) == 1 else None

    def row(self) -> Row:
        directory, root = self.server_directory(), self.server_root()
        if directory is None or root is None:
            msg = "no single warm server runs in the day's folder"
            raise AssertionError(msg)
        minutes = (time.monotonic() - self._started) / 60
        return Row(self.runs, minutes, usage_of(root, directory), self.last_small_run)

    def stop(self) -> None:
        """Stop the day's server, and wait until it is gone."""
        root = self.server_root()
        if root is None:
            return
        os.kill(root, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{root}") and time.monotonic() < deadline:
            time.sleep(0.2)


def _line(row: Row) -> str:
    usage = row.usage
    return (
        f"| {row.runs} | {row.minutes:.1f} | {usage.processes} | {usage.pss_bytes / 2**20:,.0f} | {usage.threads} "
        f"| {usage.open_files} | {usage.disk_bytes / 2**20:,.1f} | {row.small_run_seconds:.2f} |"
    )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warm_day", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="at least this many runs")
    parser.add_argument("--minutes", type=float, default=0.0, help="and keep going until this many minutes passed")
    parser.add_argument("--projects", type=int, default=5, help="project folders the runs come from")
    parser.add_argument("--every", type=int, default=30, help="a row after about every this many runs")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="warm-day-"))
    day = Day(folder, args.projects, say=lambda text: print(text, file=sys.stderr, flush=True))
    print(f"a warm server of the day's own, in {folder}", file=sys.stderr)
    print("| runs | minutes | processes | PSS MiB | threads | open files | folder MiB | small run s |")
    print("|---|---|---|---|---|---|---|---|")
    rows: List[Row] = []
    next_row = 1  # the first row after the first round
    number = 0
    try:
        while day.runs < args.runs or (time.monotonic() - day._started) / 60 < args.minutes:
            day.round(number)
            number += 1
            if day.runs >= next_row:
                rows.append(day.row())
                print(_line(rows[-1]), flush=True)
                next_row = day.runs + args.every
        rows.append(day.row())
        print(_line(rows[-1]), flush=True)
    finally:
        day.stop()
        shutil.rmtree(folder, ignore_errors=True)
    first, last = rows[0], rows[-1]
    print(
        f"\nafter {last.runs} runs against after {first.runs}: processes {last.usage.processes / first.usage.processes:.2f} x, "
        f"PSS {last.usage.pss_bytes / first.usage.pss_bytes:.2f} x, small run {last.small_run_seconds:.2f} s "
        f"against {first.small_run_seconds:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
