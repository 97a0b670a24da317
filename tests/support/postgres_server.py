"""A PostgreSQL server of the machine's own for the PostgreSQL sink's tests, and queries against it.

`postgres_server()` makes a cluster with `initdb` in a temporary folder
and starts it on a free loopback port (the `postgres` fixture keeps one
for the session); `pg_table` makes a table of a random name and
`pg_query` reads what a run wrote.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from support.ports import free_port


def _postgres_bin() -> Optional[Path]:
    """The folder of PostgreSQL's `initdb` and `postgres`: Debian's (the newest), else wherever `PATH` has them."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _postgres_user() -> Tuple[Optional[str], Optional[str]]:
    """The user and group to run PostgreSQL as: ourselves, or, as root (which PostgreSQL refuses), `postgres` or `nobody`."""
    if os.geteuid() != 0:
        return None, None
    import grp
    import pwd

    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        return name, grp.getgrgid(user.pw_gid).gr_name
    msg = "running as root, and neither a `postgres` nor a `nobody` user to run PostgreSQL as"
    raise RuntimeError(msg)


@contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server of the machine's own, made by `initdb` in a new temporary folder and listening on a free
    loopback port; its conninfo.  The test is skipped where psycopg or PostgreSQL is not installed.

    As root, the server runs as the `postgres` user (or `nobody`), who
    owns the folder.  It keeps no Unix socket, takes passwords only
    (scram-sha-256), and skips `fsync`: the `postgres` fixture keeps it
    for the test session.
    """
    pytest.importorskip("psycopg")
    import psycopg

    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
    user, group = _postgres_user()
    base = Path(tempfile.mkdtemp(prefix="flowspark-pg-"))
    password = secrets.token_hex(16)
    (base / "pwfile").write_text(password)
    (base / "pwfile").chmod(0o600)
    if user is not None:
        for path in (base, base / "pwfile"):
            shutil.chown(path, user, group)
    as_user: Dict[str, Any] = {"user": user, "group": group, "extra_groups": []} if user is not None else {}
    log = base / "postgres.log"
    proc: Optional["subprocess.Popen[bytes]"] = None
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(base / "data"),
                "-U",
                "flowspark",
                "--auth=scram-sha-256",
                "--pwfile",
                str(base / "pwfile"),
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            cwd=base,
            capture_output=True,
            check=True,
            timeout=120,
            **as_user,
        )
        port = free_port()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(base / "data"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "fsync=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=60",
                ],
                cwd=base,
                stdout=out,
                stderr=subprocess.STDOUT,
                **as_user,
            )
        conninfo = f"host=127.0.0.1 port={port} user=flowspark password={password} dbname=postgres"
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(conninfo, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    msg = f"PostgreSQL did not start: {log.read_text()}"
                    raise RuntimeError(msg) from None
                time.sleep(0.1)
        yield conninfo
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def pg_query(conninfo: str, query: str, *params: Any) -> List[Tuple[Any, ...]]:
    """The rows `query` returns (none for a statement that returns none), run in a transaction of its own."""
    import psycopg

    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        cur.execute(query, params or None)
        return cur.fetchall() if cur.description is not None else []


def pg_table(conninfo: str, columns: str) -> str:
    """A new table with a random name and these column definitions."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    pg_query(conninfo, f"CREATE TABLE {name} ({columns})")
    return name
