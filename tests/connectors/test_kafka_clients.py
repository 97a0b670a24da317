"""Kafka clients kept for the next micro-batch: reused by the next partition or sink, reading only its own messages,
and closed once idle."""

from __future__ import annotations

from typing import Any, List

import pytest
from support.kafka_topics import new_topic, produce, read_back

pytest.importorskip("confluent_kafka")

from confluent_kafka import OFFSET_STORED, libversion

from flowspark.connectors.kafka import (
    KafkaSink,
    KafkaSinkMessage,
    KafkaSource,
    clients,
)

pytestmark = pytest.mark.kafka


def _drain(part: Any) -> List[Any]:
    out: List[Any] = []
    while True:
        try:
            out += part.next_batch()
        except StopIteration:
            return out


def test_a_kept_consumer_reads_the_next_partition_from_its_offset_and_nothing_of_the_last(broker: str) -> None:
    topic = new_topic(broker, 2)
    produce(broker, topic, [(i % 2, None, f"p{i % 2}-{i // 2}".encode(), []) for i in range(20)])
    source = KafkaSource([broker], [topic], tail=False)

    first = source.build_part("inp", f"0-{topic}", 3)
    got_first = [m.value for m in first.next_batch()]  # leaves fetched messages behind in the consumer
    consumer = first._consumer
    first.close()
    second = source.build_part("inp", f"1-{topic}", 6)
    assert second._consumer is consumer
    got_second = [m.value for m in _drain(second)]
    second.close()

    assert got_first == [f"p0-{i}".encode() for i in range(3, 10)]
    assert got_second == [f"p1-{i}".encode() for i in range(6, 10)]


def test_a_consumer_that_met_an_error_is_not_kept(broker: str) -> None:
    topic = new_topic(broker)
    produce(broker, topic, [(0, None, b"v", [])])
    # No committed offset to start from, and no reset allowed: the first read fails.
    config = {"auto.offset.reset": "error", "group.id": "never-committed"}
    failing = KafkaSource([broker], [topic], tail=False, starting_offset=OFFSET_STORED, add_config=config)
    part = failing.build_part("inp", f"0-{topic}", None)
    with pytest.raises(RuntimeError, match="_AUTO_OFFSET_RESET"):
        for _ in range(50):
            part.next_batch()
    consumer = part._consumer
    part.close()
    again = failing.build_part("inp", f"0-{topic}", 0)
    assert again._consumer is not consumer
    assert [m.value for m in _drain(again)] == [b"v"]
    again.close()


def test_idle_clients_are_closed(broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = new_topic(broker)
    sink = KafkaSink([broker], topic)
    part = sink.build("out", 0, 1)
    part.write_batch([KafkaSinkMessage(None, b"one")])
    producer = part._producer
    part.close()
    again = sink.build("out", 0, 1)
    assert again._producer is producer
    again.write_batch([KafkaSinkMessage(None, b"two")])
    again.close()

    monkeypatch.setattr(clients, "IDLE_SECONDS", 0.0)
    third = sink.build("out", 0, 1)  # the kept one was idle too long: closed, and a new one made
    assert third._producer is not producer
    third.close()
    assert [m.value() for m in read_back(broker, topic, 2)] == [b"one", b"two"]


def test_clients_retry_the_brokers_they_know_through_an_outage_unless_the_user_says_otherwise() -> None:
    config = clients.client_config(["a:9092", "b:9092"], {"acks": "all"})
    assert config["bootstrap.servers"] == "a:9092,b:9092" and config["acks"] == "all"
    if libversion()[1] >= 0x020A0000:  # librdkafka 2.10, the first with the setting
        assert config["metadata.recovery.strategy"] == "none"
    mine = clients.client_config(["a:9092"], {"metadata.recovery.strategy": "rebootstrap"})
    assert mine["metadata.recovery.strategy"] == "rebootstrap"
