"""The PostgreSQL server's and the Spark cluster's helpers that tests share (tests import them as `from conftest import
...`), and the fixtures; every other helper lives in `tests/support/`.

`tests/` is on the import path (pyproject's `pythonpath`), so pytest's own
import of this file is the module `conftest` that those imports get.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

import pyspark
import pytest
from support.kafka_broker import KafkaBroker, apache_kafka, tansu
from support.outage_proxy import Outage
from support.ports import free_port
from support.processes import SHORT_LIVED_JVM, ancestor, descendants, kill_group

from flowspark.engine.reports.driver_link import DriverServer

pytest_plugins = ["support.s3_server", "support.suite_budget", "support.parallel"]
"""Fixtures every test folder may ask for (`s3_endpoint`, `s3_folder`); the suite's time per marker and its budget;
how the suite shares two cores."""


@pytest.fixture
def server() -> Iterator[DriverServer]:
    """A driver link server on loopback, closed after the test."""
    running = DriverServer()
    yield running
    running.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka's broker for the whole session, with a plain, a SASL_SSL and a mutual-TLS listener."""
    with apache_kafka(tmp_path_factory.mktemp("kafka")) as running:
        yield running


@pytest.fixture(scope="session")
def broker(kafka: KafkaBroker) -> str:
    """The session's Kafka broker's plain `host:port`."""
    return kafka.address


@pytest.fixture
def broker_behind_outage(tmp_path: Path) -> Iterator[Tuple[str, Outage]]:
    """A broker of the test's own that clients reach only through an `Outage` proxy: its address (the proxy's) and the proxy."""
    outage = Outage()
    with tansu(tmp_path / "tansu.log", advertised_port=outage.port) as address:
        outage.target = int(address.rsplit(":", 1)[1])
        try:
            yield f"127.0.0.1:{outage.port}", outage
        finally:
            outage.close()


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
    raise RuntimeError("running as root, and neither a `postgres` nor a `nobody` user to run PostgreSQL as")


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A PostgreSQL server of the machine's own, made by `initdb` in a new temporary folder and listening on a free
    loopback port; its conninfo.

    As root, the server runs as the `postgres` user (or `nobody`), who
    owns the folder.  It keeps no Unix socket, takes passwords only
    (scram-sha-256), and skips `fsync`: it lives as long as the test
    session.
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
                    raise RuntimeError(f"PostgreSQL did not start: {log.read_text()}") from None
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


# A Spark standalone cluster on 127.0.0.1 (tests/test_cluster.py, tests/test_spark_faults.py).

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
WORKERS = 2
REGISTER_TIMEOUT = 90.0


def spark_env() -> Dict[str, str]:
    """The environment a cluster process (or a flow run on the cluster) starts with: the wheel's Spark, on loopback."""
    return dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1")


class StandaloneCluster:
    """A standalone master and workers, each in its own process group (JVMs, executors and all)."""

    def __init__(self, root: Path, workers: int = WORKERS) -> None:
        self.root = root
        self.workers = workers
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.work_dirs: List[Path] = []
        self._procs: List["subprocess.Popen[bytes]"] = []
        self._logs: List[IO[bytes]] = []

    def _spawn(self, name: str, args: List[str]) -> None:
        log = open(self.root / f"{name}.log", "wb")
        self._logs.append(log)
        self._procs.append(
            subprocess.Popen(
                [os.path.join(SPARK_HOME, "bin", "spark-class"), *args],
                # Through the workers' environment the options reach the executors they start too.
                env=dict(spark_env(), JAVA_TOOL_OPTIONS=" ".join(SHORT_LIVED_JVM)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def _spawn_worker(self, index: int, log_name: str) -> None:
        self._spawn(
            log_name,
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                "0",
                "--work-dir",
                str(self.work_dirs[index]),
                self.url,
            ],
        )

    def start(self) -> None:
        """Start the master, and the workers once the master's page answers.

        A worker's UI takes any free port: started together, it could take
        the one picked for the master's page before the master binds it.
        """
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        self._wait_for_master()
        for i in range(self.workers):
            work_dir = self.root / f"worker{i}"
            work_dir.mkdir()
            self.work_dirs.append(work_dir)
            self._spawn_worker(i, f"worker{i}")

    def worker_of(self, pid: int) -> int:
        """Which worker the process `pid` (an executor or one of its Python processes) runs under."""
        workers = {proc.pid: index for index, proc in enumerate(self._procs[1:])}
        return workers[ancestor(pid, lambda found: found in workers)]

    def lose_worker(self, index: int) -> None:
        """SIGKILL worker `index` with everything it started, as if its host went away (its executors' Python
        daemons lead process groups of their own); a fresh worker takes its place, as a replaced host would."""
        proc = self._procs[1 + index]
        doomed = descendants(proc.pid)
        kill_group(proc, signal.SIGKILL)
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        self._procs.remove(proc)
        self._spawn_worker(index, f"worker{index}-again")
        self._procs.insert(1 + index, self._procs.pop())

    def status(self) -> Dict[str, Any]:
        """The master's JSON status page (workers, apps)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as page:
            return json.load(page)  # type: ignore[no-any-return]

    def _wait_for_master(self, timeout: float = REGISTER_TIMEOUT) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self._procs[0].poll() is not None:
                raise RuntimeError(f"the master ended with {self._procs[0].returncode}; logs in {self.root}")
            try:
                self.status()
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"the master's page did not answer in {timeout:.0f} s; logs in {self.root}")

    def wait_for_workers(self, timeout: float = REGISTER_TIMEOUT) -> float:
        """Block until every worker registered with the master; return the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a cluster process ended with {proc.returncode}; logs in {self.root}")
            try:
                workers = self.status().get("workers", [])
            except OSError:
                workers = []
            alive = [w for w in workers if w.get("state") == "ALIVE"]
            if len(alive) >= self.workers:
                return time.monotonic() - started
            time.sleep(0.5)
        raise TimeoutError(f"{self.workers} workers did not register in {timeout:.0f} s; logs in {self.root}")

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                kill_group(proc, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_group(proc, signal.SIGKILL)
                proc.wait()
        for log in self._logs:
            log.close()

    def executor_logs(self) -> List[Path]:
        """Each executor's stderr log, `WORK_DIR/APP_ID/EXECUTOR_ID/stderr`, across all workers."""
        return sorted(p for d in self.work_dirs for p in d.glob("app-*/*/stderr"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[StandaloneCluster]:
    found = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    request.addfinalizer(found.stop)  # registered first: a failed start still stops what did start
    found.start()
    took = found.wait_for_workers()
    print(f"{WORKERS} workers registered in {took:.1f} s")
    yield found
