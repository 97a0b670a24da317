"""What a flow's functions print in Spark's workers lands on the driver's standard output, as in Bytewax's one process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from support.oracle import ENGINES, Engine, run_on

from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.worker_prints import OUTPUT_CALL, EntryKind, prints_to_driver


def _printed(capsys: pytest.CaptureFixture[str], engine: str, build: Any, **run_kwargs: Any) -> Tuple[List[str], str]:
    """What a run of `build` on `engine` printed: its lines on standard output, and its standard error."""
    capsys.readouterr()
    run_on(engine, build, **run_kwargs)
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def _shout(x: int) -> int:
    print("saw", x)
    return x * 10


def _count(seen: Any, x: int) -> Tuple[int, int]:
    seen = (seen or 0) + 1
    print(f"count {seen} after {x}")
    return seen, x


def test_prints_of_a_map_and_a_stateful_step_reach_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    def build(e: Engine) -> Any:
        flow = e.Dataflow("df")
        out: List[Any] = []
        nums = e.op.map("shout", e.op.input("inp", flow, e.TestingSource([1, 2, 3])), _shout)
        counted = e.op.stateful_map("count", e.op.key_on("key", nums, lambda _: "k"), _count)
        e.op.output("out", counted, e.TestingSink(out))
        return flow, {"out": out}

    bytewax_lines, _ = _printed(capsys, "bytewax", build)
    flowspark_lines, flowspark_err = _printed(capsys, "flowspark", build)
    assert [line for line in bytewax_lines if line.startswith("saw")] == ["saw 1", "saw 2", "saw 3"]
    assert sorted(flowspark_lines) == sorted(bytewax_lines)
    assert [line for line in flowspark_lines if line.startswith("count")] == [
        "count 1 after 10",
        "count 2 after 20",
        "count 3 after 30",
    ]
    assert "saw" not in flowspark_err and "count" not in flowspark_err


@pytest.mark.parametrize("engine", ENGINES)
def test_prints_of_a_sink_written_in_spark_tasks_reach_standard_output(
    engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.txt"
    path.write_text("a\nb\nc\n")

    def build(e: Engine) -> Any:
        class Shouting(e.outputs.StatelessSinkPartition):
            def write_batch(self, items: List[str]) -> None:
                for item in items:
                    print("got", item)

        class ShoutingSink(e.outputs.DynamicSink):
            lives_in_driver = False  # flowspark: written in Spark's tasks (Bytewax has no such attribute)

            def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
                return Shouting()

        flow = e.Dataflow("df")
        e.op.output("out", e.op.input("inp", flow, e.files.FileSource(path)), ShoutingSink())
        return flow, {}

    # Without one worker's order to keep, flowspark writes such a sink in
    # the task that reads the file, in a Spark worker.
    lines, _ = _printed(capsys, engine, build, workers_per_process=2)
    assert sorted(lines) == ["got a", "got b", "got c"]


def _handed_over(server: DriverServer) -> List[str]:
    """The prints the driver gets, one string per handing over."""
    written: List[str] = []
    server.register(
        OUTPUT_CALL, lambda entries: written.append("".join(v for kind, v in entries if kind is EntryKind.PRINT))
    )
    return written


def test_a_worker_hands_its_prints_over_when_its_work_ends_and_when_asked_to_flush(server: DriverServer) -> None:
    written = _handed_over(server)
    before = sys.stdout
    with prints_to_driver(server.link):
        print("one")
        print("two", end="")
        assert written == []
        print(" and", flush=True)
        assert written == ["one\ntwo and\n"]
        print("three")
    assert sys.stdout is before
    assert written == ["one\ntwo and\n", "three\n"]


def test_prints_a_gone_driver_cannot_take_go_to_the_workers_standard_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", sys.stderr)  # as PySpark sets it in its workers
    server = DriverServer()
    link = server.link
    server.close()
    with prints_to_driver(link):
        print("kept")
    assert capsys.readouterr().err == "kept\n"


def test_bytes_written_to_the_buffer_take_the_same_way_and_the_descriptor_is_the_workers_own(
    server: DriverServer,
) -> None:
    written = _handed_over(server)
    own = sys.stdout
    snowman = "\u2603".encode()
    with prints_to_driver(server.link):
        print("text,", end=" ")
        sys.stdout.buffer.write(b"bytes " + snowman[:1])
        sys.stdout.buffer.write(snowman[1:] + b"\n")
        descriptor = sys.stdout.fileno()
    assert written == ["text, bytes \u2603\n"]
    assert descriptor == own.fileno()
