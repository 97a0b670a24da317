"""Kafka to Kafka on native Spark (`spark-sql-kafka`), flowspark (at least once and exactly once) and Bytewax; a table.

    python -m benchmarks.kafka_to_kafka [--messages 1000000] [--rate 2000] [--seconds 20] [--engines ...]

Starts Apache Kafka's broker (`benchmarks.apache_kafka`, one node, on
loopback) and produces `--messages` small messages (`user{n % 200},{n}`)
into a topic of two partitions.  Then each engine, in a fresh process of
its own with two cores' worth of parallelism, reads the topic from the
start, upper-cases each value and produces it to a topic of its own, and
ends at the end of the input (native Spark's query runs `availableNow`,
with Spark's Kafka jar from `spark.jars.packages`, which Ivy fetches into
`~/.ivy2*` on first use):

| engine | what runs |
|---|---|
| `spark` | `readStream.format("kafka")` → `upper(cast(value as string))` → `writeStream.format("kafka")`, `local[2]` |
| `flowspark` | `KafkaSource(tail=False)` → `op.map` → `KafkaSink`, `python -m flowspark.run -w 2`, a Spark of its own |
| `flowspark_eos` | the same with `KafkaSink(exactly_once=True)` |
| `bytewax` | the same flow on Bytewax 0.21.1, `python -m bytewax.run -w 2` |

Throughput: wall time (process start to exit), CPU seconds of the whole
process tree, messages per second; every output is read back with a
`read_committed` consumer and counted.  Latency (`--rate` messages per
second for `--seconds`, each stamped with its produce time, into a
tailing run of each engine): the time from produce to a `read_committed`
consumer's receipt, p50 and p99, and the time to the first output.
The ratios compare with native Spark (wall) and with flowspark at least
once (exactly once's cost).  Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from benchmarks.apache_kafka import plain_broker
from benchmarks.run import TreeSampler

ENGINES = ("spark", "flowspark", "flowspark_eos", "bytewax")
SPARK_KAFKA = "4.2.0"
"""The version of Spark's Kafka connector (`spark-sql-kafka-0-10_2.13`): the newest on Maven Central (4.3.0 is not
there yet); `SPARK_KAFKA_VERSION` overrides."""
KEYS = 200

FLOW = """
import os

if os.environ["K2K_ENGINE"] == "bytewax":
    import bytewax.operators as op
    from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
    from bytewax.dataflow import Dataflow
else:
    import flowspark.operators as op
    from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
    from flowspark.dataflow import Dataflow

brokers = [os.environ["K2K_BROKERS"]]
tail = os.environ["K2K_TAIL"] == "1"
extra = {"exactly_once": True} if os.environ["K2K_ENGINE"] == "flowspark_eos" else {}
flow = Dataflow("kafka_to_kafka")
msgs = op.input("in", flow, KafkaSource(brokers, [os.environ["K2K_IN"]], tail=tail))
out = op.map("upper", msgs, lambda m: KafkaSinkMessage(m.key, m.value.upper()))
op.output("out", out, KafkaSink(brokers, os.environ["K2K_OUT"], **extra))
"""

NATIVE = """
import os, sys
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[2]").appName("kafka_to_kafka")
         .config("spark.jars", os.environ["K2K_JARS"])
         .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
brokers = os.environ["K2K_BROKERS"]
frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", brokers)
         .option("subscribe", os.environ["K2K_IN"]).option("startingOffsets", "earliest").load())
writer = (frame.selectExpr("key", "upper(cast(value as string)) as value").writeStream.format("kafka")
          .option("kafka.bootstrap.servers", brokers).option("topic", os.environ["K2K_OUT"])
          .option("checkpointLocation", os.environ["K2K_CHECKPOINT"]))
tail = os.environ["K2K_TAIL"] == "1"
query = (writer if tail else writer.trigger(availableNow=True)).start()
query.awaitTermination()
"""


@dataclass
class Result:
    engine: str
    wall: float = 0.0
    cpu: float = 0.0
    out: int = 0
    p50: Optional[float] = None
    p99: Optional[float] = None
    first: Optional[float] = None
    note: str = ""
    cpu_roles: Dict[str, float] = field(default_factory=dict)


def spark_kafka_jars() -> str:
    """Spark's Kafka connector and what it needs beyond PySpark's own jars, fetched by Maven into `~/.m2` on first use:
    a comma-separated list of paths (`spark.jars`)."""
    import pyspark

    version = os.environ.get("SPARK_KAFKA_VERSION", SPARK_KAFKA)
    folder = Path.home() / ".cache" / "flowspark-benchmarks" / f"spark-sql-kafka-{version}"
    saved = folder / "classpath.txt"
    if not saved.exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>flowspark.benchmarks</groupId><artifactId>spark-kafka</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>{version}</version>
  </dependency></dependencies>
</project>
""")
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={saved}"],
            cwd=folder,
            check=True,
            capture_output=True,
            timeout=900,
        )
    spark_jars = {path.name.rsplit("-", 1)[0] for path in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    wanted = [p for p in saved.read_text().split(os.pathsep) if Path(p).name.rsplit("-", 1)[0] not in spark_jars]
    return ",".join(wanted)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _topic(broker: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"k2k-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker})  # kept until the topic exists: its futures need it
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _produce(broker: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker, "linger.ms": 20, "batch.num.messages": 10000})
    for n in range(count):
        while True:
            try:
                producer.produce(topic, f"user{n % KEYS},{n}".encode(), f"user{n % KEYS}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def _consumer(broker: str, topic: str) -> object:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": f"k2k-read-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    return consumer


def _count(broker: str, topic: str, expect: int, quiet: float = 3.0) -> int:
    consumer = _consumer(broker, topic)
    got, last = 0, time.monotonic()
    try:
        while got < expect or time.monotonic() - last < 0.5:
            batch = [m for m in consumer.consume(10000, 0.2) if m.error() is None]  # type: ignore[attr-defined]
            if batch:
                got += len(batch)
                last = time.monotonic()
            elif time.monotonic() - last > quiet:
                break
    finally:
        consumer.close()  # type: ignore[attr-defined]
    return got


def _command(engine: str, folder: Path) -> List[str]:
    if engine == "spark":
        return [sys.executable, str(folder / "native.py")]
    runner = "bytewax.run" if engine == "bytewax" else "flowspark.run"
    return [sys.executable, "-m", runner, "k2k_flow:flow", "-w", "2"]


def _env(engine: str, broker: str, source: str, sink: str, folder: Path, tail: bool) -> Dict[str, str]:
    env = dict(
        os.environ,
        K2K_ENGINE=engine,
        K2K_BROKERS=broker,
        K2K_IN=source,
        K2K_OUT=sink,
        K2K_TAIL="1" if tail else "0",
        K2K_JARS=spark_kafka_jars() if engine == "spark" else "",
        K2K_CHECKPOINT=str(folder / f"checkpoint-{uuid.uuid4().hex[:6]}"),
        FLOWSPARK_WARM_SPARK="0",
        PYTHONPATH=str(folder),
    )
    return env


def _start(engine: str, broker: str, source: str, sink: str, folder: Path, tail: bool) -> subprocess.Popen[bytes]:
    """`engine`'s run from `source` to `sink`, in a session of its own: one that ends at the input's end, its stderr
    kept for the note on a failure, or (`tail`) a tailing one, its stderr dropped (nobody reads it while it runs)."""
    return subprocess.Popen(
        _command(engine, folder),
        cwd=folder,
        env=_env(engine, broker, source, sink, folder, tail),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if tail else subprocess.PIPE,
        start_new_session=True,
    )


def throughput(engine: str, broker: str, source: str, messages: int, folder: Path) -> Result:
    sink = _topic(broker, 2)
    started = time.monotonic()
    proc = _start(engine, broker, source, sink, folder, tail=False)
    sampler = TreeSampler(proc.pid, 0.25)
    sampler.start()
    _, err = proc.communicate()
    wall = time.monotonic() - started
    sampler.stop()
    result = Result(engine, wall, sampler.cpu_seconds, cpu_roles=sampler.cpu_by_role)
    if proc.returncode != 0:
        result.note = f"exit {proc.returncode}: {err.decode(errors='replace').strip().splitlines()[-1:]}"
        return result
    result.out = _count(broker, sink, messages)
    return result


def latency(engine: str, broker: str, rate: int, seconds: float, folder: Path, result: Result) -> None:
    """Run `engine` tailing a new topic while `rate` messages a second go in, until `seconds` after its first output;
    fill in p50, p99 (of the messages sent after the first output) and the time to the first output."""
    source, sink = _topic(broker, 2), _topic(broker, 2)
    consumer = _consumer(broker, sink)
    received: List[Tuple[float, float]] = []
    """(sent, received) wall-clock times of each output message."""
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for m in consumer.consume(1000, 0.1):  # type: ignore[attr-defined]
                if m.error() is None:
                    received.append((float(m.value().split(b",")[1]), time.time()))

    started = time.monotonic()
    proc = _start(engine, broker, source, sink, folder, tail=True)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker, "linger.ms": 0})
    launched = time.time()
    n = 0
    first_seen: Optional[float] = None
    # Paced from the launch, for `seconds` after the first output (at most two minutes of waiting for it).
    while time.monotonic() - started < 120 and (first_seen is None or time.monotonic() - first_seen < seconds):
        if first_seen is None and received:
            first_seen = time.monotonic()
        due = started + n / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(source, f"user{n % KEYS},{time.time():.6f}".encode(), f"user{n % KEYS}".encode())
        producer.poll(0)
        n += 1
    producer.flush(30)
    time.sleep(5)
    stop.set()
    reader.join()
    consumer.close()  # type: ignore[attr-defined]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if not received:
        result.note = "no output within 2 minutes while tailing"
        return
    first_out = min(got for _, got in received)
    result.first = first_out - launched
    # Messages sent before the run's first output waited for its start (a JVM, Spark): the steady state is the rest.
    steady = sorted(got - sent for sent, got in received if sent >= first_out) or sorted(
        got - sent for sent, got in received
    )
    result.p50 = steady[len(steady) // 2]
    result.p99 = steady[min(len(steady) - 1, int(len(steady) * 0.99))]


def _table(results: List[Result], messages: int) -> str:
    native = next((r for r in results if r.engine == "spark" and not r.note), None)
    alo = next((r for r in results if r.engine == "flowspark" and not r.note), None)
    rows = [
        "| engine | wall s | CPU s | messages/s | out | × native wall | × flowspark CPU | latency p50 / p99 s "
        "| first output s | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rate = f"{messages / r.wall:,.0f}" if r.wall and not r.note else "-"
        vs_native = f"{r.wall / native.wall:.2f}" if native and r.wall and not r.note else "-"
        vs_alo = f"{r.cpu / alo.cpu:.2f}" if alo and r.cpu and not r.note else "-"
        lat = f"{r.p50:.2f} / {r.p99:.2f}" if r.p50 is not None and r.p99 is not None else "-"
        first = f"{r.first:.1f}" if r.first is not None else "-"
        rows.append(
            f"| {r.engine} | {r.wall:.1f} | {r.cpu:.1f} | {rate} | {r.out:,} | {vs_native} | {vs_alo} | {lat} "
            f"| {first} | {r.note} |"
        )
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kafka_to_kafka", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=2000, help="messages per second in the latency run (0: none)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the latency run")
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    folder = Path(tempfile.mkdtemp(prefix="k2k-"))
    try:
        (folder / "k2k_flow.py").write_text(textwrap.dedent(FLOW))
        (folder / "native.py").write_text(textwrap.dedent(NATIVE))
        (folder / "broker").mkdir()
        with plain_broker(folder / "broker") as broker:
            source = _topic(broker, 2)
            _say(f"producing {args.messages:,} messages")
            _produce(broker, source, args.messages)
            results = []
            for engine in engines:
                _say(f"{engine}: {args.messages:,} messages")
                result = throughput(engine, broker, source, args.messages, folder)
                if args.rate and not result.note:
                    _say(f"{engine}: latency at {args.rate}/s for {args.seconds:g} s")
                    latency(engine, broker, args.rate, args.seconds, folder, result)
                _say(f"{engine}: {result}")
                results.append(result)
        print(f"{args.messages:,} messages, 2 partitions, load {os.getloadavg()[0]:.2f}\n")
        print(_table(results, args.messages))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
