"""Server folders of other installations: removed once long unused, and nothing else is."""

from __future__ import annotations

import os
import time
from pathlib import Path

from flowspark.engine.connect.server_folders import STALE_DAYS, remove_stale


def _folder(parent: Path, name: str, files: tuple[str, ...] = ("server.log", "lock", "lease"), days: float = 0) -> Path:
    folder = parent / name
    folder.mkdir()
    for file in files:
        (folder / file).write_text("x")
    when = time.time() - days * 86400
    for path in [*folder.iterdir(), folder]:
        os.utime(path, (when, when))
    return folder


def test_only_server_folders_unused_for_the_stale_time_are_removed(tmp_path: Path) -> None:
    own = tmp_path / "00000000000000aa"
    old = _folder(tmp_path, "0123456789abcdef", days=STALE_DAYS + 1)
    recent = _folder(tmp_path, "1123456789abcdef", days=STALE_DAYS - 1)
    not_ours = _folder(tmp_path, "2123456789abcdef", ("server.log", "notes.txt"), days=STALE_DAYS + 1)
    other_name = _folder(tmp_path, "photos", ("server.log",), days=STALE_DAYS + 1)
    assert remove_stale(str(own)) == [str(old)]
    assert not old.exists()
    assert recent.exists() and not_ours.exists() and other_name.exists()


def test_a_folder_whose_server_runs_stays_however_old(tmp_path: Path) -> None:
    record = '{"port": 1, "token": "t", "session_id": "s", "parallelism": 2, "supervisor": %d, "jvm": %d, "ui_port": 2}'
    running = _folder(tmp_path, "3123456789abcdef", days=STALE_DAYS + 1)
    (running / "server.json").write_text(record % (os.getpid(), os.getpid()))
    os.utime(running / "server.json", (0, 0))
    assert remove_stale(str(tmp_path / "00000000000000aa")) == []
    assert running.exists()
