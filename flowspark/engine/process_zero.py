"""Bytewax's multi-process launch: the processes other than 0 wait for process 0's run and end with its status.

Bytewax starts one process per machine (`-i/-a`, or its Kubernetes chart,
a StatefulSet whose pods are processes `0..n-1`), and all of them run
until the flow ends.  On Spark, process 0 runs the whole flow; the others
have nothing to do, but exiting at once would make a StatefulSet restart
them forever.  So process 0 listens on the port of its own address
(`addresses[0]`, which Bytewax's processes use to reach it), greets every
process that connects, sends a heartbeat every `BEAT_SECONDS`, and at the
end of its run sends its exit status; it keeps telling that status to
processes that connect late (a short run can end before they are up)
until every other process has heard it, or for `LINGER_SECONDS`.  The
others connect, wait, and exit with that status.  When process 0 goes away without one (killed, its pod
restarted), they connect again as it comes back, and give up with status
1 after `REACH_SECONDS` without it.

Nothing read from the socket is ever unpickled: the messages are short
text lines, and a peer that sends anything else is not process 0.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator, List, Optional, Tuple

__all__ = [
    "BEAT_SECONDS",
    "LINGER_SECONDS",
    "REACH_SECONDS",
    "StatusBeacon",
    "announce_status",
    "wait_for_process_zero",
]

_log = logging.getLogger(__name__)

HELLO = b"flowspark process 0\n"
BEAT = b"alive\n"
STATUS = b"status "
BEAT_SECONDS = 5.0
"""How often process 0 tells the others it is still running."""
LINGER_SECONDS = 30.0
"""How long process 0 keeps telling its status, after its run, to processes that have not heard it yet."""
REACH_SECONDS = 600.0
"""How long the others keep trying to reach a process 0 that is not (or no longer) there."""
_MAX_PEERS = 1024
_LINE = 64


def _split(address: str) -> Optional[Tuple[str, int]]:
    """`host:port` (Bytewax's form of an address) as a host and a port; `None` if it is not one."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class StatusBeacon:
    """Process 0's side: tells every process that connects that the run goes on, then how it ended.

    Without a listening socket (`None`: process 0 could not listen) it does nothing.
    """

    def __init__(self, server: Optional[socket.socket], others: int = 0) -> None:
        self._server = server
        self._others = others
        self._peers: List[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._all_told = threading.Event()
        self._told = 0
        self._status: Optional[bytes] = None
        """The status line, once the run ended."""
        if server is not None:
            threading.Thread(target=self._accept, args=(server,), name="flowspark-process-0", daemon=True).start()
            threading.Thread(target=self._beat, name="flowspark-process-0-beat", daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                peer, _ = server.accept()
            except OSError:
                if self._done.is_set():
                    return  # closed
                continue
            peer.settimeout(BEAT_SECONDS)  # a peer that reads nothing can't hold a send up for long
            with self._lock:
                if self._status is not None:  # a late process: the run has ended
                    self._count_told(self._send(peer, HELLO + self._status))
                    peer.close()
                elif len(self._peers) >= _MAX_PEERS or not self._send(peer, HELLO):
                    peer.close()
                else:
                    self._peers.append(peer)

    @staticmethod
    def _send(peer: socket.socket, data: bytes) -> bool:
        try:
            peer.sendall(data)
            return True
        except OSError:
            return False

    def _send_all(self, data: bytes) -> None:
        with self._lock:
            self._send_all_locked(data)

    def _send_all_locked(self, data: bytes) -> None:
        kept = [peer for peer in self._peers if self._send(peer, data)]
        for peer in self._peers:
            if peer not in kept:
                peer.close()
        self._peers = kept

    def _beat(self) -> None:
        while not self._done.wait(BEAT_SECONDS):
            self._send_all(BEAT)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def _count_told(self, told: bool) -> None:
        self._told += told
        if self._told >= self._others:
            self._all_told.set()

    def finish(self, status: int) -> None:
        """Tell every waiting process the run's exit status (and those that connect later, until `close`)."""
        self._done.set()
        with self._lock:
            self._status = STATUS + str(status).encode() + b"\n"
            for peer in self._peers:
                self._count_told(self._send(peer, self._status))
                peer.close()
            self._peers = []

    def close(self, linger: float) -> None:
        """Stop listening once every other process heard the status, or after `linger` seconds."""
        if self._server is None:
            return
        self._all_told.wait(linger)
        self._server.close()


def _listen(address: str) -> Optional[socket.socket]:
    """A socket listening on process 0's port: at its host's address if that is this machine's, else on every interface."""
    parts = _split(address)
    if parts is None:
        _log.warning("process 0's address %r is not host:port: the other processes can't wait for its run", address)
        return None
    host, port = parts
    problem: Optional[OSError] = None
    for bind in (host, ""):
        try:
            return socket.create_server((bind, port), backlog=64)
        except OSError as ex:
            problem = problem or ex
    _log.warning("can't listen on %s for the other processes (%s): they can't wait for this run", address, problem)
    return None


@contextmanager
def announce_status(address: str, others: int, linger: float = LINGER_SECONDS) -> Iterator[StatusBeacon]:
    """In process 0, while its run lasts: the `others` processes can wait for it on `address`.

    Call `finish` with the run's exit status; leaving without it (an
    exception) tells them 1.  Leaving waits until all of them heard it, at
    most `linger` seconds.
    """
    beacon = StatusBeacon(_listen(address), others)
    try:
        yield beacon
    finally:
        if not beacon.finished:
            beacon.finish(1)
        beacon.close(linger)


def _follow(address: Tuple[str, int]) -> Tuple[bool, Optional[int]]:
    """Connect to process 0 and wait for its status: whether it was reached, and the status if it sent one."""
    try:
        conn = socket.create_connection(address, timeout=BEAT_SECONDS)
    except OSError:
        return False, None
    with conn:
        conn.settimeout(3 * BEAT_SECONDS)
        lines = conn.makefile("rb")
        try:
            if lines.readline(_LINE) != HELLO:
                return False, None  # something else listens there
            _log.info("process 0 at %s:%d is running the flow; waiting for its run to end", *address)
            while True:
                line = lines.readline(_LINE)
                if line == BEAT:
                    continue
                number = line[len(STATUS) :].strip()
                if line.startswith(STATUS) and number.lstrip(b"-").isdigit():
                    return True, int(number)
                return True, None  # it went away without a status
        except OSError:
            return True, None


def wait_for_process_zero(address: str, process_id: int, reach_seconds: float = REACH_SECONDS) -> int:
    """In a process other than 0: wait for process 0's run at `address` to end, and return its exit status."""
    parts = _split(address)
    if parts is None:
        _log.warning(
            "process %d: process 0's address %r is not host:port, so there is no run to wait for", process_id, address
        )
        return 0
    last_seen = time.monotonic()
    told = False
    while time.monotonic() - last_seen < reach_seconds:
        reached, status = _follow(parts)
        if status is not None:
            _log.info("process %d: process 0 ended its run with status %d", process_id, status)
            return status
        if reached:
            last_seen = time.monotonic()
            _log.warning(
                "process %d: process 0 at %s went away without a status; waiting for it to come back",
                process_id,
                address,
            )
        elif not told:
            _log.info("process %d: waiting for process 0 at %s", process_id, address)
            told = True
        time.sleep(1.0)
    _log.error(
        "process %d: process 0 at %s could not be reached for %.0f s; giving up", process_id, address, reach_seconds
    )
    return 1
