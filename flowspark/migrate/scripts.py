"""Rewrite the `python -m bytewax.*` commands of shell scripts, Dockerfiles, YAML and the like.

`python -m bytewax.run` (and `.recovery`, `.visualize`) become
`python -m flowspark.*`.  `BYTEWAX_*` variables that flowspark's run command
reads with the same meaning are left alone; the others, Bytewax's
deployment tool `waxctl`, its Docker images and dependencies on the
`bytewax` distribution are reported, not changed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

from flowspark.migrate.inventory import RUN_ENV_VARS, RUNNABLE
from flowspark.migrate.report import Finding, Migrated

_SCRIPT_SUFFIXES = frozenset(
    {
        ".sh",
        ".bash",
        ".zsh",
        ".yaml",
        ".yml",
        ".toml",
        ".cfg",
        ".ini",
        ".env",
        ".conf",
        ".service",
        ".json",
        ".dockerfile",
    }
)
_SCRIPT_NAMES = frozenset({"dockerfile", "makefile", "procfile", "justfile", "containerfile"})

_RUN_MODULE = re.compile(r"""(-m["']?(?:\s*,\s*["']?|\s+))bytewax\.(\w+)\b""")
_ENV_VAR = re.compile(r"\bBYTEWAX_[A-Z0-9_]+\b")
_WAXCTL = re.compile(r"\bwaxctl\b")
_IMAGE = re.compile(r"\bbytewax/bytewax\b")
_DEPENDENCY = re.compile(r"""^\s*["']?bytewax(\[[^\]]*\])?\s*([=<>!~]=?[^"',\s#;]*)?["']?\s*,?\s*(#.*)?$""")


def is_script(path: Path) -> bool:
    """Whether `path` is a file whose commands `migrate_script` rewrites."""
    name = path.name.lower()
    return (
        path.suffix.lower() in _SCRIPT_SUFFIXES
        or name in _SCRIPT_NAMES
        or name.startswith(("dockerfile", "docker-compose", ".env", "requirements"))
        and not name.endswith(".py")
    )


def _line(path: Path, number: int, text: str, findings: List[Finding]) -> str:
    def run_module(match: "re.Match[str]") -> str:
        module = match.group(2)
        if module in RUNNABLE:
            return f"{match.group(1)}flowspark.{module}"
        findings.append(
            Finding(path, number, f"`python -m bytewax.{module}` has no flowspark counterpart; not rewritten")
        )
        return match.group(0)

    text = _RUN_MODULE.sub(run_module, text)
    for var in sorted(set(_ENV_VAR.findall(text))):
        if var not in RUN_ENV_VARS:
            findings.append(
                Finding(
                    path,
                    number,
                    f"flowspark ignores `{var}`: Spark places the processes (`--master`, see docs/cluster.md)",
                )
            )
    if _WAXCTL.search(text):
        findings.append(
            Finding(
                path,
                number,
                "`waxctl` deploys Bytewax only; deploy flowspark like any Spark application (`--master`, spark-submit)",
            )
        )
    if _IMAGE.search(text):
        findings.append(
            Finding(
                path,
                number,
                "Bytewax's Docker image runs Bytewax only; use a Python image with Java 17+ and install flowspark",
            )
        )
    if _DEPENDENCY.match(text):
        findings.append(
            Finding(
                path,
                number,
                "depends on bytewax: depend on flowspark instead "
                "(keep bytewax beside it only for Bytewax connector packages)",
            )
        )
    return text


def migrate_script(path: Path, text: str) -> Migrated:
    """`text` (the contents of `path`) with `python -m bytewax.*` rewritten, and its findings."""
    findings: List[Finding] = []
    lines = text.splitlines(keepends=True)
    new = "".join(_line(path, number, line, findings) for number, line in enumerate(lines, start=1))
    return Migrated(new, findings)
