"""Recovery settings, with Bytewax's names.

A recovery directory is where Spark keeps the run's checkpoint: source
offsets (with every partition's snapshot), the state store (every stateful
key's snapshot) and the sinks' ledger.  Start a run again with the same
directory and it continues after the last completed micro-batch.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Optional, Union

__all__ = ["RecoveryConfig"]


class RecoveryConfig:
    """Where a run keeps its checkpoint; `backup_interval` is accepted for compatibility."""

    def __init__(self, db_dir: Union[str, Path], backup_interval: Optional[timedelta] = None) -> None:
        self._db_dir = Path(db_dir)
        self._backup_interval = backup_interval

    @property
    def db_dir(self) -> Path:
        """The recovery directory."""
        return self._db_dir

    @property
    def backup_interval(self) -> Optional[timedelta]:
        """Accepted for compatibility; Spark's checkpoint needs no separate backup."""
        return self._backup_interval
