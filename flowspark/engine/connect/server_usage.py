"""What a warm server holds of the machine: its processes, their memory, threads and open files, its folder's size.

The server is its supervisor and everything under it (the JVM, the fork
server, the Pythons Spark starts), read from `/proc` on Linux; memory is
PSS, each process's share of the pages it shares with the others (the
fork server's children share most of theirs), so the figures add up.

>>> import os
>>> usage_of(os.getpid(), ".").processes >= 1
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List


@dataclass(frozen=True)
class ServerUsage:
    """A warm server's share of the machine at one moment."""

    processes: int
    pss_bytes: int
    """The processes' proportional set size, summed."""
    threads: int
    open_files: int
    disk_bytes: int
    """The size of the files in the server's folder."""


SETTLED_RUNS = 10
"""Runs after which a server's usage counts as its level: its Python worker pools and caches are started."""
GROWN = 2.0
"""How many times its level of open files or threads a server may hold before it stops once idle (`outgrown`)."""


def outgrown(level: ServerUsage, now: ServerUsage) -> bool:
    """Whether a server holding `now` grew past `GROWN` times its `level` in open files or threads.

    Spark 4.3 keeps some sockets, selectors and threads of every streaming
    query's Python runners (its Python data source's reader, its
    `foreachBatch`) after the query stops, for the JVM's life: about a dozen
    files and three threads per query, more for one stopped mid-way (a
    SIGTERM or SIGKILL of its run).  Bounded runs (one batch query) keep
    none.  A server that outgrew its level stops once idle, and the next run
    starts a new one.

    >>> level = ServerUsage(20, 800 << 20, 300, 500, 0)
    >>> outgrown(level, ServerUsage(21, 900 << 20, 350, 700, 0)), outgrown(level, ServerUsage(21, 900 << 20, 350, 1001, 0))
    (False, True)
    """
    return now.open_files > GROWN * level.open_files or now.threads > GROWN * level.threads


def process_tree(root: int) -> List[int]:
    """`root` and every process below it, as `/proc` shows them now (`[]` if `root` is gone)."""
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command's name, in parentheses, may itself hold spaces and parentheses.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(name))
    if not os.path.exists(f"/proc/{root}"):
        return []
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


def usage_of(root: int, folder: str) -> ServerUsage:
    """The usage of the process tree under `root` and of `folder`."""
    pids = process_tree(root)
    pss = threads = files = 0
    for pid in pids:
        pss += _field(f"/proc/{pid}/smaps_rollup", "Pss:") * 1024
        threads += _field(f"/proc/{pid}/status", "Threads:")
        try:
            files += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return ServerUsage(len(pids), pss, threads, files, _size(folder))


def _field(path: str, name: str) -> int:
    """The number after `name` in the `/proc` file `path` (0 if the process is gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _size(folder: str) -> int:
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                pass
    return total
