"""The one way a flow is launched: Bytewax's run arguments made into one frozen `RunConfig`, then the engine's run.

The command line (`python -m flowspark.run`, `python -m flowspark.testing`),
`cli_main`, `cluster_main` and `run_main` all come here, each filling one
`RunOptions`: its `config` maps Bytewax's notions (workers, epoch or
snapshot interval, recovery directory) onto Spark's, `drives_the_run` says
whether this process of a Bytewax multi-process launch runs the flow, and
`launch` runs it with the dataflow API server, which the engine is handed
rather than importing.

>>> config = RunOptions(parallelism=2, interval=timedelta(seconds=0)).config()
>>> (config.workers, config.interval_seconds, config.epoch_per_round)
(2, 0.05, True)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Mapping, Optional, Sequence

from flowspark import _settings as settings
from flowspark._dataflow_api import serving_api
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.progress import Progress
from flowspark.engine.run_config import RunConfig
from flowspark.engine.runner import run_flow

__all__ = ["RunOptions", "drives_the_run", "launch", "launch_process", "run_config"]

_log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 0.05
"""The shortest micro-batch interval a run is given: a zero epoch or snapshot interval means epochs per source round."""


@dataclass(frozen=True)
class RunOptions:
    """A run's options, the one list every way of launching a flow fills (the command line, `cli_main`,
    `cluster_main`, `run_main`) in Bytewax's terms; `config` maps them onto Spark's (`RunConfig`).

    `parallelism` is the workers, `interval` the epoch or snapshot interval
    (zero: each source round is an epoch), `recovery_dir` the checkpoint;
    `ordered` (by default when there is at most one worker) keeps one
    Bytewax worker's output order.  The others are `RunConfig`'s.
    """

    parallelism: Optional[int] = None
    interval: Optional[timedelta] = None
    recovery_dir: Optional[str] = None
    master: Optional[str] = None
    conf: Mapping[str, str] = field(default_factory=dict)
    progress: Optional[Progress] = None
    driver_link_port: int = 0
    spark_ui: bool = False
    remote: Optional[str] = None
    single_run: bool = False
    max_items_per_batch: Optional[int] = None
    ordered: Optional[bool] = None

    def config(self) -> RunConfig:
        """The run's configuration in Spark's terms."""
        seconds = None if self.interval is None else self.interval.total_seconds()
        return RunConfig(
            parallelism=self.parallelism,
            interval_seconds=0.0 if seconds is None else max(MIN_INTERVAL_SECONDS, seconds),
            epoch_per_round=seconds == 0,
            recovery_dir=self.recovery_dir,
            master=self.master,
            conf=dict(self.conf),
            progress=self.progress or Progress(),
            driver_link_port=self.driver_link_port,
            ordered=self.parallelism in (None, 1) if self.ordered is None else self.ordered,
            spark_ui=self.spark_ui,
            remote=self.remote,
            single_run=self.single_run,
            **({} if self.max_items_per_batch is None else {"max_items_per_batch": self.max_items_per_batch}),
        )


def run_config(**options: Any) -> RunConfig:
    """The run's configuration from Bytewax's arguments, as `RunOptions` names them."""
    return RunOptions(**options).config()


def drives_the_run(proc_id: Optional[int], process_count: int) -> bool:
    """Whether this process of a Bytewax-style multi-process launch runs the flow: only process 0 does.

    Bytewax starts one process per machine (`-i/-a`, `BYTEWAX_PROCESS_ID`
    and `BYTEWAX_ADDRESSES`, its Kubernetes chart); on Spark one run covers
    them all, so the others log why they have nothing to do.
    """
    if not proc_id:
        return True
    _log.warning(
        "process %d of %d: process 0 runs the whole flow on Spark, so this process has nothing to do; "
        "to spread a flow over machines, run it once with --master spark://HOST:PORT",
        proc_id,
        max(process_count, proc_id + 1),
    )
    return False


def launch(flow: Dataflow, config: RunConfig) -> None:
    """Run `flow` as `config` says, with the dataflow API server if the environment asks for it."""
    run_flow(flow, config, serve_api=serving_api)


def launch_process(
    flow: Dataflow,
    addresses: Sequence[str],
    proc_id: Optional[int],
    workers_per_process: int,
    options: RunOptions = RunOptions(),
) -> None:
    """This process's part of a Bytewax-style launch (`cli_main`, `cluster_main`): process 0 runs `flow` with every
    process's workers (and on the Spark Connect server `SPARK_REMOTE` names, if any); the others return at once."""
    if not drives_the_run(proc_id, len(addresses)):
        return
    parallelism = workers_per_process * max(1, len(addresses))
    launch(flow, replace(options, parallelism=parallelism, remote=settings.REMOTE.get()).config())
