"""Bytewax's `bytewax_kafka_consumer_lag` gauge, for the dashboards built on it.

Bytewax's `KafkaSource` keeps, in `prometheus_client`'s default registry,
each partition's messages between its next offset and the partition's end
(labels `step_id`, `topic`, `partition`).  flowspark's sets the same
gauge at every `next_batch`, in the Spark worker that reads the partition,
and in the driver once the task reports its lag (`KafkaSource.note_lag`),
which is the one `/metrics` shows.  The collector claims no names when it
registers, so that Bytewax's own Kafka connector can still be imported in
the same process (its gauge of the same name would clash otherwise).
"""

from __future__ import annotations

import threading
from typing import Dict, Iterator, List, Tuple

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

NAME = "bytewax_kafka_consumer_lag"
HELP = "Difference between last offset on the broker and the currently consumed offset."


class ConsumerLag(Collector):
    """The latest lag of every Kafka source partition of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lags: Dict[Tuple[str, str, str], int] = {}

    def set(self, step_id: str, topic: str, partition: int, lag: int) -> None:
        """Keep `lag` as the partition's latest lag."""
        with self._lock:
            self._lags[step_id, topic, str(partition)] = lag

    def describe(self) -> List[Metric]:
        """No names: registering claims none, so Bytewax's own gauge of the same name can still register."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The gauge with each partition's latest lag (nothing before the first one is set)."""
        with self._lock:
            lags = sorted(self._lags.items())
        if not lags:
            return
        family = GaugeMetricFamily(NAME, HELP, labels=["step_id", "topic", "partition"])
        for labels, lag in lags:
            family.add_metric(list(labels), lag)
        yield family


CONSUMER_LAG = ConsumerLag()
REGISTRY.register(CONSUMER_LAG)
