"""Which Spark a run uses: a Spark Connect server it names, the process's own session, the warm local server, or a
new session here.

A run given a Spark Connect server (`--remote sc://...`, `SPARK_REMOTE`)
runs there.  A process that already has a Spark session (an earlier run
started it, or the user did) runs on it.  Otherwise a run on this machine
with no Spark settings of its own uses the warm local server
(`warm_session`), reached through Spark Connect, which saves it Spark's
start; a run with a master, a `--conf` setting (or settings in
`spark-defaults.conf`, or a driver that spark-submit started), a recovery directory on S3
or HDFS (the server has no settings for them), or a connector that drives
Spark itself (`uses_spark_session`) starts Spark in this process, as
Bytewax's runs are their own process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from pyspark.sql import SparkSession

from flowspark import _settings as settings
from flowspark.engine.connect.connect_client import connect, driver_link_host, server_host
from flowspark.engine.connect.warm_session import WarmMode, warm_mode, warm_spark
from flowspark.engine.plan.plan import Plan
from flowspark.engine.recovery.storage import Scheme, parse_location
from flowspark.engine.spark.cluster import is_local_master
from flowspark.engine.spark.session import default_master, get_session, spark_home
from flowspark.engine.spark.spark_defaults import started_by_spark_submit, user_defaults
from flowspark.engine.spark.spark_version import check_spark
from flowspark.engine.util.client_environment import ClientEnvironment
from flowspark.errors import FlowsparkRuntimeError

if TYPE_CHECKING:
    from flowspark.engine.run_config import RunConfig


@dataclass(frozen=True)
class RunSpark:
    """The session a run uses and what the run needs to know of it."""

    session: Any
    parallelism: int
    local: bool
    """Spark runs on this machine alone."""
    remote: bool = False
    """Spark runs behind Spark Connect: `foreachBatch` is called in the server, not here."""
    lent: Optional[ClientEnvironment] = None
    """What tasks of a Spark on this machine that the run did not start borrow from it (`client_environment`)."""
    link_host: str = "127.0.0.1"
    """Where a Spark Connect server's tasks reach the run's driver link."""
    ui_url: Optional[str] = None
    """The Spark UI that shows the run's queries, where known."""
    settings: Dict[str, str] = field(default_factory=dict)
    """The session's Spark settings, as far as this process can read them (S3 settings, for recovery directories)."""

    @property
    def context(self) -> Any:
        """The classic session's `SparkContext` (a remote session has none)."""
        assert not self.remote, "a Spark Connect session has no SparkContext"
        return self.session.sparkContext


def spark_driving_steps(plan: Plan) -> List[str]:
    """The inputs and outputs whose connector drives Spark itself (`Source.uses_spark_session`)."""
    steps = [step.step_id for step in plan.inputs if getattr(step.config.source, "uses_spark_session", False)]
    return steps + [step.step_id for step in plan.outputs if getattr(step.config.sink, "uses_spark_session", False)]


def uses_spark_session(plan: Plan) -> bool:
    """Whether a source or sink of the flow drives Spark itself (`Source.uses_spark_session`)."""
    return bool(spark_driving_steps(plan))


def local_parallelism(parallelism: Optional[int], master: Optional[str]) -> Optional[int]:
    """The parallelism of a run on this machine's Spark (given, or the local session's or cores); None for a run elsewhere."""
    active = SparkSession.getActiveSession()
    if active is not None:
        context = active.sparkContext
        return parallelism or context.defaultParallelism if is_local_master(context.master) else None
    if not is_local_master(master or default_master(1)):
        return None
    return parallelism or os.cpu_count() or 2


def spark_for(plan: Plan, config: RunConfig, streaming: bool) -> RunSpark:
    """The Spark a run uses (see the module doc): `config.session_conf()` for a session started here.

    A `streaming` run (one whose input did not end within its first read)
    uses the warm server in a process that runs one flow
    (`config.single_run`: the command line), or with
    `FLOWSPARK_WARM_SPARK=all`; a run with Spark settings of its own
    (`config.conf`) never does.  Through Spark Connect, Spark calls
    `foreachBatch` in a Python process it starts for each query, a second
    or two of each streaming query's start: less than starting Spark costs
    a process, more than a streaming query costs on a session a program
    started for its earlier runs.
    """
    parallelism, master, recovery_dir = config.parallelism, config.master, config.recovery_dir
    if config.remote is not None:
        return _connected(plan, config.remote, parallelism)
    mode = warm_mode()
    allowed = mode is WarmMode.ALL or (mode is WarmMode.AUTO and (config.single_run or not streaming))
    own_conf = bool(config.conf)
    if allowed and SparkSession.getActiveSession() is None and _may_run_warm(plan, master, own_conf, recovery_dir):
        warm = warm_spark(parallelism)
        return RunSpark(
            warm.session,
            warm.parallelism,
            True,
            True,
            ClientEnvironment.of_this_process(),
            ui_url=f"http://127.0.0.1:{warm.record.ui_port}",
        )
    spark = get_session(master, config.session_conf(), app_name=f"flowspark: {plan.flow_id}")
    context = spark.sparkContext
    return RunSpark(
        spark,
        parallelism or context.defaultParallelism,
        is_local_master(context.master),
        settings=dict(context.getConf().getAll()),
        ui_url=context.uiWebUrl,
    )


def _may_run_warm(plan: Plan, master: Optional[str], own_conf: bool, recovery_dir: Optional[str]) -> bool:
    """Whether a run may use the warm server: not if it has Spark settings of its own (given, in `spark-defaults.conf`,
    or spark-submit's, whose driver JVM is already up), or other needs (see the module doc)."""
    if master is not None or own_conf or settings.MASTER.get():
        return False
    if started_by_spark_submit() or user_defaults(spark_home()):
        return False
    if recovery_dir is not None and parse_location(recovery_dir).scheme is not Scheme.LOCAL:
        return False
    if any(getattr(step.config.sink, "uses_session_catalog", False) for step in plan.outputs):
        return False
    return not uses_spark_session(plan)


def _connected(plan: Plan, url: str, parallelism: Optional[int]) -> RunSpark:
    """A run on the Spark Connect server at `url`; a flow whose connectors drive Spark themselves is refused."""
    steps = spark_driving_steps(plan)
    if steps:
        msg = (
            f"step {steps[0]!r} drives Spark itself through a classic Spark session, which a run through Spark Connect "
            f"({url.split(';')[0]}) does not have: run it without --remote/SPARK_REMOTE"
        )
        raise FlowsparkRuntimeError(msg)
    connected = connect(url, parallelism)
    check_spark(connected.session.version, f"Spark (the Spark Connect server at {url.split(';')[0]})")
    lent = ClientEnvironment.of_this_process() if connected.local else None
    return RunSpark(connected.session, connected.parallelism, connected.local, True, lent, link_host_for(url))


def link_host_for(url: str) -> str:
    """Where the tasks of the Spark Connect server at `url` reach this process: `FLOWSPARK_DRIVER_LINK_HOST`, else the
    address this machine's route to the server leaves from."""
    return settings.DRIVER_LINK_HOST.get() or driver_link_host(server_host(url))
