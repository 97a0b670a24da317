"""Every environment variable flowspark reads, in one place: `docs/settings.md` and `python -m flowspark.run --help`
list them from here.

Command-line flags and Spark's own settings come first; these reach what a
flag can't, such as a test suite's `run_main` calls.  Each is read when it
is needed, so a test may set one for a single run.

>>> DRIVER_MEMORY.name, DRIVER_MEMORY.default
('FLOWSPARK_DRIVER_MEMORY', '2g')
>>> cache_folder("class-archives").endswith("flowspark/class-archives")
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["ALL", "Setting", "cache_folder", "full_traceback"]


@dataclass(frozen=True)
class Setting:
    """An environment variable: its name, its value when unset, and what it sets."""

    name: str
    default: Optional[str]
    meaning: str

    def get(self) -> Optional[str]:
        """Its value now: the environment's, else the default."""
        return os.environ.get(self.name, self.default)


MASTER = Setting("FLOWSPARK_MASTER", None, "the Spark master of every run that gives none (--master)")
REMOTE = Setting("SPARK_REMOTE", None, "a Spark Connect server to run through, as --remote sc://...")
DRIVER_MEMORY = Setting("FLOWSPARK_DRIVER_MEMORY", "2g", "the heap of a driver JVM started in the run's process")
DRIVER_LINK_PORT = Setting(
    "FLOWSPARK_DRIVER_LINK_PORT", "0", "the driver link's port (--driver-link-port); 0: a free one"
)
DRIVER_LINK_HOST = Setting(
    "FLOWSPARK_DRIVER_LINK_HOST", None, "where a Spark Connect server's tasks reach the run's driver link"
)
WARM_SPARK = Setting("FLOWSPARK_WARM_SPARK", "auto", "which runs use the warm local Spark: auto, all or 0")
WARM_SPARK_DIR = Setting(
    "FLOWSPARK_WARM_SPARK_DIR", None, "where the warm local Spark keeps its record, token, log and lock"
)
WARM_SPARK_IDLE = Setting("FLOWSPARK_WARM_SPARK_IDLE", "600", "seconds without a run before the warm local Spark stops")
CLASS_ARCHIVE = Setting("FLOWSPARK_CLASS_ARCHIVE", "1", "0 turns off the driver JVM's class archive")
SPARK_LOG_LEVEL = Setting("FLOWSPARK_SPARK_LOG_LEVEL", None, "Spark's own log level, unless spark.log.level is set")
FULL_TRACEBACK = Setting("FLOWSPARK_FULL_TRACEBACK", None, "1 keeps Spark's whole error under a one-line fault report")
DATAFLOW_API_ENABLED = Setting(
    "FLOWSPARK_DATAFLOW_API_ENABLED", None, "serve Bytewax's dataflow API while a run lasts (or BYTEWAX_...)"
)
DATAFLOW_API_HOST = Setting(
    "FLOWSPARK_DATAFLOW_API_HOST", "127.0.0.1", "the address that API listens on (or BYTEWAX_...)"
)
DATAFLOW_API_PORT = Setting("FLOWSPARK_DATAFLOW_API_PORT", "3030", "its port; 0 picks a free one (or BYTEWAX_...)")

ALL: Tuple[Setting, ...] = (
    MASTER,
    REMOTE,
    DRIVER_MEMORY,
    DRIVER_LINK_PORT,
    DRIVER_LINK_HOST,
    WARM_SPARK,
    WARM_SPARK_DIR,
    WARM_SPARK_IDLE,
    CLASS_ARCHIVE,
    SPARK_LOG_LEVEL,
    FULL_TRACEBACK,
    DATAFLOW_API_ENABLED,
    DATAFLOW_API_HOST,
    DATAFLOW_API_PORT,
)
"""Every setting, in the order the docs list them."""


def cache_folder(*parts: str) -> str:
    """A folder under flowspark's cache: `$XDG_CACHE_HOME/flowspark`, else `~/.cache/flowspark`."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "flowspark", *parts)


def full_traceback() -> bool:
    """Whether errors keep every frame, Spark's and flowspark's included (`FLOWSPARK_FULL_TRACEBACK=1`)."""
    return FULL_TRACEBACK.get() == "1"
