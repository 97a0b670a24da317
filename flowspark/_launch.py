"""The one way a flow is launched: Bytewax's run arguments made into one frozen `RunConfig`, then the engine's run.

The command line (`python -m flowspark.run`, `python -m flowspark.testing`),
`cli_main`, `cluster_main` and `run_main` all come here: `run_config` maps
Bytewax's notions (workers, epoch or snapshot interval, recovery
directory) onto Spark's, `drives_the_run` says whether this process of a
Bytewax multi-process launch runs the flow, and `launch` runs it with the
dataflow API server, which the engine is handed rather than importing.

>>> config = run_config(parallelism=2, interval=timedelta(seconds=0))
>>> (config.workers, config.interval_seconds, config.epoch_per_round)
(2, 0.05, True)
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Dict, Optional, Sequence

from flowspark import _settings as settings
from flowspark._dataflow_api import serving_api
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.progress import Progress
from flowspark.engine.run_config import RunConfig
from flowspark.engine.runner import run_flow

__all__ = ["drives_the_run", "launch", "launch_process", "run_config"]

_log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 0.05
"""The shortest micro-batch interval a run is given: a zero epoch or snapshot interval means epochs per source round."""


def run_config(
    *,
    parallelism: Optional[int] = None,
    interval: Optional[timedelta] = None,
    recovery_dir: Optional[str] = None,
    master: Optional[str] = None,
    conf: Optional[Dict[str, str]] = None,
    progress: Optional[Progress] = None,
    driver_link_port: int = 0,
    spark_ui: bool = False,
    remote: Optional[str] = None,
    single_run: bool = False,
    max_items_per_batch: Optional[int] = None,
    ordered: Optional[bool] = None,
) -> RunConfig:
    """The run's configuration from Bytewax's arguments: `parallelism` is the workers, `interval` the epoch or
    snapshot interval (zero: each source round is an epoch), `recovery_dir` the checkpoint; `ordered` (by default
    when there is at most one worker) keeps one Bytewax worker's output order."""
    seconds = None if interval is None else interval.total_seconds()
    return RunConfig(
        parallelism=parallelism,
        interval_seconds=0.0 if seconds is None else max(MIN_INTERVAL_SECONDS, seconds),
        epoch_per_round=seconds == 0,
        recovery_dir=recovery_dir,
        master=master,
        conf=dict(conf or {}),
        progress=progress or Progress(),
        driver_link_port=driver_link_port,
        ordered=parallelism in (None, 1) if ordered is None else ordered,
        spark_ui=spark_ui,
        remote=remote,
        single_run=single_run,
        **({} if max_items_per_batch is None else {"max_items_per_batch": max_items_per_batch}),
    )


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
    *,
    interval: Optional[timedelta] = None,
    recovery_dir: Optional[str] = None,
    progress: Optional[Progress] = None,
) -> None:
    """This process's part of a Bytewax-style launch (`cli_main`, `cluster_main`): process 0 runs `flow` with every
    process's workers; the others return at once."""
    if not drives_the_run(proc_id, len(addresses)):
        return
    parallelism = workers_per_process * max(1, len(addresses))
    config = run_config(
        parallelism=parallelism,
        interval=interval,
        recovery_dir=recovery_dir,
        progress=progress,
        remote=settings.REMOTE.get(),
    )
    launch(flow, config)
