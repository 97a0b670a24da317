"""Recovery settings, with Bytewax's names.

A recovery directory is where Spark keeps the run's checkpoint: source
offsets (with every partition's snapshot), the state store (every stateful
key's snapshot) and the sinks' ledger.  Start a run again with the same
directory and it continues after the last completed micro-batch.

`python -m flowspark.recovery DIR --inspect` lists what a directory holds;
`--step STEP --key KEY` prints one key's snapshot.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import List, Optional, Union

__all__ = ["RecoveryConfig", "init_db_dir"]


class RecoveryConfig:
    """Where a run keeps its checkpoint; `backup_interval` is accepted for compatibility."""

    def __init__(self, db_dir: Union[str, Path], backup_interval: Optional[timedelta] = None) -> None:
        self._db_dir = Path(_local(str(db_dir)))
        self._backup_interval = backup_interval

    @property
    def db_dir(self) -> Path:
        """The recovery directory."""
        return self._db_dir

    @property
    def backup_interval(self) -> Optional[timedelta]:
        """Accepted for compatibility; Spark's checkpoint needs no separate backup."""
        return self._backup_interval


def _local(location: str) -> str:
    """A recovery directory's local path (from a path or a `file://` URI)."""
    from flowspark.engine.private_files import local_directory

    return local_directory(location)


def init_db_dir(db_dir: Union[str, Path], count: int) -> None:
    """Create the recovery directory; Spark's checkpoint needs no partitions to be made first."""
    Path(_local(str(db_dir))).mkdir(parents=True, exist_ok=True)


def _main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.recovery",
        description="Create or inspect a flowspark recovery directory (a Spark checkpoint).",
    )
    parser.add_argument("db_dir", type=_local, help="the recovery directory (a path or a file:// URI)")
    parser.add_argument("part_count", nargs="?", type=int,
                        help="accepted for Bytewax compatibility: the directory is created, no partitions are needed")
    parser.add_argument("--inspect", action="store_true", help="print the last epoch and the keys per stateful step")
    parser.add_argument("--step", help="with --key: the stateful step (e.g. flow.sum) whose snapshot to print")
    parser.add_argument("--key", help="with --step: the key whose snapshot to print")
    args = parser.parse_args(argv)
    if not (args.inspect or args.step or args.key):
        init_db_dir(args.db_dir, args.part_count or 1)
        print(f"created {args.db_dir}: flowspark keeps Spark's checkpoint there; no partitions need to be "
              "initialised, and any worker count can resume it")
        return 0
    from flowspark.engine.inspect_state import snapshot_of, summary

    if args.step or args.key:
        if not (args.step and args.key):
            parser.error("--step and --key go together")
        print(repr(snapshot_of(str(args.db_dir), args.step, args.key)))
        return 0
    info = summary(str(args.db_dir))
    print(f"flow: {info.flow_id}")
    print(f"last completed epoch: {info.last_epoch}")
    print(f"sinks written through epoch: {info.sinks_epoch}")
    for step, count in info.keys_per_step.items():
        print(f"  {step}: {count} keys")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
