"""Console connectors: `StdOutSink` against Bytewax's, and flowspark's `StdInSource`."""

from __future__ import annotations

import io
import os
import pickle
import time
from datetime import datetime, timezone
from typing import Any, Iterator, List

import bytewax.connectors.stdio as bw
import pytest

from flowspark.connectors.stdio import StdInSource, StdOutSink
from flowspark.inputs import StatelessSourcePartition


class _Item:
    def __str__(self) -> str:
        return "as str"

    def __repr__(self) -> str:
        return "as repr"


ITEMS: List[Any] = ["a", 1, None, ("k", 2.5), _Item(), "two\nlines", ""]


def test_stdout_sink_matches_bytewax(capsys: pytest.CaptureFixture[str]) -> None:
    part = StdOutSink().build("out", 0, 1)
    part.write_batch(ITEMS)
    part.write_batch([])
    part.close()
    ours = capsys.readouterr().out
    bw.StdOutSink().build("out", 0, 1).write_batch(ITEMS)
    assert ours == capsys.readouterr().out
    assert ours == "a\n1\nNone\n('k', 2.5)\nas str\ntwo\nlines\n\n"


class _Recorder(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushed: List[str] = []

    def flush(self) -> None:
        self.flushed.append(self.getvalue())


def test_stdout_sink_flushes_after_each_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Recorder()
    monkeypatch.setattr("sys.stdout", out)
    part = StdOutSink().build("out", 0, 1)
    part.write_batch(["a", "b"])
    part.write_batch(["c"])
    assert out.flushed == ["a\nb\n", "a\nb\nc\n"]


def poll(part: StatelessSourcePartition[str], timeout: float = 5.0) -> Iterator[List[str]]:
    """Yield the non-empty batches of `part` until it ends, honouring `next_awake`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        awake = part.next_awake()
        if awake is not None:
            time.sleep(max(0.0, (awake - datetime.now(timezone.utc)).total_seconds()))
        try:
            got = part.next_batch()
        except StopIteration:
            return
        if got:
            yield list(got)
    pytest.fail("partition did not end")


def test_stdin_source_reads_lines_until_eof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\r\n\n  c  \nlast"))
    lines = [x for got in poll(StdInSource().build("in", 0, 1)) for x in got]
    assert lines == ["a", "b", "", "  c  ", "last"]


def test_stdin_source_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{i}\n" for i in range(7))))
    batches = list(poll(StdInSource(batch_size=3).build("in", 0, 1)))
    assert max(len(got) for got in batches) <= 3
    assert sum(batches, []) == [str(i) for i in range(7)]


def test_stdin_source_empty_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert list(poll(StdInSource().build("in", 0, 1))) == []


def test_stdin_source_only_worker_0_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("x\n"))
    with pytest.raises(StopIteration):
        StdInSource().build("in", 1, 2).next_batch()
    assert sum(poll(StdInSource().build("in", 0, 2)), []) == ["x"]


def test_stdin_source_does_not_block_while_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    with open(read_fd, encoding="utf-8") as stdin, open(write_fd, "w", encoding="utf-8") as writer:
        monkeypatch.setattr("sys.stdin", stdin)
        part = StdInSource().build("in", 0, 1)
        started = time.monotonic()
        assert part.next_batch() == []
        assert time.monotonic() - started < 0.5
        awake = part.next_awake()
        assert awake is not None and awake > datetime.now(timezone.utc)
        writer.write("hello\n")
        writer.flush()
        assert next(poll(part)) == ["hello"]
        assert part.next_awake() is None
        writer.close()
        assert list(poll(part)) == []


def test_stdin_source_read_error_is_raised_after_earlier_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    # Far more good bytes than one decoded chunk, so they reach the queue first.
    stdin = io.TextIOWrapper(io.BytesIO(b"ok\n" * 10_000 + b"\xff\n"), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)
    part = StdInSource(batch_size=100).build("in", 0, 1)
    lines: List[str] = []
    with pytest.raises(UnicodeDecodeError):
        for got in poll(part):
            lines.extend(got)
    assert lines and set(lines) == {"ok"}


def test_stdin_source_pickles() -> None:
    source = pickle.loads(pickle.dumps(StdInSource(batch_size=5)))
    assert isinstance(source, StdInSource)
