"""The Spark releases flowspark runs on, and a clear error below them.

flowspark needs Python's `transformWithState` on rows
(`groupBy(...).transformWithState(...)`), Python streaming data sources
(`DataSourceStreamReader`), `mapInArrow`, `DataFrame.toArrow` and Spark
Connect's Python client: PySpark 4.0 has all but the first (it has only the
pandas form), so 4.1 is the oldest release that runs a flow.  The installed
PySpark is checked as the engine is first imported, before any of those
imports can fail with a less telling error; a Spark that the run did not
install (a `SPARK_HOME` of the user's, a Spark Connect server) is checked
once the run has its session.
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import Optional, Tuple

from flowspark.errors import FlowsparkRuntimeError

OLDEST = (4, 1)
"""The oldest Spark minor release flowspark runs on."""

OLDEST_TEXT = ".".join(map(str, OLDEST))


def minor_release(version: str) -> Optional[Tuple[int, int]]:
    """`(major, minor)` of a Spark version string (`4.1.0`, `4.2.0-preview1`, `4.3.0.dev0`); None if it has none."""
    match = re.match(r"(\d+)\.(\d+)", version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def unsupported(version: str, what: str) -> Optional[str]:
    """Why `what` at `version` can't run a flow, or None if it can (a version that can't be read is given the benefit
    of the doubt)."""
    release = minor_release(version)
    if release is None or release >= OLDEST:
        return None
    return (
        f"flowspark needs {what} >= {OLDEST_TEXT}, found {version}: Spark {'.'.join(map(str, release))} has no "
        f"Python transformWithState on rows. Install a newer one (pip install 'pyspark>={OLDEST_TEXT}') or run on a "
        f"Spark {OLDEST_TEXT} or later."
    )


def installed_pyspark() -> Optional[str]:
    """The version of the PySpark that `import pyspark` would load, read from its `version.py` without importing it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as f:
            match = re.search(r"""__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""", f.read())
    except OSError:
        return None
    return match.group(1) if match else None


def check_installed_pyspark() -> None:
    """Raise `ImportError` saying what to install if the PySpark on the path is older than flowspark needs."""
    version = installed_pyspark()
    problem = None if version is None else unsupported(version, "PySpark")
    if problem is not None:
        raise ImportError(problem)


def check_spark(version: str, what: str) -> None:
    """Raise `FlowsparkRuntimeError` if `what` (the session's Spark, a Spark Connect server) at `version` is too old."""
    problem = unsupported(version, what)
    if problem is not None:
        raise FlowsparkRuntimeError(problem)
