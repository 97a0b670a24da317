"""Get the user's own modules to Spark's Python workers.

A flow's functions and classes usually live in the user's modules (the
flow file, its helpers, a test module), which Spark's workers can't import
on a cluster, and often not even locally (pytest's rootdir-relative
imports).  Registering them with cloudpickle *by value* ships their code
inside the pickles.  Both cloudpickles are told: the pip copy, which
flowspark uses for plans and snapshots, and PySpark's vendored copy, which
Spark uses for the stateful processors it ships.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from typing import Dict, FrozenSet, Iterable, Set

import cloudpickle
from pyspark import cloudpickle as spark_cloudpickle

import flowspark


@functools.lru_cache(maxsize=1)
def _installed_roots() -> FrozenSet[str]:
    paths = sysconfig.get_paths()
    roots = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    roots.add(os.path.dirname(os.path.abspath(flowspark.__file__)))
    return frozenset(os.path.realpath(r) for r in roots)


def user_packages() -> Set[str]:
    """Top-level names of loaded modules that are neither installed nor part of Python."""
    roots = _installed_roots()
    found: Set[str] = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name == "__main__" or not path:
            continue
        if not _is_user_file(path, roots):
            continue
        found.add(name.split(".")[0])
    return {n for n in found if n in sys.modules}


_seen_files: Dict[str, bool] = {}
"""Whether each module file looked at so far is the user's: a run's check then resolves only new modules' paths."""


def _is_user_file(path: str, roots: FrozenSet[str]) -> bool:
    known = _seen_files.get(path)
    if known is None:
        real = os.path.realpath(path)
        known = _seen_files[path] = not any(real.startswith(root + os.sep) for root in roots)
    return known


def ship_by_value(packages: Iterable[str]) -> None:
    """Register each package with both cloudpickles so its code travels in pickles."""
    for name in packages:
        module = sys.modules[name]
        cloudpickle.register_pickle_by_value(module)
        spark_cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
