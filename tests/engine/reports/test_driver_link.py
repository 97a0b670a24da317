"""The driver's server and the output stash, driven directly (no Spark)."""

from __future__ import annotations

import pickle
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest

from flowspark.engine.plan import chunks
from flowspark.engine.reports import driver_link
from flowspark.engine.reports.driver_link import DriverLink, DriverServer
from flowspark.engine.sinks.sink_writer import OutputStash


def test_calls_reach_the_driver_from_another_process(server: DriverServer) -> None:
    seen: List[Any] = []
    server.register("echo", lambda *args: seen.append(args) or list(args))
    code = (
        "import pickle, sys; link = pickle.loads(sys.stdin.buffer.read()); "
        "print(link.call('echo', 1, 'two'), link.call('echo'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(server.link), capture_output=True, check=True
    )
    assert done.stdout.decode().strip() == "[1, 'two'] []"
    assert seen == [(1, "two"), ()]


def test_a_failing_call_raises_in_the_caller_and_is_kept_for_the_run(server: DriverServer) -> None:
    def broken() -> None:
        msg = "source is gone"
        raise ValueError(msg)

    server.register("broken", broken)
    with pytest.raises(RuntimeError, match="'broken' failed: source is gone"):
        server.link.call("broken")
    assert isinstance(server.failure, ValueError)


def test_a_link_to_a_later_server_opens_a_new_connection() -> None:
    first, second = DriverServer(), DriverServer()
    try:
        first.register("who", lambda: "first")
        second.register("who", lambda: "second")
        assert [first.link.call("who"), second.link.call("who"), first.link.call("who")] == ["first", "second", "first"]
    finally:
        first.close()
        second.close()


def test_a_link_pickles_with_its_key_and_the_server_rejects_a_wrong_key_but_serves_on(server: DriverServer) -> None:
    server.register("ping", lambda: "pong")
    assert pickle.loads(pickle.dumps(server.link)) == server.link
    stranger = DriverLink(server.link.host, server.link.port, b"0" * 16)
    with pytest.raises(Exception, match="digest"):
        stranger.call("ping")
    code = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).call('ping'))"
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(server.link), capture_output=True, check=True
    )
    assert done.stdout.decode().strip() == "pong"


def test_the_stash_hands_over_what_it_holds_once_keyed_by_ticket(server: DriverServer) -> None:
    stash = OutputStash(server)
    payload = chunks.dumps(["a", "b"])
    ticket = server.link.call("stash", payload)
    assert ticket.startswith(OutputStash.TICKET) and len(ticket) < 40
    assert {t: chunks.loads(p) for t, p in stash.detach().items()} == {ticket: ["a", "b"]}
    assert stash.detach() == {}
    later = stash.put(b"the next batch's")
    assert stash.detach() == {later: b"the next batch's"}


def _raw(server: DriverServer) -> socket.socket:
    return socket.create_connection((server.link.host, server.link.port), timeout=5)


def test_junk_and_silent_peers_never_stop_or_stall_the_server(server: DriverServer) -> None:
    server.register("ping", lambda: "pong")
    silent = [_raw(server) for _ in range(5)]  # connect and never answer the challenge
    oversized = _raw(server)
    oversized.sendall(struct.pack("!i", 1 << 20) + b"x" * 4096)  # a frame over the handshake's limit
    garbage = _raw(server)
    garbage.sendall(b"\x00\xff" * 512)
    half = _raw(server)
    half.sendall(struct.pack("!i", 300))  # a header, then nothing
    started = time.monotonic()
    assert server.link.call("ping") == "pong"
    assert time.monotonic() - started < 2
    for peer in silent + [oversized, garbage, half]:
        peer.close()
    assert server.link.call("ping") == "pong"


def test_a_peer_that_never_answers_is_dropped_after_the_handshake_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_link, "HANDSHAKE_SECONDS", 0.3)
    running = DriverServer()
    try:
        silent = _raw(running)
        silent.recv(1024)  # the challenge
        silent.settimeout(5)
        assert silent.recv(1024) == b""  # closed by the server, not left waiting
    finally:
        running.close()


def test_a_pickle_in_place_of_the_handshake_is_never_loaded(server: DriverServer, tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self) -> Any:
            return (open, (str(marker), "w"))

    peer = _raw(server)
    peer.recv(1024)
    blob = pickle.dumps(Exploit())
    peer.sendall(struct.pack("!i", len(blob)) + blob)
    peer.sendall(struct.pack("!i", len(blob)) + blob)
    time.sleep(0.3)
    peer.close()
    assert not marker.exists()


def test_the_server_listens_on_loopback_by_default_and_on_a_fixed_port_when_asked() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = DriverServer(port=port)
    try:
        assert running.link.host == "127.0.0.1" and running.link.port == port
        assert running._socket.getsockname()[0] == "127.0.0.1"
    finally:
        running.close()
