"""Progress reports: the line's content, what the CLI shows, what a library caller gets."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.progress import BatchReport, Progress, render, show_on_stderr
from flowspark.testing import TestingSink, TestingSource, run_main

ROOT = Path(__file__).resolve().parents[3]


def test_render_shows_counts_duration_state_and_bar() -> None:
    line = render(
        BatchReport(epoch=3, items_in=12345, items_out=678, seconds=0.5, state_rows=40, fraction=0.5), width=10
    )
    assert line.startswith("[#####.....]  50.0% epoch 3 | 12,345 in | 678 out | 0.50 s/batch | 40 state rows | ")
    assert line.endswith("UTC")
    assert "%" not in render(BatchReport(1, 1, 1, 0.1, None, None))


@pytest.fixture
def shown() -> Iterator[Callable[[io.StringIO, bool], None]]:
    """Installs `show_on_stderr` on a given stream; restores flowspark's loggers afterwards."""
    package, progress = logging.getLogger("flowspark"), logging.getLogger("flowspark.engine.reports.progress")
    saved = [(log, list(log.handlers), log.level, log.propagate) for log in (package, progress)]

    def install(out: io.StringIO, show_progress: bool) -> None:
        show_on_stderr(show_progress, out)

    yield install
    for log, handlers, level, propagate in saved:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_non_terminal_output_is_a_line_every_interval_and_a_summary(shown: Callable[[io.StringIO, bool], None]) -> None:
    out = io.StringIO()
    shown(out, True)
    progress = Progress()
    progress.announce("Spark UI at http://127.0.0.1:4040")
    for epoch in range(5):
        progress.batch(BatchReport(epoch, epoch * 10, epoch, 0.2, None, None))
    progress.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0] == "flowspark: Spark UI at http://127.0.0.1:4040"
    assert lines[1].startswith("flowspark: epoch 0 | 0 in | 0 out")
    assert lines[2].startswith("flowspark: done: epoch 4 | 40 in | 4 out")


def test_terminal_line_is_redrawn_and_cleared_before_other_messages(shown: Callable[[io.StringIO, bool], None]) -> None:
    out = _Terminal()
    shown(out, True)
    progress = Progress()
    progress.batch(BatchReport(0, 10, 1, 0.2, None, None))
    progress.batch(BatchReport(1, 20, 2, 0.2, None, None))
    logging.getLogger("flowspark.engine.runner").warning("a hiccup")
    text = out.getvalue()
    assert text.startswith("\r\033[Kepoch 0 | 10 in | 1 out")
    assert "\r\033[Kepoch 1 | 20 in | 2 out" in text
    assert text.endswith("\r\033[Kflowspark: a hiccup\n")


def test_no_progress_keeps_other_messages(shown: Callable[[io.StringIO, bool], None]) -> None:
    out = io.StringIO()
    shown(out, False)
    progress = Progress()
    progress.announce("Spark UI at http://127.0.0.1:4040")
    progress.batch(BatchReport(0, 10, 1, 0.2, None, None))
    progress.finish()
    logging.getLogger("flowspark.engine.runner").warning("a hiccup")
    assert out.getvalue() == "flowspark: a hiccup\n"


def _paused_flow(out: List[int], epochs: List[int]) -> Dataflow:
    """Five items in three bursts, so that a run takes several micro-batches."""
    pause = TestingSource.PAUSE(timedelta(seconds=0.6))
    source: TestingSource[int] = TestingSource([1, 2, pause, 3, 4, pause, 5])
    flow = Dataflow("paused")
    nums = op.input("inp", flow, source)
    tapped = op.inspect_debug("tap", nums, lambda _step, _item, epoch, _worker: epochs.append(epoch))
    op.output("out", op.map("double", tapped, lambda x: 2 * x), TestingSink(out))
    return flow


def test_run_main_reports_each_micro_batch_to_its_callback_and_to_flowspark_loggers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    out: List[int] = []
    epochs: List[int] = []
    reports: List[BatchReport] = []
    with caplog.at_level(logging.DEBUG, logger="flowspark"):
        run_main(_paused_flow(out, epochs), epoch_interval=timedelta(seconds=0.1), on_progress=reports.append)
    assert sorted(out) == [2, 4, 6, 8, 10]
    seen = [r.epoch for r in reports]
    assert seen == sorted(set(seen))
    assert set(epochs) <= set(seen) and len(set(epochs)) >= 2
    assert (reports[-1].items_in, reports[-1].items_out) == (5, 5)

    assert all(r.name.startswith("flowspark") for r in caplog.records)
    records = [r for r in caplog.records if r.name == "flowspark.engine.reports.progress"]
    assert records
    assert [r.batch_report for r in records if r.levelno == logging.DEBUG] == reports
    assert records[-1].levelno == logging.INFO and records[-1].getMessage().startswith("done: ")


def test_run_main_prints_nothing_of_its_own(tmp_path: Path) -> None:
    script = (
        "from flowspark.dataflow import Dataflow\n"
        "import flowspark.operators as op\n"
        "from flowspark.testing import TestingSink, TestingSource, run_main\n"
        "out = []\n"
        "flow = Dataflow('quiet')\n"
        "op.output('out', op.input('inp', flow, TestingSource([1, 2, 3])), TestingSink(out))\n"
        "run_main(flow)\n"
        "assert out == [1, 2, 3]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


def test_cli_reports_progress_of_a_file_flow_on_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples.wordcount:flow", "--max-batch-items", "3", "-i", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "flowspark: Spark UI at http" in done.stderr
    summary = [line for line in done.stderr.splitlines() if line.startswith("flowspark: done: ")]
    assert len(summary) == 1
    assert "[########################] 100.0% epoch " in summary[0]
    assert " | 10 in | " in summary[0] and " out | " in summary[0]
    assert len(done.stdout.splitlines()) == 50
