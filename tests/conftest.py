"""pytest's wiring for the whole suite: the fixtures every test folder may ask for, and the plugins of `support`.

The helpers themselves live in `tests/support/` (brokers, PostgreSQL, the
standalone cluster, process trees, ...), which tests import as
`from support.<module> import ...` (`tests/` is on the import path,
pyproject's `pythonpath`); the fixtures here only start and stop what
those modules make.  Session-scoped fixtures start their server once per
session (once per pytest-xdist process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

import pytest
from support.kafka_broker import KafkaBroker, apache_kafka, tansu
from support.outage_proxy import Outage
from support.postgres_server import postgres_server
from support.spark_cluster import WORKERS, StandaloneCluster

from flowspark.engine.reports.driver_link import DriverServer

pytest_plugins = ["support.scratch", "support.s3_server", "support.suite_budget", "support.parallel"]
"""The suite's own temporary folder; fixtures every test folder may ask for (`s3_endpoint`, `s3_folder`); the suite's
time per marker and its budget; how the suite shares two cores."""


@pytest.fixture
def server() -> Iterator[DriverServer]:
    """A driver link server on loopback, closed after the test."""
    running = DriverServer()
    yield running
    running.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka's broker for the whole session, with a plain, a SASL_SSL and a mutual-TLS listener."""
    with apache_kafka(tmp_path_factory.mktemp("kafka")) as running:
        yield running


@pytest.fixture(scope="session")
def broker(kafka: KafkaBroker) -> str:
    """The session's Kafka broker's plain `host:port`."""
    return kafka.address


@pytest.fixture
def broker_behind_outage(tmp_path: Path) -> Iterator[Tuple[str, Outage]]:
    """A broker of the test's own that clients reach only through an `Outage` proxy: its address (the proxy's) and the proxy."""
    outage = Outage()
    with tansu(tmp_path / "tansu.log", advertised_port=outage.port) as address:
        outage.target = int(address.rsplit(":", 1)[1])
        try:
            yield f"127.0.0.1:{outage.port}", outage
        finally:
            outage.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A PostgreSQL server of the machine's own for the whole session (`support.postgres_server`); its conninfo."""
    with postgres_server() as conninfo:
        yield conninfo


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and its workers for the whole session (`support.spark_cluster`)."""
    found = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    request.addfinalizer(found.stop)  # registered first: a failed start still stops what did start
    found.start()
    took = found.wait_for_workers()
    print(f"{WORKERS} workers registered in {took:.1f} s")
    yield found
