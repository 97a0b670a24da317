"""Kill a run (its whole process group, JVM included) at random points; resume; compare.

The final output of a run killed several times and resumed each time from
the same recovery directory must equal an uninterrupted run's, line for
line: nothing lost, nothing written twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest
from support.table_formats import conf_args, delta_settings, delta_table_rows

from conftest import pg_query, pg_table

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "recovery" / "kill_flows.py"


def _start(flow: str, env: Dict[str, str], recovery: str, *spark_args: str) -> "subprocess.Popen[bytes]":
    """Start `flow` of `kill_flows` in a process group of its own, with `spark_args` (`--conf`s) after flowspark's."""
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{FLOWS}:{flow}",
        "-r",
        str(recovery),
        "--max-batch-items",
        "4000",
        "-w",
        "2",
        *spark_args,
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _run_with_kills(flow: str, env: Dict[str, str], recovery: str, kills: int, seed: int) -> int:
    """Run to completion, killing the process group `kills` times first; return the kills done."""
    rng = random.Random(seed)
    done = 0
    for _ in range(kills):
        proc = _start(flow, env, recovery)
        try:
            proc.wait(timeout=rng.uniform(9.0, 20.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            done += 1
            continue
        assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
        return done
    proc = _start(flow, env, recovery)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return done


def _lines(path: Path) -> List[str]:
    """The sorted lines of an output file, of a `DirSink`'s files, of a Delta table, or of every data file of a Spark
    output directory (partition folders included)."""
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


def _reference_and_killed(
    flow: str, tmp_path: Path, kills: int, as_uri: bool = False, directory: bool = False
) -> Tuple[List[str], List[str], int]:
    """The reference output and the output of a run killed `kills` times.

    With `as_uri`, the killed run's recovery directory is a `file://` URI
    of a path with a space in it; with `directory`, the flow writes into
    an output directory.
    """
    src = tmp_path / "in.txt"
    _write_input(src, 60_000)
    env = dict(os.environ, KILL_IN=str(src))
    reference = tmp_path / "reference.txt"
    killed = tmp_path / "killed.txt"
    if directory:
        reference.mkdir()
        killed.mkdir()
    _run_with_kills(flow, dict(env, KILL_OUT=str(reference)), str(tmp_path / "ref-recovery"), 0, 0)
    recovery = (tmp_path / "killed recovery").as_uri() if as_uri else str(tmp_path / "recovery")
    done = _run_with_kills(flow, dict(env, KILL_OUT=str(killed)), recovery, kills, seed=int(time.time()))
    return _lines(reference), _lines(killed), done


def test_user_logic_with_timers_survives_kills(tmp_path: Path) -> None:
    expected, got, kills = _reference_and_killed("flow", tmp_path, 3)
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"


def test_windowed_file_to_file_survives_kills_with_a_file_uri_recovery_directory(tmp_path: Path) -> None:
    expected, got, kills = _reference_and_killed("windowed", tmp_path, 3, as_uri=True)
    assert len(expected) == 50 * 100
    assert got == expected, f"after {kills} kills"
    uri = (tmp_path / "killed recovery").as_uri()
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
    expected, got, kills = _reference_and_killed("to_dir", tmp_path, 3, directory=True)
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"


def test_spark_source_and_sink_survive_kills(tmp_path: Path) -> None:
    expected, got, kills = _reference_and_killed("spark_io", tmp_path, 3)
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"


def test_spark_partition_folders_with_compaction_survive_kills(tmp_path: Path) -> None:
    expected, got, kills = _reference_and_killed("spark_parts", tmp_path, 3, directory=True)
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"


def test_a_spark_catalog_table_survives_kills(tmp_path: Path) -> None:
    expected, got, kills = _reference_and_killed("spark_table", tmp_path, 3, directory=True)
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"


def _kill_when(proc: "subprocess.Popen[bytes]", seen: Callable[[], bool]) -> bool:
    """Kill the run's process group as soon as `seen()`; false if the run ended first."""
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if seen():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.01)
    assert proc.wait(timeout=60) == 0, proc.stderr.read().decode() if proc.stderr else ""
    return False


def _killed_mid_write(flow: str, tmp_path: Path, writing: Callable[[Path], bool]) -> Tuple[List[str], List[str], int]:
    """The reference output and that of a run killed twice while `writing(out)`, then resumed (`_killed_twice`)."""
    src = tmp_path / "in.txt"
    _write_input(src, 60_000)
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    reference.mkdir()
    killed.mkdir()
    _run_with_kills(
        flow, dict(os.environ, KILL_IN=str(src), KILL_OUT=str(reference)), str(tmp_path / "ref-recovery"), 0, 0
    )
    env = dict(os.environ, KILL_IN=str(src), KILL_OUT=str(killed))
    kills = _killed_twice(flow, env, str(tmp_path / "recovery"), writing, 12)
    return _lines(reference), _lines(killed), kills


def _killed_twice(
    flow: str, env: Dict[str, str], recovery: str, writing: Callable[[Path], bool], later: int, *run_args: str
) -> int:
    """Run `flow` (with `run_args`) to its end, killed while `writing(out)` and again once `later` data files more are
    out, so the second kill hits a later batch; the kills done."""
    out = Path(env["KILL_OUT"])
    kills = int(_kill_when(_start(flow, env, recovery, *run_args), lambda: writing(out)))
    files = len(_data_files(out))
    kills += _kill_when(
        _start(flow, env, recovery, *run_args), lambda: writing(out) and len(_data_files(out)) >= files + later
    )
    proc = _start(flow, env, recovery, *run_args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return kills


def _data_files(path: Path) -> List[Path]:
    """The data files below a folder, which readers see (not Spark's `_temporary` or flowspark's `_flowspark`)."""
    found = []
    for folder, dirs, names in os.walk(path):  # a run may be changing the folder: what vanishes is passed over
        dirs[:] = [name for name in dirs if not name.startswith((".", "_"))]
        found += [Path(folder, name) for name in names if not name.startswith((".", "_"))]
    return found


def test_spark_partition_folders_killed_while_a_batch_is_staged_or_moved_in(tmp_path: Path) -> None:
    expected, got, kills = _killed_mid_write("spark_parts", tmp_path, lambda out: any(out.glob("_flowspark/*/staging")))
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"
    assert kills == 2


def test_a_spark_catalog_table_killed_while_spark_writes_a_batch(tmp_path: Path) -> None:
    expected, got, kills = _killed_mid_write("spark_table", tmp_path, lambda out: (out / "_temporary").exists())
    assert len(expected) == 60_000 + 50
    assert got == expected, f"after {kills} kills"
    assert kills == 2


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


@pytest.mark.table_formats
def test_a_delta_table_killed_while_spark_writes_a_batch(tmp_path: Path) -> None:
    """Killed once a batch's first data file is out (before or after Delta's commit of it), and a few files later."""
    src, out = tmp_path / "in.txt", tmp_path / "out"
    _write_input(src, 8_000)
    env = dict(os.environ, KILL_IN=str(src), KILL_OUT=str(out))
    run_args = ("--max-batch-items", "500", *conf_args(delta_settings()))
    kills = _killed_twice(
        "spark_delta", env, str(tmp_path / "recovery"), lambda o: any(o.glob("*.parquet")), 4, *run_args
    )
    assert _lines(out) == _running_sums(src), f"after {kills} kills"
    assert kills == 2


def _kill_once_rows_pass(proc: "subprocess.Popen[bytes]", postgres: str, table: str, rows: int) -> bool:
    """Kill the run's process group once `table` holds more than `rows` rows; false if the run ended first."""
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if pg_query(postgres, f"SELECT count(*) FROM {table}")[0][0] > rows:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.05)
    assert proc.wait(timeout=60) == 0, proc.stderr.read().decode() if proc.stderr else ""
    return False


@pytest.mark.postgres
def test_a_postgres_sink_written_in_spark_tasks_survives_kills(postgres: str, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    _write_input(src, 60_000)
    reference = tmp_path / "reference.txt"
    _run_with_kills(
        "flow", dict(os.environ, KILL_IN=str(src), KILL_OUT=str(reference)), str(tmp_path / "ref-recovery"), 0, 0
    )
    table = pg_table(postgres, "key text NOT NULL, line text NOT NULL")
    env = dict(os.environ, KILL_IN=str(src), KILL_PG=postgres, KILL_TABLE=table)
    recovery = str(tmp_path / "recovery")
    # Killed as soon as rows arrive, then again with some 40% of them in: each time in the middle of the writes.
    kills = sum(
        _kill_once_rows_pass(_start("to_postgres", env, recovery), postgres, table, rows) for rows in (0, 24_000)
    )
    proc = _start("to_postgres", env, recovery)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()

    got = sorted(line for (line,) in pg_query(postgres, f"SELECT line FROM {table}"))
    assert len(got) == 60_000 + 50
    assert got == _lines(reference), f"after {kills} kills"
    assert kills >= 1
