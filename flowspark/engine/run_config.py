"""How a flow runs: the one frozen configuration `flowspark._launch` makes from Bytewax's arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from flowspark.engine.reports.progress import Progress


@dataclass(frozen=True)
class RunConfig:
    """How to run: parallelism, micro-batch interval, recovery directory, Spark settings (`flowspark._launch.RunOptions`
    makes one from Bytewax's arguments)."""

    parallelism: Optional[int] = None
    interval_seconds: float = 0.0
    """Seconds between micro-batch starts (Spark's processing-time trigger); 0: the next starts once there is input
    and the last is done."""
    recovery_dir: Optional[str] = None
    master: Optional[str] = None
    conf: Dict[str, str] = field(default_factory=dict)
    max_items_per_batch: int = 1_000_000
    max_seconds_per_poll: float = 5.0
    progress: Optional[Progress] = None
    driver_link_port: int = 0
    """The driver link's port on a cluster (for firewalls); 0 picks a free one."""
    ordered: bool = False
    """Keep one Bytewax worker's output order (`run_main`, `-w 1`), whatever Spark's parallelism."""
    epoch_per_round: bool = False
    """Each source round is an epoch, as with Bytewax's zero epoch interval; else each micro-batch is."""
    spark_ui: bool = False
    """A Spark started for the run serves its UI (`spark.ui.enabled`, unless `conf` says otherwise)."""
    remote: Optional[str] = None
    """A Spark Connect server to run on (`sc://host:port/;token=...`), instead of a Spark of the run's own."""
    single_run: bool = False
    """The process runs this one flow (the command line): a Spark started for it would serve no other run (`run_spark`)."""

    def session_conf(self) -> Dict[str, str]:
        """The Spark settings of a session started for the run: the UI if asked for, then the user's `conf`."""
        return {"spark.ui.enabled": "true", **self.conf} if self.spark_ui else dict(self.conf)

    @property
    def workers(self) -> int:
        """Bytewax's worker count: `-w` (times the processes of a Bytewax launch), else 1 as in Bytewax.

        Dynamic sources and sinks get one partition per worker; Spark's
        parallelism defaults to the cores when it is not given.
        """
        return self.parallelism or 1
