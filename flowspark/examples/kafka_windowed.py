"""Count each user's clicks per minute of event time: Kafka topic in, Kafka topic out.

Input messages have the user as key and JSON like
`{"page": "/home", "at": "2024-01-01T00:00:05+00:00"}` as value.  Each closed
one-minute window becomes an output message with the user as key and
`{"window_start": ..., "clicks": N}` as value, and is printed.

Settings come from the environment: `KAFKA_BROKERS` (comma-separated,
default `127.0.0.1:9092`), `KAFKA_IN_TOPIC` (default `clicks`),
`KAFKA_OUT_TOPIC` (default `clicks_per_minute`) and `KAFKA_TAIL` (default
`true`; `false` stops at the end of the input).

`python -m flowspark.examples.kafka_windowed` creates the topics and produces sample
clicks; `python -m flowspark.run flowspark.examples.kafka_windowed:flow` runs the flow.
"""

import json
import os
from datetime import datetime, timedelta, timezone
from typing import List, Tuple

from confluent_kafka.serialization import StringDeserializer

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.connectors.kafka import KafkaSinkMessage, KafkaSourceMessage
from flowspark.connectors.kafka import operators as kop
from flowspark.dataflow import Dataflow

BROKERS = os.environ.get("KAFKA_BROKERS", "127.0.0.1:9092").split(",")
IN_TOPIC = os.environ.get("KAFKA_IN_TOPIC", "clicks")
OUT_TOPIC = os.environ.get("KAFKA_OUT_TOPIC", "clicks_per_minute")
TAIL = os.environ.get("KAFKA_TAIL", "true").lower() not in ("0", "false", "no")

ALIGN_TO = datetime(2024, 1, 1, tzinfo=timezone.utc)
LENGTH = timedelta(minutes=1)


def user_and_time(msg: KafkaSourceMessage[object, object]) -> Tuple[str, datetime]:
    return str(msg.key), datetime.fromisoformat(json.loads(str(msg.value))["at"])


def click_time(at: datetime) -> datetime:
    return at


def count(clicks: int, _at: datetime) -> int:
    return clicks + 1


def to_message(user_window: Tuple[str, Tuple[int, int]]) -> KafkaSinkMessage[bytes, bytes]:
    user, (window_id, clicks) = user_window
    start = ALIGN_TO + window_id * LENGTH
    value = json.dumps({"window_start": start.isoformat(), "clicks": clicks})
    return KafkaSinkMessage(user.encode(), value.encode())


flow = Dataflow("kafka_windowed")
raw = kop.input("inp", flow, brokers=BROKERS, topics=[IN_TOPIC], tail=TAIL)
op.inspect("read_errors", raw.errs).then(op.raises, "crash_on_read_error")
decoded = kop.deserialize(
    "decode", raw.oks, key_deserializer=StringDeserializer(), val_deserializer=StringDeserializer()
)
op.inspect("decode_errors", decoded.errs).then(op.raises, "crash_on_decode_error")
clicks = op.map("user_and_time", decoded.oks, user_and_time)
clock = win.EventClock(click_time, wait_for_system_duration=timedelta(seconds=10))
windower = win.TumblingWindower(length=LENGTH, align_to=ALIGN_TO)
counts = win.fold_window("count", clicks, clock, windower, int, count, int.__add__)
messages = op.map("to_message", op.inspect("show", counts.down), to_message)
kop.output("out", messages, brokers=BROKERS, topic=OUT_TOPIC)


def sample_clicks() -> List[Tuple[str, str]]:
    """`(user, JSON value)` pairs over three minutes, busiest at the start, in time order."""
    out = []
    for i in range(36):
        user = ("alice", "bob", "carol")[i // 2 % 3]
        at = ALIGN_TO + timedelta(seconds=int(180 * (i / 36) ** 1.5))
        out.append((user, json.dumps({"page": f"/page/{i % 4}", "at": at.isoformat()})))
    return out


def produce_sample() -> None:
    """Create both topics (if missing) and produce the sample clicks, one request each."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": ",".join(BROKERS)})
    for future in admin.create_topics([NewTopic(IN_TOPIC, 2), NewTopic(OUT_TOPIC, 1)]).values():
        try:
            future.result()
        except Exception as ex:  # an existing topic is fine
            print(f"note: {ex}")
    # One record per request: some brokers (tansu 0.6) misreport the end
    # offset of a partition after a batched produce.
    producer = Producer({"bootstrap.servers": ",".join(BROKERS), "linger.ms": 0, "batch.num.messages": 1})
    for user, value in sample_clicks():
        producer.produce(IN_TOPIC, value.encode(), user.encode())
        producer.flush()
    print(f"produced {len(sample_clicks())} clicks to {IN_TOPIC!r}")


if __name__ == "__main__":
    produce_sample()
