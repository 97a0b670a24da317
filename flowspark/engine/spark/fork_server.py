"""The warm server's fork server: a Python with PySpark and flowspark imported, forking the Pythons Spark starts.

`forked_python` (the `python` Spark is given) sends it the command Spark
ran, its environment, working directory and standard streams; the fork
server forks a child that takes them over and runs the module as `python
-m` would, answers the child's pid, and when the child ends, its status.
A caller whose connection closes first (Spark stopped it) has its child
stopped as Spark stops a Python it started (SIGTERM: PySpark's daemon then
stops its workers too).  The server listens on a socket in the warm
server's directory, which only the user can enter, and serves only
processes of the user (`SO_PEERCRED`); what it reads is JSON, never a
pickle.

    python -m flowspark.engine.spark.fork_server SOCKET   (the supervisor starts it)

>>> from flowspark.engine.spark.forked_python import request
>>> parse_request(request(["-c", "print('hi')"], {}, "/")) is None  # only the modules Spark starts
True
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import traceback
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from flowspark.engine.spark import forked_python
from flowspark.engine.spark.forked_python import ANSWER, is_forked
from flowspark.engine.util.private_files import write_private

WARM_IMPORTS = (
    "pyspark.daemon",
    "pyspark.worker",
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.sql.streaming.transform_with_state_driver_worker",
    "pyspark.sql.worker.plan_data_source_read",
    "flowspark.engine.streaming_query",
)
"""What the Pythons Spark starts import before their first step: PySpark's modules and flowspark's engine."""

CONNECT_IMPORTS = ("pyspark.sql.connect.streaming.worker.foreach_batch_worker",)
"""What a Spark Connect server's Pythons import besides (its `foreachBatch` worker): the warm server's fork server
imports these too."""

FORKS_SOCKET = "forks.sock"
"""The fork server's socket, in the directory `start` is given."""
FORKED_PYTHON = "python"
"""The program Spark is given as its Python, beside the socket."""

SOCKET_PATH_LIMIT = 100
"""The longest fork server socket path used (Unix allows 107 bytes)."""

_REQUEST_LIMIT = 4 << 20
_REQUEST_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_CREDENTIALS = struct.Struct("3i")


@dataclass
class Request:
    """A command to run, as `forked_python` sends it."""

    module: str
    args: List[str]
    """The arguments after the module's name."""
    env: Dict[str, str]
    cwd: str


@dataclass
class Child:
    """A running child and the connection of the process that asked for it."""

    pid: int
    pidfd: int
    conn: socket.socket
    caller_waits: bool = True


def warm_up(connect: bool) -> None:
    """Import what the children need (with `connect`, a Spark Connect server's too), with numeric libraries kept to
    one thread (threads don't survive a fork)."""
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    for name in (*WARM_IMPORTS, *(CONNECT_IMPORTS if connect else ())):
        importlib.import_module(name)
    # pyarrow imports pandas on its first array: once here, not in each child.
    importlib.import_module("pyarrow").array([""])


def parse_request(data: bytes) -> Optional[Request]:
    """The request in `data`, or None when it is not one the fork server runs.

    >>> from flowspark.engine.spark.forked_python import request
    >>> parse_request(request(["-m", "pyspark.sql.worker.plan_data_source_read"], dict(os.environ), "/")).module
    'pyspark.sql.worker.plan_data_source_read'
    >>> parse_request(b'{"args": "-m pyspark.sql.worker.plan_data_source_read"}') is None
    True
    """
    try:
        fields = json.loads(data)
        args, env, cwd = fields["args"], fields["env"], fields["cwd"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args) and is_forked(args)):
        return None
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return None
    if not isinstance(cwd, str):
        return None
    if env.get("PYTHONHASHSEED") != os.environ.get("PYTHONHASHSEED"):
        return None  # a child can't change the hash seed it was forked with
    return Request(args[1], args[2:], env, cwd)


class ForkServer:
    """Serves `forked_python` on the Unix socket `path` until killed."""

    def __init__(self, path: str) -> None:
        self._selector = selectors.DefaultSelector()
        self._children: Dict[int, Child] = {}
        old_mask = os.umask(0o177)
        try:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(path):
                os.remove(path)
            self._listener.bind(path)
        finally:
            os.umask(old_mask)
        self._listener.listen(16)
        self._selector.register(self._listener, selectors.EVENT_READ)

    def serve_forever(self) -> None:
        """Serve until killed; a failure serving one caller is logged and leaves the others be."""
        while True:
            for key, _ in self._selector.select():
                try:
                    if key.fileobj is self._listener:
                        self._accept()
                    elif isinstance(key.fileobj, int):
                        self._ended(key.data)
                    else:
                        self._caller_gone(key.data)
                except Exception:  # the children of other callers live on
                    traceback.print_exc()

    def _accept(self) -> None:
        conn, _ = self._listener.accept()
        fds: List[int] = []
        try:
            conn.settimeout(_REQUEST_SECONDS)
            request = self._read(conn, fds) if self._mine(conn) else None
            if request is None or len(fds) != 3:
                conn.sendall(ANSWER.pack(-1))
                conn.close()
                return
            pid = self._fork(request, fds, conn)
        except OSError:
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        child = Child(pid, os.pidfd_open(pid), conn)
        self._children[pid] = child
        conn.settimeout(None)
        try:
            conn.sendall(ANSWER.pack(pid))
        except OSError:
            pass  # the caller is gone: its connection reads as closed below
        self._selector.register(child.pidfd, selectors.EVENT_READ, pid)
        self._selector.register(conn, selectors.EVENT_READ, pid)

    @staticmethod
    def _mine(conn: socket.socket) -> bool:
        """Whether the peer runs as this user."""
        _, uid, _ = _CREDENTIALS.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
        return bool(uid == os.getuid())

    @staticmethod
    def _read(conn: socket.socket, fds: List[int]) -> Optional[Request]:
        data, received, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        fds.extend(received)
        while data and not data.endswith(b"\n") and len(data) < _REQUEST_LIMIT:
            more = conn.recv(1 << 16)
            if not more:
                return None
            data += more
        return parse_request(data)

    def _fork(self, request: Request, fds: List[int], conn: socket.socket) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                self._become_child(request, fds, conn)
            finally:
                os._exit(70)
        return pid

    def _become_child(self, request: Request, fds: List[int], conn: socket.socket) -> None:
        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(_PR_SET_NAME, process_name(request).encode()[:15])
        conn.close()
        for child in self._children.values():
            child.conn.close()
            os.close(child.pidfd)
        self._listener.close()
        self._selector.close()
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
        for fd in fds:
            os.close(fd)
        fds.clear()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os._exit(run_module(request))

    def _ended(self, pid: int) -> None:
        child = self._children.pop(pid, None)
        if child is None:
            return
        self._selector.unregister(child.pidfd)
        os.close(child.pidfd)
        _, status = os.waitpid(pid, 0)
        if child.caller_waits:
            self._selector.unregister(child.conn)
            try:
                child.conn.sendall(ANSWER.pack(status))
            except OSError:
                pass
        child.conn.close()

    def _caller_gone(self, pid: int) -> None:
        child = self._children.get(pid)
        if child is None or not child.caller_waits:
            return
        self._selector.unregister(child.conn)
        child.caller_waits = False
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def process_name(request: Request) -> str:
    """The name a child shows in `ps -o comm` and `top` (its command line is the fork server's): the last part of the
    module it runs, or for PySpark's daemon, of the worker module it forks.

    >>> process_name(Request("pyspark.daemon", ["pyspark.sql.worker.plan_data_source_read"], {}, "/"))
    'plan_data_source_read'
    >>> process_name(Request("pyspark.sql.streaming.python_streaming_source_runner", [], {}, "/"))
    'python_streaming_source_runner'
    """
    module = request.args[0] if request.module == "pyspark.daemon" and request.args else request.module
    return module.rpartition(".")[2]


def run_module(request: Request) -> int:
    """In a child: take over the caller's environment and directory, run the module as `__main__`; its exit code."""
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.cwd)
    extra = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[:1] = [request.cwd, *extra]
    if request.env.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(write_through=True)  # type: ignore[union-attr]
    sys.argv = [request.module, *request.args]
    code = 0
    try:
        with warnings.catch_warnings():
            # The module is imported already (that is what makes the child warm): runpy says so, and it is meant.
            warnings.filterwarnings("ignore", message=".*found in sys.modules", category=RuntimeWarning)
            runpy.run_module(request.module, run_name="__main__", alter_sys=True)
    except SystemExit as ex:
        code = ex.code if isinstance(ex.code, int) else (0 if ex.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def write_program(path: str, fork_server: str) -> None:
    """Write `forked_python` to `path` as a program only the user can run, for the fork server at the socket
    `fork_server` and this Python."""
    source = inspect.getsource(forked_python)
    call = f"\nimport sys\n\nsys.exit(main(sys.argv[1:], {fork_server!r}, {sys.executable!r}))\n"
    write_private(path, f"#!{sys.executable} -IS\n{source}{call}".encode())
    os.chmod(path, 0o700)


def start(directory: str, python: str, connect: bool, output: int) -> Optional[Tuple["subprocess.Popen[bytes]", str]]:
    """Start a fork server whose socket and program live in `directory` (private to the user), if it can serve
    `python`: the server and the program to give Spark as its Python.

    None when `python` is not this process's Python (the children would
    run the wrong one) or the socket's path is too long for Unix.  The
    server writes to `output` and is killed when the thread that started
    it ends (the process, in practice), its children with it; with
    `connect` it also imports what a Spark Connect server's Pythons need.
    """
    sock, program = os.path.join(directory, FORKS_SOCKET), os.path.join(directory, FORKED_PYTHON)
    if os.path.realpath(python) != os.path.realpath(sys.executable) or len(sock.encode()) > SOCKET_PATH_LIMIT:
        return None
    write_program(program, sock)
    server = subprocess.Popen(
        [sys.executable, "-m", __name__, sock, *(["--connect"] if connect else [])],
        # PySpark's workers' hash seed, which a forked child keeps.
        env=dict(os.environ, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0")),
        cwd=directory,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        preexec_fn=die_with_parent,
    )
    return server, program


def die_with_parent() -> None:
    """In a child before it runs: be killed when its parent dies, however it dies (even before this call)."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent or parent == 1:
        os.kill(os.getpid(), signal.SIGKILL)


def main(argv: List[str]) -> int:
    if len(argv) not in (1, 2) or argv[1:] not in ([], ["--connect"]):
        print(f"usage: python -m {__name__} SOCKET [--connect]", file=sys.stderr)
        return 2
    server = ForkServer(argv[0])
    warm_up(connect=argv[1:] == ["--connect"])
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
