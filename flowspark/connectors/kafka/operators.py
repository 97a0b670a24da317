"""Kafka operators, with Bytewax's names: `input`, `output` and (de)serialization steps.

Import them as `from flowspark.connectors.kafka import operators as kop`.
Steps that can fail per message (`input`, `deserialize*`) return a
`KafkaOpOut` whose `errs` stream carries `KafkaError` items holding the
message that failed; serialization failures fail the run instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar, Union, cast

from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.serialization import Deserializer, MessageField, SerializationContext, Serializer

import flowspark.operators as op
from flowspark.connectors.kafka import (
    K2,
    V2,
    K,
    KafkaError,
    KafkaSink,
    KafkaSinkMessage,
    KafkaSource,
    KafkaSourceMessage,
    V,
)
from flowspark.dataflow import Dataflow, Stream, operator

__all__ = [
    "KafkaOpOut",
    "deserialize",
    "deserialize_key",
    "deserialize_value",
    "input",
    "output",
    "serialize",
    "serialize_key",
    "serialize_value",
]

X = TypeVar("X")
"""Type of the items that went through."""

E = TypeVar("E")
"""Type of the error items."""

_Bytes = Optional[bytes]


@dataclass(frozen=True)
class KafkaOpOut(Generic[X, E]):
    """The two streams of a Kafka step: what went through, and the errors."""

    oks: Stream[X]
    """Messages read or converted without error."""

    errs: Stream[E]
    """`KafkaError`s, each with the message it concerns."""


def _ctx(topic: Optional[str], part: MessageField) -> SerializationContext:
    # A message may carry no topic; serializers get `None` then, as in Bytewax.
    return SerializationContext(cast(str, topic), part)


def _is_message(item: object) -> bool:
    return isinstance(item, KafkaSourceMessage)


@operator
def _kafka_error_split(
    step_id: str, up: Stream[Union[KafkaSourceMessage[K2, V2], KafkaError[K, V]]]
) -> KafkaOpOut[KafkaSourceMessage[K2, V2], KafkaError[K, V]]:
    """Messages to `oks`, `KafkaError`s to `errs`."""
    split = op.branch("branch", up, _is_message)
    return KafkaOpOut(
        cast(Stream[KafkaSourceMessage[K2, V2]], split.trues), cast(Stream[KafkaError[K, V]], split.falses)
    )


def _as_sink(msg: Union[KafkaSourceMessage[K, V], KafkaSinkMessage[K, V]]) -> KafkaSinkMessage[K, V]:
    return msg.to_sink() if isinstance(msg, KafkaSourceMessage) else msg


@operator
def _to_sink(
    step_id: str, up: Stream[Union[KafkaSourceMessage[K, V], KafkaSinkMessage[K, V]]]
) -> Stream[KafkaSinkMessage[K, V]]:
    """Turn source messages into sink messages (`to_sink`); pass sink messages on."""
    return op.map("map", up, _as_sink)


@operator
def input(  # noqa: A001 - Bytewax's operator name
    step_id: str,
    flow: Dataflow,
    *,
    brokers: List[str],
    topics: List[str],
    tail: bool = True,
    starting_offset: int = OFFSET_BEGINNING,
    add_config: Optional[Dict[str, str]] = None,
    batch_size: int = 1000,
    commit_offsets: bool = False,
) -> KafkaOpOut[KafkaSourceMessage[_Bytes, _Bytes], KafkaError[_Bytes, _Bytes]]:
    """Read Kafka topics (see `KafkaSource`, also for `commit_offsets`, not in Bytewax); read errors go to `errs`
    instead of failing the run.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.kafka import operators as kop
    from flowspark.connectors.stdio import StdOutSink
    from flowspark.dataflow import Dataflow

    flow = Dataflow("kop_input_eg")
    clicks = kop.input("clicks", flow, brokers=["localhost:9092"], topics=["clicks"])
    op.output("out", op.map("value", clicks.oks, lambda m: m.value), StdOutSink())
    op.inspect("errors", clicks.errs)  # messages that could not be read
    ```
    """
    source = KafkaSource(
        brokers,
        topics,
        tail,
        starting_offset,
        add_config,
        batch_size,
        raise_on_errors=False,
        commit_offsets=commit_offsets,
    )
    return op.input("kafka_input", flow, source).then(_kafka_error_split, "split_err")


@operator
def output(
    step_id: str,
    up: Stream[Union[KafkaSourceMessage[_Bytes, _Bytes], KafkaSinkMessage[_Bytes, _Bytes]]],
    *,
    brokers: List[str],
    topic: str,
    add_config: Optional[Dict[str, str]] = None,
    exactly_once: bool = False,
    transactional_id_prefix: str = "flowspark",
) -> None:
    """Produce messages to `topic` (a message's own `topic` wins); see `KafkaSink` for the guarantee and for
    `exactly_once` (not in Bytewax).

    ```python
    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSinkMessage
    from flowspark.connectors.kafka import operators as kop
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSource

    flow = Dataflow("kop_output_eg")
    words = op.input("inp", flow, TestingSource([b"a", b"b"]))
    messages = op.map("message", words, lambda w: KafkaSinkMessage(None, w))
    kop.output("out", messages, brokers=["localhost:9092"], topic="words")
    ```
    """
    sink = KafkaSink(
        brokers, topic, add_config, exactly_once=exactly_once, transactional_id_prefix=transactional_id_prefix
    )
    _to_sink("to_sink", up).then(op.output, "kafka_output", sink)


class _Failed(Exception):
    """A (de)serializer raised; `code` tells which part of the message it was."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _converter(
    convert: Callable[[KafkaSourceMessage[Any, Any]], KafkaSourceMessage[Any, Any]],
) -> Callable[[KafkaSourceMessage[Any, Any]], Union[KafkaSourceMessage[Any, Any], KafkaError[Any, Any]]]:
    """Wrap `convert` so that its exception becomes a `KafkaError` holding the original message."""

    def shim_mapper(msg: KafkaSourceMessage[Any, Any]) -> Union[KafkaSourceMessage[Any, Any], KafkaError[Any, Any]]:
        try:
            return convert(msg)
        except _Failed as ex:
            return KafkaError(ConfluentKafkaError(ex.code, str(ex.__cause__)), msg)

    return shim_mapper


def _decode_key(deserializer: Deserializer, msg: KafkaSourceMessage[Any, Any]) -> Any:
    try:
        return deserializer(msg.key, _ctx(msg.topic, MessageField.KEY))
    except Exception as ex:
        raise _Failed(ConfluentKafkaError._KEY_DESERIALIZATION) from ex


def _decode_value(deserializer: Deserializer, msg: KafkaSourceMessage[Any, Any]) -> Any:
    try:
        return deserializer(msg.value, _ctx(msg.topic, MessageField.VALUE))
    except Exception as ex:
        raise _Failed(ConfluentKafkaError._VALUE_DESERIALIZATION) from ex


@operator
def deserialize_key(
    step_id: str,
    up: Stream[KafkaSourceMessage[_Bytes, V]],
    deserializer: Deserializer,
) -> KafkaOpOut[KafkaSourceMessage[object, V], KafkaError[_Bytes, V]]:
    """Decode each message's key; messages whose key fails to decode go to `errs`."""

    def convert(msg: KafkaSourceMessage[Any, Any]) -> KafkaSourceMessage[Any, Any]:
        return msg._with_key(_decode_key(deserializer, msg))

    return op.map("map", up, _converter(convert)).then(_kafka_error_split, "split")


@operator
def deserialize_value(
    step_id: str,
    up: Stream[KafkaSourceMessage[K, _Bytes]],
    deserializer: Deserializer,
) -> KafkaOpOut[KafkaSourceMessage[K, object], KafkaError[K, _Bytes]]:
    """Decode each message's value; messages whose value fails to decode go to `errs`.

    ```python
    from confluent_kafka.serialization import StringDeserializer

    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSourceMessage
    from flowspark.connectors.kafka import operators as kop
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("deserialize_eg")
    raw = op.input("inp", flow, TestingSource([KafkaSourceMessage(None, b"hello", topic="t")]))
    decoded = kop.deserialize_value("decode", raw, StringDeserializer())
    out = []
    op.output("out", op.map("value", decoded.oks, lambda m: m.value), TestingSink(out))
    run_main(flow)
    assert out == ["hello"]
    ```
    """

    def convert(msg: KafkaSourceMessage[Any, Any]) -> KafkaSourceMessage[Any, Any]:
        return msg._with_value(_decode_value(deserializer, msg))

    return op.map("map", up, _converter(convert)).then(_kafka_error_split, "split_err")


@operator
def deserialize(
    step_id: str,
    up: Stream[KafkaSourceMessage[_Bytes, _Bytes]],
    *,
    key_deserializer: Deserializer,
    val_deserializer: Deserializer,
) -> KafkaOpOut[KafkaSourceMessage[object, object], KafkaError[_Bytes, _Bytes]]:
    """Decode keys and values; a message failing either goes to `errs` unchanged (key first)."""

    def convert(msg: KafkaSourceMessage[Any, Any]) -> KafkaSourceMessage[Any, Any]:
        key = _decode_key(key_deserializer, msg)
        return msg._with_key_and_value(key, _decode_value(val_deserializer, msg))

    return op.map("map", up, _converter(convert)).then(_kafka_error_split, "split_err")


def _encoded(serializer: Serializer, obj: Any, topic: Optional[str], part: MessageField) -> bytes:
    data = serializer(obj, _ctx(topic, part))
    if data is None:
        msg = f"serializer {serializer!r} returned `None` for the message {part.value} {obj!r}"
        raise TypeError(msg)
    return data


@operator
def serialize_key(
    step_id: str,
    up: Stream[Union[KafkaSourceMessage[Any, V], KafkaSinkMessage[Any, V]]],
    serializer: Serializer,
) -> Stream[KafkaSinkMessage[bytes, V]]:
    """Encode each message's key (source messages become sink messages); a failure fails the run."""

    def shim_mapper(msg: KafkaSinkMessage[Any, V]) -> KafkaSinkMessage[bytes, V]:
        return msg._with_key(_encoded(serializer, msg.key, msg.topic, MessageField.KEY))

    return _to_sink("to_sink", up).then(op.map, "map", shim_mapper)


@operator
def serialize_value(
    step_id: str,
    up: Stream[Union[KafkaSourceMessage[K, Any], KafkaSinkMessage[K, Any]]],
    serializer: Serializer,
) -> Stream[KafkaSinkMessage[K, bytes]]:
    """Encode each message's value (source messages become sink messages); a failure fails the run.

    ```python
    from confluent_kafka.serialization import StringSerializer

    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSinkMessage
    from flowspark.connectors.kafka import operators as kop
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("serialize_eg")
    messages = op.input("inp", flow, TestingSource([KafkaSinkMessage(None, "hello")]))
    encoded = kop.serialize_value("encode", messages, StringSerializer())
    out = []
    op.output("out", op.map("value", encoded, lambda m: m.value), TestingSink(out))
    run_main(flow)
    assert out == [b"hello"]
    ```
    """

    def shim_mapper(msg: KafkaSinkMessage[K, Any]) -> KafkaSinkMessage[K, bytes]:
        return msg._with_value(_encoded(serializer, msg.value, msg.topic, MessageField.VALUE))

    return _to_sink("to_sink", up).then(op.map, "map", shim_mapper)


@operator
def serialize(
    step_id: str,
    up: Stream[Union[KafkaSourceMessage[Any, Any], KafkaSinkMessage[Any, Any]]],
    *,
    key_serializer: Serializer,
    val_serializer: Serializer,
) -> Stream[KafkaSinkMessage[bytes, bytes]]:
    """Encode keys and values (source messages become sink messages); a failure fails the run."""

    def shim_mapper(msg: KafkaSinkMessage[Any, Any]) -> KafkaSinkMessage[bytes, bytes]:
        key = _encoded(key_serializer, msg.key, msg.topic, MessageField.KEY)
        return msg._with_key_and_value(key, _encoded(val_serializer, msg.value, msg.topic, MessageField.VALUE))

    return _to_sink("to_sink", up).then(op.map, "map", shim_mapper)
