"""Files only the user can change: flowspark's own records in the recovery directory.

Resuming a run unpickles what the recovery directory holds (the sinks'
ledger, the sources' snapshots beside Spark's offsets), so whoever can write
there can run code as the user.  flowspark creates its directories 0700 and
its files 0600 whatever the umask, and refuses a directory that other users
can write to.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import uuid

from flowspark.errors import FlowsparkRuntimeError

DIR_MODE = 0o700
FILE_MODE = 0o600


def _only_mine(group_id: int) -> bool:
    """Whether group `group_id` is the user's own private group (no other members)."""
    try:
        group = grp.getgrgid(group_id)
        user = pwd.getpwuid(os.getuid())
    except KeyError:
        return False
    return group_id == user.pw_gid and not [m for m in group.gr_mem if m != user.pw_name]


def others_can_write(path: str) -> bool:
    """Whether another user can change `path` (or, for a directory, replace what is in it)."""
    info = os.stat(path)
    if info.st_uid != os.getuid() and os.getuid() != 0:
        return True
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and not _only_mine(info.st_gid)


def make_dirs(path: str) -> None:
    """Create `path` and its missing parents, each 0700 whatever the umask."""
    if not path or os.path.isdir(path):
        return
    make_dirs(os.path.dirname(path))
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return  # another task made it first
    os.chmod(path, DIR_MODE)


def private_dir(path: str, what: str = "recovery directory") -> None:
    """Create `path` (0700) if it is missing; refuse it if other users can write to it."""
    if not os.path.isdir(path):
        make_dirs(path)
        return
    if others_can_write(path):
        msg = (
            f"{what} {path!r} can be written by other users: flowspark loads the snapshots and records kept "
            f"there when a run resumes, so anyone who can change them can run code as you. Make it yours "
            f"alone (chmod 700 {path!r}) or choose another directory."
        )
        raise FlowsparkRuntimeError(msg)


def write_private(path: str, data: bytes) -> None:
    """Replace `path` with `data` atomically, as a file only the user can read and write."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd != -1:
            os.close(fd)
    os.replace(tmp, path)


def write_private_once(path: str, data: bytes) -> bool:
    """Write `data` to `path` unless it exists; whether it was written.

    Written to a private temporary file, synced, then linked to its name,
    which fails if another writer got there first.
    """
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def read_trusted(path: str) -> bytes:
    """The bytes of a file flowspark wrote, refused if another user could have changed it."""
    if others_can_write(path):
        msg = (
            f"{path!r} can be written by other users, and flowspark would load it as a pickle: "
            f"make it yours alone (chmod 600 {path!r}) if you trust its content, or start from a new recovery directory"
        )
        raise FlowsparkRuntimeError(msg)
    with open(path, "rb") as f:
        return f.read()
