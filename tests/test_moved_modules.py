"""Modules that moved stay importable by their old names, so pickles written before the move still load."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path

import pytest

from flowspark._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]

# Written by flowspark at de6a56b (before the moves), with pickle.HIGHEST_PROTOCOL.
OLD_PICKLES = {
    "flowspark._step_config:StepKind.STATEFUL_BATCH": (
        b"\x80\x05\x95;\x00\x00\x00\x00\x00\x00\x00\x8c\x15flowspark.step_config\x94\x8c\x08StepKind\x94\x93\x94"
        b"\x8c\x0estateful_batch\x94\x85\x94R\x94."
    ),
    "flowspark._batch_logic:StatefulBatchLogic": (
        b"\x80\x05\x950\x00\x00\x00\x00\x00\x00\x00\x8c\x15flowspark.batch_logic\x94\x8c\x12StatefulBatchLogic"
        b"\x94\x93\x94."
    ),
    "flowspark.engine.sinks.batch_id:SinkBatch('run-1', 7)": (
        b"\x80\x05\x95Y\x00\x00\x00\x00\x00\x00\x00\x8c!flowspark.engine.sinks.sink_batch\x94\x8c\tSinkBatch\x94"
        b"\x93\x94)\x81\x94}\x94(\x8c\x06run_id\x94\x8c\x05run-1\x94\x8c\x08batch_id\x94K\x07ub."
    ),
    "flowspark.engine.state.keyed_state:KeySlot": (
        b"\x80\x05\x95,\x00\x00\x00\x00\x00\x00\x00\x8c\x1cflowspark.engine.state.slots\x94\x8c\x07KeySlot\x94\x93\x94."
    ),
    "flowspark.engine.recovery.sink_ledger:Ledger": (
        b'\x80\x05\x951\x00\x00\x00\x00\x00\x00\x00\x8c"flowspark.engine.sinks.sink_ledger\x94\x8c\x06Ledger\x94'
        b"\x93\x94."
    ),
}


def _expected(where: str) -> object:
    module_name, _, expression = where.partition(":")
    module = importlib.import_module(module_name)
    return eval(expression, vars(module))  # the names are the test's own


@pytest.mark.parametrize("where", sorted(OLD_PICKLES))
def test_a_pickle_written_under_the_old_module_name_loads(where: str) -> None:
    assert pickle.loads(OLD_PICKLES[where]) == _expected(where)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_name_imports_the_same_module(old: str) -> None:
    new = MOVED[old]
    assert importlib.import_module(old) is importlib.import_module(new)
    module = importlib.import_module(new)
    assert module.__name__ == new and module.__spec__ is not None and module.__spec__.name == new


@pytest.mark.parametrize("old", sorted(MOVED))
def test_no_file_stands_at_an_old_name(old: str) -> None:
    path = ROOT / old.replace(".", "/")
    assert not path.with_suffix(".py").exists() and not (path / "__init__.py").exists()
