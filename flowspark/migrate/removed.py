"""Bytewax modules a project may import that Bytewax 0.21 does not offer: removed, or private to it.

Checked against the modules of every Bytewax release (its git tags and
PyPI wheels, 0.8 to 0.21.1).  The codemod reports an import of one of
them with its replacement and leaves the import as it is: the names moved
and changed with it, so no rewrite of the module name alone is right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from flowspark.migrate.inventory import flowspark_name, has_name


@dataclass(frozen=True)
class RemovedModule:
    """What became of a Bytewax module that Bytewax 0.21 does not offer."""

    removed_in: Optional[str]
    """The Bytewax release without it, or `None` for a module Bytewax 0.21 still ships as private."""
    replacement: Optional[str]
    """What to use instead, naming Bytewax 0.21's modules (`bytewax.x`), or `None` if nothing replaces it."""
    homes: Tuple[str, ...] = ()
    """Bytewax 0.21's public modules that hold the names it had, where they kept them."""


_CORE_HOMES = ("bytewax.inputs", "bytewax.recovery", "bytewax.run", "bytewax.testing", "bytewax.tracing")
_CORE_NAMES = (
    "it is Bytewax's core; its public names are in "
    "`bytewax.inputs`, `bytewax.recovery`, `bytewax.run`, `bytewax.testing` and `bytewax.tracing`"
)
_WINDOWING = (
    "use `bytewax.operators.windowing` (Bytewax 0.20 renamed `*ClockConfig` to `*Clock`, `*Window` to `*Windower`, "
    "`WindowConfig` to `Windower`)"
)
_KAFKA_INTERNAL = RemovedModule("0.19", "import from `bytewax.connectors.kafka`", ("bytewax.connectors.kafka",))
_BIGQUERY_DYNAMODB = RemovedModule("0.16", None)

REMOVED_MODULES: Mapping[str, RemovedModule] = {
    # Each comment names the Bytewax releases that shipped the module.
    # the Rust core, 0.7-0.18
    "bytewax.bytewax": RemovedModule("0.19", _CORE_NAMES, _CORE_HOMES),
    # the Rust core, 0.19-0.21
    "bytewax._bytewax": RemovedModule(None, _CORE_NAMES, _CORE_HOMES),
    # 0.14-0.19
    "bytewax._encoder": RemovedModule(
        "0.20", "use `bytewax.visualize` (`to_json`, `to_mermaid`, `to_plantuml`)", ("bytewax.visualize",)
    ),
    # 0.19-0.21
    "bytewax._metrics": RemovedModule(None, None),
    # 0.20-0.21
    "bytewax._utils": RemovedModule(None, None),
    # 0.7.1-0.9
    "bytewax.exhash": RemovedModule("0.10", None),
    # 0.8-0.15
    "bytewax.execution": RemovedModule(
        "0.16",
        "`run_main` and `cluster_main` are in `bytewax.testing`; "
        "`spawn_cluster` became `python -m bytewax.testing -p PROCESSES -w WORKERS`",
        ("bytewax.testing", "bytewax.run"),
    ),
    # 0.8-0.15
    "bytewax.parse": RemovedModule(
        "0.16", "use the arguments (`-w`, `-i`, `-a`) and `BYTEWAX_*` variables of `python -m bytewax.run`"
    ),
    # 0.12-0.15, with their `outputs`
    "bytewax.connectors.bigquery": _BIGQUERY_DYNAMODB,
    "bytewax.connectors.bigquery.outputs": _BIGQUERY_DYNAMODB,
    "bytewax.connectors.dynamodb": _BIGQUERY_DYNAMODB,
    "bytewax.connectors.dynamodb.outputs": _BIGQUERY_DYNAMODB,
    # 0.11-0.17
    "bytewax.window": RemovedModule("0.18", _WINDOWING, ("bytewax.operators.windowing",)),
    # 0.17-0.19
    "bytewax.serde": RemovedModule("0.20", "none is needed: since Bytewax 0.20 state is pickled with `pickle`"),
    # 0.17.1-0.17.2
    "bytewax.connectors.periodic": RemovedModule(
        "0.18",
        "subclass `bytewax.inputs.SimplePollingSource` (Bytewax 0.17's `SimplePollingInput`)",
        ("bytewax.inputs",),
    ),
    # 0.18-0.19
    "bytewax.operators.window": RemovedModule("0.20", _WINDOWING, ("bytewax.operators.windowing",)),
    # 0.18
    "bytewax.connectors.kafka._types": _KAFKA_INTERNAL,
    "bytewax.connectors.kafka.error": _KAFKA_INTERNAL,
    "bytewax.connectors.kafka.message": _KAFKA_INTERNAL,
    "bytewax.connectors.kafka.sink": _KAFKA_INTERNAL,
    "bytewax.connectors.kafka.source": _KAFKA_INTERNAL,
    "bytewax.connectors.kafka.registry": RemovedModule(
        "0.19",
        "make `confluent_kafka`'s (de)serializers (or those of `bytewax.connectors.kafka.serde`) yourself "
        "and use them with `bytewax.connectors.kafka.operators`",
    ),
}
"""Bytewax modules (`bytewax.x.y`) that Bytewax 0.21 lacks or keeps private, and what to use instead."""

_BYTEWAX_NAME = re.compile(r"\bbytewax(?=\.\w)")


def removed_module(module: str) -> Optional[str]:
    """`module` itself or the package it is in, if that is one of `REMOVED_MODULES`."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in REMOVED_MODULES:
            return prefix
    return None


def _in_flowspark(text: str) -> str:
    """Bytewax's module names in `text` (`bytewax.x`, `python -m bytewax.run`) as flowspark's."""
    return _BYTEWAX_NAME.sub("flowspark", text)


def _ticked(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _homes_of(entry: RemovedModule, names: Sequence[str]) -> Tuple[str, bool]:
    """Where flowspark has each of `names`, which came from a removed module with `entry.homes`, and
    whether it has them all."""
    found: Dict[str, List[str]] = {}
    missing = []
    for name in names:
        home = next((flowspark_name(h) for h in entry.homes if has_name(flowspark_name(h), name)), None)
        if home is None:
            missing.append(name)
        else:
            found.setdefault(home, []).append(name)
    parts = [f"{_ticked(found_names)} from `{home}`" for home, found_names in found.items()]
    text = f"import {', '.join(parts)}" if parts else ""
    if missing:
        text += f"{'; ' if text else ''}flowspark has no {_ticked(missing)}"
    return text, not missing


def describe(module: str, names: Sequence[str] = (), *, imported: bool = True) -> str:
    """The finding for an import of removed module `module` (a key of `REMOVED_MODULES`), or of `names` from it;
    or, not `imported`, for a use of it (`bytewax.window.X` after `import bytewax`)."""
    tail = "; import left as is" if imported else ""
    entry = REMOVED_MODULES[module]
    if entry.removed_in is None:
        text = f"`{module}` is private to Bytewax"
    else:
        text = f"`{module}` was removed in Bytewax {entry.removed_in}"
    names = [n for n in names if n != "*"]
    if names and entry.homes:
        homes, complete = _homes_of(entry, names)
        text += f"; {homes}"
        if complete:
            return text + tail
    replacement = "nothing replaces it" if entry.replacement is None else _in_flowspark(entry.replacement)
    return f"{text}; {replacement}{tail}"
