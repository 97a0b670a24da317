"""Check that a recovery directory is flowspark's, whole and of one time, before a run uses it.

Bytewax keeps recovery partitions (SQLite files) that must all be there
and close enough in time; flowspark keeps one Spark checkpoint (`query/`)
and the sinks' ledger beside it.  Bytewax's errors keep their meaning:

- `NoPartitionsError`: the directory holds files, but nothing of
  flowspark's (a wrong directory, or Bytewax's own partitions);
- `MissingPartitionsError`: the sinks' ledger or Spark's checkpoint is gone
  while the other says batches were written;
- `InconsistentPartitionsError`: the ledger and the checkpoint are from
  different times (one restored from an older backup), so resuming would
  write some batches twice or never.

An empty directory, or one `init_db_dir` prepared, starts a fresh run.
"""

from __future__ import annotations

from typing import List, Optional, Union

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.driver_fence import FENCE
from flowspark.engine.recovery.resume_check import META
from flowspark.engine.recovery.sink_ledger import LEDGER, RUN_ID, read_ledger
from flowspark.engine.recovery.storage import Location
from flowspark.recovery import INIT_MARKER, InconsistentPartitionsError, MissingPartitionsError, NoPartitionsError

QUERY = "query"
"""Spark's checkpoint, inside the recovery directory."""

OURS = {META, LEDGER, RUN_ID, FENCE, INIT_MARKER, QUERY, "spark-sources"}
"""What flowspark keeps in a recovery directory (`spark-sources`: `SparkSource`'s spools)."""


def _batch_ids(folder: Location) -> List[int]:
    return sorted(int(n) for n in storage.list_names(folder) if n.isdigit())


def _last(ids: List[int]) -> Optional[int]:
    return ids[-1] if ids else None


def check_recovery_dir(where: Union[str, Location]) -> None:
    """Raise Bytewax's recovery errors where they apply (see the module doc); a missing directory is fine."""
    place = storage.as_location(where)
    directory = str(place)
    entries = [n for n in storage.list_names(place) if not n.startswith(".") and n != "lost+found"]
    if entries and not OURS.intersection(entries):
        bytewax = any(n.startswith("part-") and n.endswith(".sqlite3") for n in entries)
        what = "Bytewax's recovery partitions, which flowspark can't read" if bytewax else "no flowspark recovery data"
        msg = (
            f"No recovery partitions found in {directory!r}: it holds {what}; can't resume. "
            "Give flowspark an empty directory (or one made with `python -m flowspark.recovery DIR N`)."
        )
        raise NoPartitionsError(msg)
    query_place = place.join(QUERY)
    query = str(query_place)
    offsets, commits = _batch_ids(query_place.join("offsets")), _batch_ids(query_place.join("commits"))
    ledger = place.join(LEDGER)
    ledger_path = str(ledger)
    written = read_ledger(ledger)[0] if storage.exists(ledger) else None
    if written is None or written < 0:
        if commits:
            msg = (
                f"Missing the sinks' ledger {ledger_path!r} of recovery directory {directory!r}, whose checkpoint "
                f"completed epoch {commits[-1] + 1}; can't resume without writing outputs again. Restore the "
                "whole directory from one backup, or start with an empty one."
            )
            raise MissingPartitionsError(msg)
        return
    if not offsets:
        msg = (
            f"Missing Spark's checkpoint ({query!r}) of recovery directory {directory!r}, whose sinks were "
            f"written through epoch {written + 1}; can't resume. Restore the whole directory from one backup, "
            "or start with an empty one."
        )
        raise MissingPartitionsError(msg)
    last_commit = _last(commits)
    if written > offsets[-1] or (last_commit is not None and written < last_commit):
        done = "none" if last_commit is None else last_commit + 1
        msg = (
            f"Recovery directory {directory!r} is inconsistent: its sinks were written through epoch {written + 1}, "
            f"its checkpoint completed epoch {done} and planned up to {offsets[-1] + 1}; they come from different "
            "times (was one restored from an older backup?), so resuming would lose or repeat output. Restore "
            "the whole directory from one backup, or start with an empty one."
        )
        raise InconsistentPartitionsError(msg)
