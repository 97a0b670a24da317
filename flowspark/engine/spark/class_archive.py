"""A class-data-sharing archive that cuts the driver JVM's start-up.

Spark's driver loads about 15,000 classes before a query can start, and on a
small machine that is most of the 6-13 seconds its session takes to come up.
Java's dynamic class-data sharing (`-XX:ArchiveClassesAtExit`, JDK 13+) dumps
the classes a JVM loaded into a file when it exits; a later JVM given that
file (`-XX:SharedArchiveFile`) maps them instead of loading and verifying
them again.  So the first flowspark run on a machine writes the archive as
its JVM exits, and every later run starts from it (measured: 13.3 s -> 7.3 s
to a ready session).

A JVM given a truncated archive crashes, so an archive only appears under its
final name once the JVM that wrote it has exited cleanly: it is written to a
temporary name and renamed by the run's exit hook.  One run at a time
writes (a lock file naming the run, taken over once that run has died), and
the name carries a digest of everything the archive depends on (the `java`
binary, Spark's jars, the PySpark version), so an upgrade makes a new one;
the archives of installations since removed go when a new one is written
(`install_cache`).
No run writes one while a configuration folder with files in it is on
Spark's class path (`SPARK_CONF_DIR`, a `spark-defaults.conf`): Java refuses
to.  `FLOWSPARK_CLASS_ARCHIVE=0` turns all of this off, and so does a user's own
`spark.driver.defaultJavaOptions` (it replaces flowspark's JVM options; a
user's `spark.driver.extraJavaOptions` only adds to them).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import socket
import time
from typing import Any, Callable, Optional, Tuple

import pyspark

from flowspark import _settings as settings
from flowspark.engine.spark import install_cache
from flowspark.engine.spark.java_check import java_binary

STALE_SECONDS = 86400.0
"""A lock or temporary file this old is left over, whoever wrote it."""

DUMP_SECONDS = 300.0
"""How long the exit hook waits for the JVM to write the archive."""

_QUIET = "-Xlog:cds*=off"  # the JVM reports skipped classes on stdout, the user's stream


def _digest(java: str, spark_home: str) -> str:
    """What the archive depends on: the JVM build and the jars on Spark's class path, where they are.

    A JVM uses an archive only with the class path it was written with, and
    each installation of PySpark has its own `SPARK_HOME` (`session`): the
    archive of another one would be opened, found not to match, and
    silently ignored, and no run would write one that matches.
    """
    parts = [java, str(os.stat(java).st_mtime_ns), pyspark.__version__, os.path.abspath(spark_home)]
    jars = os.path.join(spark_home, "jars")
    if os.path.isdir(jars):
        parts.extend(sorted(os.listdir(jars)))
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def _folders_on_class_path(spark_home: str) -> bool:
    """Whether Spark's launcher puts a folder with files in it on the driver's class path, where Java refuses to write an archive.

    The launcher adds the configuration folders (`SPARK_CONF_DIR`, else
    `SPARK_HOME/conf`; `HADOOP_CONF_DIR`, `YARN_CONF_DIR`) and
    `SPARK_DIST_CLASSPATH`; a JVM asked to write an archive with any such
    folder that is not empty fails to start.
    """
    env = os.environ
    entries = [
        env.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"),
        env.get("HADOOP_CONF_DIR", ""),
        env.get("YARN_CONF_DIR", ""),
        *env.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep),
    ]
    for entry in entries:
        try:
            if entry and os.path.isdir(entry) and os.listdir(entry):
                return True
        except OSError:
            continue
    return False


def _owner_gone(path: str) -> bool:
    """True if the run named in the lock file `path` has died, or the file is `STALE_SECONDS` old."""
    try:
        if time.time() - os.path.getmtime(path) > STALE_SECONDS:
            return True
        with open(path) as f:
            host, pid = f.read().split()
    except (OSError, ValueError):
        return False
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _take_lock(path: str) -> bool:
    """Create `path` exclusively, naming this process in it; a dead run's lock is taken over."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if not _owner_gone(path):
                return False
            try:
                os.remove(path)
            except OSError:
                return False
            continue
        except OSError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}")
        return True
    return False


def _remove_leftovers(directory: str, stem: str) -> None:
    """Delete temporary archives of earlier runs: this one's (only the lock holder writes one), and any other
    installation's `STALE_SECONDS` old."""
    for name in os.listdir(directory):
        if not name.endswith(".tmp"):
            continue
        path = os.path.join(directory, name)
        try:
            if name.startswith(stem) or time.time() - os.path.getmtime(path) > STALE_SECONDS:
                os.remove(path)
        except OSError:
            pass


def java_options(spark_home: Optional[str]) -> Tuple[str, Optional[Callable[[Any], None]]]:
    """The driver JVM's archive options, and the hook to call once its session exists.

    The hook is `None` when the archive is used (or off); when this run is
    the one that writes it, the hook arranges for the rename at exit.
    """
    if settings.CLASS_ARCHIVE.get() == "0" or spark_home is None:
        return "", None
    java = java_binary()
    if java is None:
        return "", None
    directory = settings.cache_folder("class-archives")
    try:
        os.makedirs(directory, exist_ok=True)
        stem = f"driver-{_digest(java, spark_home)}"
    except OSError:
        return "", None
    final = os.path.join(directory, f"{stem}.jsa")
    jars = os.path.join(os.path.abspath(spark_home), "jars")
    if os.path.isfile(final):
        install_cache.ensure_recorded(final, jars)
        return f"-XX:SharedArchiveFile={final} {_QUIET}", None
    if _folders_on_class_path(spark_home):
        return "", None
    lock = os.path.join(directory, f"{stem}.lock")
    if not _take_lock(lock):
        return "", None
    _remove_leftovers(directory, stem)
    install_cache.remove_orphans(directory, "driver-")
    temporary = os.path.join(directory, f"{stem}.{os.getpid()}.tmp")

    def rename_at_exit(spark: Any) -> None:
        proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
        atexit.register(_finish, spark, proc, temporary, final, lock, jars)

    return f"-XX:ArchiveClassesAtExit={temporary} {_QUIET}", rename_at_exit


def _finish(spark: Any, proc: Any, temporary: str, final: str, lock: str, jars: str) -> None:
    """Stop the JVM, wait for it to write the archive, and give the archive its final name, recording the jars it
    was written for (`install_cache`).

    Runs at interpreter exit, where an exception would only add noise to
    the run's end: any failure leaves no archive, and the next run tries again.
    """
    try:
        spark.stop()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=DUMP_SECONDS)
            if proc.returncode == 0 and os.path.getsize(temporary) > 0:
                os.replace(temporary, final)
                install_cache.record(final, jars)
    except Exception:
        pass
    finally:
        for path in (temporary, lock):
            try:
                os.remove(path)
            except OSError:
                pass
