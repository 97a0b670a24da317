"""`KafkaSink`: messages produced from the Spark tasks that made them, at least once (or, with `exactly_once`, in
Kafka transactions: `transactions`)."""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
)

from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException, Message, Producer
from typing_extensions import override

from flowspark.connectors.kafka.clients import PRODUCERS, client_config
from flowspark.connectors.kafka.messages import KafkaSinkMessage
from flowspark.connectors.kafka.transactions import TransactionalKafkaSink
from flowspark.outputs import DynamicSink, StatelessSinkPartition


class _KafkaSinkPartition(StatelessSinkPartition[KafkaSinkMessage[Optional[bytes], Optional[bytes]]]):
    def __init__(self, producer: Producer, topic: Optional[str], config: Dict[str, Any]) -> None:
        self._producer = producer
        self._topic = topic
        self._config: Optional[Dict[str, Any]] = config
        """The settings `producer` was made with, to hand it back to the pool by them (`None`: let it go)."""

    def _produce(
        self,
        msg: KafkaSinkMessage[Optional[bytes], Optional[bytes]],
        report: Callable[[Optional[ConfluentKafkaError], Optional[Message]], None],
    ) -> None:
        topic = self._topic if msg.topic is None else msg.topic
        if topic is None:
            text = f"No topic to produce to for {msg}"
            raise RuntimeError(text)
        partition = -1 if msg.partition is None else msg.partition
        while True:
            try:
                self._producer.produce(
                    topic,
                    msg.value,
                    msg.key,
                    partition,
                    on_delivery=report,
                    timestamp=msg.timestamp,
                    headers=list(msg.headers),
                )
                return
            except BufferError:
                # The local queue is full: let deliveries drain, then retry.
                self._producer.poll(0.1)

    @override
    def write_batch(self, items: List[KafkaSinkMessage[Optional[bytes], Optional[bytes]]]) -> None:
        failed: List[str] = []

        def report(err: Optional[ConfluentKafkaError], _: Optional[Message]) -> None:
            if err is not None:
                failed.append(f"{err.str()} ({err.name()})")

        for msg in items:
            try:
                self._produce(msg, report)
            except KafkaException as ex:
                # librdkafka refuses some messages at once (a partition the
                # topic's known metadata lacks) and others only in the
                # delivery report, depending on how far metadata arrived:
                # both count as undelivered, and the rest are still sent.
                report(ex.args[0], None)
            self._producer.poll(0)
        self._producer.flush()
        if failed:
            self._config = None  # a producer that failed a delivery is not kept
            text = f"{len(failed)} of {len(items)} Kafka messages were not delivered; first error: {failed[0]}"
            raise RuntimeError(text)

    @override
    def close(self) -> None:
        self._producer.flush()
        if self._config is not None:
            PRODUCERS.give(self._config, self._producer)
        # Let go of the producer now, even if the runtime keeps this
        # partition object around after the run.
        del self._producer


class KafkaSink(DynamicSink[KafkaSinkMessage[Optional[bytes], Optional[bytes]]]):
    """Produce `KafkaSinkMessage`s (key and value `bytes` or `None`) to `topic`.

    `topic=None` means every message names its own topic.  Each micro-batch
    is produced and flushed before it counts as written; a message the
    broker does not acknowledge fails the run.  A broker that can't be
    reached is waited for, up to librdkafka's `message.timeout.ms` (five
    minutes unless `add_config` says otherwise).

    Delivery is at least once, as in Bytewax: a micro-batch that a crash
    interrupts after some of its messages reached Kafka but before
    flowspark recorded the batch as written is produced again, whole, when
    the run resumes, so consumers can see those messages twice.  Nothing
    is lost.

    `exactly_once=True` (not in Bytewax) makes it exactly once for
    `read_committed` consumers: each worker's messages of a micro-batch go
    in one Kafka transaction, committed with a marker of the batch, under
    transactional ids that start with `transactional_id_prefix`
    (`transactions`).  It needs `topic`, whose partition 0 holds the
    markers, and brokers that allow transactions; resume such a run with
    the worker count it ran with.

    Its partitions produce from the Spark tasks that made the messages
    (`lives_in_driver` is false): each task takes a producer from its
    process's pool (`clients.PRODUCERS`), and hands it back flushed.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSource

    flow = Dataflow("kafka_sink_eg")
    words = op.input("inp", flow, TestingSource(["a", "b"]))
    messages = op.map("message", words, lambda w: KafkaSinkMessage(key=None, value=w.encode()))
    op.output("out", messages, KafkaSink(["localhost:9092"], "words"))
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        brokers: Iterable[str],
        topic: Optional[str],
        add_config: Optional[Dict[str, str]] = None,
        *,
        exactly_once: bool = False,
        transactional_id_prefix: str = "flowspark",
    ) -> None:
        self._brokers = list(brokers)
        self._topic = topic
        self._add_config = dict(add_config or {})
        self._exactly_once = exactly_once
        self._prefix = transactional_id_prefix
        if exactly_once and topic is None:
            msg = (
                "KafkaSink(exactly_once=True) needs a `topic`: its partition 0 holds the marker of each committed batch"
            )
            raise ValueError(msg)
        if exactly_once and "transactional.id" in self._add_config:
            msg = (
                "KafkaSink(exactly_once=True) names its transactions itself (one id per worker); "
                "set `transactional_id_prefix` instead of `transactional.id`"
            )
            raise ValueError(msg)

    @override
    def transactional(self) -> Optional[TransactionalKafkaSink]:
        if not self._exactly_once:
            return None
        assert self._topic is not None
        return TransactionalKafkaSink(self._brokers, self._topic, self._add_config, self._prefix)

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _KafkaSinkPartition:
        config = client_config(self._brokers, self._add_config)
        return _KafkaSinkPartition(PRODUCERS.take(config) or Producer(config), self._topic, config)
