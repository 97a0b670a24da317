"""Rewrite the `bytewax` imports of a Python file to flowspark's, with `ast` and `tokenize`.

The file is parsed, never run.  Only the word `bytewax` is replaced, where
it starts an imported module name (`import bytewax.operators as op`,
`from bytewax.connectors.kafka import ...`) or a use of the name a plain
`import bytewax.x` binds (`bytewax.operators.map(...)`), so comments,
formatting and everything else stay as they are.  Names flowspark lacks
are reported with their line, and so are imports of modules Bytewax 0.21
lacks or keeps private (`bytewax.window`, `bytewax._encoder`, ...): those
stay as they are.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from flowspark.migrate.inventory import BYTEWAX_MODULES, flowspark_name, has_module, has_name
from flowspark.migrate.removed import describe, removed_module
from flowspark.migrate.report import Finding, Migrated

OLD = "bytewax"
NEW = "flowspark"

_MODULE_STRING = re.compile(r"^bytewax(\.\w+)*(:.*)?$|(^|\s)-m\s+bytewax\.\w+")
_DEPENDENCY_STRING = re.compile(r"^bytewax(\[[^\]]*\])?\s*([=<>!~]=?.*)?$")

Position = Tuple[int, int]
"""A line (from 1) and a character column (from 0)."""


def _is_bytewax(module: Optional[str]) -> bool:
    return module is not None and (module == OLD or module.startswith(OLD + "."))


def _char_col(lines: List[str], line: int, byte_col: int) -> int:
    """`ast` columns count UTF-8 bytes; edits need characters."""
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _lines(source: str) -> List[str]:
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)


@dataclass
class _Scan:
    """What one pass over a module's syntax tree found."""

    path: Path
    lines: List[str]
    edits: Set[Position] = field(default_factory=set)
    from_starts: Set[Position] = field(default_factory=set)
    aliases: Dict[str, str] = field(default_factory=dict)
    """Local name -> flowspark module it stands for."""
    plain_imports: Set[str] = field(default_factory=set)
    """Rewritten modules imported as `import bytewax.x` (binding the name `bytewax`)."""
    kept_imports: Set[str] = field(default_factory=set)
    """Modules imported as `import bytewax.x` that stay Bytewax's."""
    findings: List[Finding] = field(default_factory=list)

    def note(self, line: int, message: str) -> None:
        self.findings.append(Finding(self.path, line, message))

    def supported(self, module: str, line: int, names: Sequence[str] = ()) -> bool:
        """Whether flowspark has `module`'s counterpart (`names` are imported from it); reports it if not."""
        removed = removed_module(module)
        if removed is not None:
            self.note(line, describe(removed, names if removed == module else ()))
            return False
        if has_module(flowspark_name(module)):
            return True
        if module in BYTEWAX_MODULES:
            self.note(line, f"flowspark has no `{flowspark_name(module)}` (Bytewax's `{module}`); import left as is")
        else:
            self.note(
                line,
                f"`{module}` is not part of Bytewax itself (a connector package?); import left as is: "
                "flowspark's `op.input`/`op.output` run its sources and sinks while bytewax is installed",
            )
        return False

    def edit_at(self, line: int, byte_col: int) -> None:
        self.edits.add((line, _char_col(self.lines, line, byte_col)))


def _scan_import(scan: _Scan, node: ast.Import) -> None:
    for alias in node.names:
        if not _is_bytewax(alias.name):
            continue
        if not scan.supported(alias.name, alias.lineno):
            if alias.asname is None:
                scan.kept_imports.add(alias.name)
            continue
        scan.edit_at(alias.lineno, alias.col_offset)
        if alias.asname is not None:
            scan.aliases[alias.asname] = flowspark_name(alias.name)
        else:
            scan.plain_imports.add(alias.name)


def _scan_import_from(scan: _Scan, node: ast.ImportFrom) -> None:
    if node.level != 0 or not _is_bytewax(node.module) or node.module is None:
        return
    if not scan.supported(node.module, node.lineno, [a.name for a in node.names]):
        return
    submodules = [removed_module(f"{node.module}.{a.name}") for a in node.names]
    if any(submodules):
        for alias, removed in zip(node.names, submodules):
            if removed is not None:
                scan.note(alias.lineno, describe(removed))
        return  # the module's other names stay Bytewax's too: the line needs a hand
    scan.from_starts.add((node.lineno, _char_col(scan.lines, node.lineno, node.col_offset)))
    module = flowspark_name(node.module)
    for alias in node.names:
        if alias.name == "*":
            continue
        if not has_name(module, alias.name):
            scan.note(alias.lineno, f"flowspark's `{module}` has no `{alias.name}`")
        elif has_module(f"{module}.{alias.name}"):
            scan.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"


def _dotted(node: ast.expr, parents: Dict[ast.AST, ast.AST]) -> Tuple[List[str], int]:
    """The dotted name starting at Name `node` (`bytewax.operators.map` -> its parts) and its line."""
    parts = [node.id] if isinstance(node, ast.Name) else []
    here: ast.AST = node
    while isinstance(parents.get(here), ast.Attribute):
        here = parents[here]
        assert isinstance(here, ast.Attribute)
        parts.append(here.attr)
    return parts, node.lineno


def _check_name(scan: _Scan, module: str, name: str, line: int) -> None:
    """Report a use of `name` from flowspark module `module` if it is a module Bytewax removed or flowspark lacks."""
    removed = removed_module(f"{OLD}{module[len(NEW) :]}.{name}")
    if removed is not None:
        scan.note(line, describe(removed, imported=False))
    elif not has_name(module, name):
        scan.note(line, f"flowspark's `{module}` has no `{name}`")


def _scan_names(scan: _Scan, tree: ast.Module) -> None:
    """Rewrite uses of a plainly imported `bytewax`; check attributes of module aliases."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == OLD and scan.plain_imports:
            parts, line = _dotted(node, parents)
            prefixes = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
            module = next(
                (m for m in prefixes if m in BYTEWAX_MODULES or m in scan.plain_imports or m in scan.kept_imports), OLD
            )
            if removed_module(module) is not None or not has_module(flowspark_name(module)):
                continue  # its import is left as is, and reported
            scan.edit_at(node.lineno, node.col_offset)
            rest = parts[len(module.split(".")) :]
            if rest:
                _check_name(scan, flowspark_name(module), rest[0], line)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in scan.aliases:
            _check_name(scan, scan.aliases[node.value.id], node.attr, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if _MODULE_STRING.search(text):
                scan.note(node.lineno, f"string {text[:60]!r} names a Bytewax module; not rewritten, check it by hand")
            elif _DEPENDENCY_STRING.match(text):
                scan.note(
                    node.lineno,
                    f"depends on {text!r}: depend on flowspark instead "
                    "(keep bytewax beside it only for Bytewax connector packages)",
                )


def _from_module_edits(source: str, from_starts: Set[Position]) -> Set[Position]:
    """Where the module name of each `from bytewax... import` statement starts."""
    edits: Set[Position] = set()
    waiting = False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.NAME:
            continue
        if waiting:
            edits.add(token.start)
            waiting = False
        elif token.string == "from" and token.start in from_starts:
            waiting = True
    return edits


def migrate_python(path: Path, source: str) -> Migrated:
    """`source` (the text of `path`) with its `bytewax` imports and uses rewritten."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as ex:
        return Migrated(source, [Finding(path, ex.lineno or 1, f"not migrated: can't parse it ({ex.msg})")])
    scan = _Scan(path, _lines(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            _scan_import(scan, node)
        elif isinstance(node, ast.ImportFrom):
            _scan_import_from(scan, node)
    _scan_names(scan, tree)
    edits = scan.edits | _from_module_edits(source, scan.from_starts)
    lines = list(scan.lines)
    for line, col in sorted(edits, reverse=True):
        text = lines[line - 1]
        if text[col : col + len(OLD)] == OLD:
            lines[line - 1] = text[:col] + NEW + text[col + len(OLD) :]
    scan.findings.sort(key=lambda f: f.line)
    return Migrated("".join(lines), scan.findings)
