"""Every example runs with `python -m flowspark.run` and prints what Bytewax prints."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(engine: str, module: str, cwd: Path) -> List[str]:
    done = subprocess.run(
        [sys.executable, "-m", f"{engine}.run", f"{module}:flow"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("name", ["wordcount", "user_sessions"])
@pytest.mark.quick
def test_example_output_matches_bytewax(name: str, tmp_path: Path) -> None:
    source = (ROOT / "flowspark" / "examples" / f"{name}.py").read_text()
    (tmp_path / "sample_data").symlink_to(ROOT / "flowspark" / "examples" / "sample_data")
    (tmp_path / f"bw_{name}.py").write_text(source.replace("flowspark", "bytewax"))
    expected = _run("bytewax", f"bw_{name}", tmp_path)
    got = _run("flowspark", f"examples.{name}", ROOT)
    assert expected
    assert sorted(got) == sorted(expected)


@pytest.mark.quick
def test_file_to_parquet_writes_every_purchase_with_running_totals(tmp_path: Path) -> None:
    out = tmp_path / "purchases.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples.file_to_parquet:flow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=dict(os.environ, PURCHASES_PARQUET=str(out)),
    )
    assert done.returncode == 0, done.stderr
    with open(ROOT / "flowspark" / "examples" / "sample_data" / "purchases.csv") as f:
        purchases = list(csv.DictReader(f))
    totals: Dict[str, float] = {}
    expected: Set[Tuple[str, str, float, datetime, float]] = set()
    for row in purchases:
        totals[row["user"]] = round(totals.get(row["user"], 0.0) + float(row["amount"]), 2)
        at = datetime.fromisoformat(row["at"]).replace(tzinfo=None)
        expected.add((row["user"], row["item"], float(row["amount"]), at, totals[row["user"]]))
    table = pq.read_table(out)
    assert table.column_names == ["user", "item", "amount", "at", "user_total"]
    got = {(r["user"], r["item"], r["amount"], r["at"].to_pydatetime(), r["user_total"]) for r in table.to_pylist()}
    assert len(expected) == len(purchases) == table.num_rows
    assert got == expected
