"""One driver at a time per recovery directory: the latest to start owns it, and the others stop writing.

A supervisor restarts a lost driver (a Kubernetes restart policy, YARN's
next application attempt, systemd), and the old run's executors may still
be finishing its tasks, or the old driver may be alive on the far side of
a network split.  Both would write the same micro-batch's sink files as the
new run rewrites them from the ledger's snapshots.  So each run, as it
starts (`owning`), writes a fresh token into `flowspark-driver` in the
recovery directory, and keeps it through its query's restarts; the sink
tasks it starts check that the token is still theirs before writing a
partition, and the driver checks before each micro-batch and each ledger
commit.  A run whose token was replaced stops with an error that says
which run took over; a stale task fails without writing.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, Optional, Union

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location
from flowspark.errors import FlowsparkRuntimeError

__all__ = ["FENCE", "DriverFence", "FencedOut", "claim_for", "owning"]

FENCE = "flowspark-driver"
"""The file naming the driver that owns the recovery directory."""


class FencedOut(FlowsparkRuntimeError):
    """Another driver took over the recovery directory: this run (or a stale task of it) must not write."""


@dataclass(frozen=True)
class DriverFence:
    """This driver's claim on a recovery directory (picklable: sink tasks carry it)."""

    directory: Location
    token: str

    @classmethod
    def claim(cls, directory: Union[str, Location]) -> DriverFence:
        """Take the recovery directory over for this driver, from any earlier one."""
        fence = cls(storage.as_location(directory), secrets.token_hex(16))
        owner = {
            "token": fence.token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        }
        storage.write_private(fence.directory.join(FENCE), json.dumps(owner).encode())
        return fence

    def check(self) -> None:
        """Raise `FencedOut` unless this driver still owns the directory."""
        try:
            owner = json.loads(storage.read_trusted(self.directory.join(FENCE)))
        except FileNotFoundError:
            owner = {}
        except ValueError:
            owner = {"token": "?"}
        if owner.get("token") == self.token:
            return
        who = (
            f"the run started on {owner.get('host')!s} (pid {owner.get('pid')!s}) at {owner.get('started')!s}"
            if owner.get("host")
            else "another run"
        )
        msg = (
            f"{who} took over recovery directory {str(self.directory)!r}; this run stops "
            "writing, as two runs must not share one recovery directory (if that run is gone, start this one again)"
        )
        raise FencedOut(msg)


_RUN_CLAIM: ContextVar[Optional[DriverFence]] = ContextVar("flowspark_run_claim", default=None)
"""The claim of the run going on in this context, kept through its query's restarts."""


@contextmanager
def owning(directory: Union[str, Location]) -> Iterator[DriverFence]:
    """While a run lasts: its claim on `directory`, which every ledger it opens (`claim_for`) keeps."""
    fence = DriverFence.claim(directory)
    token = _RUN_CLAIM.set(fence)
    try:
        yield fence
    finally:
        _RUN_CLAIM.reset(token)


def claim_for(directory: Union[str, Location]) -> DriverFence:
    """The run's claim on `directory` if it made one (a restart of its query must not take the directory back), else a new one."""
    fence = _RUN_CLAIM.get()
    if fence is not None and fence.directory == storage.as_location(directory):
        return fence
    return DriverFence.claim(directory)
