"""Start Spark's Python workers while the driver is still setting up the query.

On a local master the first micro-batch used to wait for Spark to start its
Python daemon, fork the workers and have each import PySpark, pyarrow and
flowspark's task code, while a core sat idle as the driver planned the
query: about a second of every run on a 2-core machine.  Tiny jobs,
submitted from background threads as the run begins, do that start-up
alongside the planning, and the query's tasks reuse the warm workers (Spark
keeps idle Python workers for reuse).

Spark keeps one daemon, and so one pool of workers, per worker environment.
The source's tasks get the environment of SQL jobs and
`transformWithState`'s tasks the one RDD jobs get; they differ only by
`SPARK_SIMPLIFIED_TRACEBACK`, which SQL jobs set while Spark's simplified
tracebacks are on.  flowspark turns them off (`session`), so that one pool
serves the whole query, and one RDD job, the quicker to plan, warms it.  If
a run turns them back on, one SQL job (`mapInArrow`) warms the source's
workers, and for a flow with stateful steps an RDD job warms theirs;
warming a kind the query does not use would only take CPU from it.
On a cluster the recovery-directory probe
(`cluster.check_recovery_dir_visible`) has just run Python tasks on every
executor, which warms them the same way.
"""

from __future__ import annotations

import threading
import weakref
from enum import Enum
from typing import Any, Callable, Dict, Iterator, List

from flowspark.engine.spark.cluster import is_local_master

JOB_GROUP = "flowspark-warm-up"
"""The Spark job group (as the Spark UI shows it) of the warm-up jobs."""


SIMPLIFIED_TRACEBACK = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"
"""Spark's setting that gives SQL jobs' Python workers an environment, and so a pool, of their own."""


class WorkerKind(Enum):
    """The Python workers of one environment, which Spark pools apart."""

    SQL = "sql"
    """The source's tasks while simplified tracebacks are on (and every SQL job's)."""
    RDD = "rdd"
    """`transformWithState`'s tasks and every RDD job's; the source's tasks too while simplified tracebacks are off."""


def kinds_used(spark: Any, stateful: bool) -> List[WorkerKind]:
    """The worker kinds a query's tasks use (`stateful`: it has stateful steps)."""
    if spark.conf.get(SIMPLIFIED_TRACEBACK, "true").lower() != "true":
        return [WorkerKind.RDD]
    return [WorkerKind.SQL] + ([WorkerKind.RDD] if stateful else [])


_warmed: Dict[WorkerKind, "weakref.WeakSet[Any]"] = {kind: weakref.WeakSet() for kind in WorkerKind}
"""The SparkContexts whose workers of each kind were warmed (once per context is enough)."""


def warm_python_workers(spark: Any, stateful: bool) -> None:
    """Start one task per core of each worker kind the query uses (`stateful`: it has stateful steps), in the background."""
    context = spark.sparkContext
    if not is_local_master(context.master):
        return
    for kind in kinds_used(spark, stateful):
        if context in _warmed[kind]:
            continue
        _warmed[kind].add(context)
        threading.Thread(
            target=_run_job, args=(spark, _JOBS[kind]), name=f"flowspark-warm-up-{kind.value}", daemon=True
        ).start()


def _run_job(spark: Any, job: Callable[[Any, int], None]) -> None:
    context = spark.sparkContext
    try:
        context.setJobGroup(JOB_GROUP, "flowspark: start the Python workers while the query is planned")
        job(spark, context.defaultParallelism)
    except Exception:  # a session stopped meanwhile, say: the query starts its own workers anyway
        return


def _sql_job(spark: Any, cores: int) -> None:
    spark.range(cores, numPartitions=cores).mapInArrow(_import_in_batches, "id long").collect()


def _rdd_job(spark: Any, cores: int) -> None:
    spark.sparkContext.parallelize(range(cores), cores).foreach(_import_task_code)


_JOBS: Dict[WorkerKind, Callable[[Any, int], None]] = {WorkerKind.SQL: _sql_job, WorkerKind.RDD: _rdd_job}


def _import_in_batches(batches: Iterator[Any]) -> Iterator[Any]:
    _import_task_code(0)
    return batches


def _import_task_code(_: int) -> None:
    """Import the modules the query's tasks run, so the reused worker already holds them."""
    import flowspark.engine.sources.spark_source
    import flowspark.engine.state.stateful  # noqa: F401
