"""flowspark's modules import one another without a circle (every import counts: at module level, under
`TYPE_CHECKING` or inside a function), the engine's folders are floors, the engine imports nothing from the launch
path above it, and no engine function takes more than six parameters."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[1] / "flowspark"

ABOVE_THE_ENGINE = (
    "flowspark.run",
    "flowspark.testing",
    "flowspark._launch",
    "flowspark._dataflow_api",
    "flowspark.visualize",
)

ENGINE_FLOORS = ("util", "reports", "plan", "recovery", "sources", "sinks", "spark", "state", "connect")
"""The folders of `flowspark.engine`, from the bottom: each imports only folders before it here (the engine's own
modules, `runner` and the rest, stand above them all)."""


def _modules() -> Dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The flowspark modules `name` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> Dict[str, Set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _circle_from(start: str, graph: Dict[str, Set[str]]) -> List[str]:
    """A path of imports from `start` back to itself, if there is one (depth first)."""
    stack = [(start, [start])]
    seen: Set[str] = set()
    while stack:
        name, path = stack.pop()
        for target in sorted(graph[name]):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return []


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    circles = [circle for circle in (_circle_from(name, graph) for name in sorted(graph)) if circle]
    assert circles == [], "\n".join(" -> ".join(circle) for circle in circles)


def test_the_engine_imports_nothing_of_the_launch_path() -> None:
    graph = _graph()
    reaching = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("flowspark.engine")
        for target in targets
        if target.startswith(ABOVE_THE_ENGINE)
    }
    assert reaching == set()


def _engine_folder(name: str) -> str:
    parts = name.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["flowspark", "engine"] else ""


def test_every_engine_folder_has_its_floor() -> None:
    folders = {path.name for path in (PACKAGE / "engine").iterdir() if (path / "__init__.py").exists()}
    assert folders == set(ENGINE_FLOORS)


def test_each_engine_folder_imports_only_the_folders_below_it() -> None:
    graph = _graph()
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if _engine_folder(name)
        for target in targets
        if (target.startswith("flowspark.engine.") and not _engine_folder(target))
        or (
            _engine_folder(target)
            and ENGINE_FLOORS.index(_engine_folder(target)) > ENGINE_FLOORS.index(_engine_folder(name))
        )
    )
    assert upward == [], "\n".join(upward)


def folder_imports() -> Dict[str, Set[str]]:
    """Each engine folder, from the bottom, and the engine folders its modules import."""
    folders: Dict[str, Set[str]] = {folder: set() for folder in ENGINE_FLOORS}
    for name, targets in _graph().items():
        for target in targets:
            if _engine_folder(name) and _engine_folder(target) and _engine_folder(name) != _engine_folder(target):
                folders[_engine_folder(name)].add(_engine_folder(target))
    return folders


def test_no_two_engine_folders_import_each_other_through_others() -> None:
    folders = folder_imports()
    circles = [circle for circle in (_circle_from(folder, folders) for folder in ENGINE_FLOORS) if circle]
    assert circles == [], "\n".join(" -> ".join(circle) for circle in circles)


MOST_PARAMETERS = 6
"""The most parameters an engine function takes (`self` and `cls` not counted): more belong in a value of their own
(`attempt.Attempt`, `sink_writer.WriterSetup`, ...)."""


def test_no_engine_function_takes_more_than_six_parameters() -> None:
    over = []
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            args = node.args
            names = [arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            if len(names) > MOST_PARAMETERS:
                name = getattr(node, "name", "lambda")
                over.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name} takes {len(names)}")
    assert over == [], "\n".join(over)
