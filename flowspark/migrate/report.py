"""What migrating one file gives: its new text and the findings to report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List


@dataclass(frozen=True)
class Finding:
    """Something flowspark does not support, or that needs a look, at `path:line`."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class Migrated:
    """A file's text after migration (the same text when nothing changed) and its findings."""

    text: str
    findings: List[Finding] = field(default_factory=list)
