"""The `python` the warm server gives Spark: the Pythons Spark starts are forked from one already warm.

For each streaming query, Spark's driver starts fresh Python processes of
its own (`python -m <module>`): the `foreachBatch` worker, the runner of a
Python data source's offsets, the one that reads `transformWithState`'s
schema; and a daemon per kind of task, which forks its task workers.  Each
imports PySpark (and pandas, pyarrow, gRPC) and, once it unpickles a
flow's code, flowspark: most of a second each, paid again by every run.
The warm server's supervisor keeps a Python with those imported
(`fork_server`) and names this program, written into its private
directory, as Spark's Python.  Asked to run one of those modules, it hands
its arguments, environment, working directory and standard streams to the
fork server, which forks a child that runs the module as `python -m`
would; this program waits and exits with the child's status, and the fork
server kills a child whose caller is gone (Spark stopped it).  Any other
command, or no fork server to reach, runs the real Python as given.

The program is this module's source, followed by a call of `main` with the
fork server's socket and the real Python (`fork_server.write_program`),
run by the real Python with `-I -S` (its shebang): it imports only the
standard library, so it starts in milliseconds.

>>> is_forked(["-m", "pyspark.sql.connect.streaming.worker.foreach_batch_worker"])
True
>>> is_forked(["-c", "import pyspark"])
False
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
from typing import Dict, List, Optional, Sequence

FORKED_MODULES = (
    "pyspark.daemon",
    "pyspark.sql.connect.streaming.worker.",
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.sql.streaming.transform_with_state_driver_worker",
    "pyspark.sql.worker.",
)
"""The modules Spark starts a Python for (prefixes): its driver's helpers and the daemon its task workers fork
from; everything else runs the real Python."""

ANSWER = struct.Struct("!i")
"""The fork server's two answers: the child's pid (-1: it will not run the command), then its `waitpid` status."""


def is_forked(args: Sequence[str]) -> bool:
    """Whether Python's arguments `args` run a module the fork server runs."""
    return len(args) >= 2 and args[0] == "-m" and args[1].startswith(FORKED_MODULES)


START_SECONDS = 5.0
"""How long the fork server has to take a command and fork its child; a busy or stopped one leaves it to the real
Python (closing the connection stops a child it forks late)."""


def request(args: Sequence[str], environment: Dict[str, str], cwd: str) -> bytes:
    """What this program sends the fork server: one JSON line."""
    return json.dumps({"args": list(args), "env": environment, "cwd": cwd}).encode() + b"\n"


def _answer(conn: socket.socket) -> Optional[int]:
    """The fork server's next answer; None if it closed the connection first."""
    answer = b""
    while len(answer) < ANSWER.size:
        more = conn.recv(ANSWER.size - len(answer))
        if not more:
            return None
        answer += more
    return int(ANSWER.unpack(answer)[0])


def exit_code(status: int) -> int:
    """A `waitpid` status as a shell reports it: the exit code, or 128 + the signal that ended the process."""
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _forked(path: str, args: Sequence[str]) -> Optional[int]:
    """Run `args` in a child of the fork server at `path`; its exit code, or None if it can't or won't start one."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(START_SECONDS)
            conn.connect(path)
            fds = array.array("i", [0, 1, 2])
            conn.sendmsg([request(args, dict(os.environ), os.getcwd())], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            pid = _answer(conn)
            if pid is None or pid < 0:
                return None
            conn.settimeout(None)  # the child runs as long as Spark wants it
            try:
                status = _answer(conn)
            except OSError:
                status = None
    except OSError:
        return None
    return 1 if status is None else exit_code(status)  # started: never run the module a second time


def main(args: List[str], fork_server: str, python: str) -> int:
    """Run `python args` by the fork server at the socket `fork_server` if it takes them, else by the real `python`
    (which replaces this process)."""
    if is_forked(args):
        code = _forked(fork_server, args)
        if code is not None:
            return code
    os.execv(python, [python, *args])
