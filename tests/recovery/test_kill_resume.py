"""Kill a run (its whole process group) at points of its progress; resume; compare.

The final output of a run killed several times and resumed each time from
the same recovery directory must equal what the flow makes of its input,
line for line: nothing lost, nothing written twice.  That output is
computed here in plain Python (`_running_sums`, `_window_sums`,
`_dir_lines`); an undisturbed run as the reference would cost about as
much as the killed one.

A kill waits for progress, not for a wall-clock time: for epochs the run
commits to its recovery directory's Spark checkpoint or for its output to
grow (then a random moment more, so that it lands anywhere in the epoch
under way, sinks' writes included), or for a sink to be in the middle of a
write.  So each kill lands mid-run after real work however loaded the
machine is, and each test asserts how many kills it made.

A run with Spark settings of its own or a catalog table (`spark_table`,
`spark_delta`) has its JVM in its process group, which dies with it; the
others run on the warm local Spark server (`flowspark.engine.connect`),
which outlives the kill as it would a user's killed run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence, Tuple
from zlib import adler32

import pytest
from support.postgres_server import pg_query, pg_table
from support.table_formats import conf_args, delta_settings, delta_table_rows

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "recovery" / "kill_flows.py"

LINES = 60_000
"""The input's lines: 16 epochs of `--max-batch-items 4000` (the last at the end of input), room for five kills."""

JITTER = 1.5
"""The most seconds a kill at a point of progress waits past it (a random share of them)."""


@contextmanager
def _started(flow: str, env: Dict[str, str], recovery: str, *spark_args: str) -> Iterator["subprocess.Popen[bytes]"]:
    """`flow` of `kill_flows` started in a process group of its own, with `spark_args` (`--conf`s) after flowspark's;
    the group is killed on the way out if the run still runs (a failed test leaves no run behind)."""
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{FLOWS}:{flow}",
        "-r",
        recovery,
        "--max-batch-items",
        "4000",
        "-w",
        "2",
        *spark_args,
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            _kill(proc)


def _kill(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL the run's process group (nothing in it can tidy up) and reap the run."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _ended_well(proc: "subprocess.Popen[bytes]", timeout: float) -> None:
    """Assert that the run ends within `timeout` s and exits 0; its error output, read as it comes (a full pipe would
    stall the run), says why not."""
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()


def _committed(recovery: Path) -> int:
    """How many epochs the recovery directory's Spark checkpoint has committed (`query/commits/N` for epoch N)."""
    try:
        names = [path.name for path in (recovery / "query" / "commits").iterdir()]
    except FileNotFoundError:
        return 0
    return max((int(name) + 1 for name in names if name.isdigit()), default=0)


@dataclass(frozen=True)
class KillPoint:
    """When to kill a run: `arm()`, called before the run starts, makes the test of the point being reached (it may
    note where the run starts from); the kill follows a random share of `jitter` s later; `poll` s between tests."""

    arm: Callable[[], Callable[[], bool]]
    jitter: float = 0.0
    poll: float = 0.01


def _epochs_on(recovery: Path) -> KillPoint:
    """Once the run has committed one or two epochs (at random) more than when it started, and up to `JITTER` s later:
    anywhere in the epoch under way, after real progress."""

    def arm() -> Callable[[], bool]:
        target = _committed(recovery) + random.randint(1, 2)
        return lambda: _committed(recovery) >= target

    return KillPoint(arm, JITTER)


def _output_grows(out: Path) -> KillPoint:
    """Once the output file is longer than when the run started, and up to `JITTER` s later: while the run writes
    output past what a killed run left."""

    def arm() -> Callable[[], bool]:
        start = out.stat().st_size if out.exists() else 0
        return lambda: out.exists() and out.stat().st_size > start

    return KillPoint(arm, JITTER)


def _mid_write(out: Path, writing: Callable[[Path], bool], later: int = 0) -> KillPoint:
    """As soon as `writing(out)` holds once `later` data files more are out than when the run started (so that it hits
    a later batch than the one a killed run left half written)."""

    def arm() -> Callable[[], bool]:
        files = len(_data_files(out))
        return lambda: writing(out) and len(_data_files(out)) >= files + later

    return KillPoint(arm)


def _rows_over(postgres: str, table: str, rows: int) -> KillPoint:
    """As soon as `table` holds more than `rows` rows: in the middle of the partitions' writes."""
    return KillPoint(lambda: lambda: pg_query(postgres, f"SELECT count(*) FROM {table}")[0][0] > rows, poll=0.05)


def _killed_at(proc: "subprocess.Popen[bytes]", seen: Callable[[], bool], point: KillPoint) -> bool:
    """Kill the run's process group at `point`, once `seen()`; false if the run ended first (it must exit 0)."""
    deadline = time.monotonic() + 300
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the run went 300 s without reaching its kill point"
        if seen():
            try:
                proc.wait(timeout=random.uniform(0.0, point.jitter))
            except subprocess.TimeoutExpired:
                _kill(proc)
                return True
            break
        time.sleep(point.poll)
    _ended_well(proc, 60)
    return False


def _run_with_kills(
    flow: str, env: Dict[str, str], recovery: Path, points: Sequence[KillPoint], *run_args: str, as_uri: bool = False
) -> List[int]:
    """Run `flow` (with `run_args`) to its end, killed at each of `points` in turn and started again; the epochs
    committed when each kill landed (none for a point the run ended before).

    With `as_uri`, the recovery directory is given as a `file://` URI.
    """
    where = recovery.as_uri() if as_uri else str(recovery)
    kills = []
    for point in points:
        seen = point.arm()
        with _started(flow, env, where, *run_args) as proc:
            if _killed_at(proc, seen, point):
                kills.append(_committed(recovery))
    with _started(flow, env, where, *run_args) as proc:
        _ended_well(proc, 300)
    return kills


def _data_files(path: Path) -> List[Path]:
    """The data files below a folder, which readers see (not Spark's `_temporary` or flowspark's `_flowspark`)."""
    found = []
    for folder, dirs, names in os.walk(path):  # a run may be changing the folder: what vanishes is passed over
        dirs[:] = [name for name in dirs if not name.startswith((".", "_"))]
        found += [Path(folder, name) for name in names if not name.startswith((".", "_"))]
    return found


def _lines(path: Path) -> List[str]:
    """The sorted lines of an output file, of a `DirSink`'s files (each behind its file's name and `|`), of a Delta
    table, or of every data file of a Spark output directory (partition folders included)."""
    if path.is_file():
        return sorted(path.read_text().splitlines())
    if (path / "_delta_log").is_dir():
        return sorted(row["line"] for row in delta_table_rows(path))
    data = _data_files(path)
    if all(p.name.startswith("part_") for p in data):
        return sorted(f"{p.name}|{line}" for p in data for line in p.read_text().splitlines())
    return sorted(json.loads(line)["line"] for p in data for line in p.read_text().splitlines())


def _write_input(path: Path, n: int) -> None:
    """`key,second,value` lines: 50 keys, seconds in order (ten lines a second)."""
    rng = random.Random(7)
    path.write_text("".join(f"k{rng.randrange(50)},{i // 10},{rng.randrange(1000)}\n" for i in range(n)))


def _running_sums(src: Path) -> List[str]:
    """The lines `kill_flows`' running sums write for the input `src`: a key's count and total after each of its
    values, then its total at the end."""
    totals: Dict[str, Tuple[int, int]] = {}
    lines = []
    for line in src.read_text().splitlines():
        key, _, value = line.split(",")
        seen, total = totals.get(key, (0, 0))
        totals[key] = (seen + 1, total + int(value))
        lines.append(f"{key},{seen + 1}:{total + int(value)}")
    return sorted(lines + [f"{key},eof:{total}" for key, (_, total) in totals.items()])


def _dir_lines(src: Path) -> List[str]:
    """What `_lines` reads of `kill_flows`' `DirSink` for the input `src`: each running-sum line behind the name of
    its key's file (`DirSink`'s defaults: `part_` and adler32 of the key modulo the file count, three here)."""
    return sorted(f"part_{adler32(line.split(',')[0].encode()) % 3}|{line}" for line in _running_sums(src))


def _window_sums(src: Path) -> List[str]:
    """The lines `kill_flows`' windowed flow writes for the input `src`: `key,window,total` per key and minute of
    event time it has values in (window `n` holds seconds `60n` to `60n + 59`)."""
    totals: Dict[Tuple[str, int], int] = {}
    for line in src.read_text().splitlines():
        key, second, value = line.split(",")
        window = (key, int(second) // 60)
        totals[window] = totals.get(window, 0) + int(value)
    return sorted(f"{key},{window},{total}" for (key, window), total in totals.items())


def _input(tmp_path: Path, lines: int = LINES) -> Path:
    """A new input file of `lines` lines in `tmp_path` (`_write_input`)."""
    src = tmp_path / "in.txt"
    _write_input(src, lines)
    return src


def _env(src: Path, **settings: str) -> Dict[str, str]:
    """The environment of a run of the input `src`, with `kill_flows`' other `settings` (`KILL_OUT`, ...)."""
    return dict(os.environ, KILL_IN=str(src), **settings)


def test_user_logic_with_timers_survives_kills(tmp_path: Path) -> None:
    src, out, recovery = _input(tmp_path), tmp_path / "out.txt", tmp_path / "recovery"
    kills = _run_with_kills("flow", _env(src, KILL_OUT=str(out)), recovery, [_epochs_on(recovery)] * 3)
    expected = _running_sums(src)
    assert len(expected) == LINES + 50
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 3


def test_windowed_file_to_file_survives_kills_with_a_file_uri_recovery_directory(tmp_path: Path) -> None:
    src, out, recovery = _input(tmp_path), tmp_path / "out.txt", tmp_path / "killed recovery"
    # Windows close from epoch 9 on (an hour of event time after the first): killed once with only open windows in
    # the state, then twice while closed ones are written.
    points = [_epochs_on(recovery), _output_grows(out), _output_grows(out)]
    kills = _run_with_kills("windowed", _env(src, KILL_OUT=str(out)), recovery, points, as_uri=True)
    expected = _window_sums(src)
    assert len(expected) == 50 * 100
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 3
    uri = recovery.as_uri()
    assert "%20" in uri
    shown = subprocess.run(
        [sys.executable, "-m", "flowspark.recovery", uri, "--inspect"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "flow: kill_windowed"
    epochs = {line.split(": ")[0]: line.split(": ")[1] for line in lines[1:3]}
    assert int(epochs["last completed epoch"]) >= 1
    assert int(epochs["sinks written through epoch"]) >= int(epochs["last completed epoch"])
    assert any(line.strip().startswith("kill_windowed.sum") for line in lines[3:]), shown.stdout


def test_a_dir_sink_written_in_spark_tasks_survives_kills(tmp_path: Path) -> None:
    src, out, recovery = _input(tmp_path), tmp_path / "out", tmp_path / "recovery"
    out.mkdir()
    kills = _run_with_kills("to_dir", _env(src, KILL_OUT=str(out)), recovery, [_epochs_on(recovery)] * 3)
    expected = _dir_lines(src)
    assert len(expected) == LINES + 50
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 3


def test_spark_source_and_sink_survive_kills(tmp_path: Path) -> None:
    src, out, recovery = _input(tmp_path), tmp_path / "out", tmp_path / "recovery"
    kills = _run_with_kills("spark_io", _env(src, KILL_OUT=str(out)), recovery, [_epochs_on(recovery)] * 2)
    expected = _running_sums(src)
    assert len(expected) == LINES + 50
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 2


def test_spark_partition_folders_with_compaction_survive_kills_at_random_and_while_a_batch_is_staged_or_moved_in(
    tmp_path: Path,
) -> None:
    """Killed while the first batch is staged or moved in, at a random point, and while a later batch is (a batch writes
    a file per key folder and task: 12 more files are out once the batch the resumed run replays is in)."""
    src, out, recovery = _input(tmp_path), tmp_path / "out", tmp_path / "recovery"
    out.mkdir()

    def staged(folder: Path) -> bool:
        return any(folder.glob("_flowspark/*/staging"))

    anywhere = _epochs_on(recovery)
    points = [_mid_write(out, staged), anywhere, _mid_write(out, staged, 12)]
    kills = _run_with_kills("spark_parts", _env(src, KILL_OUT=str(out)), recovery, points)
    expected = _running_sums(src)
    assert len(expected) == LINES + 50
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 3


def test_a_spark_catalog_table_survives_kills_at_random_and_while_spark_writes_a_batch(tmp_path: Path) -> None:
    """Killed while Spark writes the first batch, at a random point, and while Spark writes a later batch (a batch is
    one file: two more are out once the batch the resumed run replays is in, and the next)."""
    src, out, recovery = _input(tmp_path), tmp_path / "out", tmp_path / "recovery"
    out.mkdir()

    def writing(folder: Path) -> bool:
        return (folder / "_temporary").exists()

    anywhere = _epochs_on(recovery)
    points = [_mid_write(out, writing), anywhere, _mid_write(out, writing, 2)]
    kills = _run_with_kills("spark_table", _env(src, KILL_OUT=str(out)), recovery, points)
    expected = _running_sums(src)
    assert len(expected) == LINES + 50
    assert _lines(out) == expected, f"killed at epochs {kills}"
    assert len(kills) == 3


@pytest.mark.table_formats
def test_a_delta_table_killed_while_spark_writes_a_batch(tmp_path: Path) -> None:
    """Killed once a batch's first data file is out (before or after Delta's commit of it), and a few files later."""
    src, out, recovery = _input(tmp_path, 8_000), tmp_path / "out", tmp_path / "recovery"

    def written(folder: Path) -> bool:
        return any(folder.glob("*.parquet"))

    run_args = ("--max-batch-items", "500", *conf_args(delta_settings()))
    points = [_mid_write(out, written), _mid_write(out, written, 4)]
    kills = _run_with_kills("spark_delta", _env(src, KILL_OUT=str(out)), recovery, points, *run_args)
    assert _lines(out) == _running_sums(src), f"killed at epochs {kills}"
    assert len(kills) == 2


@pytest.mark.postgres
def test_a_postgres_sink_written_in_spark_tasks_survives_kills(postgres: str, tmp_path: Path) -> None:
    src, recovery = _input(tmp_path), tmp_path / "recovery"
    table = pg_table(postgres, "key text NOT NULL, line text NOT NULL")
    # Killed as soon as rows arrive, then again with some 40% of them in: each time in the middle of the writes.
    points = [_rows_over(postgres, table, 0), _rows_over(postgres, table, 24_000)]
    kills = _run_with_kills("to_postgres", _env(src, KILL_PG=postgres, KILL_TABLE=table), recovery, points)
    got = sorted(line for (line,) in pg_query(postgres, f"SELECT line FROM {table}"))
    assert len(got) == LINES + 50
    assert got == _running_sums(src), f"killed at epochs {kills}"
    assert len(kills) == 2
