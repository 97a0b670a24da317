"""`flowspark.connectors.kafka.serde` against Bytewax 0.21.1's: the same bytes, values and errors, alone and through Kafka."""

from __future__ import annotations

import importlib
import json
import pickle
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from support.kafka_topics import new_topic, produce, read_back

pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")

from bytewax.connectors.kafka import serde as bw_serde
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.schema_registry import Schema

from flowspark.connectors.kafka import (
    KafkaSinkMessage,
    serde,
)

USER = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "raw", "type": "bytes"},
        {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 4}},
    ],
}
LOGICAL = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": "long"}]}
LINE = {"type": "record", "name": "Line", "fields": [{"name": "a", "type": "Point"}, {"name": "b", "type": "Point"}]}

CASES: List[Tuple[str, Any, List[Any]]] = [
    ("string", {"type": "string"}, ["", "héllo", "x" * 300]),
    ("long", {"type": "long"}, [0, -1, 2**62, -(2**40)]),
    ("union", ["null", "double", "string"], [None, 1.5, "s"]),
    (
        "record",
        USER,
        [
            {
                "name": "ann",
                "age": 41,
                "tags": ["a", "b"],
                "scores": {"x": 1.0},
                "kind": "A",
                "raw": b"\x00\xff",
                "id": b"abcd",
            },
            {"name": "bo", "tags": [], "scores": {}, "kind": "B", "raw": b"", "id": b"\x00\x00\x00\x01"},
        ],
    ),
    (
        "logical",
        LOGICAL,
        [
            {
                "at": datetime(2024, 5, 1, 12, 30, 1, 250000, tzinfo=timezone.utc),
                "day": date(2024, 2, 29),
                "amount": Decimal("1234.50"),
                "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            },
        ],
    ),
]


def _text(schema: Any) -> str:
    return json.dumps(schema)


@pytest.mark.parametrize(
    ("schema", "values"), [(schema, values) for _, schema, values in CASES], ids=[name for name, _, _ in CASES]
)
def test_bytes_and_values_are_bytewaxs(schema: Any, values: List[Any]) -> None:
    ours_out, theirs_out = serde.PlainAvroSerializer(_text(schema)), bw_serde.PlainAvroSerializer(_text(schema))
    ours_in, theirs_in = serde.PlainAvroDeserializer(_text(schema)), bw_serde.PlainAvroDeserializer(_text(schema))
    for value in values:
        data = ours_out(value)
        assert data == theirs_out(value)
        assert data is not None
        assert ours_in(data) == theirs_in(data)
        assert ours_in(data, None) == theirs_in(data, None)
    assert ours_out.schema == theirs_out.schema
    assert ours_in.schema == theirs_in.schema


def test_a_registry_schema_and_named_schemas_are_taken_as_bytewax_takes_them() -> None:
    line = {"a": {"x": 1, "y": 2}, "b": {"x": -3, "y": 4}}
    got: List[Tuple[Optional[bytes], Any]] = []
    for module in (serde, bw_serde):
        named: Dict[str, Any] = {}
        module.PlainAvroSerializer(_text(POINT), named_schemas=named)
        out = module.PlainAvroSerializer(Schema(_text(LINE), "AVRO"), named_schemas=named)
        back = module.PlainAvroDeserializer(Schema(_text(LINE), "AVRO"), named_schemas=named)
        data = out(line)
        got.append((data, back(data)))
    assert got[0] == got[1]
    assert got[0][1] == line


def _failure(call: Callable[[], Any]) -> Tuple[str, str]:
    with pytest.raises(Exception) as info:
        call()
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("bad JSON", lambda m: m.PlainAvroSerializer("{not json")),
        ("unknown type", lambda m: m.PlainAvroDeserializer('{"type": "nope"}')),
        ("not a schema", lambda m: m.PlainAvroSerializer(42)),
        ("missing field", lambda m: m.PlainAvroSerializer(_text(POINT))({"x": 1})),
        ("wrong type", lambda m: m.PlainAvroSerializer(_text(POINT))({"x": "one", "y": 2})),
        ("None to decode", lambda m: m.PlainAvroDeserializer(_text(POINT))(None)),
        ("truncated", lambda m: m.PlainAvroDeserializer(_text(POINT))(b"\x02")),
    ],
)
def test_errors_are_bytewaxs(name: str, call: Callable[[Any], Any]) -> None:
    assert _failure(lambda: call(serde)) == _failure(lambda: call(bw_serde))


def test_text_to_decode_is_taken_as_its_bytes_as_in_bytewax() -> None:
    text = "\x04\x06"  # x=2, y=3
    assert serde.PlainAvroDeserializer(_text(POINT))(text) == bw_serde.PlainAvroDeserializer(_text(POINT))(text)


def test_they_pickle_and_work_after() -> None:
    out = pickle.loads(pickle.dumps(serde.PlainAvroSerializer(_text(USER))))
    back = pickle.loads(pickle.dumps(serde.PlainAvroDeserializer(_text(USER))))
    value = _user(1)
    assert back(out(value)) == value


# -- through Kafka, against Bytewax running the same flows ------------------


def _user(i: int) -> Dict[str, Any]:
    return {
        "name": f"u{i}",
        "age": None if i % 3 == 0 else i,
        "tags": [f"t{i}"] * (i % 3),
        "scores": {"s": i / 2},
        "kind": "AB"[i % 2],
        "raw": bytes([i]),
        "id": i.to_bytes(4, "big"),
    }


def _to_message(item: Tuple[str, Dict[str, Any]]) -> KafkaSinkMessage[bytes, Dict[str, Any]]:
    key, value = item
    return KafkaSinkMessage(key.encode(), value)


def _fields(msg: Any) -> Tuple[Any, ...]:
    return msg.key, msg.value, msg.offset


def _modules(engine: str) -> List[Any]:
    """The engine's `operators`, Kafka `operators`, `serde`, `testing` and `dataflow` modules."""
    names = ["operators", "connectors.kafka.operators", "connectors.kafka.serde", "testing", "dataflow"]
    return [importlib.import_module(f"{engine}.{name}") for name in names]


def _write_flow(engine: str, broker: str, topic: str, items: List[Tuple[str, Dict[str, Any]]]) -> Any:
    """Items keyed by name, serialized with the engine's `PlainAvroSerializer`, produced to `topic`."""
    ops, kop, engine_serde, testing, dataflow = _modules(engine)
    flow = dataflow.Dataflow("avro_out")
    messages = ops.map("message", ops.input("inp", flow, testing.TestingSource(items)), _to_message)
    encoded = kop.serialize_value("ser", messages, engine_serde.PlainAvroSerializer(_text(USER)))
    kop.output("out", encoded, brokers=[broker], topic=topic)
    return flow


def _read_flow(engine: str, broker: str, topic: str, oks: List[Any], errs: List[Any]) -> Any:
    """Messages of `topic` decoded with the engine's `PlainAvroDeserializer`; decoded ones to `oks`, failures to `errs`."""
    ops, kop, engine_serde, testing, dataflow = _modules(engine)
    flow = dataflow.Dataflow("avro_in")
    inp = kop.input("inp", flow, brokers=[broker], topics=[topic], tail=False)
    decoded = kop.deserialize_value("de", inp.oks, engine_serde.PlainAvroDeserializer(_text(USER)))
    ops.output("oks", decoded.oks, testing.TestingSink(oks))
    ops.output("errs", decoded.errs, testing.TestingSink(errs))
    return flow


@pytest.mark.kafka
def test_a_flow_through_kafka_writes_and_reads_what_bytewaxs_does(broker: str) -> None:
    from bytewax.testing import run_main as bytewax_run_main

    from flowspark.testing import cluster_main

    items = [(f"k{i}", _user(i)) for i in range(12)]
    ours, theirs = new_topic(broker), new_topic(broker)
    # Two workers: the serializer is pickled to Spark's tasks and runs there.
    cluster_main(_write_flow("flowspark", broker, ours, items), [], 0, worker_count_per_proc=2)
    bytewax_run_main(_write_flow("bytewax", broker, theirs, items))
    our_bytes = sorted((m.key(), m.value()) for m in read_back(broker, ours, len(items)))
    their_bytes = sorted((m.key(), m.value()) for m in read_back(broker, theirs, len(items)))
    assert our_bytes == their_bytes
    assert len(our_bytes) == len(items)

    produce(broker, ours, [(0, b"bad", b"\x02", [])])
    got: Dict[str, Tuple[List[Any], List[Any]]] = {}
    for engine in ("flowspark", "bytewax"):
        oks: List[Any] = []
        errs: List[Any] = []
        flow = _read_flow(engine, broker, ours, oks, errs)
        if engine == "flowspark":
            cluster_main(flow, [], 0, worker_count_per_proc=2)
        else:
            bytewax_run_main(flow)
        got[engine] = (oks, errs)
    (our_oks, our_errs), (their_oks, their_errs) = got["flowspark"], got["bytewax"]
    assert sorted(map(_fields, our_oks)) == sorted(map(_fields, their_oks))
    assert sorted((m.key, m.value["name"]) for m in our_oks) == sorted((k.encode(), v["name"]) for k, v in items)
    (ours_err,), (theirs_err,) = our_errs, their_errs
    assert ours_err.err.code() == theirs_err.err.code() == ConfluentKafkaError._VALUE_DESERIALIZATION
    assert ours_err.err.str() == theirs_err.err.str()
    assert _fields(ours_err.msg) == _fields(theirs_err.msg) == (b"bad", b"\x02", len(items))
