"""Kafka consumers and producers kept for the next micro-batch in the process that used them.

Each micro-batch's task reads its partition, or produces its messages,
through a librdkafka client; making one costs a connection, a login and a
metadata request (tens of milliseconds, and more over TLS), which a live
flow would pay on every micro-batch.  As Spark's own Kafka source keeps its
consumers per executor, a client is handed back here when its task is
done, idle (a consumer keeps no assignment, so it fetches nothing), and
the next task of any partition with the same settings takes it: its
connections are up, and librdkafka keeps them up or reconnects by itself.
A client idle for `IDLE_SECONDS` is closed.

>>> pool = ClientPool(lambda client: None)
>>> settings = {"bootstrap.servers": "127.0.0.1:9092"}
>>> pool.take(settings) is None
True
>>> pool.give(settings, "a client")
>>> pool.take(settings)
'a client'
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Tuple, TypeVar

from confluent_kafka import Consumer, Producer, libversion

from flowspark.connectors.kafka.shipped_files import with_shipped_files

C = TypeVar("C")
"""A kind of Kafka client."""

IDLE_SECONDS = 60.0
"""How long a client is kept unused before it is closed."""

KEPT_PER_SETTINGS = 8
"""At most this many idle clients are kept for the same settings (one per partition a process reads at once)."""


RECOVERY_STRATEGY = "metadata.recovery.strategy"
"""librdkafka's setting for what a client does once every broker it knows is down (from librdkafka 2.10)."""

_REBOOTSTRAPS_SINCE = 0x020A0000
"""librdkafka 2.10.0, the first to re-bootstrap by default (`libversion()`'s number)."""


def client_config(brokers: Iterable[str], *settings: Dict[str, Any]) -> Dict[str, Any]:
    """The settings of a librdkafka client of `brokers`: `settings` merged in order (the user's `add_config` last),
    with Spark's copies of the files they name (`with_shipped_files`).

    Through an outage the client retries the brokers it knows rather than
    re-bootstrapping (`metadata.recovery.strategy` `none`, unless the settings
    say otherwise): a producer librdkafka 2.16 re-bootstrapped while its
    broker was down may wait in `flush` long after the broker is back.

    >>> client_config(["a:9092", "b:9092"], {"acks": "all"})["bootstrap.servers"]
    'a:9092,b:9092'
    """
    merged: Dict[str, Any] = {"bootstrap.servers": ",".join(brokers)}
    if libversion()[1] >= _REBOOTSTRAPS_SINCE:
        merged[RECOVERY_STRATEGY] = "none"
    for more in settings:
        merged.update(more)
    return with_shipped_files(merged)


def _settings_key(config: Dict[str, Any]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((key, repr(value)) for key, value in config.items()))


class ClientPool(Generic[C]):
    """Idle clients by their settings: `take` one if there is one, `give` it back when done."""

    def __init__(self, close: Callable[[C], None]) -> None:
        self._close = close
        self._idle: Dict[Tuple[Tuple[str, str], ...], List[Tuple[float, C]]] = {}
        self._lock = threading.Lock()

    def _expired(self, now: float) -> List[C]:
        """Take out the clients idle too long (under the lock)."""
        gone: List[C] = []
        for key, kept in list(self._idle.items()):
            gone += [client for since, client in kept if now - since > IDLE_SECONDS]
            kept[:] = [(since, client) for since, client in kept if now - since <= IDLE_SECONDS]
            if not kept:
                del self._idle[key]
        return gone

    def take(self, config: Dict[str, Any]) -> Optional[C]:
        """An idle client made with `config`, if there is one."""
        now = time.monotonic()
        with self._lock:
            gone = self._expired(now)
            kept = self._idle.get(_settings_key(config))
            client = kept.pop()[1] if kept else None
        for old in gone:
            self._close(old)
        return client

    def give(self, config: Dict[str, Any], client: C) -> None:
        """`client`, made with `config`, is done with for now."""
        with self._lock:
            kept = self._idle.setdefault(_settings_key(config), [])
            extra = [client] if len(kept) >= KEPT_PER_SETTINGS else []
            if not extra:
                kept.append((time.monotonic(), client))
        for old in extra:
            self._close(old)


def _close_consumer(consumer: Consumer) -> None:
    consumer.close()


def _close_producer(producer: Producer) -> None:
    producer.flush()


CONSUMERS: ClientPool[Consumer] = ClientPool(_close_consumer)
"""This process's idle consumers (unassigned)."""

PRODUCERS: ClientPool[Producer] = ClientPool(_close_producer)
"""This process's idle producers (flushed)."""
