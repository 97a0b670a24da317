"""The walk of one run from the command line to its streaming query, read from the source.

    python -m tests.support.run_walk [ENTRY] [TARGET]

Reads every module of `flowspark` (ast only, nothing is imported), finds
each function's calls (names resolved through the module's imports, its
own definitions, `self.` methods, and a method name only one class
defines), and prints:

- the path: the shortest chain of calls from `ENTRY` (default
  `flowspark.run.main`) to `TARGET` (default
  `flowspark.engine.streaming_query.start_query`), one hop a line;
- the walk: every function that lies on some chain from `ENTRY` to
  `TARGET`, in the order a reader meets them following the calls depth
  first in source order, with the files visited and the returns (entering
  a file already left before).

The figures are a reader's: how many places the run's path goes through
before its query starts, and how often it comes back to one.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

PACKAGE = Path(__file__).resolve().parents[2] / "flowspark"

ENTRY = "flowspark.run.main"
TARGET = "flowspark.engine.streaming_query.start_query"


def _modules() -> Dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _import_names(node: ast.AST, module: str, is_package: bool) -> Iterator[Tuple[str, str]]:
    """(local name, qualified name) of one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                yield alias.name.split(".")[0], alias.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        for alias in node.names:
            yield alias.asname or alias.name, f"{base}.{alias.name}"


class _Index:
    """Every function and method of the package, with its calls resolved where the source says what they call."""

    def __init__(self) -> None:
        self.modules = _modules()
        self.functions: Dict[str, Tuple[str, ast.AST, Optional[str]]] = {}
        """Qualified name -> (module, node, class name)."""
        self.names: Dict[str, Dict[str, str]] = {}
        """Module -> its top-level names (imports and definitions) -> qualified name."""
        self.classes: Set[str] = set()
        methods: Dict[str, List[str]] = {}
        for module, path in self.modules.items():
            tree = ast.parse(path.read_text())
            names: Dict[str, str] = {}
            for node in tree.body:
                for local, qualified in _import_names(node, module, path.name == "__init__.py"):
                    names[local] = qualified
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names[node.name] = f"{module}.{node.name}"
                    self.functions[f"{module}.{node.name}"] = (module, node, None)
                elif isinstance(node, ast.ClassDef):
                    names[node.name] = f"{module}.{node.name}"
                    self.classes.add(f"{module}.{node.name}")
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            qualified = f"{module}.{node.name}.{item.name}"
                            self.functions[qualified] = (module, item, node.name)
                            methods.setdefault(item.name, []).append(qualified)
            self.names[module] = names
        self.unique_methods = {
            name: found[0] for name, found in methods.items() if len(found) == 1 and not name.startswith("__")
        }

    def _canonical(self, qualified: str) -> Optional[str]:
        """The function a name stands for: re-exports followed, a class standing for its `__init__`."""
        for _ in range(10):
            if qualified in self.functions:
                return qualified
            if qualified in self.classes:
                init = f"{qualified}.__init__"
                return init if init in self.functions else None
            module, _, name = qualified.rpartition(".")
            if module in self.names and name in self.names[module] and self.names[module][name] != qualified:
                qualified = self.names[module][name]
                continue
            return None
        return None

    def calls(self, function: str) -> List[str]:
        """The package's functions `function` calls, in source order, each once."""
        module, node, owner = self.functions[function]
        local = dict(self.names[module])
        for inner in ast.walk(node):
            for name, qualified in _import_names(inner, module, self.modules[module].name == "__init__.py"):
                local[name] = qualified
        found: List[str] = []
        # In the order they run: a call's arguments before the call.
        for call in sorted(
            (n for n in ast.walk(node) if isinstance(n, ast.Call)),
            key=lambda n: (n.end_lineno or n.lineno, n.end_col_offset or n.col_offset),
        ):
            target = self._resolve(call.func, local, module, owner)
            if target is not None and target != function and target not in found:
                found.append(target)
        return found

    def _resolve(self, func: ast.expr, local: Dict[str, str], module: str, owner: Optional[str]) -> Optional[str]:
        if isinstance(func, ast.Name):
            return self._canonical(local[func.id]) if func.id in local else None
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Name):
            if func.value.id == "self" and owner is not None:
                return self._canonical(f"{module}.{owner}.{func.attr}")
            if func.value.id in local:
                found = self._canonical(f"{local[func.value.id]}.{func.attr}")
                if found is not None:
                    return found
        return self.unique_methods.get(func.attr)


def _file(index: _Index, function: str) -> str:
    return str(index.modules[index.functions[function][0]].relative_to(PACKAGE.parent))


def shortest_path(index: _Index, entry: str, target: str) -> List[str]:
    """The fewest calls from `entry` to `target` (breadth first)."""
    before: Dict[str, str] = {}
    queue = deque([entry])
    seen = {entry}
    while queue:
        function = queue.popleft()
        if function == target:
            path = [target]
            while path[-1] != entry:
                path.append(before[path[-1]])
            return path[::-1]
        for called in index.calls(function):
            if called not in seen:
                seen.add(called)
                before[called] = function
                queue.append(called)
    return []


def walk(index: _Index, path: List[str], depth: int = 1) -> List[Tuple[str, str]]:
    """The stops of a reader who follows `path` and steps `depth` calls off it at each of its functions.

    Depth first in source order, each function once, until the path's last
    function; a stop is (caller, function).
    """
    spine = set(path)
    order: List[Tuple[str, str]] = []
    seen: Set[str] = set()

    def visit(caller: str, function: str, off: int) -> None:
        seen.add(function)
        order.append((caller, function))
        for called in index.calls(function):
            if called in seen or path[-1] in seen:
                continue
            if called in spine:
                visit(function, called, 0)
            elif off < depth:
                visit(function, called, off + 1)

    visit("", path[0], 0)
    return order


def returns(index: _Index, stops: List[Tuple[str, str]]) -> List[bool]:
    """Which stops are calls from one file into another the walk had already been in."""
    been: Set[str] = set()
    found = []
    for caller, function in stops:
        file = _file(index, function)
        found.append(bool(caller) and file != _file(index, caller) and file in been)
        been.add(file)
    return found


def main(argv: List[str]) -> int:
    """Print the path and the walk from `argv[0]` (or `ENTRY`) to `argv[1]` (or `TARGET`)."""
    entry = argv[0] if argv else ENTRY
    target = argv[1] if len(argv) > 1 else TARGET
    index = _Index()
    path = shortest_path(index, entry, target)
    if not path:
        print(f"no chain of calls from {entry} to {target}")
        return 1
    print(f"path: {len(path) - 1} hops over {len(set(_file(index, f) for f in path))} files")
    for function in path:
        print(f"  {function}  ({_file(index, function)})")
    stops = walk(index, path)
    files = [_file(index, function) for _, function in stops]
    back = returns(index, stops)
    print(f"walk: {len(stops)} stops in {len(set(files))} files, {sum(back)} calls back into a file already visited")
    print("  (* on the path, < a call back into a file already visited)")
    for (_, function), file, again in zip(stops, files, back):
        print(f"  {'*' if function in path else ' '}{'<' if again else ' '} {function}  ({file})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
