"""The Spark settings a user gives outside flowspark, which flowspark's own defaults must not override.

A driver that spark-submit started (it runs `flowspark/run.py` under
`spark-submit`, or a cluster manager did so in cluster mode) already has its
settings, from `--master`, `--conf`, `--properties-file` and
`spark-defaults.conf`, in its JVM: they are read back from there.  A driver
that flowspark starts itself reads `spark-defaults.conf` from
`SPARK_CONF_DIR`, else `SPARK_HOME/conf`, as spark-submit does;
`python -m flowspark.run --properties-file` adds a file of its own on top
(`read_properties`).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Dict, Iterator

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def started_by_spark_submit() -> bool:
    """Whether spark-submit started this Python process as its driver, with the driver's JVM already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _logical_lines(text: str) -> Iterator[str]:
    """A properties file's lines with Java's continuations joined (a line ending in an odd number of backslashes)."""
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _key_end(line: str) -> int:
    """Where a property's key ends: at the first `=`, `:` or blank that no backslash escapes."""
    at = 0
    while at < len(line) and line[at] not in "=: \t\f":
        at += 2 if line[at] == "\\" else 1
    return min(at, len(line))


def _unescaped(text: str) -> str:
    return re.sub(
        r"\\u([0-9a-fA-F]{4})|\\(.)",
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else _ESCAPES.get(m.group(2), m.group(2)),
        text,
    )


def parse_properties(text: str) -> Dict[str, str]:
    """The `spark.*` settings of a Java properties text, as spark-submit reads them (values trimmed, other keys left out)."""
    settings: Dict[str, str] = {}
    for line in _logical_lines(text):
        stripped = line.lstrip()
        if not stripped or stripped[0] in "#!":
            continue
        end = _key_end(stripped)
        rest = stripped[end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
        key = _unescaped(stripped[:end])
        if key.startswith("spark."):
            settings[key] = _unescaped(rest).strip()
    return settings


def read_properties(path: str) -> Dict[str, str]:
    """The `spark.*` settings of a properties file (`OSError` if it can't be read)."""
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def defaults_file(spark_home: str) -> str:
    """Where spark-submit looks for `spark-defaults.conf`: `SPARK_CONF_DIR`, else `SPARK_HOME/conf`."""
    return os.path.join(os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"), "spark-defaults.conf")


_PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"


def _submitted() -> Dict[str, str]:
    """The settings spark-submit gave this driver's JVM, less an application name it made up.

    Without a name of the user's, spark-submit names the application after
    its main file (`run.py`) or, given `--class` (as Spark on Kubernetes
    gives its driver pods), after that class.
    """
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    settings = dict(SparkConf().getAll())
    if settings.get("spark.app.name") in (os.path.basename(sys.argv[0]), _PYTHON_RUNNER):
        del settings["spark.app.name"]
    return settings


def user_defaults(spark_home: str) -> Dict[str, str]:
    """The settings a driver here gets from outside flowspark: spark-submit's, else `spark-defaults.conf`'s (see the module doc).

    Without a `spark-defaults.conf` (the usual case) there are none; one
    that can't be read is left to spark-submit, which reads it too and says
    what is wrong with it.
    """
    if started_by_spark_submit():
        return _submitted()
    try:
        return read_properties(defaults_file(spark_home))
    except (OSError, UnicodeDecodeError):
        return {}
