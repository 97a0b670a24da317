"""The driver's server and the output stash, driven directly (no Spark)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Any, Iterator, List

import pytest

from flowspark.engine import chunks
from flowspark.engine.driver_link import DriverLink, DriverServer
from flowspark.engine.sink_writer import OutputStash


@pytest.fixture
def server() -> Iterator[DriverServer]:
    running = DriverServer()
    yield running
    running.close()


def test_calls_reach_the_driver_from_another_process(server: DriverServer) -> None:
    seen: List[Any] = []
    server.register("echo", lambda *args: seen.append(args) or list(args))
    code = (
        "import pickle, sys; link = pickle.loads(sys.stdin.buffer.read()); "
        "print(link.call('echo', 1, 'two'), link.call('echo'))"
    )
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(server.link), capture_output=True, check=True)
    assert done.stdout.decode().strip() == "[1, 'two'] []"
    assert seen == [(1, "two"), ()]


def test_a_failing_call_raises_in_the_caller_and_is_kept_for_the_run(server: DriverServer) -> None:
    def broken() -> None:
        raise ValueError("source is gone")

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
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(server.link), capture_output=True, check=True)
    assert done.stdout.decode().strip() == "pong"


def test_the_stash_gives_back_each_chunk_once_by_its_ticket(server: DriverServer) -> None:
    stash = OutputStash(server)
    payload = chunks.dumps(["a", "b"])
    ticket = server.link.call("stash", payload)
    assert ticket.startswith(OutputStash.TICKET) and len(ticket) < 40
    assert chunks.loads(stash.take(ticket)) == ["a", "b"]
    with pytest.raises(KeyError):
        stash.take(ticket)


def test_a_payload_that_is_no_ticket_passes_through_and_clear_drops_leftovers(server: DriverServer) -> None:
    stash = OutputStash(server)
    inline = chunks.dumps([1, 2])
    assert stash.take(inline) == inline
    left = stash.put(b"from a dropped task attempt")
    stash.clear()
    with pytest.raises(KeyError):
        stash.take(left)
