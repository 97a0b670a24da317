"""Run a flow from the command line: `python -m flowspark.run IMPORT_STR`.

`IMPORT_STR` is `module`, `module:flow_var`, `module:factory("arg", n=2)` or
`path/to/file.py[:...]`, as in Bytewax.  Bytewax's flags and `BYTEWAX_*`
environment variables keep their meaning where Spark has one: workers are
local parallelism, the snapshot interval is the micro-batch interval, the
recovery directory holds Spark's checkpoint.  `--master` and `--conf` go to
Spark.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from flowspark import _settings as settings
from flowspark._locate import locate_flow, module_name
from flowspark.dataflow import Dataflow
from flowspark.errors import RunStopped
from flowspark.recovery import RecoveryConfig

if TYPE_CHECKING:
    from flowspark.engine.run_config import RunConfig

__all__ = ["cli_main"]

# By name: run as `python -m flowspark.run`, this module is `__main__`.
_log = logging.getLogger("flowspark.run")


class _EnvDefault(argparse.Action):
    """An option whose default comes from an environment variable."""

    def __init__(self, envvar: str, default: Any = None, **kwargs: Any) -> None:
        if envvar in os.environ:
            default = os.environ[envvar]
            kwargs["required"] = False
        super().__init__(default=default, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        setattr(namespace, self.dest, values)


def _parse_timedelta(text: str) -> timedelta:
    """An interval option's seconds (Bytewax's name for it, which argparse shows in its error)."""
    return timedelta(seconds=float(text))


def _environment_help() -> str:
    """The environment variables flowspark reads, for `--help` (`flowspark._settings`)."""
    width = max(len(setting.name) for setting in settings.ALL)
    lines = [f"  {setting.name:<{width}}  {setting.meaning}" for setting in settings.ALL]
    return "environment variables (docs/settings.md):\n" + "\n".join(lines)


def _parser(testing: bool = False) -> argparse.ArgumentParser:
    """`python -m flowspark.run`'s options; `testing`: `python -m flowspark.testing`'s (`-p` in place of `-i/-a`)."""
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.testing" if testing else "python -m flowspark.run",
        description="Run a flowspark dataflow as a Spark Structured Streaming query.",
        epilog=_environment_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "import_str", help="module[:flow] or path/to/file.py[:flow]; flow defaults to `flow`; may be a factory call"
    )
    if testing:
        parser.add_argument(
            "-w",
            "--workers-per-process",
            type=int,
            default=1,
            action=_EnvDefault,
            envvar="BYTEWAX_WORKERS_PER_PROCESS",
            help="Bytewax's workers per process; with -p, the run's parallelism (default 1)",
        )
        parser.add_argument(
            "-p",
            "--processes",
            type=int,
            default=1,
            action=_EnvDefault,
            envvar="BYTEWAX_PROCESSES",
            help="Bytewax's process count: one run on Spark stands for them all, with their workers (default 1)",
        )
    else:
        parser.add_argument(
            "-w",
            "--workers-per-process",
            type=int,
            action=_EnvDefault,
            envvar="BYTEWAX_WORKERS_PER_PROCESS",
            help="Bytewax's workers: Spark's parallelism (local threads, shuffle partitions); default: every core, "
            "in one worker's order on the embedded Spark (as Bytewax's one worker), in any order on a --master",
        )
        parser.add_argument(
            "-i",
            "--process-id",
            type=int,
            action=_EnvDefault,
            envvar="BYTEWAX_PROCESS_ID",
            help="Bytewax's process id: process 0 runs the whole flow, the others wait for its run to end and "
            "exit with its status (use --master for a cluster)",
        )
        parser.add_argument(
            "-a",
            "--addresses",
            action=_EnvDefault,
            envvar="BYTEWAX_ADDRESSES",
            help="Bytewax's ';'-separated process addresses: their count multiplies -w in process 0",
        )
    parser.add_argument(
        "-r",
        "--recovery-directory",
        action=_EnvDefault,
        envvar="BYTEWAX_RECOVERY_DIRECTORY",
        help="directory for Spark's checkpoint (a path, or a file://, s3:// or hdfs:// URI); a run started "
        "again with it continues where it stopped",
    )
    parser.add_argument(
        "-s",
        "--snapshot-interval",
        type=_parse_timedelta,
        action=_EnvDefault,
        envvar="BYTEWAX_SNAPSHOT_INTERVAL",
        help="seconds between micro-batches (each one is a snapshot); default 0: the next one starts as soon as input comes",
    )
    parser.add_argument(
        "-b",
        "--backup-interval",
        type=_parse_timedelta,
        action=_EnvDefault,
        envvar="BYTEWAX_RECOVERY_BACKUP_INTERVAL",
        help="accepted for Bytewax compatibility; Spark keeps its own checkpoint history",
    )
    parser.add_argument(
        "--master",
        default=settings.MASTER.get(),
        help="Spark master URL, e.g. spark://host:7077 (default: embedded local[N])",
    )
    parser.add_argument(
        "--remote",
        default=settings.REMOTE.get(),
        metavar="URL",
        help="run through the Spark Connect server at URL, e.g. sc://host:15002/;token=... (env SPARK_REMOTE)",
    )
    parser.add_argument(
        "--max-batch-items",
        type=int,
        default=None,
        metavar="N",
        help="at most N items per source partition in one micro-batch (default 1,000,000)",
    )
    parser.add_argument(
        "--driver-link-port",
        type=int,
        default=int(settings.DRIVER_LINK_PORT.get() or "0"),
        metavar="PORT",
        help="on a cluster, the port executors reach the driver's flowspark server on "
        "(default: a free one; env FLOWSPARK_DRIVER_LINK_PORT)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="don't report progress on stderr (a redrawn line in a terminal, a line every 10 s otherwise)",
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting; repeatable")
    parser.add_argument(
        "--properties-file",
        metavar="FILE",
        help="a file of Spark settings, as spark-submit's (over spark-defaults.conf, under --conf)",
    )
    return parser


def _conf(pairs: Sequence[str], properties_file: Optional[str], parser: argparse.ArgumentParser) -> Dict[str, str]:
    """The run's own Spark settings: the properties file's, then `--conf`'s, which win."""
    conf: Dict[str, str] = {}
    if properties_file is not None:
        from flowspark.engine.spark.spark_defaults import read_properties

        try:
            conf.update(read_properties(properties_file))
        except (OSError, UnicodeDecodeError) as ex:
            parser.error(f"can't read the --properties-file {properties_file!r}: {getattr(ex, 'strerror', None) or ex}")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--conf needs KEY=VALUE; got {pair!r}")
        conf[key] = value
    return conf


def cli_main(
    flow: Dataflow,
    *,
    workers_per_process: int = 1,
    process_id: Optional[int] = None,
    addresses: Optional[List[str]] = None,
    epoch_interval: Optional[timedelta] = None,
    recovery_config: Optional[RecoveryConfig] = None,
) -> None:
    """Run `flow` from a program as `python -m flowspark.run` runs it: Bytewax's `bytewax.run.cli_main`.

    As for the command line, process 0 of a Bytewax-style launch
    (`process_id`, `addresses`) runs the whole flow with every process's
    workers, and the others return at once.
    """
    from flowspark._launch import RunOptions, launch_process

    recovery_dir = None if recovery_config is None else recovery_config.location
    options = RunOptions(interval=epoch_interval, recovery_dir=recovery_dir)
    launch_process(flow, addresses or [], process_id, workers_per_process, options)


def _prepare_import(import_str: str) -> Tuple[str, str]:
    """The module and the flow's name in an import string, with the module's root put on `sys.path`, as Bytewax's
    private helper of the same name gives them (its own tests call it).

    >>> _prepare_import("flowspark.examples.wordcount")
    ('flowspark.examples.wordcount', 'flow')
    """
    module_part, _, flow_name = import_str.partition(":")
    return module_name(module_part), flow_name or "flow"


def _parse_args(
    argv: Optional[List[str]] = None, parser: Optional[argparse.ArgumentParser] = None
) -> argparse.Namespace:
    """`python -m flowspark.run`'s arguments, with Bytewax's Kubernetes chart's way of giving the process id and addresses.

    The chart starts each pod with `BYTEWAX_POD_NAME` (`<statefulset>-<n>`)
    and `BYTEWAX_STATEFULSET_NAME`, so its process id is `n`, and with
    `BYTEWAX_HOSTFILE_PATH`, a file of the pods' addresses, one per line.
    """
    parser = parser or _parser()
    args = parser.parse_args(argv)
    env = os.environ
    if args.process_id is None and "BYTEWAX_POD_NAME" in env and "BYTEWAX_STATEFULSET_NAME" in env:
        pod, statefulset = env["BYTEWAX_POD_NAME"], env["BYTEWAX_STATEFULSET_NAME"]
        ordinal = pod[len(statefulset) + 1 :] if pod.startswith(statefulset + "-") else ""
        if not ordinal.isdigit():
            parser.error(
                f"BYTEWAX_POD_NAME={pod!r} is not <BYTEWAX_STATEFULSET_NAME>-<number> "
                f"(BYTEWAX_STATEFULSET_NAME={statefulset!r}); set both as Bytewax's chart does, or pass -i"
            )
        args.process_id = int(ordinal)
    if args.process_id is not None and args.addresses is None and "BYTEWAX_HOSTFILE_PATH" in env:
        try:
            with open(env["BYTEWAX_HOSTFILE_PATH"]) as hosts:
                args.addresses = ";".join(line.strip() for line in hosts if line.strip())
        except OSError as ex:
            parser.error(
                f"can't read the addresses in BYTEWAX_HOSTFILE_PATH={env['BYTEWAX_HOSTFILE_PATH']!r}: {ex.strerror}; "
                "point it at the chart's hosts file, or pass -a"
            )
    return args


def main(argv: Optional[List[str]] = None, testing: bool = False) -> int:
    """Parse the command line, run the flow, and return the process exit code.

    `testing`: the command line of Bytewax's `python -m bytewax.testing`,
    which starts `-p` processes of `-w` workers each on this machine; here
    one run stands for them all, with their worker count.  In a Bytewax
    multi-process launch, the processes other than 0 wait for process 0's
    run and return its status (`process_zero`).
    """
    from flowspark._dataflow_api import settings_from_env
    from flowspark._launch import RunOptions, drives_the_run
    from flowspark.engine.process_zero import announce_status, wait_for_process_zero
    from flowspark.engine.reports.progress import show_on_stderr

    parser = _parser(testing)
    args = parser.parse_args(argv) if testing else _parse_args(argv, parser)
    show_on_stderr(show_progress=not args.no_progress)
    workers = args.workers_per_process
    addresses: List[str] = []
    if testing:
        processes = int(args.processes)
    else:
        addresses = [a for a in (args.addresses or "").split(";") if a.strip()]
        if not drives_the_run(args.process_id, len(addresses)):
            return wait_for_process_zero(addresses[0], args.process_id) if addresses else 0
        processes = max(len(addresses), 1)
    if workers is not None:
        workers = int(workers) * processes
    if args.backup_interval is not None and args.recovery_directory is None:
        parser.error("-b/--backup-interval needs -r/--recovery-directory")
    if args.remote is not None and (args.master is not None or args.conf or args.properties_file):
        parser.error(
            "--remote runs on the Spark Connect server's own Spark: --master, --conf and --properties-file "
            "can't go with it"
        )
    conf = _conf(args.conf, args.properties_file, parser)
    master = args.master or conf.pop("spark.master", None)
    options = RunOptions(
        parallelism=workers,
        interval=args.snapshot_interval,
        recovery_dir=None if args.recovery_directory is None else str(args.recovery_directory),
        master=master,
        conf=conf,
        driver_link_port=args.driver_link_port,
        spark_ui=True,
        remote=args.remote,
        single_run=True,
        max_items_per_batch=args.max_batch_items,
        ordered=workers == 1 if workers is not None else _on_this_machine(master, args.remote),
    )
    try:
        settings_from_env()
    except ValueError as ex:
        parser.error(str(ex))
    config = options.config()
    if len(addresses) < 2:
        return _run(args.import_str, config)
    with announce_status(addresses[0], len(addresses) - 1) as others:
        status = _run(args.import_str, config)
        others.finish(status)
    return status


def _on_this_machine(master: Optional[str], remote: Optional[str]) -> bool:
    """Whether a run without `-w` is on the embedded local Spark (no master or server named): it then keeps one
    worker's order, as Bytewax's default of one worker does; on a master of the user's it spreads over every core."""
    from flowspark.engine.spark.spark_defaults import started_by_spark_submit

    return master is None and remote is None and not started_by_spark_submit()


def _run(import_str: str, config: RunConfig) -> int:
    """Find the flow and run it; the exit status, with the failure or stop told in one message."""
    from flowspark._launch import launch
    from flowspark.engine.reports.failures import user_traceback

    flow = locate_flow(import_str)
    try:
        launch(flow, config)
    except KeyboardInterrupt:
        _log.error("KeyboardInterrupt")
        return 130
    except RunStopped as stop:
        _log.warning("%s", stop)
        return stop.status
    except Exception as ex:
        # The user's own frames only, as Bytewax shows them: flowspark's and
        # Spark's are noise to them (FLOWSPARK_FULL_TRACEBACK=1 keeps them).
        _log.error("%s", user_traceback(ex).rstrip("\n"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
