"""The warm local Spark from the command line: whether it runs, what it holds, and stopping it.

    python -m flowspark.warm [status]   # since when, its processes, memory, threads, files and runs served
    python -m flowspark.warm stop       # stop it now (the next run that needs it starts it again)

The warm server is the Spark Connect server your runs share on this machine
(see docs/warm-spark.md); this looks at the one of this installation.  Its
log (`server.log` in its folder) says why it stopped.

>>> main(["sideways"])
2
"""

from __future__ import annotations

import os
import sys
import time
from typing import List, Optional

from flowspark.engine.connect.connect_server import (
    LOG,
    RECORD,
    ServerRecord,
    read_record,
    runs_counted,
    server_dir,
    stop,
)
from flowspark.engine.connect.server_usage import usage_of

USAGE = """usage: python -m flowspark.warm [status | stop]

  status  whether this installation's warm local Spark runs: since when, its processes, memory and runs served
  stop    stop it (the next run that needs it starts it again)
"""

STOP_SECONDS = 60.0
"""How long `stop` waits for the server to be gone."""


def status(directory: str, record: Optional[ServerRecord]) -> str:
    """What `status` prints about the server recorded in `directory`."""
    try:
        started = os.stat(os.path.join(directory, RECORD)).st_mtime
    except FileNotFoundError:  # it stopped since its record was read
        record = None
    if record is None:
        return f"warm local Spark: not running; its files: {directory}"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
    usage = usage_of(record.supervisor, directory)
    return (
        f"warm local Spark: running since {since}, supervisor pid {record.supervisor} (JVM {record.jvm}), "
        f"Spark Connect on 127.0.0.1:{record.port}, Spark UI at http://127.0.0.1:{record.ui_port}\n"
        f"  {usage.processes} processes, {usage.pss_bytes / 2**20:,.1f} MiB (PSS), {usage.threads} threads, "
        f"{usage.open_files} open files; {runs_counted(directory)} runs served; its folder {usage.disk_bytes / 2**20:,.1f} MiB\n"
        f"  its files: {directory} (why it stopped, when it does: {LOG})"
    )


def main(argv: List[str]) -> int:
    """`status` (the default) or `stop`; 2 for anything else."""
    if argv not in ([], ["status"], ["stop"]):
        print(USAGE, file=sys.stderr, end="")
        return 2
    directory = server_dir()
    if argv == ["stop"]:
        record = stop(directory)
        deadline = time.monotonic() + STOP_SECONDS
        while record is not None and read_record(directory) == record and time.monotonic() < deadline:
            time.sleep(0.1)
        print(f"warm local Spark: {'stopped' if record is not None else 'not running'}; its files: {directory}")
        return 0
    print(status(directory, read_record(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
