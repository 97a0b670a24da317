"""`KafkaSource`: every partition of the given topics, read in the Spark tasks that own them (see the package doc)."""

from __future__ import annotations

import time
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Optional,
    Tuple,
    Union,
)

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.admin import AdminClient
from typing_extensions import override

from flowspark._notices import say
from flowspark.connectors.kafka.clients import CONSUMERS, client_config
from flowspark.connectors.kafka.consumer_lag import CONSUMER_LAG
from flowspark.connectors.kafka.messages import KafkaError, KafkaSourceMessage, RawItem, source_message
from flowspark.connectors.kafka.outage import BrokerOutage, refused, unreachable
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition

_TIMEOUT = 10.0
"""Seconds to wait for the broker's answer about topics or offsets."""

_PROBE_TIMEOUT = 2.0
"""Seconds `has_news` waits for an end offset: a broker that does not answer fails the partition's task instead."""

_WAIT = 0.2
"""Seconds a partition waits for messages it knows are there but were not fetched yet."""

_REOPEN_WAIT = 1.0
"""Seconds between two tries to open a partition while its broker can't be reached."""


class KafkaDataLoss(RuntimeError):
    """A partition no longer holds messages the flow has not read yet: they were deleted before it got to them."""


def _check_iterable(name: str, value: Iterable[str]) -> None:
    if isinstance(value, str):
        msg = f"{name} must be an iterable and not a string"
        raise TypeError(msg)


class _KafkaSourcePartition(StatefulSourcePartition[RawItem, Optional[int]]):
    """One Kafka partition; emits messages below the end offset, snapshots the next offset.

    `_offset` is negative only while a logical starting offset other than
    the beginning or the end (say, `OFFSET_STORED`) is still unresolved;
    the first message resolves it.
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        index: int,
        offset: int,
        tail: bool,
        batch_size: int,
        raise_on_errors: bool,
        outage: BrokerOutage,
        step_id: str = "",
        on_data_loss: str = "error",
        config: Optional[Dict[str, Any]] = None,
    ) -> None:
        self._step_id = step_id
        self._on_data_loss = on_data_loss
        self._consumer = consumer
        self._config = config
        """The settings `consumer` was made with, to hand it back to the pool by them (`None`: close it instead)."""
        self._tp = TopicPartition(topic, index)
        self._tail = tail
        self._batch_size = batch_size
        self._raise = raise_on_errors
        self._outage = outage
        self._pending: List[Message] = []
        if offset >= 0 and tail:
            # The end offset only bounds this read: without the broker, it
            # is the start (nothing is read) until a fetch carries the end.
            low, self._end = self._watermarks_if_reachable(offset)
        else:
            low, self._end = self._watermarks()
        self._offset = {OFFSET_BEGINNING: low, OFFSET_END: self._end}.get(offset, offset)
        if 0 <= self._offset < low:
            self._offset = self._past_lost_messages(low)
        consumer.assign([TopicPartition(topic, index, self._offset)])

    def _watermarks_if_reachable(self, offset: int) -> Tuple[int, int]:
        try:
            found = self._watermarks()
        except KafkaException as ex:
            if not unreachable(ex.args[0]):
                raise
            self._outage.began(ex.args[0])
            return offset, offset
        self._outage.ended()
        return found

    def _where(self) -> str:
        return f"Kafka topic {self._tp.topic!r} partition {self._tp.partition}"

    def _oldest_past_a_loss(self, err: ConfluentKafkaError) -> Optional[int]:
        """The partition's oldest offset, if `err` says the next offset, a known one, is no longer there."""
        if err.code() != ConfluentKafkaError._AUTO_OFFSET_RESET or self._offset < 0:
            return None
        low = self._watermarks()[0]
        return low if low > self._offset else None

    def _past_lost_messages(self, low: int) -> int:
        """Where to go on when the messages from the next offset up to `low` are gone: as `auto.offset.reset` says,
        else a `KafkaDataLoss`."""
        if self._on_data_loss in ("earliest", "smallest", "beginning"):
            return low
        if self._on_data_loss in ("latest", "largest", "end"):
            return self._end
        raise self._data_loss(low)

    def _data_loss(self, low: int) -> KafkaDataLoss:
        """The error for the messages from the next offset up to `low`, deleted unread; the consumer is not kept."""
        self._config = None
        return KafkaDataLoss(
            f"{self._where()} no longer holds offsets {self._offset} to {low - 1}, which this flow has not read: "
            f"they were deleted (retention or DeleteRecords) before it got to them, and its oldest message is now at "
            f"offset {low}. To go on without them, set auto.offset.reset in the source's add_config to 'earliest' "
            "(the oldest message kept) or 'latest' (the end)"
        )

    def _watermarks(self, cached: bool = False) -> Tuple[int, int]:
        """The partition's first and end offsets: asked of the broker, or as of the last fetch."""
        low, high = self._consumer.get_watermark_offsets(self._tp, timeout=_TIMEOUT, cached=cached)
        return low, high

    def _error(self, err: ConfluentKafkaError, msg: Optional[Message]) -> KafkaError[Optional[bytes], Optional[bytes]]:
        """Raise `err` or turn it into an error item, as `raise_on_errors` says."""
        self._config = None  # a consumer that met an error is not kept
        if self._raise:
            text = f"error consuming from {self._where()}: {err.str()} ({err.name()})"
            raise RuntimeError(text)
        source = source_message(msg) if msg is not None else None
        if source is None or source.topic is None:
            source = KafkaSourceMessage(
                None, None, topic=self._tp.topic, partition=self._tp.partition, offset=self._offset
            )
        return KafkaError(err, source)

    def _fetch(self, want: int) -> List[Message]:
        """Up to `want` messages and events; wait a little only if messages are known to be there."""
        if self._pending:
            got, self._pending = self._pending, []
            return got
        got = self._consumer.consume(want, 0)
        if not got and not self._caught_up():
            first = self._consumer.poll(_WAIT)
            if first is not None:
                got = [first, *self._consumer.consume(want - 1, 0)] if want > 1 else [first]
        return got

    def _caught_up(self) -> bool:
        return self._offset >= 0 and self._offset >= self._end

    @override
    def next_batch(self) -> List[RawItem]:
        if self._caught_up():
            try:
                self._end = max(self._end, self._watermarks(cached=True)[1])
            except KafkaException as ex:
                return [self._error(ex.args[0], None)]
            if self._caught_up() and not self._tail:
                raise StopIteration
        room = self._end - self._offset if self._offset >= 0 else self._batch_size
        fetched = self._fetch(max(1, min(self._batch_size, room)))
        batch: List[RawItem] = []
        for i, msg in enumerate(fetched):
            err = msg.error()
            offset = msg.offset()
            if msg.topic() is not None and (msg.topic(), msg.partition()) != (self._tp.topic, self._tp.partition):
                continue  # left over from the partition the kept consumer read before
            if err is None and offset is not None:
                if self._offset >= 0 and offset >= self._end:
                    self._pending = fetched[i:]
                    break
                batch.append(source_message(msg))
                self._offset = offset + 1
            elif err is not None and err.code() == ConfluentKafkaError._PARTITION_EOF:
                # Every message before the end was delivered ahead of this
                # event, so skip whatever offsets (transaction markers) remain.
                if offset is not None and offset >= 0:
                    self._offset = max(self._offset, offset)
                    self._end = max(self._end, offset)
            elif err is not None and unreachable(err):
                self._outage.began(err)
            elif err is not None and (oldest := self._oldest_past_a_loss(err)) is not None:
                raise self._data_loss(oldest)
            elif err is not None:
                batch.append(self._error(err, msg))
        if batch:
            self._outage.ended()
        lag = self.lag()
        if lag is not None:
            CONSUMER_LAG.set(self._step_id, self._tp.topic, self._tp.partition, lag)
        return batch

    @override
    def snapshot(self) -> Optional[int]:
        return self._offset

    def lag(self) -> Optional[int]:
        """Messages between the next offset and the partition's end as of the last fetch (for `/metrics`)."""
        if self._offset < 0:
            return None
        return max(0, max(self._end, self._watermarks(cached=True)[1]) - self._offset)

    @override
    def close(self) -> None:
        if self._config is None:
            self._consumer.close()
            return
        self._consumer.unassign()
        CONSUMERS.give(self._config, self._consumer)


class KafkaSource(FixedPartitionedSource[RawItem, Optional[int]]):
    """Read Kafka topics: one source partition per Kafka partition, resumed at the next offset.

    Partitions are read in the Spark tasks that own them, on the executors,
    which must have `confluent-kafka` and reach the brokers.

    Emits `KafkaSourceMessage`s whose key and value are `bytes` (or `None`).
    `tail=False` ends each partition once it has caught up with the
    partition's end offset; `starting_offset` (`OFFSET_BEGINNING`, the
    default, or `OFFSET_END`) applies only where there is no resume state.
    `add_config` adds librdkafka settings for the consumers and the admin
    client.  A topic that does not exist is an error: topics are not
    auto-created unless `add_config` sets `allow.auto.create.topics`.  Read
    errors raise a `RuntimeError` naming the topic and partition, or, with
    `raise_on_errors=False`, are emitted as `KafkaError` items.

    `commit_offsets=True` (not in Bytewax, which commits nothing) commits
    each partition's next offset to the consumer group `add_config` names
    (`group.id`) once a micro-batch is in the checkpoint, so that
    `kafka-consumer-groups --describe` and lag exporters show where the flow
    is.  Recovery never reads them: it resumes from the checkpoint.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSource
    from flowspark.connectors.stdio import StdOutSink
    from flowspark.dataflow import Dataflow

    # Every message of topic "clicks" so far, then the run ends (tail=False).
    flow = Dataflow("kafka_source_eg")
    messages = op.input("inp", flow, KafkaSource(["localhost:9092"], ["clicks"], tail=False))
    op.output("out", op.map("value", messages, lambda m: m.value.decode()), StdOutSink())
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        brokers: Iterable[str],
        topics: Iterable[str],
        tail: bool = True,
        starting_offset: int = OFFSET_BEGINNING,
        add_config: Optional[Dict[str, str]] = None,
        batch_size: int = 1000,
        raise_on_errors: bool = True,
        *,
        commit_offsets: bool = False,
    ) -> None:
        _check_iterable("brokers", brokers)
        _check_iterable("topics", topics)
        if commit_offsets and not (add_config or {}).get("group.id"):
            msg = "KafkaSource(commit_offsets=True) commits to the consumer group `add_config` names: set `group.id`"
            raise ValueError(msg)
        self._commit_offsets = commit_offsets
        self._committer: Optional[Consumer] = None
        """The consumer `committed` commits through, made at its first call (in the planner); never pickled."""
        self._commit_failed = False
        self._brokers = list(brokers)
        self._topics = list(topics)
        self._tail = tail
        self._starting_offset = starting_offset
        self._add_config = dict(add_config or {})
        self._batch_size = batch_size
        self._raise_on_errors = raise_on_errors
        self._probe: Optional[Consumer] = None
        """The consumer `has_news` asks, made at its first call (in the planner); never pickled."""

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_probe"] = None
        state["_committer"] = None
        return state

    def _config(self, base: Dict[str, Any]) -> Dict[str, Any]:
        return client_config(self._brokers, base, self._add_config)

    def _partitions(self) -> Dict[str, Union[List[int], ConfluentKafkaError]]:
        """Each topic's partition numbers, or why they could not be listed (a refused login or certificate rather than
        the transport failure it leads to)."""
        refusals: List[ConfluentKafkaError] = []

        def note(err: ConfluentKafkaError) -> None:
            if refused(err):
                refusals.append(err)

        client = AdminClient(self._config({"allow.auto.create.topics": False, "error_cb": note}))
        found: Dict[str, Union[List[int], ConfluentKafkaError]] = {}
        for topic in self._topics:
            try:
                meta = client.list_topics(topic, timeout=_TIMEOUT).topics[topic]
                found[topic] = sorted(meta.partitions) if meta.error is None else meta.error
            except KafkaException as ex:
                client.poll(0)  # serves the errors that led to this one to `note`
                found[topic] = refusals[-1] if refusals else ex.args[0]
        return found

    @override
    def list_parts(self) -> List[str]:
        # The admin client is gone before anything is raised, so a kept
        # exception does not keep a client (and its connections) alive.
        parts: List[str] = []
        for topic, found in self._partitions().items():
            if isinstance(found, ConfluentKafkaError):
                msg = f"error listing partitions for Kafka topic {topic!r}: {found.str()}"
                raise RuntimeError(msg)
            parts.extend(f"{index}-{topic}" for index in found)
        return parts

    def _topic_partition(self, for_part: str) -> TopicPartition:
        index, topic = for_part.split("-", 1)
        if topic not in self._topics:
            msg = f"partition {for_part!r} is of topic {topic!r}, which is not one of {self._topics!r}"
            raise ValueError(msg)
        return TopicPartition(topic, int(index))

    def _outage(self) -> BrokerOutage:
        return BrokerOutage(self._config({})["bootstrap.servers"])

    def _consumer_config(self) -> Dict[str, Any]:
        return self._config(
            {
                "group.id": "flowspark-unused",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                # A fetch the broker holds open delays the next request on its
                # connection (a kept consumer's offsets request for its next
                # partition): hold it briefly; a task reads only while it is due.
                "fetch.wait.max.ms": 10,
            }
        )

    def has_news(self, for_part: str, resume_state: Optional[int]) -> bool:
        """Whether partition `for_part`, caught up at `resume_state`, has messages past it.

        Asked by flowspark's planner for a tailing partition whose last
        reading caught up, so that it gets a Spark task (and an idle flow a
        micro-batch) only once the broker's end offset moved past it.  One
        offsets request; a broker that can't be reached means no news (and
        a line saying so), other errors are raised (the planner then lets
        the task meet them).
        """
        tp = self._topic_partition(for_part)
        if resume_state is None or resume_state < 0:
            return True
        if self._probe is None:
            self._probe = Consumer(self._consumer_config())
        outage = self._outage()
        try:
            high: int = self._probe.get_watermark_offsets(tp, timeout=_PROBE_TIMEOUT)[1]
        except KafkaException as ex:
            if not unreachable(ex.args[0]):
                raise
            outage.began(ex.args[0])
            return False
        outage.ended()
        return high > resume_state

    def committed(self, step_id: str, snapshots: Dict[str, Optional[int]]) -> None:
        """With `commit_offsets`, commit each partition's next offset (its snapshot) to the consumer group.

        Called by flowspark's planner once a micro-batch is in the
        checkpoint.  A commit that fails (a broker down) warns once and the
        run goes on; the next micro-batch's commit brings the group up to date.
        """
        if not self._commit_offsets:
            return
        offsets = [
            TopicPartition(tp.topic, tp.partition, offset)
            for name, offset in snapshots.items()
            if offset is not None and offset >= 0
            for tp in [self._topic_partition(name)]
        ]
        if not offsets:
            return
        group = self._add_config["group.id"]
        try:
            if self._committer is None:
                self._committer = Consumer(self._consumer_config())
            self._committer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as ex:
            if not self._commit_failed:
                say(
                    f"flowspark: step {step_id!r} could not commit its offsets to Kafka consumer group {group!r} "
                    f"({ex.args[0].str()}); the run goes on, and resumes from its checkpoint, not from the group"
                )
            self._commit_failed = True
            return
        self._commit_failed = False

    def note_lag(self, step_id: str, for_part: str, lag: int) -> None:
        """Show a partition's lag, as the task that read it reported, in Bytewax's gauge (in the driver)."""
        tp = self._topic_partition(for_part)
        CONSUMER_LAG.set(step_id, tp.topic, tp.partition, lag)

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _KafkaSourcePartition:
        """Partition `for_part` at `resume_state`; while its broker can't be reached, wait for it, saying so.

        A partition is built again in every micro-batch and in every retried
        task (a lost executor's, say), so a broker that is down or restarting
        then must not end the run: the task waits, as a tailing read does.
        A broker that was never there fails the run at its start instead,
        when `list_parts` asks it for the topics' partitions.
        """
        tp = self._topic_partition(for_part)
        config = self._consumer_config()
        kept = CONSUMERS.take(config)
        if kept is not None:
            try:
                return self._open(kept, config, step_id, tp, resume_state)
            except KafkaException:
                pass  # a kept consumer may know the brokers as they were: a new one asks again
        outage = self._outage()
        while True:
            try:
                part = self._open(Consumer(config), config, step_id, tp, resume_state)
            except KafkaException as ex:
                if not unreachable(ex.args[0]):
                    msg = f"error opening Kafka topic {tp.topic!r} partition {tp.partition}: {ex.args[0].str()}"
                    raise RuntimeError(msg) from ex
                outage.began(ex.args[0])
                time.sleep(_REOPEN_WAIT)
                continue
            outage.ended()
            return part

    def _open(
        self, consumer: Consumer, config: Dict[str, Any], step_id: str, tp: TopicPartition, resume_state: Optional[int]
    ) -> _KafkaSourcePartition:
        """Partition `tp` read through `consumer` (made with `config`), which is closed if that fails."""
        offset = self._starting_offset if resume_state is None else resume_state
        try:
            return _KafkaSourcePartition(
                consumer,
                tp.topic,
                tp.partition,
                offset,
                self._tail,
                self._batch_size,
                self._raise_on_errors,
                self._outage(),
                step_id,
                self._add_config.get("auto.offset.reset", "error"),
                config,
            )
        except BaseException:
            consumer.close()
            raise
