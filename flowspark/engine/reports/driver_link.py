"""The one channel between Spark's Python processes and the user's process.

Sinks and driver-resident sources live in the user's process (the
driver), as in Bytewax.  Spark's Python processes reach them through one
authenticated socket server there: the streaming source asks for offsets,
each task fetches its input (if a driver-resident source made it) and
hands over its output chunks.  Bulk data so never travels inside
Spark's own task descriptions and results, where the JVM would copy it into
every task and stage it serialises.

On one machine the server listens on loopback; on a cluster it listens
where Spark's own driver does (`spark.driver.bindAddress`, by default the
driver's host name) and executors reach it at the driver's host name.
Every connection must prove it holds the run's random key before anything
it sends is unpickled.
"""

from __future__ import annotations

import os
import pickle
import secrets
import socket
import struct
import threading
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from typing import Any, Callable, Dict, Optional, Tuple

import cloudpickle

from flowspark.engine.reports.worker_logs import LogLevels
from flowspark.engine.util.client_environment import ClientEnvironment
from flowspark.engine.util.cyclic_gc import collector_paused


@dataclass(frozen=True)
class DriverLink:
    """Where the driver's server is and its key: what workers need to call it (picklable)."""

    host: str
    port: int
    authkey: bytes
    lent: Optional[ClientEnvironment] = None
    """The run's directory and variables, for user code in workers of a Spark the run did not start (`client_environment`)."""
    logging: LogLevels = field(default_factory=LogLevels.of_this_process)
    """The driver's loggers' levels when the run started, which apply to user code in workers (`worker_logs`)."""

    @property
    def on_loopback(self) -> bool:
        """The driver is on the workers' machine: what workers write to their standard error reaches the run's."""
        return self.host in ("127.0.0.1", "::1", "localhost")

    def call(self, name: str, *args: Any) -> Any:
        """Call `name` on the driver; raise `RuntimeError` with its message if it failed there."""
        with _LOCK:
            ok, value = _exchange(self, (name, args))
        if not ok:
            msg = f"flowspark driver call {name!r} failed: {value}"
            raise RuntimeError(msg)
        return value


_LOCK = threading.Lock()
_open: Dict[str, Any] = {"link": None, "conn": None}
"""This process's connection: Spark reuses its Python workers for later tasks (and later runs)."""


def _exchange(link: DriverLink, request: Tuple[str, Tuple[Any, ...]]) -> Tuple[bool, Any]:
    """Send one request on this process's connection to `link` and read the reply.

    A connection to an earlier run's server is closed first, and one that
    failed is not used again.
    """
    if _open["link"] != link:
        if _open["conn"] is not None:
            _open["conn"].close()
        _open["link"], _open["conn"] = None, Client((link.host, link.port), authkey=link.authkey)
        _no_delay(_open["conn"].fileno())
        _open["link"] = link
    try:
        _open["conn"].send(request)
        reply: Tuple[bool, Any] = pickle.loads(_open["conn"].recv_bytes())
    except (EOFError, OSError):
        _open["link"] = None
        raise
    return reply


def _no_delay(fd: int) -> None:
    """Send each message at once: a connection sends a large one as its length and then its bytes, and Nagle's
    algorithm would hold the bytes until the peer acknowledged the length, which it delays by up to 40 ms."""
    with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as sock:  # a duplicate: closing it keeps `fd` open
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


HANDSHAKE_SECONDS = 10.0
"""How long a new connection has to prove it holds the key before it is dropped."""


def _receive_timeout(sock: socket.socket, seconds: float) -> None:
    """Bound every blocking read and write on `sock` (and on descriptors sharing it); 0 for none."""
    whole = int(seconds)
    value = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


class DriverServer:
    """Serves named calls to Spark's Python processes, one thread per connection.

    No peer can stall or stop it: the accept loop only accepts, and each
    connection proves it holds the key in its own thread, within
    `HANDSHAKE_SECONDS`; a connection that sends junk, too much or nothing
    is closed alone.  Only authenticated peers (Spark's processes, given
    the key) get their requests unpickled.  The first exception a call
    raises is kept in `failure`: the run stops on it and raises it, since
    it came from a source or sink.
    """

    def __init__(self, bind_host: str = "127.0.0.1", advertised_host: Optional[str] = None, port: int = 0) -> None:
        self._calls: Dict[str, Callable[..., Any]] = {}
        self.failure: Optional[BaseException] = None
        self._authkey = secrets.token_bytes(32)
        self._socket = socket.create_server((bind_host, port), backlog=128)
        self.link = DriverLink(advertised_host or bind_host, self._socket.getsockname()[1], self._authkey)
        self._closed = False
        threading.Thread(target=self._serve, name="flowspark-driver-server", daemon=True).start()

    def register(self, name: str, call: Callable[..., Any]) -> None:
        self._calls[name] = call

    def lend(self, environment: ClientEnvironment) -> None:
        """Have workers run user code with `environment` (`DriverLink.lent`): call before the link is shipped."""
        self.link = replace(self.link, lent=environment)

    def _serve(self) -> None:
        while not self._closed:
            try:
                peer, _ = self._socket.accept()
            except OSError:
                if self._closed:
                    return
                continue  # a peer that left before it was accepted
            threading.Thread(target=self._handle, args=(peer,), name="flowspark-driver-call", daemon=True).start()

    def _handle(self, peer: socket.socket) -> None:
        try:
            with peer:
                _receive_timeout(peer, HANDSHAKE_SECONDS)
                _no_delay(peer.fileno())
                conn = Connection(os.dup(peer.fileno()))
                try:
                    deliver_challenge(conn, self._authkey)
                    answer_challenge(conn, self._authkey)
                    _receive_timeout(peer, 0)  # Spark's workers idle between tasks
                except BaseException:
                    conn.close()
                    raise
            with conn:
                self._answer(conn)
        except Exception:
            return  # a peer without the key, or a broken connection: only it is dropped

    def _answer(self, conn: Connection) -> None:
        while not self._closed:
            try:
                name, args = conn.recv()
            except (EOFError, OSError):
                return
            try:
                with collector_paused():
                    reply: Tuple[bool, Any] = (True, self._calls[name](*args))
            except BaseException as ex:
                if self.failure is None and name != "failure":
                    self.failure = ex
                reply = (False, str(ex))
            conn.send_bytes(cloudpickle.dumps(reply))

    def close(self) -> None:
        self._closed = True
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
