"""The folders of warm servers of other installations, removed once long unused.

Each installation (a flowspark version, an edited checkout, another
Python or PySpark) gets a server folder of its own (`server_dir`), which
outlives its server: its log and settings stay for a look after a failure.
When a run starts a server, the folders beside its own that no server
uses and that nothing has touched for `STALE_DAYS` go.  Only folders made
of a warm server's own files are removed, so a `FLOWSPARK_WARM_SPARK_DIR`
shared with anything else loses nothing else.

    >>> from flowspark.engine.connect.server_folders import remove_stale
    >>> remove_stale("/nonexistent/folder/0123456789abcdef")
    []
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import List

from flowspark.engine.connect.connect_server import (
    LEASE,
    LOCK,
    LOG,
    RECORD,
    read_record,
)
from flowspark.engine.spark.fork_server import FORKED_PYTHON, FORKS_SOCKET

STALE_DAYS = 7.0
"""How long a folder without a server stays after its last use."""

SERVER_FILES = frozenset({RECORD, LOCK, LEASE, LOG, FORKS_SOCKET, FORKED_PYTHON, "spark.properties"})
"""Every name a server folder holds."""

_FOLDER_NAME = re.compile(r"[0-9a-f]{16}")


def remove_stale(keep: str) -> List[str]:
    """Remove the server folders beside `keep` that no server uses and nothing touched for `STALE_DAYS`; their paths."""
    parent = os.path.dirname(keep)
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    removed: List[str] = []
    oldest = time.time() - STALE_DAYS * 86400
    for name in names:
        folder = os.path.join(parent, name)
        if folder != keep and _FOLDER_NAME.fullmatch(name) and _stale(folder, oldest):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _stale(folder: str, oldest: float) -> bool:
    """Whether `folder` is a server folder (nothing but a server's files) unused and untouched since `oldest`."""
    try:
        if os.path.islink(folder) or not os.path.isdir(folder):
            return False
        entries = os.listdir(folder)
        if not set(entries) <= SERVER_FILES:
            return False
        times = [os.lstat(folder).st_mtime] + [os.lstat(os.path.join(folder, entry)).st_mtime for entry in entries]
    except OSError:
        return False
    return max(times) < oldest and read_record(folder) is None
