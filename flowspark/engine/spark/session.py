"""The SparkSession flowspark runs on, created once per process and reused.

The settings are the ones the research probes found necessary or fastest:
RocksDB (the only state store `transformWithState` accepts), Arrow, UTC, a
C1-only driver JIT (the default JIT burns 15-30 CPU-seconds per run on two
cores), a class-data-sharing archive of the driver's classes
(`class_archive`), the serial garbage collector and a 2 GiB heap (with G1
and 4 GiB the JVM's memory grew from 0.9 to 1.8 GiB between 1M and 10M
events of the windowed benchmark; with these, 0.8 to 1.2 GiB at the same
speed), a first metaspace threshold above what Spark's start loads (with
the default one the JVM stopped for a full collection three or four times
while Spark started, once with the class archive), a large thread stack (Spark's error matching can
overflow the default one on long Python tracebacks), the FileSystem-based checkpoint
manager (no process forked per checkpoint file), and the user's own interpreter for
Python workers (`PYSPARK_PYTHON`, the only setting honoured when a flow
starts as `python ...`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Set, Tuple

import pyspark
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from flowspark import _settings as settings
from flowspark.engine.sources.data_source import FlowsparkSource
from flowspark.engine.spark import class_archive, fork_server, install_cache
from flowspark.engine.spark.cluster import is_local_master
from flowspark.engine.spark.java_check import check_java
from flowspark.engine.spark.native_libs import rocksdb_library_dir
from flowspark.engine.spark.spark_defaults import started_by_spark_submit, user_defaults
from flowspark.engine.spark.spark_version import check_spark
from flowspark.engine.util.shutdown import jvm_ignores_sigterm
from flowspark.errors import FlowsparkRuntimeError

_LOG_CONFIG = os.path.join(os.path.dirname(__file__), "log4j2.properties")
_CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
_JAVA_OPTIONS = (
    "-Xss16m -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC -XX:MetaspaceSize=256m "
    f"-Dlog4j2.configurationFile=file:{_LOG_CONFIG}"
)


def _spark_home_without_zip() -> Optional[str]:
    """A SPARK_HOME whose Python workers import the installed pyspark, not `pyspark.zip`.

    Spark puts `SPARK_HOME/python/lib/pyspark.zip` first on its Python
    workers' path; code imported from a zip is compiled again in every
    worker of every run (seconds of CPU per run).  This home links to the
    installed Spark but leaves the zip out, so workers import the installed
    package and its cached bytecode.  `None` when it can't be made.
    """
    real = os.path.dirname(os.path.abspath(pyspark.__file__))
    tag = hashlib.sha1(real.encode()).hexdigest()[:12]
    home = settings.cache_folder(f"spark-home-{pyspark.__version__}-{tag}")
    if not os.path.isdir(home):
        install_cache.remove_unlinked_homes(os.path.dirname(home), "spark-home-")
    try:
        lib = os.path.join(home, "python", "lib")
        os.makedirs(lib, exist_ok=True)
        for name in ("bin", "jars", "sbin", "conf"):
            link = os.path.join(home, name)
            if os.path.exists(os.path.join(real, name)) and not os.path.lexists(link):
                os.symlink(os.path.join(real, name), link)
        for name in os.listdir(os.path.join(real, "python", "lib")):
            link = os.path.join(lib, name)
            if name.startswith("py4j") and not os.path.lexists(link):
                os.symlink(os.path.join(real, "python", "lib", name), link)
    except OSError:
        return None
    return home


def spark_home() -> str:
    """The user's `SPARK_HOME`, else one that keeps Python workers off `pyspark.zip`, else the installed PySpark's."""
    found = os.environ.get("SPARK_HOME") or _spark_home_without_zip()
    return found or os.path.dirname(os.path.abspath(pyspark.__file__))


def default_master(parallelism: int) -> str:
    """`FLOWSPARK_MASTER`, else the master spark-submit or `spark-defaults.conf` gives, else `local[parallelism]`."""
    return settings.MASTER.get() or user_defaults(spark_home()).get("spark.master") or f"local[{parallelism}]"


def get_session(
    master: Optional[str] = None, conf: Optional[Dict[str, str]] = None, app_name: str = "flowspark"
) -> SparkSession:
    """The process's session, created on first use with flowspark's settings once a usable Java is found.

    The user's settings (`conf`, over spark-submit's or `spark-defaults.conf`'s:
    `spark_defaults`) win over flowspark's, `spark.app.name` over `app_name`
    and `spark.log.level` over flowspark's silence.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    home = os.environ["SPARK_HOME"] = spark_home()
    given = {**user_defaults(home), **(conf or {})}
    url = master or given.pop("spark.master", None) or default_master(os.cpu_count() or 2)
    # flowspark's JVM options are Spark's "default" ones, which Spark puts
    # before the user's `extraJavaOptions`: those add to them (a later
    # option wins).  A user's own default options replace them, archive
    # included; a JVM that spark-submit started has its options already.
    own_defaults = "spark.driver.defaultJavaOptions" in given or started_by_spark_submit()
    archive_options, on_started = ("", None) if own_defaults else class_archive.java_options(home)
    local = is_local_master(url)
    builder = SparkSession.builder.appName(app_name).master(url)
    chosen = spark_settings(local, archive_options, given)
    for key, value in chosen.items():
        builder = builder.config(key, value)
    forked_python = _fork_pythons(chosen.get("spark.python.unix.domain.socket.dir")) if local else None
    threading.Thread(target=_import_gateway_converters, name="flowspark-import", daemon=True).start()
    try:
        with _jvm_environment(local, forked_python), _no_orphan_jvm(), jvm_ignores_sigterm():
            spark = _started(builder.getOrCreate)
    except Exception as ex:
        # Spark gives up on an unreachable master after about a minute of
        # retries (logged, but the log is off) and stops the context.
        if not url.startswith("local") and "stopped SparkContext" in str(ex):
            msg = (
                f"could not connect to the Spark master {url!r}: it did not answer Spark's retries. "
                "Check that the master is running and reachable from this machine."
            )
            raise FlowsparkRuntimeError(msg) from None
        raise
    check_spark(spark.version, f"Spark (SPARK_HOME={home})")
    if on_started is not None:
        on_started(spark)
    level = settings.SPARK_LOG_LEVEL.get()
    if level is not None or "spark.log.level" not in given:  # Spark has set the user's level itself
        spark.sparkContext.setLogLevel((level or "OFF").upper())
    spark.dataSource.register(FlowsparkSource)
    return spark


def spark_settings(local: bool, java_options: str, conf: Dict[str, str]) -> Dict[str, str]:
    """flowspark's Spark settings (see the module doc), then the user's own `conf`, which win.

    `local` adds those of a Spark that runs on this machine alone, and
    `java_options` goes with flowspark's driver JVM options.
    """
    chosen = {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.defaultJavaOptions": f"{_JAVA_OPTIONS} {java_options}".strip(),
        # Spark's 1g default is tight for the chunks big micro-batches carry;
        # more only lets the heap grow with the input (see the module doc).
        "spark.driver.memory": settings.DRIVER_MEMORY.get() or "2g",
        "spark.executor.defaultJavaOptions": "-Xss16m",
        # A micro-batch runs when input comes, or when a timer is due
        # (`wake_ups`): never one without either, which a stateful query
        # would otherwise run at every trigger.
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        # How often an idle query asks its sources for input: each ask goes
        # to the driver, and Spark's 10 ms cost an idle flow a tenth of a core.
        "spark.sql.streaming.pollingDelay": "25ms",
        # Each micro-batch's state commit writes the batch's changes as a
        # log, not a new snapshot of RocksDB (flush, new files, upload);
        # snapshots are taken in the background.  An existing checkpoint
        # resumes either way.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Checkpoints live on a local (or mounted) filesystem, where a
        # rename is atomic anyway; the default FileContext manager forks
        # `readlink` for every checkpoint file it renames (about 650 forks
        # in a 10M-event run, 1.5-2 s of its wall time).
        "spark.sql.streaming.checkpointFileManagerClass": _CHECKPOINT_FILE_MANAGER,
        # One environment, and so one pool of Python workers, for the
        # source's tasks and the stateful ones (see `warm_up`).  User errors
        # reach the driver through flowspark's own failure records, never
        # through the traceback text this would shorten.
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
        # Spark's own task retries (`spark.task.maxFailures`, 4 on clusters)
        # stay on for lost executors and workers; a user function that raises
        # still ends the run on its first raise (`failures.reported_to`).
    }
    if local:
        # Spark listens on every interface by default (its UI included);
        # a run on one machine needs none of them beyond loopback.  Its
        # Python workers talk to the JVM over Unix sockets in a directory
        # only the user can enter: on TCP, any local process could take a
        # state server's one connection before the worker does.
        chosen.update(
            {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.python.unix.domain.socket.enabled": "true",
                "spark.python.unix.domain.socket.dir": _private_dir(),
                # Loopback is still shared with every local user: Spark's RPC
                # and block transfers then take only peers with this secret,
                # and the UI (CLI runs) offers no "kill" buttons.
                "spark.authenticate": "true",
                "spark.ui.killEnabled": "false",
            }
        )
        library_dir = rocksdb_library_dir(os.environ.get("SPARK_HOME"))
        if library_dir is not None and "spark.driver.extraLibraryPath" not in conf:
            chosen["spark.driver.extraLibraryPath"] = library_dir
    chosen.update(conf)
    return chosen


_FORK_SERVER: List[Tuple["subprocess.Popen[bytes]", str]] = []
"""This process's fork server and the program that uses it, once started."""


def _fork_pythons(directory: Optional[str]) -> Optional[str]:
    """The Python a local Spark is to start: a program whose Pythons fork from one that imported PySpark and
    flowspark while the JVM started; None to keep `PYSPARK_PYTHON`.

    Spark starts fresh Pythons for a run: a daemon per kind of task (the
    source's, the state's, a data source's planning), whose workers
    import PySpark, pandas, pyarrow and, once they unpickle the flow,
    flowspark; and the runner of the source's offsets.  Forked from one
    fork server (`fork_server`, the warm server's), they import nothing
    and start at their first step.  Only for a Spark started by the
    process's main thread (the fork server dies with the thread that
    started it), with `PYSPARK_PYTHON` this process's own Python and the
    socket in `directory`, a private one; one fork server per process.
    The program is given to the JVM and the Spark context as they start,
    never left in this process's environment, where other processes it
    starts (a warm server's supervisor, say) would inherit it.
    """
    if _FORK_SERVER:
        return _FORK_SERVER[0][1]
    if directory is None or threading.current_thread() is not threading.main_thread():
        return None
    started = fork_server.start(directory, os.environ["PYSPARK_PYTHON"], connect=False, output=subprocess.DEVNULL)
    if started is None:
        return None
    _FORK_SERVER.append(started)
    return started[1]


def _import_gateway_converters() -> None:
    """Import what PySpark's first JVM call imports, while the JVM is still starting.

    PySpark's numpy argument converter imports `pyspark.testing.utils`
    (and with it pandas) on the first call through the gateway, after
    the JVM has started: in a thread now, that import runs while the main
    thread only waits for the JVM.  Python's import lock makes the first
    call wait for it if it has not finished.
    """
    import pyspark.testing.utils  # noqa: F401


def _private_dir() -> str:
    """A directory for this process's Unix sockets that only the user can enter, removed at exit."""
    path = tempfile.mkdtemp(prefix="flowspark-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _children(pid: str = "self") -> Set[int]:
    """A process's child processes (none where `/proc` can't tell)."""
    found: Set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(child) for child in f.read().split())
    except OSError:
        pass
    return found


def _descendants(pids: Set[int]) -> List[int]:
    """`pids` and every process below them, parents first."""
    order: List[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        order.append(pid)
        todo.extend(_children(str(pid)))
    return order


@contextmanager
def _no_orphan_jvm() -> Iterator[None]:
    """Stop the JVM that is starting if the start is interrupted (Ctrl-C) or fails.

    PySpark starts the JVM with Ctrl-C ignored, and a JVM whose start was
    cut short keeps running, listening on its ports, after Python exits.
    """
    before = _children()
    try:
        yield
    except BaseException:
        started = _descendants(_children() - before)
        for pid in reversed(started):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in started:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        raise


_NO_DRIVER_PYTHON = "flowspark-no-static-python-data-sources"
"""What the driver JVM is told its Python command is: no command at all.

In a driver JVM started by PySpark, `PYSPARK_DRIVER_PYTHON` decides one
thing (Spark's `DataSourceManager`, the only reader of its
`defaultPythonExec`): before the first Python data source is registered
or looked up, Spark starts that Python to list the `pyspark_*` data-source
packages installed there, a process of its own on the way to every
query's start.  flowspark's query reads only
its own source, so its JVM starts with a command that does not exist and
Spark skips the listing.  Python workers are started with `PYSPARK_PYTHON`
and are not affected.  A program that reads such packages through Spark
itself creates its SparkSession before running a flow; flowspark then
runs on that session, as it is.
"""


def jvm_environment(local: bool) -> Dict[str, str]:
    """The environment a driver JVM starts with: no driver Python for it and, for a local master, its UI on loopback
    and a fresh secret.

    The UI binds to `SPARK_LOCAL_IP`, or to every interface without it; a
    user's own `SPARK_LOCAL_IP` wins.  The secret goes in the environment
    (`_SPARK_AUTH_SECRET`, which only the user can read) because settings
    reach the JVM on its command line, which every local user can read.
    """
    added = {"PYSPARK_DRIVER_PYTHON": _NO_DRIVER_PYTHON}
    if local:
        added["_SPARK_AUTH_SECRET"] = secrets.token_hex(32)
        if "SPARK_LOCAL_IP" not in os.environ:
            added["SPARK_LOCAL_IP"] = "127.0.0.1"
    return added


@contextmanager
def _jvm_environment(local: bool, python: Optional[str]) -> Iterator[None]:
    """While the driver's JVM and the Spark context start, which take their environment from ours: `jvm_environment`
    and `python` as `PYSPARK_PYTHON` (if given), restored afterwards."""
    added = {**jvm_environment(local), **({"PYSPARK_PYTHON": python} if python else {})}
    saved = {name: os.environ.get(name) for name in added}
    os.environ.update(added)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_NOISE = (
    b"Streaming TransformWithStateInPandas Python worker",
    b"Starting Streaming TransformWithStateInPandas Python worker",
    b"WARNING: Using incubator modules",
    b"Setting default log level to",
    b"To adjust logging level use",
)


_TRACEBACK = b"Traceback (most recent call last):"
_CHAINED = (b"During handling of the above exception", b"The above exception was the direct cause")
_HANGUPS = (b"BrokenPipeError", b"ConnectionResetError", b"EOFError")
_MAX_HELD_LINES = 64
_LAST_WORDS_SECONDS = 2.0
"""How long a failed start waits for the JVM's stderr to be written out (a JVM still up never closes its end)."""


_STDLIB = (b'File "<frozen ', b'File "' + os.path.dirname(os.__file__).encode() + b"/")


def _spark_hangup(block: List[bytes], chained: bool) -> bool:
    """Whether a traceback is one of PySpark's own processes losing its connection as a query stops.

    Its frames are in PySpark (and in Python's own library, which PySpark's
    calls) and it ends in a broken pipe, a reset connection or an end of file
    (or it is chained to such a traceback): nothing the user did, nothing lost.
    """
    frames = [line.lstrip() for line in block if line.lstrip().startswith(b'File "')]
    spark = [f for f in frames if b"/pyspark/" in f]
    return (
        bool(spark)
        and all(b"/pyspark/" in f or f.startswith(_STDLIB) for f in frames)
        and (chained or block[-1].startswith(_HANGUPS))
    )


def _forward(pipe: BinaryIO, started: Optional[threading.Event] = None) -> None:
    """Copy the JVM's stderr to ours, minus Spark's start-up and state-worker chatter and its processes' hang-ups.

    Nothing is written before `started` is set: while the JVM starts, our
    own stderr is the pipe itself.
    """
    skip_blank = False
    dropped = False
    held: List[bytes] = []

    def write(lines: List[bytes]) -> None:
        if started is not None:
            started.wait()
        sys.stderr.buffer.write(b"".join(lines))
        sys.stderr.flush()

    for line in pipe:
        if held:
            held.append(line)
            if line[:1] not in (b" ", b"\t") and line.strip():  # the exception line ends the traceback
                dropped = _spark_hangup(held, dropped)
                if not dropped:
                    write(held)
                held = []
            elif len(held) > _MAX_HELD_LINES:
                write(held)
                held, dropped = [], False
            continue
        if line.startswith(_TRACEBACK):
            held = [line]
            continue
        if dropped and (not line.strip() or line.startswith(_CHAINED)):
            continue
        dropped = False
        if line.startswith(_NOISE) or (skip_blank and line.strip() == b""):
            skip_blank = True
            continue
        skip_blank = False
        write([line])
    if held:
        write(held)


def _started(start: Callable[[], SparkSession]) -> SparkSession:
    """`start()` with its JVM's stderr filtered; a JVM that exits before it answers is started once more.

    Now and then the child that PySpark forks to run spark-submit dies
    before it runs it, in a process whose gRPC threads (a Spark Connect
    client's: an earlier run on the warm server) were busy at the fork;
    PySpark says only `JAVA_GATEWAY_EXITED`.  A JVM that can't start at
    all fails twice, its own words written out each time.
    """
    try:
        return _with_filtered_stderr(start)
    except PySparkRuntimeError as ex:
        if ex.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
    return _with_filtered_stderr(start)


def _with_filtered_stderr(start: Callable[[], SparkSession]) -> SparkSession:
    """Start the JVM with its stderr (and so its Python workers') going through `_forward`.

    Spark's `transformWithState` workers print several lines per micro-batch,
    which the JVM passes to the stderr it inherited from us; real errors and
    user prints travel the same way and are kept.  A JVM that ends before
    it answers (PySpark's `JAVA_GATEWAY_EXITED`) has said why on that
    stderr: its words are written before the error goes up.
    """
    read_fd, write_fd = os.pipe()
    started = threading.Event()
    forwarder = threading.Thread(
        target=_forward, args=(os.fdopen(read_fd, "rb"), started), name="flowspark-jvm-stderr", daemon=True
    )
    forwarder.start()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_fd, 2)

    def restore() -> None:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write_fd)
        started.set()

    try:
        spark = start()
    except BaseException:
        restore()
        forwarder.join(_LAST_WORDS_SECONDS)  # a JVM that ended closed its end: the pipe is drained at once
        raise
    restore()
    return spark
