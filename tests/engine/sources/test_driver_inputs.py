"""The source hub driven directly, as Spark's source calls it through the driver link (no Spark)."""

from __future__ import annotations

import base64
import pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import flowspark.operators as op
from flowspark.connectors.files import FileSource
from flowspark.dataflow import Dataflow
from flowspark.engine.plan import chunks
from flowspark.engine.plan.line_blocks import LineBlock
from flowspark.engine.plan.plan import build_plan
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.sources.driver_inputs import DriverInputs, Offset, Polling
from flowspark.inputs import (
    AbortExecution,
    DynamicSource,
    FixedPartitionedSource,
    Source,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from flowspark.testing import TestingSink


class _ListPartition(StatefulSourcePartition[Any, int]):
    """Emits its items `batch_size` at a time; its snapshot is the index of the next item."""

    def __init__(self, source: "_ListSource", name: str, start: int) -> None:
        self._source = source
        self._items = source.parts[name]
        self._name = name
        self._next = start

    def next_batch(self) -> List[Any]:
        failure = self._source.failures.get(self._name)
        if failure is not None and self._next >= failure[0]:
            raise failure[1]
        if self._next >= len(self._items):
            raise StopIteration
        batch = self._items[self._next : self._next + self._source.batch_size]
        self._next += len(batch)
        return batch

    def snapshot(self) -> int:
        return self._next

    def close(self) -> None:
        self._source.closed.append(self._name)


class _Committed(_ListPartition):
    """A partition that wants to hear which snapshot no run will resume before again."""

    def committed(self, snapshot: int) -> None:
        self._source.committed.append((self._name, snapshot))


class _Waking(_ListPartition):
    """Answers `next_awake` with its source's next wake-up; asked once too often, it fails."""

    def next_awake(self) -> Optional[datetime]:
        wait = self._source.wake_ups.pop(0)
        return None if wait is None else datetime.now(timezone.utc) + wait


class _EmptyBetween(_ListPartition):
    """Gives an empty batch before each of its batches, and before it ends, as `TestingSource` does before an end
    or an abort; counts its calls."""

    calls = 0

    def next_batch(self) -> List[Any]:
        type(self).calls += 1
        if type(self).calls % 2:
            return []
        return super().next_batch()


class _ListSource(FixedPartitionedSource[Any, int]):
    """Named partitions of listed items; records what the hub asks of it."""

    def __init__(self, parts: Dict[str, List[Any]], batch_size: int = 2, partition: type = _ListPartition) -> None:
        self.parts = parts
        self.batch_size = batch_size
        self.partition = partition
        self.built: List[Tuple[str, str, Optional[int]]] = []
        self.closed: List[str] = []
        self.committed: List[Tuple[str, int]] = []
        self.failures: Dict[str, Tuple[int, BaseException]] = {}
        """Partition name -> (index, exception): `next_batch` raises it once that index is reached."""
        self.wake_ups: List[Optional[timedelta]] = []
        """What `_Waking` partitions answer `next_awake`, in turn: a delay from now, or `None`."""

    def list_parts(self) -> List[str]:
        return list(self.parts)

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _ListPartition:
        self.built.append((step_id, for_part, resume_state))
        made: _ListPartition = self.partition(self, for_part, resume_state or 0)
        return made


class _WorkerPartition(StatelessSourcePartition[Tuple[int, int]]):
    def __init__(self, index: int) -> None:
        self._index = index
        self._left = 2

    def next_batch(self) -> List[Tuple[int, int]]:
        if not self._left:
            raise StopIteration
        self._left -= 1
        return [(self._index, self._left)]


class _PerWorker(DynamicSource[Tuple[int, int]]):
    """One partition per worker, emitting `(worker index, countdown)`."""

    def __init__(self) -> None:
        self.built: List[Tuple[str, int, int]] = []

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _WorkerPartition:
        self.built.append((step_id, worker_index, worker_count))
        return _WorkerPartition(worker_index)


class _Sleeper(StatefulSourcePartition[int, None]):
    """Emits nothing until an hour from now."""

    def next_batch(self) -> List[int]:
        return []

    def next_awake(self) -> Optional[datetime]:
        return datetime.now(timezone.utc) + timedelta(hours=1)

    def snapshot(self) -> None:
        return None


class _SleepySource(FixedPartitionedSource[int, None]):
    def list_parts(self) -> List[str]:
        return ["asleep"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _Sleeper:
        return _Sleeper()


def _hub(
    server: DriverServer,
    *sources: Source[Any],
    max_items: int = 1000,
    pieces: int = 1,
    workers: int = 1,
    epoch_per_round: bool = False,
) -> DriverInputs:
    flow = Dataflow("hub")
    for i, source in enumerate(sources):
        op.output(f"out{i}", op.input(f"inp{i}", flow, source), TestingSink([]))
    polling = Polling(max_items, 5.0, epoch_per_round)
    return DriverInputs(build_plan(flow), server, polling, pieces, workers=workers)


def _items(hub: DriverInputs, start: Offset, end: Offset) -> Dict[str, List[Any]]:
    """The items each piece of the range carries, by origin, as a task would fetch them."""
    found: Dict[str, List[Any]] = {}
    for origin, _, number, index, _, _ in hub.partition_data(start, end):
        for blob in pickle.loads(hub.piece(number, index)):
            found.setdefault(origin, []).extend(blob.lines() if isinstance(blob, LineBlock) else chunks.loads(blob))
    return found


def _read_all(hub: DriverInputs) -> Tuple[List[Offset], List[Any]]:
    """Every offset the hub hands out until it stops moving, and all the items in order."""
    offsets = [hub.initial_offset()]
    items: List[Any] = []
    while True:
        end = hub.latest_offset(offsets[-1])
        if end == offsets[-1]:
            return offsets, items
        items.extend(item for got in _items(hub, offsets[-1], end).values() for item in got)
        hub.commit(end)
        offsets.append(end)


def test_the_first_offset_names_every_partition_unread(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": [1], "b": [2]}), _PerWorker(), workers=3)
    first = hub.initial_offset()
    assert first["n"] == 0 and first["end"] == ""
    assert sorted(first["parts"]) == ["0:a", "0:b", "1:*0", "1:*1", "1:*2"]
    assert {part["c"] for part in first["parts"].values()} == {0}
    assert hub.partition_names() == [["a", "b"], ["*"]]


def test_a_poll_reads_every_partition_and_records_its_snapshot_and_count(server: DriverServer) -> None:
    source = _ListSource({"a": [1, 2, 3], "b": [10, 20, 30, 40, 50]})
    hub = _hub(server, source, max_items=2)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    assert second["n"] == 1 and second["end"] == ""
    assert {key: (pickle.loads(base64.b64decode(p["s"])), p["c"]) for key, p in second["parts"].items()} == {
        "0:a": (2, 2),
        "0:b": (2, 2),
    }
    assert sorted(_items(hub, first, second).values()) == [[1, 2], [10, 20]]
    assert hub.items_read == 4


def test_the_end_of_every_partition_ends_the_input_in_the_same_batch(server: DriverServer) -> None:
    source = _ListSource({"a": [1, 2, 3], "b": [4]})
    hub = _hub(server, source)
    offsets, items = _read_all(hub)
    assert [o["end"] for o in offsets] == ["", "eof"]
    assert sorted(items) == [1, 2, 3, 4]
    assert sorted(source.closed) == ["a", "b"]  # each partition closed as it ended
    assert hub.latest_offset(offsets[-1]) == offsets[-1]  # nothing after the end


def test_a_backlog_is_read_ahead_and_every_item_arrives_once_in_order(server: DriverServer) -> None:
    items = list(range(25))
    hub = _hub(server, _ListSource({"only": items}, batch_size=3), max_items=6)
    offsets, read = _read_all(hub)
    assert read == items
    assert [o["parts"]["0:only"]["c"] for o in offsets] == [0, 6, 12, 18, 24, 25]
    assert offsets[-1]["end"] == "eof"
    hub.close()


def test_a_sleeping_partition_gives_no_new_offset(server: DriverServer) -> None:
    hub = _hub(server, _SleepySource())
    first = hub.initial_offset()
    assert hub.latest_offset(first) == first
    assert hub.partition_data(first, first) == []


def test_a_partition_is_asked_when_to_wake_once_built_and_after_each_batch_and_not_polled_before(
    server: DriverServer,
) -> None:
    source = _ListSource({"a": [1, 2, 3]}, batch_size=1, partition=_Waking)
    source.wake_ups = [None, timedelta(hours=1)]  # once built; after the first batch
    hub = _hub(server, source)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    assert _items(hub, first, second) == {"000.00000.000": [1]}
    assert hub.latest_offset(second) == second  # asleep: neither polled nor asked again
    assert source.wake_ups == []
    hub.close()

    # A resumed partition is asked again once built, as Bytewax asks it: the hour is forgotten.
    source.wake_ups = [None, None, None]
    restarted = _hub(server, source)
    third = restarted.latest_offset(second)
    assert _items(restarted, second, third) == {"000.00000.000": [2, 3]}
    assert third["end"] == "eof" and source.wake_ups == []


def test_with_an_epoch_per_round_an_abort_ends_the_input_after_what_its_poll_read_before(
    server: DriverServer,
) -> None:
    source = _ListSource({"a": [1, 2, 3, 4]})
    source.failures["a"] = (2, AbortExecution())
    hub = _hub(server, source, epoch_per_round=True)
    first = hub.initial_offset()
    read = hub.latest_offset(first)
    # What the poll read before the abort is a micro-batch of its own, and a resume point.
    assert read["end"] == ""
    assert read["parts"]["0:a"]["c"] == 2
    assert _items(hub, first, read) == {"000.00000.000": [1, 2]}
    aborted = hub.latest_offset(read)
    assert aborted["end"] == "abort"
    # The micro-batch the abort cuts short brings nothing, and a resumed run starts where it started.
    assert aborted["parts"] == read["parts"]
    assert _items(hub, read, aborted) == {}
    assert hub.latest_offset(aborted) == aborted


def test_an_empty_batch_is_asked_again_once_before_the_partition_counts_as_caught_up(server: DriverServer) -> None:
    _EmptyBetween.calls = 0
    hub = _hub(server, _ListSource({"a": [1, 2, 3]}, partition=_EmptyBetween))
    first = hub.initial_offset()
    ended = hub.latest_offset(first)
    # Each empty batch was followed at once by items, and the end by an empty batch: all in one poll.
    assert ended["end"] == "eof"
    assert _items(hub, first, ended) == {"000.00000.000": [1, 2, 3]}
    assert _EmptyBetween.calls == 6


def test_two_empty_batches_in_a_row_end_the_poll_of_a_partition(server: DriverServer) -> None:
    class Idle(_ListPartition):
        calls = 0

        def next_batch(self) -> List[Any]:
            Idle.calls += 1
            return []

    hub = _hub(server, _ListSource({"a": [1]}, partition=Idle))
    first = hub.initial_offset()
    assert hub.latest_offset(first) == first
    assert Idle.calls == 2


@pytest.mark.parametrize("abort_at, read_before", [(2, [1, 2]), (0, [])], ids=["after-items", "first-call"])
def test_with_an_epoch_per_micro_batch_an_abort_cuts_short_its_whole_poll(
    server: DriverServer, abort_at: int, read_before: List[int]
) -> None:
    source = _ListSource({"a": [1, 2, 3, 4]})
    source.failures["a"] = (abort_at, AbortExecution())
    hub = _hub(server, source)
    first = hub.initial_offset()
    aborted = hub.latest_offset(first)
    # What the poll read goes on to the outputs, but a resumed run starts where it started.
    assert aborted["end"] == "abort"
    assert aborted["parts"] == first["parts"]
    assert _items(hub, first, aborted) == ({"000.00000.000": read_before} if read_before else {})


def test_a_new_hub_resumes_each_partition_from_the_offset_it_is_given(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": [1, 2, 3, 4, 5]}), max_items=2)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    hub.close()

    again = _ListSource({"a": [1, 2, 3, 4, 5]})
    restarted = _hub(server, again, max_items=2)
    third = restarted.latest_offset(second)
    assert again.built == [("hub.inp0", "a", 2)]
    assert _items(restarted, second, third) == {"000.00000.000": [3, 4]}
    assert third["parts"]["0:a"]["c"] == 4


def test_a_range_the_hub_no_longer_holds_is_read_again_from_its_start_snapshot(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": list(range(10))}, batch_size=3), max_items=5)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    hub.close()
    assert second["parts"]["0:a"]["c"] == 6

    # After a restart Spark asks for the pieces of a range the new hub never read.
    restarted = _hub(server, _ListSource({"a": list(range(10))}, batch_size=4), max_items=5)
    assert _items(restarted, first, second) == {"000.00000.000": [0, 1, 2, 3, 4, 5]}


def test_a_range_kept_in_the_recovery_directory_is_replayed_as_it_was_read(
    server: DriverServer, tmp_path: Path
) -> None:
    from flowspark.engine.recovery.storage import Location, Scheme

    kept = Location(Scheme.LOCAL, str(tmp_path / "input"))
    hub = _hub(server, _ListSource({"a": list(range(10))}, batch_size=3), max_items=5)
    hub.keep_input_in(kept)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    hub.close()

    # A source that can't give the same items again: the kept input is what the replay gets.
    restarted = _hub(server, _ListSource({"a": ["other"] * 10}, batch_size=3), max_items=5)
    restarted.keep_input_in(kept)
    assert _items(restarted, first, second) == {"000.00000.000": [0, 1, 2, 3, 4, 5]}
    restarted.commit(second)
    assert not (tmp_path / "input" / str(second["n"])).exists()


def test_a_file_sources_batches_reach_the_tasks_as_the_bytes_of_their_lines(
    server: DriverServer, tmp_path: Path
) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i} é\n" for i in range(7)), encoding="utf-8")
    hub = _hub(server, FileSource(path, batch_size=3))
    first = hub.initial_offset()
    end = hub.latest_offset(first)
    [(_, _, number, index, _, _)] = hub.partition_data(first, end)
    blocks = pickle.loads(hub.piece(number, index))
    assert all(isinstance(block, LineBlock) for block in blocks)
    assert [block.count for block in blocks] == [3, 3, 1]
    assert [line for block in blocks for line in block.lines()] == [f"line {i} é" for i in range(7)]


def test_a_file_range_read_again_stops_inside_a_batch_where_the_first_reading_did(
    server: DriverServer, tmp_path: Path
) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"{i}\n" for i in range(10)))
    hub = _hub(server, FileSource(path, batch_size=3), max_items=5)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    hub.close()
    assert second["parts"]["0:" + FileSource(path).list_parts()[0]]["c"] == 6

    restarted = _hub(server, FileSource(path, batch_size=4), max_items=5)
    [items] = _items(restarted, first, second).values()
    assert items == [str(i) for i in range(6)]


def test_bad_bytes_in_a_file_fail_the_poll_that_reads_them_naming_the_step_and_file(
    server: DriverServer, tmp_path: Path
) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\n" * 4 + b"\xff\xfe\n")
    hub = _hub(server, FileSource(path, batch_size=2))
    with pytest.raises(StepFailure, match="`next_batch` in step 'hub.inp0'") as failure:
        hub.latest_offset(hub.initial_offset())
    assert isinstance(failure.value.__cause__, UnicodeDecodeError)
    assert "bad.txt" in str(failure.value.__cause__)


def test_a_busy_partition_is_cut_into_pieces_that_keep_its_order(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": list(range(8))}, batch_size=2), pieces=2)
    first = hub.initial_offset()
    end = hub.latest_offset(first)
    pieces = hub.partition_data(first, end)
    assert [p[0] for p in pieces] == ["000.00000.000", "000.00000.001"]
    assert pieces[0][1] < pieces[1][1]  # sequence bases in piece order
    assert [p[4] for p in pieces] == [0, 2]  # the round of each piece's first batch: one batch a round
    assert [item for got in _items(hub, first, end).values() for item in got] == list(range(8))


def test_a_dynamic_source_gets_one_partition_per_worker(server: DriverServer) -> None:
    source = _PerWorker()
    hub = _hub(server, source, workers=3)
    _, items = _read_all(hub)
    assert source.built == [("hub.inp0", 0, 3), ("hub.inp0", 1, 3), ("hub.inp0", 2, 3)]
    assert sorted(items) == [(w, n) for w in range(3) for n in (0, 1)]


def test_committed_snapshots_reach_partitions_that_ask_and_free_the_pieces(server: DriverServer) -> None:
    source = _ListSource({"a": [1, 2, 3, 4, 5]}, partition=_Committed)
    hub = _hub(server, source, max_items=2)
    first = hub.initial_offset()
    second = hub.latest_offset(first)
    pieces = hub.partition_data(first, second)
    hub.commit(second)
    assert source.committed == [("a", 2)]
    with pytest.raises(KeyError):
        hub.piece(second["n"], pieces[0][3])


def test_close_closes_the_live_partitions(server: DriverServer) -> None:
    source = _ListSource({"a": [1, 2, 3], "b": [4, 5, 6]})
    hub = _hub(server, source, max_items=1)
    hub.latest_offset(hub.initial_offset())
    hub.close()
    assert sorted(source.closed) == ["a", "b"]


def test_fraction_done_when_every_partition_tells(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": [1]}))
    hub.latest_offset(hub.initial_offset())
    assert hub.fraction_done() == 1.0  # the only partition ended
    sleepy = _hub(server, _SleepySource())
    sleepy.latest_offset(sleepy.initial_offset())
    assert sleepy.fraction_done() is None  # a partition that can't tell


def test_a_failing_listing_names_the_step(server: DriverServer) -> None:
    class _Unlistable(_ListSource):
        def list_parts(self) -> List[str]:
            msg = "no such bucket"
            raise OSError(msg)

    hub = _hub(server, _Unlistable({}))
    with pytest.raises(StepFailure, match="listing partitions of step 'hub.inp0'") as caught:
        hub.initial_offset()
    assert isinstance(caught.value.cause, OSError)


def test_a_failing_build_names_the_partition_and_the_step(server: DriverServer) -> None:
    class _Unbuildable(_ListSource):
        def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _ListPartition:
            msg = "bad resume state"
            raise ValueError(msg)

    hub = _hub(server, _Unbuildable({"p1": [1]}))
    with pytest.raises(StepFailure, match="building partition 'p1' of step 'hub.inp0'"):
        hub.latest_offset(hub.initial_offset())


def test_a_failing_read_names_the_step_and_the_partition(server: DriverServer) -> None:
    source = _ListSource({"p1": [1, 2]})
    source.failures["p1"] = (0, ConnectionError("broker gone"))
    hub = _hub(server, source)
    with pytest.raises(StepFailure, match="`next_batch` in step 'hub.inp0' for partition 'p1'") as caught:
        hub.latest_offset(hub.initial_offset())
    assert isinstance(caught.value.cause, ConnectionError)


def test_a_failure_in_the_read_ahead_reaches_the_next_offset_request(server: DriverServer) -> None:
    source = _ListSource({"p1": list(range(6))}, batch_size=2)
    source.failures["p1"] = (2, ConnectionError("broker gone"))
    hub = _hub(server, source, max_items=2)
    second = hub.latest_offset(hub.initial_offset())  # stops at the limit: the next batch is read ahead
    with pytest.raises(StepFailure, match="for partition 'p1'"):
        hub.latest_offset(second)


def test_the_hub_serves_its_calls_through_the_driver_link(server: DriverServer) -> None:
    hub = _hub(server, _ListSource({"a": [1, 2]}))
    first = server.link.call("initial_offset")
    end = server.link.call("latest_offset", first)
    pieces = server.link.call("partition_data", first, end)
    blobs = pickle.loads(server.link.call("piece", pieces[0][2], pieces[0][3]))
    assert [item for blob in blobs for item in chunks.loads(blob)] == [1, 2]
    server.link.call("commit", end)
    assert end["end"] == "eof" and hub.items_read == 2
