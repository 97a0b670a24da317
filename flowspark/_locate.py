"""Find a flow from Bytewax's import string: `module`, `module:flow_var`, `module:factory("arg", n=2)` or
`path/to/file.py[:...]`.

>>> flow = locate_flow("flowspark.examples.wordcount:flow")
>>> flow.flow_id
'wordcount'
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

from flowspark.dataflow import Dataflow

__all__ = ["locate_flow", "module_name"]


def module_name(target: str) -> str:
    """Turn a file path into an importable module name, putting its root on `sys.path`."""
    if not target.endswith(".py") and os.sep not in target:
        sys.path.insert(0, os.getcwd())
        return target
    path = Path(target).resolve()
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    sys.path.insert(0, str(folder))
    return ".".join(parts)


def locate_flow(import_str: str) -> Dataflow:
    """Import the module and find (or build, with a factory call) the flow."""
    module_part, _, attr = import_str.partition(":")
    name = module_name(module_part)
    try:
        module = importlib.import_module(name)
    except ImportError as ex:
        if getattr(ex, "name", None) == name:
            msg = f"Could not import {name!r}: {ex}"
            raise ImportError(msg) from ex
        raise
    attr = attr or "flow"
    try:
        expr = ast.parse(attr.strip(), mode="eval").body
    except SyntaxError as ex:
        msg = f"Failed to parse {attr!r} as an attribute name or function call"
        raise ValueError(msg) from ex
    if isinstance(expr, ast.Name):
        target_name, args, kwargs = expr.id, None, {}
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        target_name = expr.func.id
        try:
            args = [ast.literal_eval(a) for a in expr.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in expr.keywords if k.arg}
        except ValueError as ex:
            msg = f"Failed to parse arguments of {attr!r}: only literal values are allowed"
            raise ValueError(msg) from ex
    else:
        msg = f"Failed to parse {attr!r} as an attribute name or function call"
        raise ValueError(msg)
    try:
        found = getattr(module, target_name)
    except AttributeError as ex:
        msg = f"Failed to find attribute {target_name!r} in {module.__name__!r}"
        raise AttributeError(msg) from ex
    flow = found(*args, **kwargs) if args is not None else found
    if not isinstance(flow, Dataflow):
        msg = f"A valid flowspark dataflow was not obtained from '{module.__name__}:{attr}'"
        raise TypeError(msg)
    return flow
