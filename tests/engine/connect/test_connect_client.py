"""Runs through a Spark Connect server the run names (`--remote`, `SPARK_REMOTE`), against a real local server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.ports import free_port

from flowspark.engine.connect.connect_client import check_reachable, connect
from flowspark.engine.connect.connect_server import read_record, start_supervisor
from flowspark.errors import FlowsparkRuntimeError

ROOT = Path(__file__).resolve().parents[3]

FLOWS = """
import os
from datetime import timedelta
import flowspark.operators as op
from flowspark.connectors.kafka import KafkaSinkMessage, KafkaSource, KafkaSink
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.inputs import SimplePollingSource
from flowspark.testing import TestingSource

paused = Dataflow("paused")
items = [("a", 1), ("b", 2), TestingSource.PAUSE(timedelta(seconds=0.3)), ("a", 3)]
sums = op.stateful_map("sum", op.input("inp", paused, TestingSource(items)), lambda s, v: ((s or 0) + v, (s or 0) + v))
op.output("out", sums, StdOutSink())

class Ticks(SimplePollingSource):
    # A number every tenth of a second, forever.

    def __init__(self):
        super().__init__(timedelta(seconds=0.1))
        self.count = 0

    def next_item(self):
        self.count += 1
        return self.count

endless = Dataflow("endless")
ticks = op.key_on("key", op.input("inp", endless, Ticks()), lambda n: "all")
op.output("out", op.stateful_map("sum", ticks, lambda s, v: ((s or 0) + v, v)), StdOutSink())

def kafka_flow():
    broker, topic_in, topic_out = os.environ["BROKER"], os.environ["TOPIC_IN"], os.environ["TOPIC_OUT"]
    flow = Dataflow("kafka")
    msgs = op.input("inp", flow, KafkaSource([broker], [topic_in], tail=False))
    counts = op.count_final("count", op.map("word", msgs, lambda m: m.value.decode()), lambda w: w)
    out = op.map("msg", counts, lambda kv: KafkaSinkMessage(kv[0].encode(), str(kv[1]).encode()))
    op.output("out", out, KafkaSink([broker], topic_out))
    return flow
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on loopback with a token (flowspark's own supervisor, in a folder of its own): its URL."""
    directory = tmp_path_factory.mktemp("connect")
    supervisor = start_supervisor(str(directory))
    deadline = time.monotonic() + 180
    record = read_record(str(directory))
    while record is None and time.monotonic() < deadline and supervisor.poll() is None:
        time.sleep(0.2)
        record = read_record(str(directory))
    assert record is not None, (directory / "server.log").read_text()
    yield record.server_url
    os.kill(record.supervisor, signal.SIGTERM)
    supervisor.wait(60)


def _run(tmp_path: Path, target: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "remote_flows.py").write_text(FLOWS)
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", target, "--no-progress", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )


def _local(tmp_path: Path, target: str, **env: str) -> List[str]:
    """The sorted output of `target` run as the README runs it, on the local Spark (the suite's warm one)."""
    done = _run(tmp_path, target, **env)
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.splitlines())


@pytest.mark.quick
def test_the_readme_example_gives_the_same_output_through_the_server(server: str, tmp_path: Path) -> None:
    done = _run(tmp_path, "flowspark.examples.wordcount:flow", "--remote", server)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == _local(tmp_path, "flowspark.examples.wordcount:flow")


@pytest.mark.quick
def test_a_streaming_run_goes_through_the_server_named_by_spark_remote(server: str, tmp_path: Path) -> None:
    done = _run(tmp_path, "remote_flows:paused", SPARK_REMOTE=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["('a', 1)", "('b', 2)", "('a', 4)"]


@pytest.mark.kafka
def test_a_kafka_flow_gives_the_same_output_through_the_server(server: str, broker: str, tmp_path: Path) -> None:
    topics = {name: f"{name}-{os.getpid()}-{time.monotonic_ns()}" for name in ("in", "out-remote", "out-local")}
    AdminClient({"bootstrap.servers": broker}).create_topics([NewTopic(t, 2, 1) for t in topics.values()])
    time.sleep(1)
    producer = Producer({"bootstrap.servers": broker})
    for word in "a b a c b a".split():
        producer.produce(topics["in"], word.encode())
    producer.flush(30)
    env = {"BROKER": broker, "TOPIC_IN": topics["in"]}
    remote = _run(tmp_path, "remote_flows:kafka_flow()", "--remote", server, TOPIC_OUT=topics["out-remote"], **env)
    assert remote.returncode == 0, remote.stderr
    local = _run(tmp_path, "remote_flows:kafka_flow()", TOPIC_OUT=topics["out-local"], **env)
    assert local.returncode == 0, local.stderr
    assert (
        _read(broker, topics["out-remote"], 3)
        == _read(broker, topics["out-local"], 3)
        == [(b"a", b"3"), (b"b", b"2"), (b"c", b"1")]
    )


def _read(broker: str, topic: str, expect: int) -> List[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"read-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: List[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < expect and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.key(), msg.value()))
    consumer.close()
    return sorted(got)


def test_ctrl_c_stops_a_streaming_run_through_the_server(server: str, tmp_path: Path) -> None:
    """Ctrl-C lands between the run's calls to the server, never inside one, where gRPC would lose it."""
    (tmp_path / "remote_flows.py").write_text(FLOWS)
    run = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", "remote_flows:endless", "--no-progress", "--remote", server],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert run.stdout is not None
        first = run.stdout.readline()
        assert first, run.stderr.read() if run.stderr else ""
        pressed = time.monotonic()
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode != 0
    assert time.monotonic() - pressed < 30
    assert err.strip().splitlines()[-1] == "flowspark: KeyboardInterrupt", err
    assert "Traceback" not in err, err


def test_a_run_whose_tasks_cant_reach_it_is_refused_before_it_starts(server: str) -> None:
    session = connect(server).session
    with pytest.raises(
        FlowsparkRuntimeError, match=r"can't reach this process at 127\.0\.0\.1:\d+ .*FLOWSPARK_DRIVER_LINK_HOST"
    ):
        check_reachable(session, "127.0.0.1", free_port(), server)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--remote", "http://example.com"], "is not a Spark Connect URL"),
        (["--remote", "sc://127.0.0.1:1"], "could not reach the Spark Connect server at sc://127.0.0.1:1"),
    ],
)
def test_a_bad_server_is_named_in_one_line(tmp_path: Path, args: List[str], error: str) -> None:
    done = _run(tmp_path, "flowspark.examples.wordcount:flow", *args)
    assert done.returncode == 1
    assert error in done.stderr
    assert "Traceback" not in done.stderr


def test_master_and_remote_do_not_go_together(tmp_path: Path) -> None:
    done = _run(
        tmp_path, "flowspark.examples.wordcount:flow", "--remote", "sc://localhost:15002", "--master", "local[1]"
    )
    assert done.returncode == 2
    assert "--remote runs on the Spark Connect server's own Spark" in done.stderr
