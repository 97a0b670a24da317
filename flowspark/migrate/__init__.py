"""Move a Bytewax project to flowspark: `python -m flowspark.migrate [--diff] PATH...`.

Python files get their `bytewax` imports rewritten (parsed with `ast` and
`tokenize`, never run); scripts (shell, Dockerfile, YAML, TOML, ...) get
their `python -m bytewax.run` commands rewritten.  Whatever flowspark does
not support is reported as `file:line: message`.  Files change in place,
or, with `--diff`, nothing is written and a unified diff is printed.
"""

from __future__ import annotations

import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

from flowspark.migrate.python_files import migrate_python
from flowspark.migrate.report import Finding, Migrated
from flowspark.migrate.scripts import is_script, migrate_script

__all__ = ["Finding", "FileChange", "migrate_file", "migrate_paths", "project_files"]

_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


@dataclass
class FileChange:
    """One migrated file: its text before and after, and what to report about it."""

    path: Path
    before: str
    after: str
    findings: List[Finding] = field(default_factory=list)
    encoding: str = "utf-8"

    @property
    def changed(self) -> bool:
        """Whether migrating changed the file's text."""
        return self.after != self.before


def project_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The Python files and scripts under `paths`, skipping hidden directories and virtualenvs."""
    for path in paths:
        if path.is_file():
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".") and d not in _SKIPPED_DIRS and not (Path(root, d) / "pyvenv.cfg").exists()
            )
            for name in sorted(files):
                file = Path(root, name)
                if file.suffix == ".py" or is_script(file):
                    yield file


def _read(path: Path) -> Tuple[str, str]:
    """The text of `path` (newlines untouched) and its encoding (PEP 263 for Python files)."""
    encoding = "utf-8"
    if path.suffix == ".py":
        with open(path, "rb") as raw:
            encoding, _ = tokenize.detect_encoding(raw.readline)
    with open(path, encoding=encoding, newline="") as text:
        return text.read(), encoding


def migrate_file(path: Path) -> Optional[FileChange]:
    """The migration of one file, or `None` if it is neither Python nor a script."""
    migrate: Callable[[Path, str], Migrated]
    if path.suffix == ".py":
        migrate = migrate_python
    elif is_script(path):
        migrate = migrate_script
    else:
        return None
    try:
        before, encoding = _read(path)
    except (UnicodeDecodeError, SyntaxError) as ex:
        return FileChange(path, "", "", [Finding(path, 1, f"not migrated: can't read it as text ({ex})")])
    result = migrate(path, before)
    return FileChange(path, before, result.text, result.findings, encoding)


def migrate_paths(paths: Iterable[Path]) -> List[FileChange]:
    """Migrate every file under `paths`, without writing anything."""
    changes = []
    for path in project_files(paths):
        change = migrate_file(path)
        if change is not None and (change.changed or change.findings):
            changes.append(change)
    return changes
