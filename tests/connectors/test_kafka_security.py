"""Kafka connectors over TLS against Apache Kafka's broker: SASL_SSL (user and password, PLAIN or SCRAM-SHA-256) and
mutual TLS (a client certificate), with certificates given by path or shipped with the job."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from support.failures import error_chain
from support.kafka_broker import KafkaBroker
from support.kafka_topics import new_topic, produce, read_back
from support.processes import run_module

pytest.importorskip("confluent_kafka")

import flowspark.operators as op
from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSink, TestingSource, cluster_main

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def _listener(kafka: KafkaBroker, login: str) -> Tuple[str, Dict[str, str]]:
    """The broker's address and the client settings for a login: a SASL mechanism over TLS, or a client certificate."""
    if login == "client-certificate":
        return kafka.mtls_address, kafka.mtls_config
    return kafka.secure_address, kafka.secure_config if login == "PLAIN" else kafka.scram_config


@pytest.mark.parametrize("login", ["PLAIN", "SCRAM-SHA-256", "client-certificate"])
@pytest.mark.parametrize("workers", [1, 2], ids=["in_the_driver", "in_spark_tasks"])
def test_source_and_sink_over_tls(kafka: KafkaBroker, workers: int, login: str) -> None:
    address, config = _listener(kafka, login)
    topic = new_topic(kafka.address, 2)
    messages = [KafkaSinkMessage(f"k{i}".encode(), f"v{i}".encode(), partition=i % 2) for i in range(6)]
    flow = Dataflow("kafka_secure_out")
    op.output(
        "out",
        op.input("inp", flow, TestingSource(messages)),
        KafkaSink([address], topic, config),
    )
    cluster_main(flow, [], 0, worker_count_per_proc=workers)

    flow = Dataflow("kafka_secure_in")
    got: List[Any] = []
    source = KafkaSource([address], [topic], tail=False, add_config=config)
    op.output("out", op.input("inp", flow, source), TestingSink(got))
    cluster_main(flow, [], 0, worker_count_per_proc=workers)

    assert sorted((m.partition, m.key, m.value) for m in got) == [
        (i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in (0, 2, 4, 1, 3, 5)
    ]


def _failure(flow_id: str, address: str, topic: str, config: Dict[str, str]) -> List[str]:
    """The messages of the error a run reading `topic` at `address` with `config` fails with, outermost first."""
    flow = Dataflow(flow_id)
    op.output(
        "out",
        op.input("inp", flow, KafkaSource([address], [topic], tail=False, add_config=config)),
        TestingSink([]),
    )
    with pytest.raises(Exception) as info:
        cluster_main(flow, [], 0)
    return error_chain(info.value)


def test_a_wrong_password_fails_the_run_naming_the_partition(kafka: KafkaBroker) -> None:
    topic = new_topic(kafka.address)
    chain = _failure("kafka_secure_in", kafka.secure_address, topic, {**kafka.secure_config, "sasl.password": "wrong"})
    assert any("Authentication failed" in text and topic in text for text in chain), chain


def test_a_client_without_the_certificate_the_broker_asks_for_fails_the_run(kafka: KafkaBroker) -> None:
    """The broker's TLS alert, which librdkafka reports as a transport failure, is named; not waited out as an outage."""
    topic = new_topic(kafka.address)
    config = {k: v for k, v in kafka.mtls_config.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    chain = _failure("kafka_mtls_in", kafka.mtls_address, topic, config)
    assert any("kafka_mtls_in.inp" in text for text in chain), chain
    assert any("alert bad certificate" in text and topic in text for text in chain), chain


def test_a_certificate_shipped_with_the_job_is_found_by_its_name(kafka: KafkaBroker, tmp_path: Path) -> None:
    """`--conf spark.files=.../team-ca.pem` ships the file; `ssl.ca.location: team-ca.pem` finds Spark's copy in the
    driver and in every task, though the run's own folder has no such file."""
    shipped = tmp_path / "certs" / "team-ca.pem"
    shipped.parent.mkdir()
    shutil.copy(kafka.secure_config["ssl.ca.location"], shipped)
    source_topic, sink_topic = new_topic(kafka.address, 2), new_topic(kafka.address)
    produce(kafka.address, source_topic, [(i % 2, None, f"m{i}".encode(), []) for i in range(4)])
    config = {**kafka.secure_config, "ssl.ca.location": "team-ca.pem"}
    (tmp_path / "secure_flow.py").write_text(
        textwrap.dedent(f"""
        import flowspark.operators as op
        from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
        from flowspark.dataflow import Dataflow

        config = {config!r}
        flow = Dataflow("shipped_ca")
        messages = op.input("inp", flow, KafkaSource([{kafka.secure_address!r}], [{source_topic!r}], tail=False,
                                                     add_config=config))
        upper = op.map("upper", messages, lambda m: KafkaSinkMessage(None, m.value.upper()))
        op.output("out", upper, KafkaSink([{kafka.secure_address!r}], {sink_topic!r}, config))
    """)
    )
    done = run_module(
        "flowspark.run", "secure_flow:flow", "-w", "2", "--conf", f"spark.files={shipped}", cwd=tmp_path, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(m.value() for m in read_back(kafka.address, sink_topic, 4)) == [b"M0", b"M1", b"M2", b"M3"]
