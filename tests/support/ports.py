"""Free loopback ports for the servers the tests start.

`free_port` and `free_ports` are the benchmarks' own
(`benchmarks.apache_kafka`), so that the tests' brokers and the
benchmark's pick their ports one way.
"""

from __future__ import annotations

from benchmarks.apache_kafka import free_port, free_ports

__all__ = ["free_port", "free_ports"]
