"""Kafka brokers that can't be reached: which errors say so, and the one line a process writes when an outage begins
and when it ends."""

from __future__ import annotations

import time
from typing import (
    ClassVar,
    Dict,
)

from confluent_kafka import KafkaError as ConfluentKafkaError

from flowspark._notices import say

UNREACHABLE = frozenset(
    {
        ConfluentKafkaError._TRANSPORT,
        ConfluentKafkaError._ALL_BROKERS_DOWN,
        ConfluentKafkaError._TIMED_OUT,
        ConfluentKafkaError._RESOLVE,
        ConfluentKafkaError.NETWORK_EXCEPTION,
        ConfluentKafkaError.REQUEST_TIMED_OUT,
        ConfluentKafkaError.LEADER_NOT_AVAILABLE,
        ConfluentKafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
"""Errors that say only that a broker (or a partition's leader) could not be reached: librdkafka keeps retrying."""


REFUSED = frozenset({ConfluentKafkaError._AUTHENTICATION, ConfluentKafkaError._SSL})
"""Errors that say a broker refused this client's login or TLS handshake: retrying will not help."""


def refused(err: ConfluentKafkaError) -> bool:
    """Whether `err` says a broker refused this client's login or TLS handshake.

    A broker that refuses the client's certificate (or asks for one it was
    not given) ends the handshake with a TLS alert, which librdkafka reports
    as a transport failure carrying OpenSSL's words for the alert.
    """
    return err.code() in REFUSED or (err.code() == ConfluentKafkaError._TRANSPORT and "SSL routines" in err.str())


def unreachable(err: ConfluentKafkaError) -> bool:
    """Whether `err` says only that a broker can't be reached now (not that it refused this client): worth waiting out."""
    return err.code() in UNREACHABLE and not err.fatal() and not refused(err)


class BrokerOutage:
    """What this process knows of its brokers' outages: one line on stderr when one begins, one when it ends.

    Brokers are named by their bootstrap list; every consumer of the same
    brokers in the process shares one outage, so a hundred partitions
    waiting for one broker print one line.
    """

    _since: ClassVar[Dict[str, float]] = {}

    def __init__(self, brokers: str) -> None:
        self._brokers = brokers

    def began(self, err: ConfluentKafkaError) -> None:
        """`err` said the brokers could not be reached (librdkafka goes on trying)."""
        if self._brokers not in self._since:
            self._since[self._brokers] = time.monotonic()
            say(
                f"flowspark: Kafka brokers {self._brokers} unreachable ({err.str()}); waiting for them, nothing is lost"
            )

    def ended(self) -> None:
        """The brokers answered."""
        since = self._since.pop(self._brokers, None)
        if since is not None:
            say(
                f"flowspark: Kafka brokers {self._brokers} answer again after {time.monotonic() - since:.0f} s; reading on"
            )
