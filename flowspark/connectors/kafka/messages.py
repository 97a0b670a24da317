"""The messages Kafka's steps carry: `KafkaSourceMessage` (read), `KafkaSinkMessage` (to produce), `KafkaError`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (
    Any,
    Generic,
    List,
    Optional,
    SupportsIndex,
    Tuple,
    TypeVar,
    Union,
)

from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import Message

K = TypeVar("K")
"""Type of a message's key."""

V = TypeVar("V")
"""Type of a message's value."""

K_co = TypeVar("K_co", covariant=True)
"""Type of a sink message's key."""

V_co = TypeVar("V_co", covariant=True)
"""Type of a sink message's value."""

K2 = TypeVar("K2")
"""Type of the key of a message after a step changed it."""

V2 = TypeVar("V2")
"""Type of the value of a message after a step changed it."""


@dataclass(frozen=True)
class KafkaSourceMessage(Generic[K, V]):
    """A message read from Kafka, with where it came from."""

    key: K
    value: V

    topic: Optional[str] = field(default=None)
    headers: List[Tuple[str, bytes]] = field(default_factory=list)
    latency: Optional[float] = field(default=None)
    offset: Optional[int] = field(default=None)
    partition: Optional[int] = field(default=None)
    timestamp: Optional[Tuple[int, int]] = field(default=None)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Union[str, Tuple[Any, ...]]:
        """Pickle as the fields in order, rebuilt by `_message`.

        The default pickles each message's `__dict__`, field names included:
        half as many bytes this way, and half the time to unpickle, for
        items that usually cross between processes twice.  Subclasses
        pickle the default way, which keeps their own fields.
        """
        if type(self) is not KafkaSourceMessage:
            return super().__reduce_ex__(protocol)
        fields = self.__dict__
        return (
            _message,
            (
                fields["key"],
                fields["value"],
                fields["topic"],
                fields["headers"],
                fields["latency"],
                fields["offset"],
                fields["partition"],
                fields["timestamp"],
            ),
        )

    def to_sink(self) -> KafkaSinkMessage[K, V]:
        """The same key, value and headers as a message to produce."""
        return KafkaSinkMessage(key=self.key, value=self.value, headers=self.headers)

    def _with_key_and_value(self, key: K2, value: V2) -> KafkaSourceMessage[K2, V2]:
        return KafkaSourceMessage(
            key, value, self.topic, self.headers, self.latency, self.offset, self.partition, self.timestamp
        )

    def _with_key(self, key: K2) -> KafkaSourceMessage[K2, V]:
        return self._with_key_and_value(key, self.value)

    def _with_value(self, value: V2) -> KafkaSourceMessage[K, V2]:
        return self._with_key_and_value(self.key, value)


@dataclass(frozen=True)
class KafkaError(Generic[K, V]):
    """An error met while reading (or deserializing) a message."""

    err: ConfluentKafkaError
    """The error, as confluent-kafka reports it."""

    msg: KafkaSourceMessage[K, V]
    """The message the error came with (only its topic and partition, if none)."""


@dataclass(frozen=True)
class KafkaSinkMessage(Generic[K_co, V_co]):
    """A message to produce; `topic=None` uses the sink's topic, `partition=None` the partitioner."""

    key: K_co
    value: V_co

    topic: Optional[str] = None
    headers: List[Tuple[str, bytes]] = field(default_factory=list)
    partition: Optional[int] = None
    timestamp: int = 0

    def __reduce_ex__(self, protocol: SupportsIndex) -> Union[str, Tuple[Any, ...]]:
        """Pickle as the fields in order, rebuilt by `_sink_message` (as `KafkaSourceMessage` pickles): an
        exactly-once `KafkaSink`'s messages cross to the task that writes their worker's transaction."""
        if type(self) is not KafkaSinkMessage:
            return super().__reduce_ex__(protocol)
        fields = self.__dict__
        return (
            _sink_message,
            (
                fields["key"],
                fields["value"],
                fields["topic"],
                fields["headers"],
                fields["partition"],
                fields["timestamp"],
            ),
        )

    def _with_key_and_value(self, key: K2, value: V2) -> KafkaSinkMessage[K2, V2]:
        return KafkaSinkMessage(key, value, self.topic, self.headers, self.partition, self.timestamp)

    def _with_key(self, key: K2) -> KafkaSinkMessage[K2, V_co]:
        return self._with_key_and_value(key, self.value)

    def _with_value(self, value: V2) -> KafkaSinkMessage[K_co, V2]:
        return self._with_key_and_value(self.key, value)


RawMessage = KafkaSourceMessage[Optional[bytes], Optional[bytes]]
RawItem = Union[RawMessage, KafkaError[Optional[bytes], Optional[bytes]]]


def _message(
    key: Any,
    value: Any,
    topic: Optional[str],
    headers: Any,
    latency: Optional[float],
    offset: Optional[int],
    partition: Optional[int],
    timestamp: Optional[Tuple[int, int]],
) -> KafkaSourceMessage[Any, Any]:
    """A `KafkaSourceMessage` built the way unpickling builds one: its `__dict__` set at once.

    The frozen dataclass's `__init__` sets each field through
    `object.__setattr__`, three times as slow, and this runs once per
    message consumed and once per message unpickled.
    """
    made: KafkaSourceMessage[Any, Any] = _new(KafkaSourceMessage)
    fields = made.__dict__
    fields["key"] = key
    fields["value"] = value
    fields["topic"] = topic
    fields["headers"] = headers
    fields["latency"] = latency
    fields["offset"] = offset
    fields["partition"] = partition
    fields["timestamp"] = timestamp
    return made


def _sink_message(
    key: Any, value: Any, topic: Optional[str], headers: Any, partition: Optional[int], timestamp: int
) -> KafkaSinkMessage[Any, Any]:
    """A `KafkaSinkMessage` built the way unpickling builds one: its `__dict__` set at once (see `_message`)."""
    made: KafkaSinkMessage[Any, Any] = _new(KafkaSinkMessage)
    fields = made.__dict__
    fields["key"] = key
    fields["value"] = value
    fields["topic"] = topic
    fields["headers"] = headers
    fields["partition"] = partition
    fields["timestamp"] = timestamp
    return made


_new = object.__new__


def source_message(msg: Message) -> RawMessage:
    """A consumed message as a `KafkaSourceMessage`."""
    return _message(
        msg.key(),
        msg.value(),
        msg.topic(),
        msg.headers() or [],
        msg.latency(),
        msg.offset(),
        msg.partition(),
        msg.timestamp(),
    )
