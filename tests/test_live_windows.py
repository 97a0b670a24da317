"""A streaming run: SystemClock windows close on time, with no new item to push them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"(sensor-\d) window (\d+): (\d+) readings; closed (\S+) emitted (\S+)")


def test_windows_are_emitted_within_a_window_length_of_closing() -> None:
    # 16 s of readings: the first micro-batches of a cold run on a busy
    # machine can take seconds, and `SystemClock` stamps what they carry
    # with their own time, so the early windows may get no reading at all.
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples.live_windows:flow", "--no-progress", "-s", "0.2"],
        cwd=ROOT,
        env=dict(os.environ, LIVE_READINGS="64"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [LINE.fullmatch(line) for line in done.stdout.splitlines()]
    assert all(rows), done.stdout
    assert sum(int(m.group(3)) for m in rows if m) == 64
    lags = [datetime.fromisoformat(m.group(5)) - datetime.fromisoformat(m.group(4)) for m in rows if m]
    on_time = [lag for lag in lags if lag >= timedelta(0)]
    # Windows still open at end of input are flushed early; the others closed
    # by the clock's wake-up, within a window length plus a micro-batch, and
    # a generous margin for a busy machine.
    assert len(on_time) >= 2, done.stdout
    assert max(on_time) <= timedelta(seconds=2 + 0.2 + 5), done.stdout
