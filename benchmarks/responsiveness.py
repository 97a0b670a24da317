"""What a developer and a live flow feel, on Bytewax 0.21.1, flowspark and plain Spark: one markdown table.

    python -m benchmarks.responsiveness [--engines bytewax,flowspark,spark] [--rows ...] [--repeat N] [--seconds S]

Rows (`--rows`, in this order):

- `readme`: the README example (wordcount) from process start to its first
  line on stdout, and to its exit; median of `--repeat` runs after one
  untimed warm-up run.
- `unit_test`: `run_main` of a small windowed flow, `--calls` times in one
  process (`benchmarks/flows/small_windowed.py`): the first call, the median
  of the others, and the engine's import.
- `latency_map`, `latency_count`, `latency_count_fast`: end-to-end latency
  p50 and p99 of a paced source (`benchmarks/flows/paced.py`) -> `map` ->
  sink at 1,000 items/s; the same with `key_on` -> `stateful_map` at 1,000
  and 20,000 items/s; and the time to the first output.  Each engine's CLI
  runner with its default settings.
- `restart`: a live windowed flow (`benchmarks/flows/live_restart.py`) run
  with `-r DIR -s 1`, stopped with SIGINT, started again on the same
  directory: from the second start to its first output line, and to the
  first output of an item made after that start.

The `spark` engine runs the `readme` and latency rows' flows as plain
PySpark on a Spark of each run's own (`benchmarks/native_live.py`): what
Spark itself takes for them, flowspark's floor.

Every run is a fresh subprocess in its own session, strictly one at a time,
each with a timeout; a run that fails makes an error cell, not a crash.
Progress goes to stderr, the table to stdout.  See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("bytewax", "flowspark", "spark")
NATIVE = "benchmarks.native_live"
"""The module that runs a row's flow as plain PySpark, the `spark` engine."""
NATIVE_ROWS = {"readme", "latency_map", "latency_count", "latency_count_fast"}
"""The rows the `spark` engine measures."""
ROWS = ("readme", "unit_test", "latency_map", "latency_count", "latency_count_fast", "restart")
STREAMING = {"latency_map", "latency_count", "latency_count_fast", "restart"}
"""Rows whose flowspark runs are streaming queries (their input does not end within the first read)."""
README_FLOW = {
    "bytewax": "benchmarks.flows.wordcount:flow",
    "flowspark": "flowspark.examples.wordcount:flow",
    "spark": f"{NATIVE}:wordcount",
}
RESULT = "RESULT "  # the line `benchmarks.flows.small_windowed` prints its figures on
GRACE = 60.0
"""Seconds a run has to exit after SIGINT before its session is killed."""


class RunFailed(Exception):
    """A run that gave no figures: timed out, failed, or printed nothing usable."""


# --- one subprocess, its stdout lines timed as they come ------------------------------------


@dataclass(frozen=True)
class Line:
    at: float
    """Seconds from the process's start."""
    text: str


class Watched:
    """A subprocess in a session of its own; each stdout line is kept with the time it arrived.

    stderr goes to `log`, stdout to `log` with `.out` appended.
    `started` is the wall-clock time (`time.time()`) just before the start,
    for comparing with times the flow itself writes down.
    """

    def __init__(self, cmd: Sequence[str], env: Dict[str, str], log: Path) -> None:
        self.cmd = list(cmd)
        self.log = log
        self.left_behind = False
        """Whether processes of the run's session outlived it by 10 s (then they were killed)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        self._err = open(log, "wb")
        self._err.write(f"$ {shlex.join(self.cmd)}\n".encode())
        self._err.flush()
        self._out = open(f"{log}.out", "wb")
        self.lines: List[Line] = []
        self._changed = threading.Condition()
        self.started = time.time()
        self._t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            start_new_session=True,
        )
        self.ended: Optional[float] = None
        """Seconds from the start to the exit, once seen."""
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: Optional[IO[bytes]]) -> None:
        assert stream is not None
        for raw in stream:
            line = Line(time.perf_counter() - self._t0, raw.decode(errors="replace").rstrip("\n"))
            self._out.write(raw)
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        self.proc.wait()
        with self._changed:
            self.ended = time.perf_counter() - self._t0
            self._changed.notify_all()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def wait_line(self, wanted: Callable[[Line], bool], timeout: float) -> Optional[Line]:
        """The first line (already seen or to come) that is `wanted`; None at the exit or after `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if wanted(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.perf_counter()
                if self.ended is not None or left <= 0:
                    return None
                self._changed.wait(min(left, 1.0))

    def wait(self, timeout: float) -> Optional[int]:
        """The exit code, after at most `timeout` seconds; None if the session had to be killed."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(10)
        return self.proc.returncode

    def interrupt(self) -> Optional[int]:
        """SIGINT to the run's process (as `kill -INT`), then its exit code; None if it had to be killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(GRACE)

    def kill(self) -> None:
        """SIGKILL to every process left in the run's session (the warm Spark server lives in a session of its own)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._reader.join(10)

    def close(self) -> None:
        """End what the run left behind, after 10 s of grace (noted in `left_behind`)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _group_alive(self.proc.pid):
            time.sleep(0.2)
        if _group_alive(self.proc.pid):
            self.left_behind = True
            self.kill()
        self._err.close()
        self._out.close()

    def failure(self, rc: Optional[int], timeout: float) -> RunFailed:
        """Why the run gave nothing, pointing at its log."""
        if rc is None:
            return RunFailed(f"timed out after {timeout:.0f} s (log {_shown(self.log)})")
        return RunFailed(f"exit code {rc} (log {_shown(self.log)})")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


# --- the measurements --------------------------------------------------------------------------


@dataclass
class Outcome:
    """One engine's figures (in seconds) for one row, or why there are none."""

    figures: List[float] = field(default_factory=list)
    error: str = ""
    notes: List[str] = field(default_factory=list)
    output: List[str] = field(default_factory=list)
    """What the run wrote, sorted, where both engines must write the same."""


@dataclass
class Bench:
    """The settings and folders every measurement uses."""

    args: argparse.Namespace
    work: Path
    """This invocation's logs and run folders."""
    runs: List[Watched] = field(default_factory=list)
    """The runs of the measurement under way."""

    def env(self, engine: str, **extra: str) -> Dict[str, str]:
        env = dict(os.environ, FLOWBENCH_ENGINE=engine, PYTHONUNBUFFERED="1")
        env.update(extra)
        return env

    def runner(self, engine: str, flow: str, *options: str) -> List[str]:
        """The command that runs `flow` (`module:attribute`) with the engine's CLI; for `spark`, `native_live`'s own
        version of the flow named by the attribute, without `options`."""
        if engine == "spark":
            return [sys.executable, "-m", NATIVE, flow.rsplit(":", 1)[1]]
        return [sys.executable, "-m", f"{engine}.run", flow, *options]

    def start(self, name: str, cmd: Sequence[str], env: Dict[str, str]) -> Watched:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {shlex.join(cmd[1:])}", file=sys.stderr, flush=True)
        run = Watched(cmd, env, self.work / f"{name}.log")
        self.runs.append(run)
        return run


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile `q` (0-1) of sorted values."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def readme(bench: Bench, engine: str) -> Outcome:
    """The wordcount example: first stdout line and exit, median of `--repeat` runs after an untimed one."""
    cmd = bench.runner(engine, README_FLOW[engine])
    firsts: List[float] = []
    walls: List[float] = []
    output: List[str] = []
    warm_up = ""
    for i in range(bench.args.repeat + 1):
        run = bench.start(f"readme-{engine}-{i}" + ("-warmup" if i == 0 else ""), cmd, bench.env(engine))
        try:
            rc = run.wait(bench.args.timeout)
        finally:
            run.close()
        if rc != 0:
            raise run.failure(rc, bench.args.timeout)
        if not run.lines or run.ended is None:
            msg = f"no output line (log {_shown(run.log)})"
            raise RunFailed(msg)
        if i == 0:
            warm_up = f"warm-up (untimed) {run.lines[0].at:.2f} / {run.ended:.2f}; "
        else:
            firsts.append(run.lines[0].at)
            walls.append(run.ended)
        output = sorted(line.text for line in run.lines)
        print(f"    first line {run.lines[0].at:.2f} s, exit {run.ended:.2f} s", file=sys.stderr, flush=True)
    return Outcome(
        [statistics.median(firsts), statistics.median(walls)],
        output=output,
        notes=[
            f"{len(output)} lines; runs (first line / exit, s): {warm_up}"
            + ", ".join(f"{f:.2f} / {w:.2f}" for f, w in zip(firsts, walls))
        ],
    )


def unit_test(bench: Bench, engine: str) -> Outcome:
    """`--calls` `run_main` calls of a small windowed flow in one process."""
    cmd = [sys.executable, "-m", "benchmarks.flows.small_windowed", str(bench.args.calls)]
    run = bench.start(f"unit_test-{engine}", cmd, bench.env(engine))
    try:
        rc = run.wait(bench.args.timeout)
    finally:
        run.close()
    if rc != 0:
        raise run.failure(rc, bench.args.timeout)
    found = [line.text[len(RESULT) :] for line in run.lines if line.text.startswith(RESULT)]
    if not found:
        msg = f"no {RESULT.strip()} line (log {_shown(run.log)}.out)"
        raise RunFailed(msg)
    result = json.loads(found[-1])
    calls: List[float] = result["call_seconds"]
    rest = calls[1:]
    figures = [calls[0], statistics.median(rest) if rest else math.nan, result["import_seconds"]]
    wall = f"; the process {run.ended:.1f} s" if run.ended is not None else ""
    return Outcome(
        figures,
        output=[json.dumps(item) for item in result["output"]],
        notes=[f"calls (s): {', '.join(f'{c:.3f}' for c in calls)}{wall}"],
    )


@dataclass(frozen=True)
class Paced:
    """A latency row: which flow of `benchmarks/flows/paced.py`, at what rate."""

    flow: str
    rate: int


PACED = {
    "latency_map": Paced("map_flow", 1_000),
    "latency_count": Paced("count_flow", 1_000),
    "latency_count_fast": Paced("count_flow", 20_000),
}


def latency(bench: Bench, engine: str, row: str) -> Outcome:
    """p50 and p99 of `written - stamp` over the items stamped after the warm-up, and the time to the first output."""
    paced = PACED[row]
    args = bench.args
    folder = bench.work / f"{row}-{engine}-samples"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    options = ["-s", str(args.snapshot_interval)] if args.snapshot_interval is not None else []
    env = bench.env(
        engine,
        FLOWBENCH_RATE=str(paced.rate),
        FLOWBENCH_SECONDS=str(args.seconds),
        FLOWBENCH_WARMUP=str(args.warmup),
        FLOWBENCH_LATENCY_DIR=str(folder),
    )
    run = bench.start(f"{row}-{engine}", bench.runner(engine, f"benchmarks.flows.paced:{paced.flow}", *options), env)
    timeout = args.timeout + args.warmup + args.seconds
    try:
        rc = run.wait(timeout)
    finally:
        run.close()
    if rc != 0:
        raise run.failure(rc, timeout)
    first_file = folder / "FIRST"
    if not first_file.exists():
        msg = f"the sink wrote nothing (log {_shown(run.log)})"
        raise RunFailed(msg)
    first = float(first_file.read_text())
    cut = first + args.warmup
    latencies: List[float] = []
    produced = 0
    last = cut
    for samples in folder.glob("samples-*"):
        for text in samples.read_text().splitlines():
            stamp, written = map(float, text.split())
            produced += 1
            if stamp >= cut:
                latencies.append(written - stamp)
                last = max(last, stamp)
    if not latencies:
        msg = (
            f"fell behind: none of the {produced:,} items written was stamped after the warm-up "
            f"(samples in {_shown(folder)})"
        )
        raise RunFailed(msg)
    latencies.sort()
    shutil.rmtree(folder, ignore_errors=True)
    return Outcome(
        [_percentile(latencies, 0.50), _percentile(latencies, 0.99), first - run.started],
        notes=[
            f"{len(latencies):,} of {produced:,} items stamped after the warm-up, over {last - cut:.1f} s "
            f"({len(latencies) / max(last - cut, 1e-3):,.0f}/s); max {latencies[-1] * 1000:,.1f} ms; "
            f"the run {run.ended or 0:.1f} s"
        ],
    )


def warm_up_streaming(bench: Bench) -> None:
    """One short, untimed streaming run on flowspark before the timed ones.

    The first flowspark run on a machine also writes the driver JVM's class
    archive (`flowspark/engine/spark/class_archive.py`), a one-off cost that would
    otherwise land on whichever streaming row comes first.
    """
    folder = bench.work / "warm-up-samples"
    folder.mkdir(parents=True, exist_ok=True)
    env = bench.env("flowspark", FLOWBENCH_SECONDS="1", FLOWBENCH_WARMUP="0", FLOWBENCH_LATENCY_DIR=str(folder))
    run = bench.start("warm-up-flowspark", bench.runner("flowspark", "benchmarks.flows.paced:map_flow"), env)
    try:
        rc = run.wait(bench.args.timeout)
    finally:
        run.close()
    shutil.rmtree(folder, ignore_errors=True)
    print(
        f"    untimed; {'exit code ' + str(rc) if rc is not None else 'timed out'} after {run.ended or 0:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def _newest_stamp(line: Line) -> Optional[float]:
    """The newest item's stamp in a `live_restart` output line, if it is one."""
    try:
        return float(line.text.rsplit(" ", 1)[-1])
    except ValueError:
        return None


def restart(bench: Bench, engine: str) -> Outcome:
    """Run the live flow with a recovery directory, stop it with SIGINT, start it again; time the second start."""
    args = bench.args
    recovery = bench.work / f"restart-{engine}-recovery"
    shutil.rmtree(recovery, ignore_errors=True)
    recovery.mkdir(parents=True)
    options = ["-r", str(recovery), "-s", "1"]
    if engine == "bytewax":
        options += ["-b", "0"]  # Bytewax wants a backup interval with -r
        init = bench.start(
            "restart-bytewax-init", [sys.executable, "-m", "bytewax.recovery", str(recovery), "1"], bench.env(engine)
        )
        try:
            rc = init.wait(args.timeout)
        finally:
            init.close()
        if rc != 0:
            raise init.failure(rc, args.timeout)
    cmd = bench.runner(engine, "benchmarks.flows.live_restart:flow", *options)
    env = bench.env(engine)

    first_run = bench.start(f"restart-{engine}-1", cmd, env)
    try:
        first = first_run.wait_line(lambda line: True, args.timeout)
        if first is None:
            exited = first_run.ended is not None
            first_run.kill()
            raise first_run.failure(first_run.proc.returncode if exited else None, args.timeout)
        stop_at = max(args.live_seconds, first.at + 5)
        time.sleep(max(0.0, stop_at - first_run.elapsed))
        stopped = first_run.interrupt()
    finally:
        first_run.close()

    second = bench.start(f"restart-{engine}-2", cmd, env)
    try:
        again = second.wait_line(lambda line: True, args.timeout)
        new = second.wait_line(
            lambda line: (_newest_stamp(line) or 0.0) >= second.started, max(0.0, args.timeout - second.elapsed)
        )
        ended = second.ended
        second.interrupt()
    finally:
        second.close()
    if again is None or new is None:
        what = "no output line" if again is None else "no output of an item made after the restart"
        why = f"exited after {ended:.1f} s" if ended is not None else f"none in {args.timeout:.0f} s"
        msg = f"{what} ({why}; log {_shown(second.log)})"
        raise RunFailed(msg)
    shutil.rmtree(recovery, ignore_errors=True)
    return Outcome(
        [again.at, new.at],
        notes=[
            f"first run: first output {first.at:.1f} s, SIGINT at {stop_at:.1f} s, exit code {stopped}; "
            f"restart: first line `{again.text}`"
        ],
    )


MEASURES: Dict[str, Callable[[Bench, str], Outcome]] = {
    "readme": readme,
    "unit_test": unit_test,
    "latency_map": lambda bench, engine: latency(bench, engine, "latency_map"),
    "latency_count": lambda bench, engine: latency(bench, engine, "latency_count"),
    "latency_count_fast": lambda bench, engine: latency(bench, engine, "latency_count_fast"),
    "restart": restart,
}


def what(row: str, args: argparse.Namespace) -> str:
    """The table's first column: what the row measures, its figures in order."""
    if row == "readme":
        return f"README example (wordcount): first output line / whole run, median of {args.repeat} after a warm-up"
    if row == "unit_test":
        return (
            f"a unit test: `run_main` of a small windowed flow, {args.calls} in one process: "
            "first / median of the rest / engine import"
        )
    if row == "restart":
        return (
            "a live flow restarted with `-r DIR -s 1` (2 partitions, 1 s windows, 48 keys): "
            "first output line / first output of new input"
        )
    paced = PACED[row]
    if row == "latency_map":
        return f"latency p50 / p99 / first output: paced source → `map` → sink, {paced.rate:,} items/s"
    if row == "latency_count":
        return f"same, `key_on` (100 keys) → `stateful_map` running count, {paced.rate:,} items/s"
    return f"same, {paced.rate:,} items/s"


def measure(bench: Bench, row: str, engine: str) -> Optional[Outcome]:
    """One row on one engine; None where the engine has no version of the row's flow."""
    if engine == "spark" and row not in NATIVE_ROWS:
        return None
    bench.runs.clear()
    try:
        outcome = MEASURES[row](bench, engine)
    except RunFailed as ex:
        outcome = Outcome(error=str(ex))
    except Exception as ex:  # a broken measurement must not lose the other rows
        outcome = Outcome(error=f"{type(ex).__name__}: {ex}")
    left = [_shown(run.log) for run in bench.runs if run.left_behind]
    if left:
        outcome.notes.append(f"processes outlived their run by 10 s and were killed: {', '.join(left)}")
    shown = " / ".join(_duration(f) for f in outcome.figures) if outcome.figures else f"FAILED: {outcome.error}"
    print(f"    {row} on {engine}: {shown}", file=sys.stderr, flush=True)
    return outcome


# --- the report --------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 0.995:
        return f"{seconds:.2f} s"
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 9.95 else f"{ms:.1f} ms" if ms >= 0.995 else f"{ms:.2f} ms"


def _ratio(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b) or a <= 0:
        return "-"
    r = b / a
    return f"{r:,.0f} ×" if r >= 9.95 else f"{r:.2f} ×"


def _cell(outcome: Optional[Outcome]) -> str:
    if outcome is None:
        return "(not run)"
    if outcome.error:
        return f"failed: {outcome.error}"
    return " / ".join(_duration(f) for f in outcome.figures)


def _fmt_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)])


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _versions() -> str:
    found = []
    for name in ("bytewax", "flowspark", "pyspark"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return ", ".join(found) + (f" (checkout at {commit})" if commit else "")


def warm_spark_state() -> str:
    """Which of flowspark's runs use its warm Spark Connect server (`FLOWSPARK_WARM_SPARK`), and whether it is up now."""
    mode = os.environ.get("FLOWSPARK_WARM_SPARK", "auto")
    if mode == "0":
        return "turned off (FLOWSPARK_WARM_SPARK=0)"
    try:
        from flowspark.engine.connect.connect_server import read_record, server_dir
    except ImportError as ex:
        return f"unknown ({ex})"
    up = "running" if read_record(server_dir()) is not None else "not running"
    used = {"auto": "bounded runs and every command-line run", "all": "every run"}.get(mode, f"{mode!r} runs")
    return f"{up} before the first run; used by {used} (FLOWSPARK_WARM_SPARK={mode})"


def _ratios(base: Optional[Outcome], other: Optional[Outcome]) -> str:
    if base and other and base.figures and other.figures:
        return " / ".join(_ratio(a, b) for a, b in zip(base.figures, other.figures))
    return "-"


def report(results: Dict[Tuple[str, str], Outcome], args: argparse.Namespace, facts: List[str]) -> str:
    rows = []
    notes = []
    for row in args.rows:
        bw, fs, sp = (results.get((row, engine)) for engine in ENGINES)
        spark_cell = _cell(sp) if "spark" in args.engines and row in NATIVE_ROWS else "-"
        rows.append([what(row, args), _cell(bw), _cell(fs), spark_cell, _ratios(bw, fs), _ratios(sp, fs)])
        for engine in args.engines:
            outcome = results.get((row, engine))
            if outcome is not None:
                notes += [f"`{row}` on {engine}: {note}" for note in outcome.notes]
        for engine, outcome in (("flowspark", fs), ("spark", sp)):
            if bw and outcome and bw.output and outcome.output:
                same = "the same as" if bw.output == outcome.output else "DIFFERENT from"
                notes.append(f"`{row}`: {engine}'s output {same} Bytewax's")
    header = ["what", "Bytewax", "flowspark", "plain Spark", "flowspark / Bytewax", "flowspark / plain Spark"]
    return (
        "\n".join(
            [
                f"### Responsiveness ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores)",
                "",
                f"    python -m benchmarks.responsiveness {shlex.join(args.argv)}".rstrip(),
                "",
                _fmt_table(header, rows),
                "",
                *(f"- {fact}" for fact in facts),
                *(f"- {note}" for note in notes),
            ]
        )
        + "\n"
    )


# --- main --------------------------------------------------------------------------------------


def _csv(allowed: Sequence[str]) -> Callable[[str], List[str]]:
    def parse(text: str) -> List[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad:
            msg = f"unknown {bad}; choose from {', '.join(allowed)}"
            raise argparse.ArgumentTypeError(msg)
        return items

    return parse


def main(argv: Optional[List[str]] = None) -> int:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(prog="python -m benchmarks.responsiveness", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--engines", "--engine", type=_csv(ENGINES), default=list(ENGINES), help=f"subset of {','.join(ENGINES)}"
    )
    parser.add_argument("--rows", type=_csv(ROWS), default=list(ROWS), help=f"subset of {','.join(ROWS)}")
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs of the README example, after one untimed (default 5)"
    )
    parser.add_argument("--calls", type=int, default=10, help="`run_main` calls in the unit-test process (default 10)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=15.0,
        help="seconds of each latency run measured after its warm-up (default 15)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds of each latency run, from its first output, left out (default 5)",
    )
    parser.add_argument(
        "--live-seconds",
        type=float,
        default=15.0,
        help="the restart row's first run is stopped this long after its start, "
        "and at least 5 s after its first output (default 15)",
    )
    parser.add_argument(
        "--snapshot-interval",
        type=float,
        default=None,
        metavar="S",
        help="pass `-s S` to both engines' latency runs (default: each engine's own)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds any run may take beyond its planned length before it is killed (default 300)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=ROOT / "benchmarks" / ".cache",
        help="logs go to CACHE/responsiveness/<time>/ (default benchmarks/.cache)",
    )
    parser.add_argument("--json", type=Path, help="also write every outcome as JSON here")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.engines = [e for e in ENGINES if e in args.engines]
    args.rows = [r for r in ROWS if r in args.rows]
    if args.repeat < 1 or args.calls < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--repeat and --calls must be at least 1, --seconds above 0, --warmup not below 0")

    work = args.cache_dir.resolve() / "responsiveness" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args, work)
    facts = [f"engines: {_versions()}"]
    if "flowspark" in args.engines:
        facts.append(f"flowspark's warm Spark Connect server: {warm_spark_state()}")
    load_before = _load()
    started = time.monotonic()
    results: Dict[Tuple[str, str], Outcome] = {}
    warmed = False
    for row in args.rows:
        for engine in args.engines:
            if engine == "flowspark" and row in STREAMING and not warmed:
                warm_up_streaming(bench)
                warmed = True
            outcome = measure(bench, row, engine)
            if outcome is not None:
                results[(row, engine)] = outcome
    facts += [
        f"load average (1 / 5 / 15 min): {load_before} before, {_load()} after; the script took "
        f"{time.monotonic() - started:.0f} s",
        "settings: each engine's CLI defaults: Bytewax 1 worker, no recovery, epochs of 10 s; "
        "flowspark `local[N]` on N cores, a micro-batch as soon as input comes"
        + (f"; latency rows with `-s {args.snapshot_interval}` on both" if args.snapshot_interval is not None else ""),
        f"logs: {_shown(work)}",
    ]
    if STREAMING & set(args.rows) - {"restart"}:
        facts.insert(
            -1, f"latency rows: {args.seconds:g} s measured after {args.warmup:g} s of warm-up from the first output"
        )
    if args.json:
        args.json.write_text(json.dumps({f"{r}@{e}": asdict(o) for (r, e), o in results.items()}, indent=1))
    print(report(results, args, facts))
    return 0 if all(not o.error for o in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
