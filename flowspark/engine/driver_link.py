"""The one channel between Spark's Python processes and the user's process.

Sources and sinks live in the user's process (the driver), as in Bytewax.
Spark's Python processes reach them through one authenticated socket
server there: the streaming source asks for offsets, each task fetches its
input and hands over its output chunks.  Bulk data so never travels inside
Spark's own task descriptions and results, where the JVM would copy it into
every task and stage it serialises.

On one machine the server listens on loopback; on a cluster it listens on
every interface and executors reach it at the driver's host name.
"""

from __future__ import annotations

import pickle
import secrets
import threading
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Callable, Dict, Optional, Tuple

import cloudpickle

from flowspark.engine.gc_pause import collector_paused


@dataclass(frozen=True)
class DriverLink:
    """Where the driver's server is and its key: what workers need to call it (picklable)."""

    host: str
    port: int
    authkey: bytes

    def call(self, name: str, *args: Any) -> Any:
        """Call `name` on the driver; raise `RuntimeError` with its message if it failed there."""
        with _LOCK:
            ok, value = _exchange(self, (name, args))
        if not ok:
            raise RuntimeError(f"flowspark driver call {name!r} failed: {value}")
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
        _open["link"] = link
    try:
        _open["conn"].send(request)
        reply: Tuple[bool, Any] = pickle.loads(_open["conn"].recv_bytes())
    except (EOFError, OSError):
        _open["link"] = None
        raise
    return reply


class DriverServer:
    """Serves named calls to Spark's Python processes, one thread per connection.

    The first exception a call raises is kept in `failure`: the run stops
    on it and raises it, since it came from a source or sink.
    """

    def __init__(self, host: Optional[str] = None) -> None:
        self._calls: Dict[str, Callable[..., Any]] = {}
        self.failure: Optional[BaseException] = None
        authkey = secrets.token_bytes(16)
        self._listener = Listener(("0.0.0.0" if host else "127.0.0.1", 0), authkey=authkey)
        self.link = DriverLink(host or "127.0.0.1", self._listener.address[1], authkey)
        self._closed = False
        threading.Thread(target=self._serve, name="flowspark-driver-server", daemon=True).start()

    def register(self, name: str, call: Callable[..., Any]) -> None:
        self._calls[name] = call

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except (AuthenticationError, EOFError, ConnectionError):
                continue  # a caller without the key, or one that gave up: serve the others
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    name, args = conn.recv()
                except (EOFError, OSError):
                    return
                try:
                    with collector_paused():
                        reply: Tuple[bool, Any] = (True, self._calls[name](*args))
                except BaseException as ex:
                    if self.failure is None:
                        self.failure = ex
                    reply = (False, str(ex))
                conn.send_bytes(cloudpickle.dumps(reply))

    def close(self) -> None:
        self._closed = True
        self._listener.close()
