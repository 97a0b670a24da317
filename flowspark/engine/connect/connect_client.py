"""Sessions on a Spark Connect server: the warm local one (`warm_session`), or one a run names (`--remote`).

A process keeps one session per server and parallelism.  Each is set up
for flowspark's queries: its shuffle partitions are the run's parallelism
(which a query's state records in its checkpoint), and flowspark's data
source is registered in it.  A server on this machine (`localhost`,
127.0.0.1) reaches the run's driver link on loopback; one elsewhere, at
the address this machine uses to reach it (`driver_link_host`).
"""

from __future__ import annotations

import atexit
import logging
import socket
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

from flowspark.engine.sources.data_source import FlowsparkSource
from flowspark.errors import FlowsparkRuntimeError

_LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Connected:
    """A session on a Spark Connect server."""

    session: Any
    parallelism: int
    host: str
    """The server's host name, as the URL gives it."""

    @property
    def local(self) -> bool:
        """The server runs on this machine."""
        return self.host in _LOOPBACK


_sessions: Dict[Tuple[str, int], Connected] = {}


def server_host(url: str) -> str:
    """The host of a Spark Connect URL (`sc://host:port/;params`); an URL of another form is refused."""
    parts = urlsplit(url.split(";")[0])
    if parts.scheme != "sc" or not parts.hostname:
        msg = (
            f"{url.split(';')[0]!r} is not a Spark Connect URL: give one as sc://host:port (and ;token=... if "
            f"the server wants one)"
        )
        raise FlowsparkRuntimeError(msg)
    return parts.hostname


def connect(url: str, parallelism: Optional[int] = None) -> Connected:
    """This process's session on the server at `url` for runs of `parallelism` (the server's cores if not given)."""
    host = server_host(url)
    if parallelism is not None and (url, parallelism) in _sessions:
        return _sessions[url, parallelism]
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    # The client logs every failed query as JSON on stderr; flowspark reports the run's errors itself.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    # The client warns when it gives up retrying, as well as raising: the error says it once.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    try:
        session = ConnectSession.builder.remote(url).create()
        _bounded_retries(session, host in _LOOPBACK)
        atexit.register(_close_quietly, session)
        cores = parallelism or _cores(session)
        found = _sessions.get((url, cores))
        if found is not None:
            return found
        session.conf.set("spark.sql.shuffle.partitions", str(cores))
        session.dataSource.register(FlowsparkSource)
    except Exception as ex:
        msg = f"could not reach the Spark Connect server at {url.split(';')[0]}: {_reason(ex)[:300]}"
        raise FlowsparkRuntimeError(msg) from None
    found = _sessions[url, cores] = Connected(session, cores, host)
    return found


RETRY_SECONDS_LOCAL = 5.0
RETRY_SECONDS_ELSEWHERE = 60.0
"""About how long a call keeps retrying a server that does not answer: one on this machine that stops answering
has stopped; one elsewhere may be across a network hiccup."""


def _bounded_retries(session: Any, local: bool) -> None:
    """Retry a server that does not answer for `RETRY_SECONDS_*`, not the client's default ten minutes, which would
    hold a run (and a process's exit) that long."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    seconds = RETRY_SECONDS_LOCAL if local else RETRY_SECONDS_ELSEWHERE
    retries = 4 if local else 8
    session.client.set_retry_policies(
        [
            DefaultPolicy(
                max_retries=retries,
                initial_backoff=100,
                backoff_multiplier=2.0,
                max_backoff=int(seconds * 1000 / retries * 2),
                max_server_retry_delay=int(seconds * 1000),
            )
        ]
    )


def _close_quietly(session: Any) -> None:
    """At exit: close the session's channel, so that the client's own exit hook sends the server nothing.

    That hook's clean-up call would wait out the retries if the server is
    gone; the server keeps the shared session for the user's other
    processes either way.
    """
    try:
        session.client.close()
    except Exception:
        pass


def _reason(error: BaseException) -> str:
    """What a failed call to a server says, in one line: gRPC's details (of the error or what it wraps), else its first line."""
    current: Optional[BaseException] = error
    while current is not None:
        details = getattr(current, "details", None)
        if callable(details):
            return str(details()).strip().splitlines()[0] if str(details()).strip() else type(current).__name__
        current = current.__cause__ or current.__context__
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def forget(server_url: str) -> None:
    """Drop this process's sessions on the server at `server_url` (it stopped): those whose URL starts with it."""
    for key in [key for key in _sessions if key[0].startswith(server_url)]:
        del _sessions[key]


def _cores(session: Any) -> int:
    """The server's default parallelism: how many partitions its `range` makes."""
    return int(session.range(0, 1 << 16).selectExpr("spark_partition_id() as part").distinct().count())


def driver_link_host(server: str) -> str:
    """The address of this machine that a Spark Connect server on host `server` reaches it at (the one its route uses)."""
    if server in _LOOPBACK:
        return "127.0.0.1"
    with socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((server, 9))  # no packet is sent: this only picks the route
        return str(probe.getsockname()[0])


REACH_SECONDS = 10.0
"""How long a server's task tries to reach the run's driver link before the run is refused."""


class _Reach:
    """`mapInArrow`'s function: connect to the driver link from a task of the server, and say whether that worked."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa

        for _ in batches:
            pass
        try:
            with socket.create_connection((self._host, self._port), timeout=REACH_SECONDS):
                problem = ""
        except OSError as ex:
            problem = str(ex) or type(ex).__name__
        yield pa.RecordBatch.from_pydict({"problem": [problem]})


def check_reachable(session: Any, host: str, port: int, url: str) -> None:
    """Refuse the run unless a task of the server at `url` reaches the driver link at `host:port`.

    Every run's outputs, taps, failures and prints reach the run's process
    over that link, and its driver-resident sources are read through it.
    """
    row = session.range(1).mapInArrow(_Reach(host, port), "problem string").first()
    if row["problem"]:
        msg = (
            f"the tasks of the Spark Connect server at {url.split(';')[0]} can't reach this process at {host}:{port} "
            f"({row['problem']}), and a flow's outputs, taps and in-process sources reach it only that way: set "
            "FLOWSPARK_DRIVER_LINK_HOST to an address of this machine the server can reach, and --driver-link-port "
            "to a port its firewall lets through, or run the flow where the server can reach it"
        )
        raise FlowsparkRuntimeError(msg)
