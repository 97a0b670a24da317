"""MkDocs hook: the site's home page is the README, its `docs/` links made relative to the site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def on_files(files: Files, config: Any) -> Files:
    """Add `index.md`, made from the README, to the site's pages."""
    text = (ROOT / "README.md").read_text()
    text = text.replace("[`docs/`](docs/index.md)", "these pages").replace("](docs/", "](")
    text = text.replace("[CHANGELOG.md](CHANGELOG.md)", "`CHANGELOG.md`")
    files.append(File.generated(config, "index.md", content=text))
    return files
