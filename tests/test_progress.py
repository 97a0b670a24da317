"""Progress reports: the line's content, and what a non-terminal run prints."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from flowspark.engine.progress import BatchReport, Progress, render

ROOT = Path(__file__).resolve().parent.parent


def test_render_shows_counts_duration_state_and_bar() -> None:
    line = render(BatchReport(epoch=3, items_in=12345, items_out=678, seconds=0.5, state_rows=40, fraction=0.5), width=10)
    assert line.startswith("[#####.....]  50.0% epoch 3 | 12,345 in | 678 out | 0.50 s/batch | 40 state rows | ")
    assert line.endswith("UTC")
    assert "%" not in render(BatchReport(1, 1, 1, 0.1, None, None))


def test_non_terminal_output_is_a_line_every_interval_and_a_summary() -> None:
    out = io.StringIO()
    progress = Progress(out, log_every=3600)
    for epoch in range(5):
        progress.batch(BatchReport(epoch, epoch * 10, epoch, 0.2, None, None))
    progress.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("flowspark: epoch 0 | 0 in | 0 out")
    assert lines[1].startswith("flowspark: done: epoch 4 | 40 in | 4 out")


def test_cli_reports_progress_of_a_file_flow_on_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples.wordcount:flow", "--max-batch-items", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "flowspark: Spark UI at http" in done.stderr
    summary = [line for line in done.stderr.splitlines() if line.startswith("flowspark: done: ")]
    assert len(summary) == 1
    assert "[########################] 100.0% epoch " in summary[0]
    assert " | 10 in | " in summary[0] and " out | " in summary[0]
    assert len(done.stdout.splitlines()) == 50
