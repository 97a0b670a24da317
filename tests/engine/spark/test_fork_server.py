"""The warm server's fork server: Spark's Python processes forked from a warm Python, or the real Python otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

from flowspark.engine.spark import fork_server, forked_python

# A module Spark's driver starts a Python for: run without Spark, it connects to the port its environment
# names, sends the secret and waits for an answer.
HELPER = "pyspark.sql.worker.lookup_data_sources"


@pytest.fixture
def forks(tmp_path: Path) -> Iterator[Tuple[Path, Dict[str, str]]]:
    """A running fork server; the `python` program that uses it and the environment that points it there."""
    with _fork_server(tmp_path) as started:
        yield started


@contextlib.contextmanager
def _fork_server(folder: Path) -> Iterator[Tuple[Path, Dict[str, str]]]:
    sock = folder / "forks.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", fork_server.__name__, str(sock)],
        env=dict(os.environ, PYTHONHASHSEED="0"),
        stdin=subprocess.DEVNULL,
    )
    program = folder / "python"
    fork_server.write_program(str(program), str(sock))
    deadline = time.monotonic() + 60
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    env = dict(os.environ, PYTHONHASHSEED="0")
    try:
        yield program, env
    finally:
        server.kill()
        server.wait()


def _helper(program: Path, env: Dict[str, str], port: int) -> "subprocess.Popen[str]":
    env = dict(env, PYTHON_WORKER_FACTORY_PORT=str(port), PYTHON_WORKER_FACTORY_SECRET="secret")
    env.pop("SPARK_PYTHON_UDS_PATH", None)
    return subprocess.Popen(
        [str(program), "-m", HELPER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_module_spark_starts_runs_in_a_child_of_the_fork_server(
    forks: Tuple[Path, Dict[str, str]],
) -> None:
    program, env = forks
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(60)
        helper = _helper(program, env, listener.getsockname()[1])
        conn, _ = listener.accept()  # the helper found the port its caller's environment names
        with conn:
            conn.settimeout(30)
            assert conn.recv(4 + len("secret")).endswith(b"secret")
        _, err = helper.communicate(timeout=60)
    assert helper.returncode != 0
    assert "fork_server" in err, err  # the traceback of the module run in the fork server's child


def test_other_commands_and_a_missing_fork_server_run_the_real_python(
    forks: Tuple[Path, Dict[str, str]], tmp_path: Path
) -> None:
    program, env = forks
    done = subprocess.run(
        [str(program), "-c", "import sys; print(sys.argv[1:])", "a"], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, "['a']\n")
    alone = tmp_path / "alone"
    fork_server.write_program(str(alone), str(tmp_path / "none.sock"))
    done = subprocess.run(
        [str(alone), "-m", HELPER], env=dict(env, PYTHON_WORKER_FACTORY_PORT="1"), capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "fork_server" not in done.stderr and HELPER.rsplit(".", 1)[-1] in done.stderr


def test_a_child_dies_with_the_process_that_asked_for_it(forks: Tuple[Path, Dict[str, str]]) -> None:
    program, env = forks
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(60)
        helper = _helper(program, env, listener.getsockname()[1])
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(30)
            conn.recv(64)  # the child now waits for an answer that never comes
            helper.send_signal(signal.SIGKILL)  # as Spark stops a Python it started
            helper.wait(30)
            assert conn.recv(64) == b""  # the child is gone: its end of the connection closed


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user"
)
def test_a_process_of_another_user_is_refused() -> None:
    folder = Path(tempfile.mkdtemp())  # one the other user can pass through, unlike pytest's
    try:
        os.chmod(folder, 0o755)
        with _fork_server(folder):
            sock = str(folder / "forks.sock")
            os.chmod(sock, 0o777)  # past the file modes that keep others out, to the fork server's own check
            probe = (
                "import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                "s.connect(sys.argv[1])\n"
                "try:\n"
                f"    s.sendall({forked_python.request(['-m', HELPER], {'PYTHONHASHSEED': '0'}, '/')!r})\n"
                "except BrokenPipeError:\n"
                "    pass  # refused before its request was read: the answer is there all the same\n"
                "print(s.recv(4).hex())\n"
            )
            other_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            done = subprocess.run(
                [*other_user, "/usr/bin/python3", "-c", probe, sock], capture_output=True, text=True, timeout=60
            )
        assert done.stdout.strip() == forked_python.ANSWER.pack(-1).hex(), done.stderr
    finally:
        shutil.rmtree(folder)
