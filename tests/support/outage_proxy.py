"""A TCP proxy through which a test cuts a broker off and brings it back, as a network outage does."""

from __future__ import annotations

import socket
import threading
from typing import List

from support.ports import free_port


class Outage:
    """A TCP proxy on a free loopback port in front of the loopback port `target`, through which a broker can be cut off.

    `cut()` drops every connection through it and turns away new ones (the
    peer sees its connection closed at once, as a broker that is down)
    until `restore()`.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.target = 0
        self._up = True
        self._open: List[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._up:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                except OSError:
                    client.close()
                    continue
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            self._up = False
            for end in self._open:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
            self._open = []

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.cut()
        self._listener.close()
