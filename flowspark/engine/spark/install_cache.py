"""What flowspark's cache holds for one installation of PySpark, and removing it once that installation is gone.

Each installation of PySpark (a virtualenv, a wheel installed somewhere)
gets its own `SPARK_HOME` of links (`session`), its own class-data-sharing
archive (`class_archive`, about 200 MB) and its own unpacked RocksDB
library (`native_libs`).  Virtualenvs come and go (a CI job may make one per
run), and what was made for one that is gone would stay in the user's cache
for ever.  So each archive and library records, in a file beside it
(`<name>.for`), the path it was made from; whenever a new one is made, the
others of its kind whose path is gone go, and so do those with no record
that have not changed for a day (made by an earlier flowspark: the next run
that wants one makes it again).  A `SPARK_HOME` of links goes once its
`jars` link leads nowhere.

>>> import tempfile, os
>>> cache = tempfile.mkdtemp()
>>> kept, gone = os.path.join(cache, "lib-a"), os.path.join(cache, "lib-b")
>>> os.mkdir(kept); os.mkdir(gone)
>>> record(kept, cache)
>>> record(gone, os.path.join(cache, "no-such-jar"))
>>> remove_orphans(cache, "lib-")
>>> sorted(os.listdir(cache))
['lib-a', 'lib-a.for']
"""

from __future__ import annotations

import os
import shutil
import time

RECORD = ".for"
"""The suffix of the file naming the path an entry was made from."""

UNRECORDED_SECONDS = 86400.0
"""An entry with no record is removed once it is this old."""

_NOT_ENTRIES = (RECORD, ".lock", ".tmp")


def record(entry: str, source: str) -> None:
    """Note beside `entry` (a file or folder) that it was made from `source`, a path that exists while it is of use.

    Never raises: an entry left without a record is only removed sooner.
    """
    temporary = f"{entry}{RECORD}.{os.getpid()}.tmp"
    try:
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(source)
        os.replace(temporary, f"{entry}{RECORD}")
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass


def ensure_recorded(entry: str, source: str) -> None:
    """`record` for an entry an earlier flowspark made, which has none yet."""
    if not os.path.exists(f"{entry}{RECORD}"):
        record(entry, source)


def _orphaned(entry: str) -> bool:
    try:
        with open(f"{entry}{RECORD}") as f:
            return not os.path.exists(f.read())
    except FileNotFoundError:
        try:
            return time.time() - os.path.getmtime(entry) > UNRECORDED_SECONDS
        except OSError:
            return False
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except FileNotFoundError:
        pass


def remove_orphans(directory: str, prefix: str) -> None:
    """Remove the entries of `directory` named `prefix...` whose recorded path is gone (`record`), with their records.

    Never raises: an entry that can't be removed stays for the next try.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix) or name.endswith(_NOT_ENTRIES):
            continue
        entry = os.path.join(directory, name)
        if _orphaned(entry):
            try:
                _remove(entry)
                _remove(f"{entry}{RECORD}")
            except OSError:
                continue
    for name in names:  # records whose entry was removed by hand, or never made
        if (
            name.startswith(prefix)
            and name.endswith(RECORD)
            and not os.path.lexists(os.path.join(directory, name[: -len(RECORD)]))
        ):
            try:
                _remove(os.path.join(directory, name))
            except OSError:
                continue


def remove_unlinked_homes(directory: str, prefix: str) -> None:
    """Remove the folders of `directory` named `prefix...` whose `jars` link leads nowhere: their PySpark is gone."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        jars = os.path.join(directory, name, "jars")
        if name.startswith(prefix) and os.path.islink(jars) and not os.path.exists(jars):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
