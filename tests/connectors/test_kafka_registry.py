"""Schema-registry Avro (de)serializers that travel: Confluent's wire format, pickling, and steps in Spark's tasks.

The registry is confluent-kafka's own in-memory one (`mock://` URLs), one
per process and URL: the tests that run steps in Spark's tasks give the
deserializer a function that makes the registry there, as an executor
needing settings of its own would.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from support.kafka_topics import new_topic, produce, read_back
from support.partitions import where_am_i

pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")

from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import flowspark.operators as op
from flowspark.connectors.kafka import KafkaSinkMessage
from flowspark.connectors.kafka import operators as kop
from flowspark.connectors.kafka.registry import RegistryAvroDeserializer, RegistryAvroSerializer, registry_client
from flowspark.connectors.kafka.serde import PlainAvroSerializer
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSink, TestingSource, cluster_main, run_main

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}],
    }
)
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": ["null", "int"], "default": None},
            {"name": "team", "type": "string", "default": "none"},
        ],
    }
)


def _mock_url() -> str:
    return f"mock://{uuid.uuid4().hex[:12]}"


def _value(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def _users(n: int) -> List[Dict[str, Any]]:
    return [{"name": f"u{i}", "age": None if i % 3 == 0 else 20 + i} for i in range(n)]


def test_messages_are_confluents_wire_format_byte_for_byte() -> None:
    url = _mock_url()
    ours = RegistryAvroSerializer(url, USER)
    theirs = AvroSerializer(registry_client(url), USER)
    for user in _users(5):
        data = ours(user, _value("users"))
        assert data is not None
        assert data == theirs(user, _value("users"))
        schema_id = registry_client(url).get_latest_version("users-value").schema_id
        assert data[0] == 0 and struct.unpack(">I", data[1:5]) == (schema_id,)
        assert data[5:] == PlainAvroSerializer(USER)(user)
        assert RegistryAvroDeserializer(url)(data, _value("users")) == user
        assert AvroDeserializer(registry_client(url))(data, _value("users")) == user
    assert RegistryAvroSerializer(url, USER)(None, _value("users")) is None
    assert RegistryAvroDeserializer(url)(None, _value("users")) is None


def test_they_pickle_as_their_arguments_after_use_where_confluents_do_not() -> None:
    url = _mock_url()
    ser = RegistryAvroSerializer(url, USER, conf={"auto.register.schemas": True})
    de = RegistryAvroDeserializer({"url": url}, USER_V2, return_record_name=True)
    data = ser({"name": "ann", "age": 3}, _value("users"))
    assert de(data, _value("users")) == {"name": "ann", "age": 3, "team": "none"}
    ser_copy, de_copy = pickle.loads(pickle.dumps(ser)), pickle.loads(pickle.dumps(de))
    assert vars(ser_copy) == {**vars(ser), "_built": None, "_lock": vars(ser_copy)["_lock"]}
    assert ser_copy({"name": "ann", "age": 3}, _value("users")) == data
    assert de_copy(data, _value("users")) == {"name": "ann", "age": 3, "team": "none"}
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(AvroSerializer(registry_client(url), USER))
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(registry_client(url))


def test_from_dict_and_to_dict_convert_as_confluents_do() -> None:
    url = _mock_url()

    def to_dict(user: Tuple[str, int], _ctx: SerializationContext) -> Dict[str, Any]:
        return {"name": user[0], "age": user[1]}

    def from_dict(fields: Dict[str, Any], _ctx: SerializationContext) -> Tuple[str, int]:
        return fields["name"], fields["age"]

    data = RegistryAvroSerializer(url, USER, to_dict)(("bo", 7), _value("users"))
    assert RegistryAvroDeserializer(url, from_dict=from_dict)(data, _value("users")) == ("bo", 7)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda url: RegistryAvroSerializer(url, USER, conf={"auto.register.schema": True}),
            ValueError,
            "Unrecognized properties: auto.register.schema",
        ),
        (lambda url: RegistryAvroSerializer(url, "{not json"), ValueError, "Expecting property name"),
        (lambda url: RegistryAvroSerializer(url, USER, to_dict="nope"), ValueError, "to_dict must be callable"),
        (lambda url: RegistryAvroDeserializer(url, from_dict="nope"), ValueError, "from_dict must be callable"),
        (lambda url: RegistryAvroDeserializer({"uri": url}), ValueError, "configuration has no `url`"),
        (lambda url: RegistryAvroDeserializer(42), TypeError, "registry must be a URL"),
    ],
)
def test_bad_arguments_fail_where_the_wrapper_is_made(make: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make(_mock_url())


def test_a_registry_that_cannot_be_reached_is_confluents_error_when_first_used() -> None:
    de = RegistryAvroDeserializer("http://127.0.0.1:9/", conf={})
    framed = b"\x00\x00\x00\x00\x01\x06ann\x00"
    with pytest.raises(Exception, match="onnect"):
        de(framed, _value("users"))


# -- steps in Spark's tasks, against real Kafka topics -----------------------


class UsersRegistry:
    """Makes an in-memory registry holding `USER` as schema 1 of `subject`, noting where (`where_am_i`)."""

    def __init__(self, where: Path, subject: str = "users-value") -> None:
        self.where = where.absolute()
        self.subject = subject
        self.url = _mock_url()

    def __call__(self) -> SchemaRegistryClient:
        with open(self.where, "a") as f:
            f.write(f"{where_am_i()}\n")
        client = SchemaRegistryClient.new_client({"url": self.url})
        client.register_schema(self.subject, Schema(USER, "AVRO"))
        return client


def _builds(where: Path) -> List[Tuple[int, bool]]:
    return [
        (int(pid), in_task == "True") for pid, in_task, _ in (line.split() for line in where.read_text().splitlines())
    ]


def _confluents_error(deserializer: AvroDeserializer, value: bytes, topic: str) -> str:
    """What Confluent's deserializer says of `value`, which it can't decode."""
    with pytest.raises(Exception) as info:
        deserializer(value, _value(topic))
    return str(info.value)


def _sink_message(item: Tuple[str, Dict[str, Any]], topic: str) -> KafkaSinkMessage[bytes, Dict[str, Any]]:
    key, value = item
    return KafkaSinkMessage(key.encode(), value, topic=topic)


@pytest.mark.kafka
def test_serialize_and_deserialize_steps_run_in_spark_tasks(broker: str, tmp_path: Path) -> None:
    topic = new_topic(broker, 2)
    users = [(f"k{i}", user) for i, user in enumerate(_users(10))]
    registry = UsersRegistry(tmp_path / "where.txt", f"{topic}-value")

    flow = Dataflow("registry_out")
    messages = op.map("message", op.input("inp", flow, TestingSource(users)), lambda item: _sink_message(item, topic))
    kop.output(
        "out",
        kop.serialize_value("ser", messages, RegistryAvroSerializer(registry, USER)),
        brokers=[broker],
        topic=topic,
    )
    cluster_main(flow, [], 0, worker_count_per_proc=2)

    written = read_back(broker, topic, len(users))
    check = AvroDeserializer(registry())
    assert sorted((m.key().decode(), check(m.value(), _value(topic))) for m in written) == sorted(users)
    assert {m.value()[:5] for m in written} == {b"\x00\x00\x00\x00\x01"}

    # Not in the framing, and a schema id the registry does not have.
    bad = {b"plain": b"\x0eannabel\x00", b"unknown": b"\x00\x00\x00\x00\x07\x06ann\x00"}
    produce(broker, topic, [(i, key, value, []) for i, (key, value) in enumerate(bad.items())])
    flow = Dataflow("registry_in")
    oks: List[Any] = []
    errs: List[Any] = []
    inp = kop.input("inp", flow, brokers=[broker], topics=[topic], tail=False)
    decoded = kop.deserialize_value("de", inp.oks, RegistryAvroDeserializer(registry))
    op.output("oks", decoded.oks, TestingSink(oks))
    op.output("errs", decoded.errs, TestingSink(errs))
    cluster_main(flow, [], 0, worker_count_per_proc=2)

    assert sorted((m.key.decode(), m.value) for m in oks) == sorted(users)
    assert sorted((e.msg.key, e.msg.value, e.err.code(), e.err.str()) for e in errs) == [
        (key, value, ConfluentKafkaError._VALUE_DESERIALIZATION, _confluents_error(check, value, topic))
        for key, value in bad.items()
    ]
    builds = _builds(tmp_path / "where.txt")
    # One build by the test itself (`check`), the others by each wrapper in Spark's workers.
    assert (os.getpid(), False) in builds
    assert len(builds) > 1 and all(in_task and pid != os.getpid() for pid, in_task in builds if pid != os.getpid())


@pytest.mark.kafka
def test_a_value_that_does_not_fit_the_schema_fails_the_run_naming_the_step(broker: str) -> None:
    topic = new_topic(broker)
    flow = Dataflow("registry_bad")
    users = [("k0", {"name": "ann"}), ("k1", {"name": 42})]
    messages = op.map("message", op.input("inp", flow, TestingSource(users)), lambda item: _sink_message(item, topic))
    kop.output(
        "out",
        kop.serialize_value("ser", messages, RegistryAvroSerializer(_mock_url(), USER)),
        brokers=[broker],
        topic=topic,
    )
    with pytest.raises(Exception, match="registry_bad.ser") as info:
        cluster_main(flow, [], 0, worker_count_per_proc=2)
    assert "must be string" in repr(info.value.__cause__)


def test_bytewaxs_recipe_and_the_wrapper_give_the_same_streams(tmp_path: Path) -> None:
    from bytewax.connectors.kafka import KafkaSourceMessage as BytewaxMessage
    from bytewax.connectors.kafka import operators as bw_kop
    from bytewax.dataflow import Dataflow as BytewaxDataflow
    from bytewax.operators import input as bw_input
    from bytewax.operators import output as bw_output
    from bytewax.testing import TestingSink as BytewaxSink
    from bytewax.testing import TestingSource as BytewaxSource
    from bytewax.testing import run_main as bytewax_run_main

    from flowspark.connectors.kafka import KafkaSourceMessage

    registry = UsersRegistry(tmp_path / "where.txt")
    good = RegistryAvroSerializer(registry, USER)({"name": "ann", "age": 1}, _value("users"))
    values = [good, b"\x06ann\x00", b"\x00\x00\x00\x00\x63\x06ann\x00", None]

    flow = Dataflow("ours")
    ours_ok: List[Any] = []
    ours_err: List[Any] = []
    msgs = op.input("inp", flow, TestingSource([KafkaSourceMessage(b"k", v, topic="users") for v in values]))
    decoded = kop.deserialize_value("de", msgs, RegistryAvroDeserializer(registry))
    op.output("oks", decoded.oks, TestingSink(ours_ok))
    op.output("errs", decoded.errs, TestingSink(ours_err))
    run_main(flow)

    bw_flow = BytewaxDataflow("theirs")
    theirs_ok: List[Any] = []
    theirs_err: List[Any] = []
    bw_msgs = bw_input("inp", bw_flow, BytewaxSource([BytewaxMessage(b"k", v, topic="users") for v in values]))
    bw_decoded = bw_kop.deserialize_value("de", bw_msgs, AvroDeserializer(registry()))
    bw_output("oks", bw_decoded.oks, BytewaxSink(theirs_ok))
    bw_output("errs", bw_decoded.errs, BytewaxSink(theirs_err))
    bytewax_run_main(bw_flow)

    assert [m.value for m in ours_ok] == [m.value for m in theirs_ok] == [{"name": "ann", "age": 1}, None]
    assert [(e.err.code(), e.err.str(), e.msg.value) for e in ours_err] == [
        (e.err.code(), e.err.str(), e.msg.value) for e in theirs_err
    ]
    assert len(ours_err) == 2, ours_err
