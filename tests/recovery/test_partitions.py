"""Bytewax's recovery partitions and their errors, on flowspark's one Spark checkpoint.

Both engines run the same flows against their own recovery directories:
prepared with `init_db_dir`, resumed after an abort (with and without
stateful snapshots), with a backup interval, and with another worker
count.  Bytewax's three errors keep their names, bases and situations.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from support.oracle import ENGINES, Engine, by_key

from flowspark.engine.recovery.recovery_dir import check_recovery_dir

ERRORS = ("InconsistentPartitionsError", "MissingPartitionsError", "NoPartitionsError")


def _recovery(engine: str) -> Any:
    return importlib.import_module(f"{engine}.recovery")


def _summing_flow(e: Engine, items: List[Any], out: List[Any], stateful: bool, batch_size: int = 1) -> Any:
    flow = e.Dataflow("resumable")
    nums = e.op.input("inp", flow, e.TestingSource(items, batch_size))
    keyed = e.op.key_on("key", nums, lambda n: "odd" if n % 2 else "even")
    if stateful:
        keyed = e.op.stateful_map("sum", keyed, lambda total, n: ((total or 0) + n, (total or 0) + n))
    e.op.output("out", keyed, e.TestingSink(out))
    return flow


def _run(
    engine: str,
    directory: Path,
    items: List[Any],
    *,
    stateful: bool = True,
    workers: int = 1,
    backup_interval: Optional[timedelta] = None,
    interval: Optional[timedelta] = None,
    batch_size: int = 1,
) -> List[Any]:
    e = Engine(engine)
    out: List[Any] = []
    config = _recovery(engine).RecoveryConfig(directory, backup_interval=backup_interval)
    flow = _summing_flow(e, items, out, stateful, batch_size)
    if workers == 1:
        e.run_main(flow, recovery_config=config, **({} if interval is None else {"epoch_interval": interval}))
    else:
        testing = importlib.import_module(f"{engine}.testing")
        testing.cluster_main(flow, [], 0, recovery_config=config, worker_count_per_proc=workers)
    return out


def _initialised(tmp_path: Path, engine: str, count: int = 1) -> Path:
    directory = tmp_path / engine
    directory.mkdir()
    _recovery(engine).init_db_dir(directory, count)
    return directory


def test_errors_have_bytewax_names_and_bases() -> None:
    for name in ERRORS:
        ours, theirs = getattr(_recovery("flowspark"), name), getattr(_recovery("bytewax"), name)
        assert [c.__name__ for c in ours.__mro__] == [c.__name__ for c in theirs.__mro__]
        assert name in _recovery("flowspark").__all__


@pytest.mark.parametrize("engine", ENGINES)
def test_init_db_dir_needs_an_existing_directory(tmp_path: Path, engine: str) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        _recovery(engine).init_db_dir(tmp_path / "missing", 2)


def test_the_command_initialises_an_existing_directory(tmp_path: Path) -> None:
    def command(*args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [sys.executable, "-m", "flowspark.recovery", *args], capture_output=True, text=True, timeout=120
        )

    done = command(str(tmp_path), "3")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "flowspark-recovery.json").exists()
    assert (tmp_path / "flowspark-recovery.json").stat().st_mode & 0o077 == 0
    missing = command(str(tmp_path / "nope"), "3")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert command(str(tmp_path)).returncode == 2  # the partition count is required, as in Bytewax


@pytest.mark.parametrize("engine", ENGINES)
def test_a_directory_without_recovery_data_is_refused(tmp_path: Path, engine: str) -> None:
    (tmp_path / "notes.txt").write_text("not recovery data")
    with pytest.raises(_recovery(engine).NoPartitionsError):
        _run(engine, tmp_path, [1, 2])


def test_bytewax_partitions_are_named_in_the_refusal(tmp_path: Path) -> None:
    bytewax_dir = _initialised(tmp_path, "bytewax", 2)
    with pytest.raises(_recovery("flowspark").NoPartitionsError, match="Bytewax's recovery partitions"):
        check_recovery_dir(str(bytewax_dir))


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
@pytest.mark.quick
def test_a_run_continues_after_an_abort_as_in_bytewax(tmp_path: Path, stateful: bool) -> None:
    """With a zero epoch interval every round before the abort is a closed epoch: the resumed run continues after them."""
    outputs: Dict[str, List[List[Any]]] = {}
    for engine in ENGINES:
        directory = _initialised(tmp_path, engine)
        items = [1, 2, 3, Engine(engine).TestingSource.ABORT(), 4, 5, 6]
        outputs[engine] = [_run(engine, directory, items, stateful=stateful, interval=timedelta(0)) for _ in range(2)]
    assert outputs["flowspark"] == outputs["bytewax"]
    assert (
        outputs["bytewax"][1] == [("even", 6), ("odd", 9), ("even", 12)]
        if stateful
        else [("even", 4), ("odd", 5), ("even", 6)]
    )


def test_the_batches_read_before_an_abort_are_closed_epochs_as_in_bytewax(tmp_path: Path) -> None:
    """In batches of two, `1, 2, 3` come as `[1, 2]` and `[3]`, the abort right after: the resumed run continues after 3."""
    outputs: Dict[str, List[List[Any]]] = {}
    for engine in ENGINES:
        directory = _initialised(tmp_path, engine)
        items = [1, 2, 3, Engine(engine).TestingSource.ABORT(), 4, 5, 6]
        outputs[engine] = [_run(engine, directory, items, interval=timedelta(0), batch_size=2) for _ in range(2)]
    assert outputs["flowspark"] == outputs["bytewax"]
    assert outputs["bytewax"][1] == [("even", 6), ("odd", 9), ("even", 12)]


@pytest.mark.parametrize("interval", [None, timedelta(seconds=5)], ids=["default-epochs", "five-second-epochs"])
@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
def test_the_items_an_abort_cuts_short_in_its_epoch_are_read_again(
    tmp_path: Path, interval: Optional[timedelta], stateful: bool
) -> None:
    """Epochs longer than a source round: `1, 2, 3` and the abort fall in one epoch, which no resume starts after."""
    outputs: Dict[str, List[List[Any]]] = {}
    for engine in ENGINES:
        directory = _initialised(tmp_path, engine)
        items = [1, 2, 3, Engine(engine).TestingSource.ABORT(), 4, 5, 6]
        outputs[engine] = [_run(engine, directory, items, stateful=stateful, interval=interval) for _ in range(2)]
    assert outputs["flowspark"] == outputs["bytewax"]
    first, resumed = outputs["bytewax"]
    assert first == resumed[:3] and len(resumed) == 6


class _AbortOnce:
    """Two partitions: `nums` gives its items in one batch and ends; `stop` aborts the first run, then ends."""

    def __init__(self, engine: str, items: List[int]) -> None:
        inputs = importlib.import_module(f"{engine}.inputs")
        self.aborted = False
        owner = self

        class Nums(inputs.StatefulSourcePartition):  # type: ignore[misc, name-defined]
            def __init__(self, resume: Optional[int]) -> None:
                self.done = bool(resume)

            def next_batch(self) -> List[int]:
                if self.done:
                    raise StopIteration()
                self.done = True
                return list(items)

            def snapshot(self) -> int:
                return int(self.done)

        class Stop(inputs.StatefulSourcePartition):  # type: ignore[misc, name-defined]
            def next_batch(self) -> List[int]:
                if not owner.aborted:
                    owner.aborted = True
                    raise inputs.AbortExecution()
                raise StopIteration()

            def snapshot(self) -> None:
                return None

        class Source(inputs.FixedPartitionedSource):  # type: ignore[misc, name-defined]
            def list_parts(self) -> List[str]:
                return ["nums", "stop"]

            def build_part(self, step_id: str, for_part: str, resume: Any) -> Any:
                return Nums(resume) if for_part == "nums" else Stop()

        self.source = Source()


@pytest.mark.parametrize("interval", [None, timedelta(0)], ids=["default-epochs", "zero-epoch-interval"])
@pytest.mark.quick
def test_the_epoch_an_abort_cuts_short_is_read_again(tmp_path: Path, interval: Optional[timedelta]) -> None:
    outputs: Dict[str, List[List[Any]]] = {}
    for engine in ENGINES:
        e = Engine(engine)
        directory = _initialised(tmp_path, engine)
        source = _AbortOnce(engine, [1, 2, 3]).source
        outputs[engine] = []
        for _ in range(2):
            out: List[Any] = []
            flow = e.Dataflow("abort_mid_epoch")
            nums = e.op.key_on("key", e.op.input("inp", flow, source), lambda n: "all")
            e.op.output(
                "out", e.op.stateful_map("sum", nums, lambda t, n: ((t or 0) + n, (t or 0) + n)), e.TestingSink(out)
            )
            e.run_main(
                flow,
                recovery_config=_recovery(engine).RecoveryConfig(directory),
                **({} if interval is None else {"epoch_interval": interval}),
            )
            outputs[engine].append(out)
    assert outputs["flowspark"] == outputs["bytewax"]
    assert outputs["bytewax"][1] == outputs["bytewax"][0] == [("all", 1), ("all", 3), ("all", 6)]


def test_a_backup_interval_does_not_hold_a_resume_back(tmp_path: Path) -> None:
    outputs: Dict[str, List[List[Any]]] = {}
    for engine in ENGINES:
        directory = _initialised(tmp_path, engine)
        source = Engine(engine).TestingSource
        items = [1, 2, source.ABORT(), 3, 4]
        runs = [
            _run(engine, directory, items, backup_interval=timedelta(hours=1), interval=timedelta(0)) for _ in range(2)
        ]
        outputs[engine] = runs
    assert outputs["flowspark"] == outputs["bytewax"]
    assert outputs["bytewax"][1] == [("odd", 4), ("even", 6)]


@pytest.mark.quick
def test_a_directory_resumes_with_another_worker_count(tmp_path: Path) -> None:
    outputs: Dict[str, List[Dict[str, List[Any]]]] = {}
    for engine in ENGINES:
        directory = _initialised(tmp_path, engine)
        source = Engine(engine).TestingSource
        items = [1, 2, 3, source.EOF(), 4, 5, 6, source.EOF(), 7, 8]
        runs = [_run(engine, directory, items, workers=workers) for workers in (1, 2, 1)]
        outputs[engine] = [by_key(run) for run in runs]
    assert outputs["flowspark"] == outputs["bytewax"]


def test_missing_or_mismatched_parts_of_a_directory_are_named(tmp_path: Path) -> None:
    recovery = _recovery("flowspark")
    directory = tmp_path / "rec"
    directory.mkdir()
    items = [1, 2, Engine("flowspark").TestingSource.EOF(), 3, 4]
    _run("flowspark", directory, items)
    check_recovery_dir(str(directory))
    first = tmp_path / "first"
    shutil.copytree(directory, first)
    _run("flowspark", directory, items)
    check_recovery_dir(str(directory))

    query = directory / "query"
    newer_query = tmp_path / "newer-query"
    shutil.move(str(query), newer_query)
    with pytest.raises(recovery.MissingPartitionsError, match="Missing Spark's checkpoint"):
        check_recovery_dir(str(directory))
    shutil.copytree(first / "query", query)  # an older checkpoint than the sinks' ledger
    with pytest.raises(recovery.InconsistentPartitionsError, match="different times"):
        _run("flowspark", directory, items)
    shutil.rmtree(query)
    shutil.move(str(newer_query), query)

    ledger = directory / "flowspark-sinks.pkl"
    ledger.unlink()
    with pytest.raises(recovery.MissingPartitionsError, match="Missing the sinks' ledger"):
        check_recovery_dir(str(directory))
    shutil.copy(first / "flowspark-sinks.pkl", ledger)  # an older ledger than the checkpoint
    with pytest.raises(recovery.InconsistentPartitionsError):
        check_recovery_dir(str(directory))
