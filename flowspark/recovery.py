"""Recovery settings and errors, with Bytewax's names.

A recovery directory is where Spark keeps the run's checkpoint: source
offsets and every source partition's snapshot, the state store (every stateful
key's snapshot) and the sinks' ledger.  Start a run again with the same
directory and it continues after the last completed epoch (micro-batch).
It is a local path, or a `file://`, `s3://` (`s3a://`) or `hdfs://` URI.

`python -m flowspark.recovery DIR N` prepares an existing directory, as
Bytewax's command does (one checkpoint serves any worker count, so `N` is
only recorded); `DIR --inspect` lists what a directory holds;
`--step STEP --key KEY` prints one key's snapshot.

flowspark's side of it lives in `flowspark.engine.recovery`: the
directory's storage, the checks before a run resumes it, the sinks'
ledger and the fence that lets one driver write at a time; the keys'
state itself is read back by `flowspark.engine.state.inspect_state`.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Union

if TYPE_CHECKING:
    from flowspark.engine.recovery.storage import Location

__all__ = [
    "InconsistentPartitionsError",
    "MissingPartitionsError",
    "NoPartitionsError",
    "RecoveryConfig",
    "init_db_dir",
]

INIT_MARKER = "flowspark-recovery.json"
"""The file `init_db_dir` writes: the directory is meant for flowspark's recovery data."""


class InconsistentPartitionsError(ValueError):
    """Raised when parts of a recovery directory are from very different times.

    flowspark keeps Spark's checkpoint and the sinks' ledger side by side;
    if one was restored from an older backup than the other, resuming
    would lose or repeat output, so the run stops instead.
    """


class MissingPartitionsError(FileNotFoundError):
    """Raised when part of a recovery directory is missing (Spark's checkpoint or the sinks' ledger)."""


class NoPartitionsError(FileNotFoundError):
    """Raised when a recovery directory holds files but no flowspark recovery data.

    This is probably due to the wrong recovery directory being specified.
    """


class RecoveryConfig:
    """Where a run keeps its checkpoint; `backup_interval` is accepted for compatibility."""

    def __init__(self, db_dir: Union[str, Path], backup_interval: Optional[timedelta] = None) -> None:
        place = _location(str(db_dir))
        self._location = str(place)
        self._db_dir = Path(self._location)
        self._backup_interval = backup_interval

    @property
    def db_dir(self) -> Path:
        """The recovery directory (for a URI on S3 or HDFS, `location` names it whole)."""
        return self._db_dir

    @property
    def location(self) -> str:
        """The recovery directory: an absolute local path, or the URI it was given as."""
        return self._location

    @property
    def backup_interval(self) -> Optional[timedelta]:
        """Accepted for compatibility: a resume always starts from the last completed epoch.

        Bytewax keeps superseded snapshots this long so that partitions
        restored from backups of different times can still agree on an
        epoch; flowspark's checkpoint is one directory, backed up whole.
        """
        return self._backup_interval


def _location(text: str) -> Location:
    """The location a recovery directory's path or URI names."""
    from flowspark.engine.recovery.storage import parse_location

    return parse_location(text)


def init_db_dir(db_dir: Union[str, Path], count: int) -> None:
    """Prepare the existing directory `db_dir` for a flow's recovery data, as Bytewax's `init_db_dir` does.

    Bytewax creates `count` partition databases; one Spark checkpoint
    serves any number of workers, so flowspark records `count` in a marker
    file (kept if present).  Raises `FileNotFoundError` if `db_dir` does
    not exist, as Bytewax does.
    """
    from flowspark.engine.recovery import storage

    directory = _location(str(db_dir))
    if directory.is_local and not storage.is_dir(directory):
        msg = f"recovery directory {str(directory)!r} does not exist; please create it with `mkdir`"
        raise FileNotFoundError(msg)
    if count < 1:
        msg = f"a recovery directory needs at least one partition; got {count}"
        raise ValueError(msg)
    storage.private_dir(directory)
    marker = directory.join(INIT_MARKER)
    if not storage.exists(marker):
        storage.write_private(marker, json.dumps({"partitions": count}).encode())


def _main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.recovery",
        description="Create or inspect a flowspark recovery directory (a Spark checkpoint).",
    )
    parser.add_argument(
        "db_dir", type=_location, help="the recovery directory (a path, or a file://, s3:// or hdfs:// URI)"
    )
    parser.add_argument(
        "part_count",
        nargs="?",
        type=int,
        help="number of partitions, as for Bytewax: recorded only, any worker count can resume",
    )
    parser.add_argument("--inspect", action="store_true", help="print the last epoch and the keys per stateful step")
    parser.add_argument("--step", help="with --key: the stateful step (e.g. flow.sum) whose snapshot to print")
    parser.add_argument("--key", help="with --step: the key whose snapshot to print")
    args = parser.parse_args(argv)
    if not (args.inspect or args.step or args.key):
        if args.part_count is None:
            parser.error("the following arguments are required: part_count (or use --inspect)")
        try:
            init_db_dir(str(args.db_dir), args.part_count)
        except (OSError, ValueError) as ex:
            print(f"error: {ex}", file=sys.stderr)
            return 1
        print(
            f"initialised {args.db_dir} for flowspark's recovery data ({args.part_count} partitions recorded; "
            "one Spark checkpoint serves any worker count)"
        )
        return 0
    from flowspark.engine.state.inspect_state import snapshot_of, summary

    if args.step or args.key:
        if not (args.step and args.key):
            parser.error("--step and --key go together")
        print(repr(snapshot_of(args.db_dir, args.step, args.key)))
        return 0
    info = summary(args.db_dir)
    print(f"flow: {info.flow_id}")
    print(f"last completed epoch: {info.last_epoch}")
    print(f"sinks written through epoch: {info.sinks_epoch}")
    for step, count in info.keys_per_step.items():
        print(f"  {step}: {count} keys")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
