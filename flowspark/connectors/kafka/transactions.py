"""`KafkaSink(exactly_once=True)`: each micro-batch's messages committed in one Kafka transaction per worker.

A worker's messages of a micro-batch are produced in a transaction of
its own, under a transactional id that names the run, the output step,
the topic and the worker: `{prefix}-{run}-{step}-{topic}-{worker}`.  The same transaction
commits a marker: the offset `batch + 1` of a consumer group of the same
name, on partition 0 of the sink's topic (Kafka's consumer offsets are
what Kafka Streams commits with its output, too).  So the messages and
the marker become visible together or not at all.

When a micro-batch is written, the partition first starts its producer
(`init_transactions`), which fences any earlier producer of its id (a
task attempt Spark gave up on, a driver that was killed) and aborts that
producer's open transaction, then reads the marker.  A batch the marker
already holds is not produced again (Spark replays a batch whose write
was cut short after some workers committed); any other batch is.  Kafka's
`read_committed` consumers so see every message once.  The run's id
comes from its recovery directory, so a resumed run finds its markers.

A producer outlives its Spark task in its process (`_KEPT`), with the last
batch committed under its id, and the worker's next task there takes it:
no other producer committed since, or it would have been fenced.  One
that was fenced fails at its next call, and the batch's messages go
again through a new producer, which reads the marker first.
"""

from __future__ import annotations

import re
import time
from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark import TaskContext
from typing_extensions import override

from flowspark.connectors.kafka.clients import CONSUMERS, ClientPool, client_config
from flowspark.connectors.kafka.messages import KafkaSinkMessage
from flowspark.engine.sinks.batch_id import SinkBatch, current_sink_batch
from flowspark.outputs import StatefulSinkPartition, WorkerPartitionedSink

_Message = KafkaSinkMessage[Optional[bytes], Optional[bytes]]

_CONNECTION_PREFIXES = (
    "bootstrap.",
    "security.",
    "sasl.",
    "ssl.",
    "ssl_",
    "enable.ssl",
    "socket.",
    "broker.",
    "client.",
    "metadata.",
    "api.version",
    "oauthbearer",
    "https.",
)
"""librdkafka settings about reaching and logging in to the brokers: the ones the marker's consumer takes of `add_config`."""

_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
"""Errors that say another producer of the same transactional id took over."""

_COORDINATOR_BUSY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
)
"""Errors of a group's coordinator that pass: asked again, it answers."""

_COMMIT_TRIES = 3
"""Tries of a commit that fails with an error Kafka calls passing (a coordinator moving, a timeout)."""

_TIMEOUT = 60.0
"""Seconds a transaction call may wait for the brokers before it fails the write."""


_KEPT: ClientPool[Tuple[Producer, Optional[int]]] = ClientPool(lambda kept: None)
"""This process's idle transactional producers, each with the last batch committed under its id while it lived.

The next task of the same worker (or the driver's next run of it) takes
one instead of starting a producer, which costs a round trip to the
transaction coordinator and fences the kept one.  A kept producer that
another one fenced meanwhile fails at its next call; the batch is then
written again through a new producer (`_TransactionalPartition._redo`).
"""


class _Started(Enum):
    """Where a partition's producer for a batch came from."""

    OWN = "own"
    """The one it used for its last batch (the driver's partition, for its whole run)."""
    KEPT = "kept"
    """One this process kept from an earlier task of the worker (`_KEPT`)."""
    NEW = "new"
    """Started now: `init_transactions` fenced every earlier one of its id."""


def _fenced(ex: KafkaException) -> bool:
    """Whether `ex` says the producer can't go on: fenced, or failed for good (librdkafka's "fatal error", which a
    fenced producer raises at its next `produce`)."""
    error = ex.args[0]
    return isinstance(error, KafkaError) and (
        error.code() in _FENCED or error.code() == KafkaError._FATAL or error.fatal()
    )


def _name(text: str) -> str:
    """`text` with what a transactional id or group id should not hold replaced by `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


class _TransactionalPartition(StatefulSinkPartition[_Message, Optional[int]]):
    """One worker's messages: produced in a transaction per micro-batch, committed with the batch's marker at `snapshot()`.

    Its snapshot is the id of the last batch it committed (or found committed).
    """

    def __init__(self, sink: TransactionalKafkaSink, step_id: str, worker: str, resume_state: Optional[int]) -> None:
        self._sink = sink
        self._step_id = step_id
        self._worker = worker
        self._last = resume_state
        self._producer: Optional[Producer] = None
        self._producer_config: Dict[str, Any] = {}
        self._consumer: Optional[Consumer] = None
        self._consumer_config: Dict[str, Any] = {}
        self._batch: Optional[SinkBatch] = None
        self._known: Optional[int] = None
        """The last batch committed under this worker's transactional id, as of the current producer's start."""
        self._open = False
        """A transaction is begun for `_batch` (not yet committed)."""
        self._reused = False
        """The producer was kept from an earlier batch and has not committed since: another may have fenced it."""
        self._written: List[_Message] = []
        """The open transaction's messages, to write again through a new producer if a kept one was fenced."""

    def _where(self) -> str:
        return f"step {self._step_id!r}, Kafka topic {self._sink.topic!r}, worker {self._worker}"

    @override
    def write_batch(self, values: List[_Message]) -> None:
        batch = current_sink_batch()
        if batch is None:
            text = f"{self._where()}: an exactly-once KafkaSink partition is written only by a flowspark run"
            raise RuntimeError(text)
        if batch != self._batch:
            self._abort()
            self._batch, self._written = batch, []
            self._begin()
        for msg in values:
            if not self._open:
                return  # the marker says this batch is in Kafka already
            self._written.append(msg)
            self._produce(msg)

    def _begin(self, new_producer: bool = False) -> None:
        """Begin a transaction for `_batch`, unless it is committed already: with a new producer (which fences earlier
        ones of this worker's id) after reading the marker, or with one kept from an earlier batch."""
        batch = self._batch
        assert batch is not None
        ident = _name(f"{self._sink.prefix}-{batch.run_id}-{self._step_id}-{self._sink.topic}-{self._worker}")
        started = self._connect(ident, new_producer)
        if started is _Started.NEW:
            self._known = self._marker()
        elif started is _Started.KEPT and self._marker() != self._known:
            # Another process's producer committed since this one's last batch, so it fenced this one: start anew.
            self._connect(ident, new_producer=True)
            self._known = self._marker()
        written = self._known
        if written is not None and written > batch.batch_id:
            msg = (
                f"{self._where()}: Kafka holds micro-batch {written} of this run, later than {batch.batch_id}: "
                f"the recovery directory is older than the topic's transactions (consumer group {ident!r})"
            )
            raise RuntimeError(msg)
        if written == batch.batch_id:
            return
        producer = self._producer
        assert producer is not None
        self._call("begin_transaction", producer.begin_transaction)
        self._open = True

    def _redo(self) -> None:
        """The kept producer was fenced: write the open transaction's messages again through a new one (unless the
        producer that fenced it committed this batch)."""
        self._open = False
        self._drop_producer()
        self._begin(new_producer=True)
        if self._open:
            for msg in self._written:
                self._produce(msg)

    def _connect(self, ident: str, new_producer: bool = False) -> _Started:
        """The producer of transactional id `ident` and the consumer of the group that holds the marker; where the
        producer came from.

        A producer this partition used for its last batch needs no marker:
        no other producer of its id committed since its own last commit, or
        it would have been fenced (and its next call fails).  One this
        process kept from another task is checked against the marker.
        """
        base = client_config(self._sink.brokers, self._sink.add_config)
        # Kafka answers a transaction begun right after a commit "concurrent transactions" until the last one's
        # markers are written; librdkafka asks again after `retry.backoff.ms`, 100 ms unless set.
        producer_config = {"retry.backoff.ms": 10, **base, "transactional.id": ident}
        started = _Started.OWN
        if new_producer or self._producer is None or producer_config != self._producer_config:
            self._drop_producer()
            self._producer_config = producer_config
            kept = None if new_producer else _KEPT.take(producer_config)
            if kept is not None:
                (self._producer, self._known), self._reused, started = kept, True, _Started.KEPT
            else:
                self._producer, self._reused, started = Producer(producer_config), False, _Started.NEW
                self._call("init_transactions", self._producer.init_transactions, _TIMEOUT)
        consumer_config = {
            **{k: v for k, v in base.items() if k.startswith(_CONNECTION_PREFIXES)},
            "group.id": ident,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
        if self._consumer is None or consumer_config != self._consumer_config:
            if self._consumer is not None:
                CONSUMERS.give(self._consumer_config, self._consumer)
            self._consumer_config = consumer_config
            self._consumer = CONSUMERS.take(consumer_config) or Consumer(consumer_config)
        return started

    def _marker(self) -> Optional[int]:
        """The last batch this worker's marker holds, or `None`."""
        consumer = self._consumer
        assert consumer is not None
        marker = [TopicPartition(self._sink.topic, 0)]
        deadline = time.monotonic() + _TIMEOUT
        while True:
            try:
                found = consumer.committed(marker, _TIMEOUT)
                break
            except KafkaException as ex:
                # A group's coordinator that is new, moving or loading answers so for a moment.
                if ex.args[0].code() not in _COORDINATOR_BUSY or time.monotonic() > deadline:
                    self._call("committed", self._raise, ex)
                time.sleep(0.1)
        offset = found[0].offset
        return offset - 1 if offset > 0 else None

    def _produce(self, msg: _Message) -> None:
        producer = self._producer
        assert producer is not None
        topic = self._sink.topic if msg.topic is None else msg.topic
        partition = -1 if msg.partition is None else msg.partition
        while True:
            try:
                producer.produce(
                    topic,
                    msg.value,
                    msg.key,
                    partition,
                    timestamp=msg.timestamp,
                    headers=list(msg.headers),
                )
                producer.poll(0)
                return
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
            except KafkaException as ex:
                if self._reused and _fenced(ex):
                    self._redo()  # writes this message too
                    return
                self._call("produce", self._raise, ex)

    @override
    def snapshot(self) -> Optional[int]:
        batch = self._batch
        if batch is None:
            return self._last
        if self._open:
            try:
                self._commit(batch)
            except KafkaException as ex:
                if not (self._reused and _fenced(ex)):
                    self._call("commit_transaction", self._raise, ex)
                self._redo()
                if self._open:
                    self._call("commit_transaction", self._commit, batch)
            self._open, self._reused, self._written = False, False, []
            self._known = batch.batch_id
        self._batch = None
        self._last = batch.batch_id
        return self._last

    def _commit(self, batch: SinkBatch) -> None:
        """Commit the open transaction with `batch`'s marker, trying again while Kafka says the error is passing.

        A message that was not delivered fails the commit (librdkafka
        flushes first).  Raises Kafka's own error.
        """
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        marker = [TopicPartition(self._sink.topic, 0, batch.batch_id + 1)]
        producer.send_offsets_to_transaction(marker, consumer.consumer_group_metadata(), _TIMEOUT)
        for tries in range(1, _COMMIT_TRIES + 1):
            try:
                producer.commit_transaction(_TIMEOUT)
                return
            except KafkaException as ex:
                if tries == _COMMIT_TRIES or not ex.args[0].retriable():
                    raise

    @staticmethod
    def _raise(ex: BaseException) -> None:
        raise ex

    def _call(self, what: str, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)`; a Kafka error fails the write, naming the batch (the open transaction is aborted)."""
        try:
            return func(*args)
        except KafkaException as ex:
            error = ex.args[0]
            batch = "" if self._batch is None else f" of micro-batch {self._batch.batch_id}"
            self._abort()
            self._drop_producer()
            fenced = isinstance(error, KafkaError) and error.code() in _FENCED
            why = " (another producer of this worker's transactional id fenced this one)" if fenced else ""
            msg = f"{self._where()}: Kafka's `{what}`{batch} failed{why}: {error}"
            raise RuntimeError(msg) from ex

    def _abort(self) -> None:
        """Abort the open transaction, if any (a batch cut short); a producer that can't is dropped."""
        if not self._open:
            return
        self._open = False
        producer = self._producer
        if producer is None:
            return
        try:
            producer.abort_transaction(_TIMEOUT)
        except KafkaException:
            self._drop_producer()  # the next batch starts a new one, which aborts what this one left

    def _drop_producer(self) -> None:
        self._producer = None  # librdkafka closes it when the object goes

    @override
    def close(self) -> None:
        self._abort()
        # In a Spark task, kept for the worker's next task in this process; the driver's partition lived for its run.
        keep = TaskContext.get() is not None
        if self._producer is not None:
            if keep:
                _KEPT.give(self._producer_config, (self._producer, self._known))
            self._producer = None
        if self._consumer is not None:
            if keep:
                CONSUMERS.give(self._consumer_config, self._consumer)
            else:
                self._consumer.close()
            self._consumer = None


class TransactionalKafkaSink(WorkerPartitionedSink[_Message, Optional[int]]):
    """The form `KafkaSink(exactly_once=True)` is written in: one transactional partition per worker."""

    lives_in_driver = False

    def __init__(self, brokers: List[str], topic: str, add_config: Dict[str, str], prefix: str) -> None:
        self.brokers = brokers
        self.topic = topic
        self.add_config = add_config
        self.prefix = prefix

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _TransactionalPartition:
        return _TransactionalPartition(self, step_id, for_part, resume_state)
