"""Delta Lake's and Apache Iceberg's Spark builds for the PySpark the tests run on, and what a run needs to use them.

Both projects build for particular Spark minor releases.  Spark fetches a
build from Maven Central itself when a run names it in
`spark.jars.packages` (cached in `~/.ivy2.5.2`); on a PySpark that neither
project builds for (Spark 4.3 when this was written), the tests that need
one skip, saying which releases have one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import unquote

import pyarrow.parquet as pq
import pyspark
import pytest

__all__ = ["conf_args", "delta_settings", "delta_table_rows", "iceberg_settings"]

DELTA_BUILDS = {"4.2": "io.delta:delta-spark_4.2_2.13:4.4.0"}
"""Delta Lake's newest build for the newest Spark minor release it builds for (it builds for 4.1 too: the same
code, and CI's time is better spent once)."""

ICEBERG_BUILDS = {"4.1": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"}
"""Apache Iceberg's newest runtime for each Spark minor release."""


def _minor() -> str:
    return ".".join(pyspark.__version__.split(".")[:2])


def _build(builds: Dict[str, str], project: str) -> str:
    """The build of `project` for this PySpark; the test skips if there is none."""
    build = builds.get(_minor())
    if build is None:
        pytest.skip(f"{project} has no build for Spark {_minor()} on Maven Central (it has for {sorted(builds)})")
    return build


def delta_settings() -> Dict[str, str]:
    """The Spark settings of a run that writes Delta tables, by path and in the session's catalog.

    Delta reads its log in 50 tasks by default, a few seconds of every
    micro-batch's commit on two cores; two tasks take under a second.
    """
    return {
        "spark.jars.packages": _build(DELTA_BUILDS, "Delta Lake"),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": "2",
    }


def iceberg_settings(catalog: str, warehouse: Path) -> Dict[str, str]:
    """The Spark settings of a run with an Iceberg catalog named `catalog`, its tables in the `warehouse` folder."""
    return {
        "spark.jars.packages": _build(ICEBERG_BUILDS, "Apache Iceberg"),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{catalog}.type": "hadoop",
        f"spark.sql.catalog.{catalog}.warehouse": str(warehouse),
    }


def conf_args(settings: Dict[str, str]) -> List[str]:
    """`settings` as `flowspark.run`'s `--conf` arguments."""
    return [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]


def delta_table_rows(table: Path) -> List[Dict[str, Any]]:
    """The rows of the Delta table at `table`, read from the files its log holds (written by a commit, not removed).

    Read without Spark: files a killed write left behind, which no commit
    names, are not rows of the table.
    """
    live: Dict[str, None] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[unquote(action["add"]["path"])] = None
            elif "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
    return [row for name in live for row in pq.read_table(table / name).to_pylist()]
