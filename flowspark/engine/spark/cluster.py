"""Checks that only matter when a flow runs on a Spark cluster.

Spark's executors write the state store (every stateful step's snapshots)
into the checkpoint under the recovery directory, while the driver writes
the offset and commit logs and flowspark's own records there.  On a
cluster, a directory that exists only on the driver's disk makes each
executor write its own private copy of the state, and a later micro-batch
scheduled on another executor silently starts from empty state.  So before
the query starts, one tiny job asks every executor whether it sees the
directory and can write to it.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from flowspark.errors import FlowsparkRuntimeError

__all__ = ["check_recovery_dir_visible", "is_local_master"]

# At most this many jobs are run to reach every registered executor; Spark
# places tasks itself, so a job may miss an executor that was busy or late.
_ROUNDS = 3
# Each probe task lingers this long, so one executor can't take every task
# before the others get theirs.
_TASK_SECONDS = 0.2

# How long the check waits for executors to take its tasks.
EXECUTOR_WAIT_SECONDS = 120.0

_Report = Tuple[str, str, Optional[str]]  # (host, executor identity, problem or None)


def is_local_master(master: Optional[str]) -> bool:
    """True for `local`, `local[N]`, `local[N,F]` and `local-cluster[...]`: one machine."""
    return master is None or master.startswith("local")


def _probe(path: str, _index: int, _items: Iterable[Any]) -> Iterator[_Report]:
    """Runs on an executor: does `path` exist there, and can a file be created in it?"""
    host = socket.gethostname()
    # Spark gives each executor's Python workers that executor's own block
    # manager folders (unique per executor, whatever the cluster manager).
    executor = os.environ.get("SPARK_LOCAL_DIRS") or f"pid {os.getppid()}"
    problem: Optional[str] = None
    if not os.path.isdir(path):
        problem = "it does not exist there" if not os.path.exists(path) else "it is not a directory there"
    else:
        probe = os.path.join(path, f".flowspark-visible-{uuid.uuid4().hex}")
        try:
            with open(probe, "w") as f:
                f.write(host)
            os.remove(probe)
        except OSError as ex:
            problem = f"it is not writable there ({ex.strerror or ex})"
    time.sleep(_TASK_SECONDS)
    yield host, executor, problem


def _executor_count(spark: Any) -> int:
    """How many executors have registered with the driver so far."""
    jsc = spark.sparkContext._jsc.sc()
    try:
        return int(jsc.getExecutorIds().size())
    except Exception:
        # The status tracker lists the driver too.
        return max(0, len(jsc.statusTracker().getExecutorInfos()) - 1)


def _run_probes(spark: Any, path: str, tasks: int, timeout: float) -> List[_Report]:
    """One job of `tasks` probes; cancelled (with a clear error) if no executor takes it in time."""
    sc = spark.sparkContext
    tag = f"flowspark-dir-check-{uuid.uuid4().hex}"
    timed_out = threading.Event()

    def give_up() -> None:
        timed_out.set()
        sc.cancelJobsWithTag(tag)

    timer = threading.Timer(timeout, give_up)
    timer.daemon = True
    sc.addJobTag(tag)
    timer.start()
    try:
        return sc.parallelize(range(tasks), tasks).mapPartitionsWithIndex(functools.partial(_probe, path)).collect()  # type: ignore[no-any-return]
    except Exception:
        if not timed_out.is_set():
            raise
        memory = sc.getConf().get("spark.executor.memory", "1g")
        msg = (
            f"no Spark executor took flowspark's start-up job within {timeout:.0f} s: check that the workers "
            f"of {sc.master} are registered and have a free core and {memory} of free memory for an "
            "executor (spark.executor.memory)"
        )
        raise FlowsparkRuntimeError(msg) from None
    finally:
        timer.cancel()
        sc.removeJobTag(tag)


def check_recovery_dir_visible(
    spark: Any, path: str, *, temporary: bool = False, timeout: float = EXECUTOR_WAIT_SECONDS
) -> None:
    """Raise `FlowsparkRuntimeError` unless every executor sees `path` and can write to it.

    A no-op on local masters (one machine, one file system).  The driver
    must have created `path` already.  `temporary` says the directory is
    the driver-side temporary checkpoint flowspark uses when no recovery
    directory was given, which changes the advice in the error.  The job
    also waits for the executors to register (so the default parallelism
    counts their cores afterwards); if none takes it in `timeout` seconds,
    that is an error too (Spark would wait silently forever).
    """
    master = spark.sparkContext.master
    if is_local_master(master):
        return
    if "://" in path and not path.startswith("file://"):
        return  # a Hadoop URI (hdfs://, s3a://): not checkable from Python, and shared by design
    local = os.path.abspath(path[len("file://") :] if path.startswith("file://") else path)
    seen: Dict[str, str] = {}
    problems: Dict[str, Tuple[str, str]] = {}
    for _ in range(_ROUNDS):
        tasks = max(2, 2 * _executor_count(spark))
        for host, executor, problem in _run_probes(spark, local, tasks, timeout):
            seen[executor] = host
            if problem is not None:
                problems.setdefault(executor, (host, problem))
        if problems or len(seen) >= _executor_count(spark):
            break
    if not problems:
        return
    host, problem = next(iter(problems.values()))
    hosts = sorted({h for h, _ in problems.values()})
    others = f" (hosts that can't see it: {', '.join(hosts)})" if len(hosts) > 1 else ""
    if temporary:
        msg = (
            f"flowspark keeps Spark's checkpoint (the state of stateful steps) in {local!r} on the driver, "
            f"but an executor on host {host!r} can't use it: {problem}{others}. On a cluster, pass "
            "-r/--recovery-directory with a directory on storage every node sees (a shared file system "
            "mounted at the same path on the driver and on every worker)."
        )
    else:
        msg = (
            f"recovery directory {local!r} can't be used by the executor on host {host!r}: {problem}{others}. "
            "Spark's executors write the state of stateful steps into it, so on a cluster the recovery "
            "directory must be on storage every node sees (a shared file system mounted at the same path "
            "on the driver and on every worker)."
        )
    raise FlowsparkRuntimeError(msg)
