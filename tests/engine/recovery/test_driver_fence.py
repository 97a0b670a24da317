"""One driver per recovery directory: the latest to open the ledger owns it; the earlier one's commits and sink tasks stop."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from support.partitions import LineSink

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import sink_part_group
from flowspark.engine.recovery.driver_fence import FENCE, DriverFence, FencedOut, claim_for, owning
from flowspark.engine.recovery.sink_ledger import Ledger
from flowspark.engine.sinks.batch_id import SinkBatch
from flowspark.engine.sinks.sink_tasks import BatchWrite, TaskOutput


def test_a_later_claim_fences_the_earlier_driver_out_and_names_the_new_owner(tmp_path: Path) -> None:
    first = DriverFence.claim(str(tmp_path))
    first.check()
    second = DriverFence.claim(str(tmp_path))
    second.check()
    with pytest.raises(FencedOut) as info:
        first.check()
    message = str(info.value)
    assert f"the run started on {socket.gethostname()} (pid {os.getpid()})" in message
    assert repr(str(tmp_path)) in message and "two runs must not share one recovery directory" in message
    assert stat.S_IMODE((tmp_path / FENCE).stat().st_mode) == 0o600


def test_a_ledger_another_driver_opened_since_can_not_commit(tmp_path: Path) -> None:
    old = Ledger(str(tmp_path))
    old.commit(0, {"out": {"p0": 3}})
    new = Ledger(str(tmp_path))
    with pytest.raises(FencedOut):
        old.commit(1, {"out": {"p0": 9}})
    assert (Ledger(str(tmp_path)).batch, new.batch) == (0, 0)


def test_a_sink_task_of_a_driver_that_lost_the_directory_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    sink = LineSink(tmp_path / "out")
    (tmp_path / "out" / "p0").write_text("a\nb\n")
    rows = chunks.to_arrow([(sink_part_group(0, 0, "0.0"), 0, chunks.DATA, chunks.dumps(["c"]))])
    stale = DriverFence.claim(str(tmp_path))
    DriverFence.claim(str(tmp_path))  # a restarted driver took over
    write = BatchWrite(
        {0: TaskOutput("flow.out", sink, ("p0", "p1"))},
        SinkBatch("run", 1),
        True,
        {"flow.out": {"p0": 2}},
        None,
        False,
        stale,
    )
    with pytest.raises(FencedOut):
        list(write(iter([rows])))
    assert sink.lines("p0") == ["a", "b"] and sink.builds() == []
    owner = DriverFence.claim(str(tmp_path))
    write = BatchWrite(
        {0: TaskOutput("flow.out", sink, ("p0", "p1"))},
        SinkBatch("run", 1),
        True,
        {"flow.out": {"p0": 4}},
        None,
        False,
        owner,
    )
    list(write(iter([rows])))
    assert sink.lines("p0") == ["a", "b", "c"]


def test_a_run_keeps_its_claim_through_its_query_s_restarts_and_loses_it_to_a_later_run(tmp_path: Path) -> None:
    with owning(str(tmp_path)) as run:
        first, restarted = Ledger(str(tmp_path)), Ledger(str(tmp_path))  # the query's first attempt, then a restart
        assert first.fence == restarted.fence == run
        first.commit(0, {})
        later = DriverFence.claim(str(tmp_path))  # another run starts with the same directory
        with pytest.raises(FencedOut):
            Ledger(str(tmp_path)).commit(1, {})  # a restart does not take the directory back
    later.check()
    assert claim_for(str(tmp_path)) != later  # outside a run, opening a ledger claims anew
