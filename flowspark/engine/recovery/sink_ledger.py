"""The sinks' ledger: which micro-batch the sinks were written through, and their snapshots after it.

The driver's writer (`sink_writer`) replaces the ledger after every
micro-batch, so a batch Spark replays after a crash is skipped, or
rewritten from partitions rebuilt at the previous snapshot.  Only the
driver that opened it last may commit (`driver_fence`).  Beside it
lives the run's id, made on first use, which `MicroBatchSink`s get to make
a rewrite replace the first try.  Both go through `storage`, so the
recovery directory may be a local path or a URI on shared storage.
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any, Dict, Tuple, Union

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.driver_fence import claim_for
from flowspark.engine.recovery.storage import Location
from flowspark.errors import FlowsparkRuntimeError

__all__ = ["LEDGER", "RUN_ID", "Ledger", "read_ledger"]

LEDGER = "flowspark-sinks.pkl"
RUN_ID = "flowspark-run-id"

Snapshots = Dict[str, Dict[str, Any]]
"""Each fixed-partition output's partition snapshots, by step id and partition name."""


class Ledger:
    """Last written batch id and sink snapshots, replaced atomically, private to the user.

    Opening it takes the recovery directory over for this run, unless the
    run has it already (`driver_fence`): a commit of a run that another
    run took it from fails with `FencedOut`, and so do the sink tasks that
    carry `fence`.
    """

    def __init__(self, directory: Union[str, Location]) -> None:
        where = storage.as_location(directory)
        self._place = where.join(LEDGER)
        self.batch = -1
        self.snapshots: Snapshots = {}
        if storage.exists(self._place):
            self.batch, self.snapshots = read_ledger(self._place)
        self.run_id = self._run_id(where.join(RUN_ID))
        self.fence = claim_for(where)

    @staticmethod
    def _run_id(place: Location) -> str:
        """The id of the run this directory holds, made on first use and kept after."""
        if not storage.exists(place):
            storage.write_private(place, uuid.uuid4().hex[:12].encode())
        return storage.read_trusted(place).decode().strip()

    def commit(self, batch: int, snapshots: Snapshots) -> None:
        self.fence.check()
        storage.write_private(self._place, pickle.dumps((batch, snapshots)))
        self.batch, self.snapshots = batch, snapshots


def read_ledger(place: Union[str, Location]) -> Tuple[int, Snapshots]:
    """The sinks' ledger: last written batch id and sink snapshots; a damaged one is named, not retried."""
    where = storage.as_location(place)
    data = storage.read_trusted(where)
    try:
        batch, snapshots = pickle.loads(data)
    except Exception as ex:
        msg = (
            f"the sinks' ledger {str(where)!r} is damaged ({type(ex).__name__}: {ex}); it can't be repaired: "
            "restore it from a backup of the recovery directory, or start with an empty recovery directory"
        )
        raise FlowsparkRuntimeError(msg) from None
    return int(batch), snapshots
