"""`KafkaSink(exactly_once=True)` against Apache Kafka's own broker (the session's `kafka` fixture): what
`read_committed` consumers see after clean runs, replayed batches, fenced attempts, a restarted broker and killed
runs; and `KafkaSource(commit_offsets=True)`, the progress a consumer group shows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest
from support.kafka_broker import apache_kafka
from support.kafka_topics import KafkaRecord as Record
from support.kafka_topics import new_topic, produce, read_back

kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

import flowspark.operators as op  # noqa: E402
from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage  # noqa: E402
from flowspark.connectors.kafka.transactions import TransactionalKafkaSink  # noqa: E402
from flowspark.dataflow import Dataflow  # noqa: E402
from flowspark.engine.sinks.batch_id import SinkBatch, writing  # noqa: E402
from flowspark.testing import TestingSource, run_main  # noqa: E402

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def _message(value: str) -> KafkaSinkMessage[Optional[bytes], Optional[bytes]]:
    return KafkaSinkMessage(key=None, value=value.encode())


def _values(broker: str, topic: str, expect: int) -> List[str]:
    """The values a `read_committed` consumer reads from `topic`, in order."""
    return [m.value().decode() for m in read_back(broker, topic, expect)]


def _marker(broker: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group, "isolation.level": "read_committed"})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], 10)[0].offset)
    finally:
        consumer.close()


def test_a_run_commits_every_message_once_with_a_marker_per_worker(broker: str) -> None:
    topic = new_topic(broker)
    flow = Dataflow("eos")
    lines = op.input("inp", flow, TestingSource([f"m{i}" for i in range(20)]))
    op.output("out", op.map("msg", lines, _message), KafkaSink([broker], topic, exactly_once=True))
    run_main(flow)
    assert _values(broker, topic, 20) == [f"m{i}" for i in range(20)]


def _partition(broker: str, topic: str, worker: str = "0") -> Any:
    return TransactionalKafkaSink([broker], topic, {}, "test").build_part("out", worker, None)


def test_a_batch_replayed_after_it_committed_is_not_produced_again(broker: str) -> None:
    """Spark replays a micro-batch whose write was cut short after this worker committed: the marker skips it."""
    topic = new_topic(broker)
    for attempt in range(2):
        part = _partition(broker, topic)
        with writing(SinkBatch("run1", 0)):
            part.write_batch([_message("a"), _message("b")])
            assert part.snapshot() == 0
        part.close()
        assert _values(broker, topic, 2) == ["a", "b"], f"after attempt {attempt}"
    assert _marker(broker, f"test-run1-out-{topic}-0", topic) == 1
    part = _partition(broker, topic)
    with writing(SinkBatch("run1", 1)):
        part.write_batch([_message("c")])
        assert part.snapshot() == 1
    part.close()
    assert _values(broker, topic, 3) == ["a", "b", "c"]


def test_an_attempt_that_another_fenced_commits_nothing(broker: str) -> None:
    """A task attempt Spark gave up on (or a killed driver's) still producing when the next attempt starts."""
    topic = new_topic(broker)
    zombie, retry = _partition(broker, topic), _partition(broker, topic)
    with writing(SinkBatch("run1", 0)):
        zombie.write_batch([_message("z1")])
        retry.write_batch([_message("r1")])  # fences the zombie and aborts its transaction
        with pytest.raises(RuntimeError, match="fenced"):
            zombie.write_batch([_message("z2")])
            zombie.snapshot()
        retry.write_batch([_message("r2")])
        assert retry.snapshot() == 0
    zombie.close()
    retry.close()
    assert _values(broker, topic, 2) == ["r1", "r2"]


@pytest.fixture
def in_a_task() -> Iterator[None]:
    """As in a Spark task (where `TaskContext.get()` is not None): partitions keep their producers when closed."""
    from pyspark import TaskContext

    TaskContext._getOrCreate()
    try:
        yield
    finally:
        TaskContext._setTaskContext(None)


def test_a_kept_producer_that_another_fenced_writes_its_batch_through_a_new_one(broker: str, in_a_task: None) -> None:
    """A task takes the producer its process kept from the worker's last batch, but a task of that worker in another
    process started a producer of the same id since (which fences the kept one)."""
    from confluent_kafka import Producer

    topic = new_topic(broker)
    part = _partition(broker, topic)
    with writing(SinkBatch("run1", 0)):
        part.write_batch([_message("a")])
        assert part.snapshot() == 0
    part.close()  # keeps its producer for the worker's next batch
    other = Producer({"bootstrap.servers": broker, "transactional.id": f"test-run1-out-{topic}-0"})
    other.init_transactions(30)  # fences the kept one
    part = _partition(broker, topic)
    with writing(SinkBatch("run1", 1)):
        part.write_batch([_message("b")])
        time.sleep(1)  # the broker's refusal arrives: the next `produce` raises librdkafka's fatal error
        part.write_batch([_message("c")])
        assert part.snapshot() == 1
    part.close()
    assert _values(broker, topic, 3) == ["a", "b", "c"]


def test_a_batch_cut_short_before_its_commit_is_written_whole_by_the_next_attempt(broker: str) -> None:
    topic = new_topic(broker)
    first = _partition(broker, topic)
    with writing(SinkBatch("run1", 0)):
        first.write_batch([_message("a")])
    first.close()  # the task failed before `snapshot()`: its transaction is aborted
    second = _partition(broker, topic)
    with writing(SinkBatch("run1", 0)):
        second.write_batch([_message("a"), _message("b")])
        assert second.snapshot() == 0
    second.close()
    assert _values(broker, topic, 2) == ["a", "b"]


def test_a_transaction_waits_out_its_broker_killed_and_started_again_mid_batch(tmp_path: Path) -> None:
    """The broker SIGKILLed between two writes of a batch and started 10 s later on its ports and data: the batch
    commits whole once it is back."""
    (tmp_path / "broker").mkdir()
    with apache_kafka(tmp_path / "broker") as broker:
        topic = new_topic(broker.address)
        part = _partition(broker.address, topic)
        with writing(SinkBatch("run1", 0)):
            part.write_batch([_message("before")])
            broker.process.kill()
            threading.Timer(10, broker.process.start).start()
            part.write_batch([_message(f"during {i}") for i in range(3)])
            assert part.snapshot() == 0
        part.close()
        assert _values(broker.address, topic, 4) == ["before", "during 0", "during 1", "during 2"]


def test_the_sink_needs_a_topic_and_names_its_transactions_itself() -> None:
    with pytest.raises(ValueError, match="needs a `topic`"):
        KafkaSink(["localhost:9092"], None, exactly_once=True)
    with pytest.raises(ValueError, match="transactional_id_prefix"):
        KafkaSink(["localhost:9092"], "t", {"transactional.id": "x"}, exactly_once=True)
    assert KafkaSink(["localhost:9092"], "t").transactional() is None


KILL_FLOW = """
import os

import flowspark.operators as op
from flowspark.connectors.kafka import KafkaSink, KafkaSource
from flowspark.dataflow import Dataflow

broker = os.environ["KILL_BROKER"]
flow = Dataflow("kafka_eos_kill")
msgs = op.input("inp", flow, KafkaSource([broker], [os.environ["KILL_IN"]]))
counted = op.stateful_map("count", op.key_on("key", msgs, lambda m: str(m.partition)),
                          lambda n, m: ((n or 0) + 1, f"{m.value.decode()} #{(n or 0) + 1}"))
op.output("kafka", op.map("sink_msg", counted, lambda kv: KafkaSinkMessage(kv[0].encode(), kv[1].encode())),
          KafkaSink([broker], os.environ["KILL_OUT"], exactly_once=True))
""".replace(
    "from flowspark.connectors.kafka import KafkaSink, KafkaSource",
    "from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource",
)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_killed_and_resumed_kafka_to_kafka_run_commits_what_an_undisturbed_one_does(
    broker: str, tmp_path: Path, workers: str
) -> None:
    """Kafka → stateful step → exactly-once `KafkaSink`, SIGKILLed mid-stream, resumed, stopped with SIGTERM as
    more input arrives and resumed again: every input message once in the output, each partition's numbered in
    order, as an undisturbed run numbers them.  With one worker
    the driver writes the sink; with two, Spark's tasks do (one per worker and micro-batch)."""
    src, dst = new_topic(broker, 2), new_topic(broker)
    (tmp_path / "flow.py").write_text(KILL_FLOW)
    env = dict(os.environ, KILL_BROKER=broker, KILL_IN=src, KILL_OUT=dst)
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{tmp_path / 'flow.py'}:flow",
        "-r",
        str(tmp_path / "rec"),
        "-w",
        workers,
    ]
    values = [f"m{i}" for i in range(90)]
    records: List[Record] = [(i % 2, None, v.encode(), []) for i, v in enumerate(values)]

    def run_until(count: int, then_produce: List[Record], stop: signal.Signals = signal.SIGKILL) -> None:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 180
            while len(read_back(broker, dst, 0, quiet=0.2, timeout=1)) < count:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, f"{dst} did not reach {count} messages"
            produce(broker, src, then_produce)
            if stop is signal.SIGTERM:
                proc.send_signal(stop)  # stops at a micro-batch boundary, saying so
                _, err = proc.communicate(timeout=120)
                assert proc.returncode == 143 and b"stopped on SIGTERM" in err, err.decode()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    produce(broker, src, records[:30])
    run_until(10, records[30:60])
    run_until(40, records[60:], stop=signal.SIGTERM)
    run_until(90, [])
    got = [(m.key().decode(), m.value().decode()) for m in read_back(broker, dst, 90)]
    want = {(str(p), f"{v} #{n + 1}") for p in (0, 1) for n, v in enumerate(values[p::2])}
    assert len(got) == 90 and set(got) == want
    for p in ("0", "1"):
        numbers = [int(v.split("#")[1]) for k, v in got if k == p]
        assert numbers == list(range(1, 46))


def test_a_source_with_commit_offsets_shows_its_progress_in_its_consumer_group(broker: str, tmp_path: Path) -> None:
    """`KafkaSource(commit_offsets=True)`: the group `add_config` names holds each partition's next offset once the
    run is over (for lag exporters); a resumed run still starts from its checkpoint."""
    from flowspark.connectors.kafka import KafkaSource
    from flowspark.recovery import RecoveryConfig
    from flowspark.testing import TestingSink

    topic, group = new_topic(broker, 2), f"g-{os.getpid()}-{time.monotonic_ns()}"
    produce(broker, topic, [(i % 2, None, f"m{i}".encode(), []) for i in range(10)])
    config = {"group.id": group}

    def run() -> List[str]:
        out: List[Any] = []
        flow = Dataflow("committing")
        source = KafkaSource([broker], [topic], tail=False, add_config=config, commit_offsets=True)
        op.output("out", op.input("inp", flow, source), TestingSink(out))
        run_main(flow, recovery_config=RecoveryConfig(str(tmp_path / "rec")))
        return sorted(m.value.decode() for m in out)

    assert run() == sorted(f"m{i}" for i in range(10))
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == [5, 5]
    produce(broker, topic, [(0, None, b"late", [])])
    assert run() == ["late"]
    with pytest.raises(ValueError, match="group.id"):
        KafkaSource([broker], [topic], commit_offsets=True)
