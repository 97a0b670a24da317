"""The manual (`docs/`, with the README as its home page and the API reference from the docstrings) builds with MkDocs
in strict mode: a broken link, a missing anchor or a docstring that names something gone fails it; the
architecture's glossary explains every engine module not named with a Spark word."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_build_in_strict_mode(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    home = (tmp_path / "site" / "index.html").read_text()
    assert "pip install . &amp;&amp; python -m flowspark.run flowspark.examples.wordcount:flow" in home
    assert 'href="recovery/"' in home  # the README's docs/ links, made the site's own
    assert "StatefulBatchLogic" in (tmp_path / "site" / "api" / "index.html").read_text()


def test_the_readme_is_a_short_manual() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


SPARK_WORDS = {
    "batch_query",
    "streaming_query",
    "session",
    "cluster",
    "spark_version",
    "spark_defaults",
    "java_check",
    "data_source",
    "spark_source",
    "executor_source",
    "connect_client",
    "checkpoint_check",
    "metrics",
    "progress",
}
"""Engine modules named with Spark's words for what they do: the glossary need not explain them."""


def test_every_engine_module_is_a_spark_word_or_in_the_glossary() -> None:
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    glossary = architecture[architecture.index("## Glossary") :]
    named = set(re.findall(r"`([a-z_]+)`", glossary))
    modules = {path.stem for path in (ROOT / "flowspark" / "engine").rglob("*.py") if path.stem != "__init__"}
    assert SPARK_WORDS <= modules
    assert sorted(modules - SPARK_WORDS - named) == []
