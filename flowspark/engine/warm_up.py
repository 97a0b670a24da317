"""Start Spark's Python workers while the driver is still setting up the query.

On a local master the first micro-batch used to wait for Spark to start its
Python daemon, fork the workers and have each import PySpark, pyarrow and
flowspark's task code, while a core sat idle as the driver planned the
query: about a second of every run on a 2-core machine.  One tiny job,
submitted from a background thread as the run begins, does that start-up
alongside the planning, and the query's tasks reuse the warm workers (Spark
keeps idle Python workers for reuse).  On a cluster the recovery-directory
probe (`cluster.check_recovery_dir_visible`) has just run Python tasks on
every executor, which warms them the same way.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from flowspark.engine.cluster import is_local_master

JOB_GROUP = "flowspark-warm-up"
"""The Spark job group (as the Spark UI shows it) of the warm-up job."""

_warmed: "weakref.WeakSet[Any]" = weakref.WeakSet()
"""The SparkContexts whose workers were warmed (once per context is enough)."""


def warm_python_workers(spark: Any) -> None:
    """Start one task per core in the background that imports what the query's tasks import."""
    context = spark.sparkContext
    if not is_local_master(context.master) or context in _warmed:
        return
    _warmed.add(context)
    threading.Thread(target=_run_job, args=(context,), name="flowspark-warm-up", daemon=True).start()


def _run_job(context: Any) -> None:
    cores = context.defaultParallelism
    try:
        context.setJobGroup(JOB_GROUP, "flowspark: start the Python workers while the query is planned")
        context.parallelize(range(cores), cores).foreach(_import_task_code)
    except Exception:  # a session stopped meanwhile, say: the query starts its own workers anyway
        return


def _import_task_code(_: int) -> None:
    """Import the modules the query's tasks run, so the reused worker already holds them."""
    import flowspark.engine.spark_source  # noqa: F401
    import flowspark.engine.stateful  # noqa: F401
