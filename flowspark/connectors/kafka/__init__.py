"""Kafka topics as sources and sinks, with Bytewax's names (needs `confluent-kafka`).

Every Kafka partition of the given topics is one source partition, named
`"{partition}-{topic}"`, read through a consumer `assign()`ed to it (no
consumer-group membership, so no join wait and no committed offsets).  Its
snapshot is the offset of the next message, so a resumed run starts from
Spark's checkpoint, never from a consumer group.

The partitions are listed on the driver and read in Spark's executors
(`lives_in_driver` is false): for each micro-batch, the task that owns a
partition assigns a consumer to it at the partition's snapshot, reads, and
hands the consumer back to its process's pool (`clients.CONSUMERS`) for
the next task, so messages reach the steps without passing through the
driver, and a live flow does not connect anew for every micro-batch.
A tailing partition that caught up gets no task until the broker reports
messages past it (`KafkaSource.has_news`, asked by the planner), so an
idle flow runs no micro-batches.  Its lag travels back to the driver
with the task's report (`KafkaSource.note_lag`).

Each read is bounded by the partition's end offset (high watermark): the one
the broker reports when the partition is opened, then the one carried by the
consumer's latest fetch response (so keeping it current costs no request).
A partition never emits a message at or past the end offset it knows, and
with `tail=False` it ends once it has caught up with it.

A broker that can't be reached (down, restarting, cut off) is waited for,
not raised: a partition then reads nothing, a caught-up one gets no task
until the broker answers again, and each process says so in one line when
the outage begins and one when it ends (`BrokerOutage`).  A partition
that can't be opened without the broker (one starting at a logical
offset, or read with `tail=False`, which ends at the end offset the broker
gives) fails to open instead, naming the topic and partition.

Messages deleted before the flow read them (retention ran out, or
`DeleteRecords`) are a `KafkaDataLoss` error naming the partition and the
offsets lost, as Spark's Kafka source fails on data loss: a resumed run
never skips them silently.  A flow that would rather go on sets
librdkafka's `auto.offset.reset` in `add_config`: `earliest` goes on at
the oldest message kept, `latest` at the end.

`KafkaSink` produces `KafkaSinkMessage`s; see its docstring for what a
restart may repeat, and `transactions` for `exactly_once=True`.  `flowspark.connectors.kafka.operators` wraps both with
(de)serialization steps and an error stream.

The package's modules: `messages` (what the steps carry), `source`,
`sink`, `transactions` (the exactly-once sink), `outage`, `clients` (the consumers and producers kept per Python
worker), `consumer_lag`, `shipped_files`, and the steps' `operators`,
`serde` and `registry`; everything public is imported here.
"""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

from flowspark.connectors.kafka.messages import K2 as K2
from flowspark.connectors.kafka.messages import V2 as V2
from flowspark.connectors.kafka.messages import K as K
from flowspark.connectors.kafka.messages import K_co as K_co
from flowspark.connectors.kafka.messages import KafkaError, KafkaSinkMessage, KafkaSourceMessage
from flowspark.connectors.kafka.messages import V as V
from flowspark.connectors.kafka.messages import V_co as V_co
from flowspark.connectors.kafka.messages import _message as _message  # what earlier pickles of messages name
from flowspark.connectors.kafka.sink import KafkaSink
from flowspark.connectors.kafka.source import KafkaDataLoss, KafkaSource

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "KafkaDataLoss",
    "KafkaError",
    "KafkaSink",
    "KafkaSinkMessage",
    "KafkaSource",
    "KafkaSourceMessage",
]
