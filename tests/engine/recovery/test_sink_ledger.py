"""The sinks' ledger and the run's id, on local disk and on S3: kept across restarts, a damaged ledger named."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.driver_fence import FENCE
from flowspark.engine.recovery.sink_ledger import LEDGER, RUN_ID, Ledger, read_ledger
from flowspark.engine.recovery.storage import parse_location
from flowspark.errors import FlowsparkRuntimeError


def _survives_a_restart(directory: str) -> None:
    first = Ledger(directory)
    assert (first.batch, first.snapshots) == (-1, {})
    first.commit(0, {"out": {"part-0": 10}})
    first.commit(1, {"out": {"part-0": 25}})
    again = Ledger(directory)
    assert (again.batch, again.snapshots) == (1, {"out": {"part-0": 25}})
    assert again.run_id == first.run_id and len(again.run_id) == 12
    assert read_ledger(parse_location(directory).join(LEDGER)) == (1, {"out": {"part-0": 25}})


def test_the_ledger_survives_a_restart_on_local_disk(tmp_path: Path) -> None:
    _survives_a_restart(str(tmp_path))
    assert stat.S_IMODE((tmp_path / LEDGER).stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / RUN_ID).stat().st_mode) == 0o600


def test_the_ledger_survives_a_restart_on_s3(s3_folder: str) -> None:
    _survives_a_restart(s3_folder)
    assert sorted(storage.list_names(parse_location(s3_folder))) == sorted([LEDGER, RUN_ID, FENCE])


def test_a_damaged_ledger_on_s3_is_named(s3_folder: str) -> None:
    Ledger(s3_folder).commit(3, {})
    storage.write_private(parse_location(s3_folder).join(LEDGER), b"\x80\x05garbage")
    with pytest.raises(FlowsparkRuntimeError, match=f"the sinks' ledger '{s3_folder}/{LEDGER}' is damaged"):
        Ledger(s3_folder)
