"""What flowspark offers in place of Bytewax's modules, read from flowspark's own source files.

The source files are parsed, not imported, so modules with optional
dependencies (Kafka, OpenTelemetry) are known without those installed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import FrozenSet, Optional

PACKAGE_DIR = Path(__file__).resolve().parent.parent

BYTEWAX_MODULES: FrozenSet[str] = frozenset(
    {
        "bytewax",
        "bytewax.connectors",
        "bytewax.connectors.demo",
        "bytewax.connectors.files",
        "bytewax.connectors.kafka",
        "bytewax.connectors.kafka.operators",
        "bytewax.connectors.kafka.serde",
        "bytewax.connectors.stdio",
        "bytewax.dataflow",
        "bytewax.errors",
        "bytewax.inputs",
        "bytewax.operators",
        "bytewax.operators.helpers",
        "bytewax.operators.windowing",
        "bytewax.outputs",
        "bytewax.recovery",
        "bytewax.run",
        "bytewax.testing",
        "bytewax.tracing",
        "bytewax.visualize",
    }
)
"""The public modules of the `bytewax` 0.21 distribution; other `bytewax.*`
modules come from connector packages (bytewax-redis, ...)."""

RUNNABLE = frozenset({"run", "recovery", "visualize"})
"""Modules both packages run with `python -m`."""

RUN_ENV_VARS = frozenset(
    {
        "BYTEWAX_ADDRESSES",
        "BYTEWAX_PROCESS_ID",
        "BYTEWAX_RECOVERY_BACKUP_INTERVAL",
        "BYTEWAX_RECOVERY_DIRECTORY",
        "BYTEWAX_SNAPSHOT_INTERVAL",
        "BYTEWAX_WORKERS_PER_PROCESS",
    }
)
"""`BYTEWAX_*` variables `python -m flowspark.run` reads, with the same meaning."""


def flowspark_name(bytewax_module: str) -> str:
    """`bytewax.x.y` -> `flowspark.x.y`."""
    return "flowspark" + bytewax_module[len("bytewax") :]


def _source_file(module: str) -> Optional[Path]:
    """The source file of flowspark module `module` (`flowspark.x.y`), if it exists."""
    parts = module.split(".")[1:]
    base = PACKAGE_DIR.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def has_module(module: str) -> bool:
    """Whether flowspark has module `module` (`flowspark.x.y`)."""
    return _source_file(module) is not None


@functools.lru_cache(maxsize=None)
def names_of(module: str) -> FrozenSet[str]:
    """The names flowspark module `module` defines or imports at top level, and its submodules."""
    path = _source_file(module)
    if path is None:
        return frozenset()
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    if path.name == "__init__.py":
        names.update(p.stem for p in path.parent.iterdir() if p.suffix == ".py" and p.stem != "__init__")
        names.update(p.name for p in path.parent.iterdir() if (p / "__init__.py").is_file())
    return frozenset(names)


def has_name(module: str, name: str) -> bool:
    """Whether `from module import name` works for flowspark module `module`."""
    return name in names_of(module) or has_module(f"{module}.{name}")
