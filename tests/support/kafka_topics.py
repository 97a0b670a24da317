"""Kafka topics as the tests use them: a new topic of a random name, messages produced one by one, and everything
a topic holds read back.

These talk to any broker by its `host:port` (the session's Apache Kafka
broker or a test's own), with `confluent_kafka`, imported when called.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, List, Optional, Tuple

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
