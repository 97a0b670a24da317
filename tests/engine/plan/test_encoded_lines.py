"""Values of a one-file sink, encoded into its lines by the workers that make them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan import chunks
from flowspark.engine.plan.encoded_lines import EncodedLines, LineChunk, LineFormat, encoded, line_format, write_lines
from flowspark.engine.reports.failures import StepFailure
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import StatefulSinkPartition
from flowspark.testing import TestingSource, cluster_main


def test_a_chunk_holds_the_bytes_the_sink_writes_and_how_many_values_they_are() -> None:
    chunk = LineChunk("f.out", LineFormat("\n", "utf-8"))
    chunk.extend(["a", "é"])
    chunk.extend([])
    chunk.extend(["", "c"])
    assert encoded(chunk.dumps()) == EncodedLines(4, "a\né\n\nc\n".encode())
    assert encoded(chunks.dumps(["a"])) is None  # pickled items are not encoded lines


def test_a_value_the_sink_could_not_write_fails_naming_the_step() -> None:
    with pytest.raises(StepFailure, match="`write_batch` in step 'f.out'") as raised:
        LineFormat("\n", "utf-8").encode("f.out", ["a", 1])
    assert isinstance(raised.value.cause, TypeError)
    with pytest.raises(StepFailure) as raised:
        LineFormat("\n", "ascii").encode("f.out", ["é"])
    assert isinstance(raised.value.cause, UnicodeEncodeError)


class _Appender:
    def __init__(self) -> None:
        self.data = b""

    def write_lines(self, data: bytes) -> None:
        self.data += data


def test_encoded_lines_go_to_the_partitions_write_lines_and_a_partition_without_one_is_named() -> None:
    partition = _Appender()
    write_lines("f.out", partition, b"a\nb\n")
    assert partition.data == b"a\nb\n"
    with pytest.raises(
        TypeError, match="step 'f.out': its sink offers a line format, but its partition has no `write_lines`"
    ) as info:
        write_lines("f.out", object(), b"a\n")
    assert "`line_format()` return None" in str(info.value)


def test_file_sinks_offer_their_format_and_other_sinks_none(tmp_path: Path) -> None:
    assert line_format(FileSink(tmp_path / "o", end="\r\n")) == LineFormat("\r\n", "UTF-8")
    assert line_format(DirSink(tmp_path, 2)) == LineFormat("\n", "UTF-8")
    assert line_format(object()) is None


class _UpperCaseFileSink(FileSink):
    """Builds partitions of its own, which the workers can't know how to encode for."""

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> Any:
        return _Upper(super().build_part(step_id, for_part, resume_state))


class _Upper(StatefulSinkPartition[str, int]):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write_batch(self, values: List[str]) -> None:
        self._inner.write_batch([v.upper() for v in values])

    def snapshot(self) -> int:
        return int(self._inner.snapshot())

    def close(self) -> None:
        self._inner.close()


def test_a_sink_that_builds_its_own_partitions_gets_its_values(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    assert line_format(_UpperCaseFileSink(path)) is None
    flow = Dataflow("enc")
    op.output("out", op.input("inp", flow, TestingSource([("k", "a"), ("k", "b")], 2)), _UpperCaseFileSink(path))
    cluster_main(flow, [], 0, worker_count_per_proc=2)
    assert path.read_text() == "A\nB\n"


def _lines_flow(items: List[Tuple[str, Any]], path: Path) -> Dataflow:
    flow = Dataflow("enc")
    op.output("out", op.input("inp", flow, TestingSource(items, 2)), FileSink(path))
    return flow


def test_a_two_worker_run_writes_the_encoded_lines_in_order(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    cluster_main(_lines_flow([("k", f"v{n}é") for n in range(5000)], path), [], 0, worker_count_per_proc=2)
    assert path.read_text().splitlines() == [f"v{n}é" for n in range(5000)]


def test_a_value_that_is_no_str_ends_the_run_with_the_sinks_error(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with pytest.raises(FlowsparkRuntimeError, match="`write_batch` in step 'enc.out'") as raised:
        cluster_main(_lines_flow([("k", "a"), ("k", 3)], path), [], 0, worker_count_per_proc=2)
    assert isinstance(raised.value.__cause__, TypeError)
