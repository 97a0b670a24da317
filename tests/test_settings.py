"""Every environment variable flowspark reads is a `flowspark._settings` entry, listed in `--help` and in
docs/settings.md; the cache folder follows `XDG_CACHE_HOME`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowspark import _settings as settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_named_in_the_package_is_a_setting() -> None:
    known = {setting.name for setting in settings.ALL}
    named = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in (ROOT / "flowspark").rglob("*.py")
        for name in re.findall(r"\bFLOWSPARK_[A-Z_]+\b", path.read_text())
    }
    assert {(path, name) for path, name in named if name not in known} == set()


def test_every_setting_is_in_the_docs_and_in_help() -> None:
    docs = (ROOT / "docs" / "settings.md").read_text()
    shown = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for setting in settings.ALL:
        assert f"`{setting.name}`" in docs, setting.name
        assert setting.name in shown, setting.name


def test_the_cache_folder_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert settings.cache_folder("class-archives") == str(tmp_path / "flowspark" / "class-archives")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert settings.cache_folder() == str(Path.home() / ".cache" / "flowspark")
