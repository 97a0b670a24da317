"""Find the Java runtime Spark's launcher will use, and check it before Spark starts.

PySpark starts its driver JVM with `$JAVA_HOME/bin/java`, or else the first
`java` on PATH.  Without one, the launcher exits at once and PySpark reports
only `[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its
port number`; with a Java older than Spark 4's minimum, Spark's classes fail
to load.  Checking first lets the error say what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Optional

from flowspark.errors import FlowsparkRuntimeError

MIN_JAVA = 17
"""The oldest Java that Spark 4 runs on."""

_INSTALL = (
    f"Install a Java {MIN_JAVA} or later runtime (Debian/Ubuntu: apt-get install openjdk-{MIN_JAVA}-jre-headless) "
    "and put it on PATH or set JAVA_HOME."
)


def java_binary() -> Optional[str]:
    """The `java` Spark's launcher will run, with links resolved: `$JAVA_HOME/bin/java`, or the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def major_version(version_output: str) -> Optional[int]:
    """The major version in `java -version`'s output (`1.8.0_381` is 8, `17.0.9` is 17), if it has one."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Raise `FlowsparkRuntimeError` saying what to install if Spark's launcher would find no usable Java.

    A `java` whose version output can't be read is given the benefit of the
    doubt: Spark itself then reports what goes wrong.
    """
    java = java_binary()
    if java is None:
        home = os.environ.get("JAVA_HOME")
        where = (
            f"JAVA_HOME is {home!r}, which has no bin/java"
            if home
            else "JAVA_HOME is not set and there is no `java` on PATH"
        )
        msg = f"Spark needs Java {MIN_JAVA} or later, and none was found: {where}. {_INSTALL}"
        raise FlowsparkRuntimeError(msg)
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as ex:
        msg = f"Spark needs Java {MIN_JAVA} or later, and {java} could not be run ({ex}). {_INSTALL}"
        raise FlowsparkRuntimeError(msg) from None
    major = major_version(done.stderr + done.stdout)
    if major is not None and major < MIN_JAVA:
        msg = f"Spark needs Java {MIN_JAVA} or later, and {java} is Java {major}. {_INSTALL}"
        raise FlowsparkRuntimeError(msg)
