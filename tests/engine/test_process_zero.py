"""Bytewax's other processes and process 0: the status travels, a stranger on the port is not process 0, waits end."""

from __future__ import annotations

import socket
import threading
import time
from typing import List

import pytest
from support.ports import free_port

from flowspark.engine.process_zero import announce_status, wait_for_process_zero


def _waiting(address: str, statuses: List[int], reach: float = 60.0) -> threading.Thread:
    thread = threading.Thread(target=lambda: statuses.append(wait_for_process_zero(address, 1, reach)), daemon=True)
    thread.start()
    return thread


def test_every_waiting_process_ends_with_process_0_s_status(caplog: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    statuses: List[int] = []
    caplog.set_level("INFO", "flowspark")
    with announce_status(address, 3) as beacon:
        waiters = [_waiting(address, statuses) for _ in range(3)]
        while caplog.text.count("is running the flow") < 3:
            assert all(w.is_alive() for w in waiters)
            threading.Event().wait(0.02)
        beacon.finish(143)
    for waiter in waiters:
        waiter.join(10)
    assert statuses == [143, 143, 143]


def test_a_run_that_raises_tells_the_others_status_1(caplog: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    statuses: List[int] = []
    caplog.set_level("INFO", "flowspark")
    with pytest.raises(ValueError), announce_status(address, 1):
        waiter = _waiting(address, statuses)
        while "is running the flow" not in caplog.text:
            threading.Event().wait(0.02)
        msg = "the run failed"
        raise ValueError(msg)
    waiter.join(10)
    assert statuses == [1]


def test_a_process_that_comes_up_after_a_short_run_still_hears_its_status() -> None:
    address = f"127.0.0.1:{free_port()}"
    statuses: List[int] = []
    started = time.monotonic()
    late: List[threading.Thread] = []
    with announce_status(address, 1, linger=60) as beacon:
        beacon.finish(0)
        late.append(_waiting(address, statuses))
    late[0].join(10)
    assert statuses == [0]
    assert time.monotonic() - started < 30  # process 0 left once the other had heard it


def test_process_0_leaves_after_its_linger_when_a_process_never_comes() -> None:
    started = time.monotonic()
    with announce_status(f"127.0.0.1:{free_port()}", 1, linger=0.5) as beacon:
        beacon.finish(0)
    assert time.monotonic() - started < 5


def test_something_else_on_the_port_is_not_process_0_and_the_wait_ends(caplog: pytest.LogCaptureFixture) -> None:
    stranger = socket.create_server(("127.0.0.1", 0))
    port = stranger.getsockname()[1]

    def answer() -> None:
        while True:
            try:
                peer, _ = stranger.accept()
            except OSError:
                return
            with peer:
                peer.sendall(b"status 0\n")  # no greeting: not process 0's words

    threading.Thread(target=answer, daemon=True).start()
    try:
        assert wait_for_process_zero(f"127.0.0.1:{port}", 2, reach_seconds=1.5) == 1
    finally:
        stranger.close()
    assert f"process 2: process 0 at 127.0.0.1:{port} could not be reached for 2 s; giving up" in caplog.text


def test_an_address_that_is_not_host_and_port_waits_for_nothing(caplog: pytest.LogCaptureFixture) -> None:
    assert wait_for_process_zero("flow-0.flow", 1) == 0
    assert "is not host:port" in caplog.text
