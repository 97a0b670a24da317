"""Apache Kafka's own broker, fetched from Maven Central and started on loopback: for the tests and the benchmarks.

`kafka_classpath()` fetches `org.apache.kafka:kafka_2.13` with `mvn` into
`~/.m2` on first use; `KafkaProcess` runs a broker's JVM, which a test may
kill and start again on the same ports and data; `plain_broker(folder)`
is a one-node KRaft broker with a plain listener, its data in `folder`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka broker the tests fetch from Maven Central and start."""


def kafka_classpath() -> str:
    """The Java class path of Apache Kafka's broker (`org.apache.kafka:kafka_2.13`), fetched by Maven into `~/.m2` on
    first use and remembered under `~/.cache/flowspark-tests`."""
    folder = Path.home() / ".cache" / "flowspark-tests" / f"kafka-{KAFKA_VERSION}"
    saved = folder / "classpath.txt"
    if saved.exists() and all(Path(jar).exists() for jar in saved.read_text().split(os.pathsep)):
        return saved.read_text()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>flowspark.tests</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{KAFKA_VERSION}</version>
  </dependency></dependencies>
</project>
""")
    fetched = subprocess.run(
        ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={saved}"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if fetched.returncode != 0:
        msg = f"Maven could not fetch Apache Kafka {KAFKA_VERSION}: {fetched.stdout}{fetched.stderr}"
        raise RuntimeError(msg)
    return saved.read_text()


class KafkaProcess:
    """The broker's JVM, which a test may kill and start again on the same ports and data, as a crashed broker is."""

    def __init__(self, java: List[str], properties: Path, log: Path, address: str) -> None:
        self._java, self._properties, self._log, self._address = java, properties, log, address
        self._proc: Optional["subprocess.Popen[bytes]"] = None

    def start(self) -> None:
        """Start the broker and wait until it answers (at most 90 s)."""
        from confluent_kafka.admin import AdminClient

        with open(self._log, "ab") as out:
            self._proc = subprocess.Popen(
                [*self._java, "kafka.Kafka", str(self._properties)], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 90
        while True:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                msg = f"Apache Kafka did not start: {self._log.read_text()[-3000:]}"
                raise RuntimeError(msg)
            try:
                AdminClient({"bootstrap.servers": self._address}).list_topics(timeout=2)
                return
            except Exception:
                time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the broker: no clean shutdown, as when its host is lost."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(count: int) -> List[int]:
    """`count` different loopback TCP ports that were free a moment ago.

    Each is held until all are found: a port asked for once it was let go
    may be given again (a broker with two listeners on one port won't start).
    """
    with ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def broker_java(classpath: str, options: Sequence[str] = ()) -> List[str]:
    """The command that runs a class of the broker's class path (`options`: more Java options)."""
    return ["java", "-Xms128m", "-Xmx768m", *options, "-cp", classpath]


def format_storage(java: List[str], properties: Path, *extra: str) -> None:
    """Format the broker's log folders (KRaft) for a new cluster."""
    cluster_id = "flowspark-" + uuid.uuid4().hex[:6]
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties), *extra],
        check=True,
        capture_output=True,
        timeout=120,
    )


def write_properties(folder: Path, listeners: Dict[str, int], controller: int, extra: Sequence[str] = ()) -> Path:
    """`folder/server.properties` of a one-node KRaft broker (broker and controller) on loopback, with transactions:
    `listeners` by name (`PLAINTEXT` among them, which brokers talk over) and their ports, then `extra` lines."""
    named = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
    protocols = ",".join(f"{name}:{name}" for name in listeners)
    properties = folder / "server.properties"
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"listeners={named},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners={named}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"listener.security.protocol.map={protocols},CONTROLLER:PLAINTEXT",
        f"log.dirs={folder / 'data'}",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        *extra,
    ]
    properties.write_text("\n".join(lines) + "\n")
    return properties


@contextmanager
def plain_broker(folder: Path, options: Sequence[str] = ()) -> Iterator[str]:
    """A one-node KRaft broker with a plain loopback listener and transactions, its data and log in `folder`: its
    `host:port`."""
    plain, controller = free_ports(2)
    properties = write_properties(folder, {"PLAINTEXT": plain}, controller)
    java = broker_java(kafka_classpath(), options)
    format_storage(java, properties)
    address = f"127.0.0.1:{plain}"
    process = KafkaProcess(java, properties, folder / "broker.log", address)
    try:
        process.start()
        yield address
    finally:
        process.stop()
