"""Read what a recovery directory holds, with Spark's state data source.

Spark's `statestore` reader gives every entry of the `keyed_state` map state of
each `transformWithState` operator: the bucket group and the snapshots
of a slot's keys.  The group names the stateful step (`S<index>/<bucket>`),
and `flowspark-meta.json` maps that index to the step id.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from flowspark.engine.plan.destinations import parse
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.resume_check import META
from flowspark.engine.recovery.sink_ledger import LEDGER, read_ledger
from flowspark.engine.recovery.storage import Location
from flowspark.engine.spark.session import get_session
from flowspark.engine.state.keyed_state import decoded, slot_keys


@dataclass
class RecoveryInfo:
    """A summary of a recovery directory."""

    flow_id: str
    last_epoch: Optional[int]
    """The last completed epoch: micro-batch id + 1, as Bytewax counts epochs from 1."""
    keys_per_step: Dict[str, int] = field(default_factory=dict)
    sinks_epoch: Optional[int] = None
    """The epoch the sinks were written through."""


def _last_commit(query_dir: Location) -> Optional[int]:
    ids = [int(n) for n in storage.list_names(query_dir.join("commits")) if n.isdigit()]
    return max(ids) if ids else None


def _meta(directory: Location) -> Dict[str, Any]:
    place = directory.join(META)
    if not storage.exists(place):
        msg = f"{str(directory)!r} is not a flowspark recovery directory (no {META}); nothing has run with it yet"
        raise FileNotFoundError(msg)
    meta: Dict[str, Any] = json.loads(storage.read_bytes(place))
    return meta


def _slots(directory: Location) -> List[Tuple[str, bytes]]:
    """Every slot of every stateful operator, as `(group, stored bytes)`."""
    query = directory.join("query")
    operators = sorted(n for n in storage.list_names(query.join("state")) if n.isdigit())
    if _last_commit(query) is None or not operators:
        return []
    spark = get_session()
    # Starts Spark's state store coordinator, which the state reader of Spark 4.1 needs but does not start.
    spark.streams  # noqa: B018
    rows: List[Tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="flowspark-inspect-") as scratch:
        readable = query.hadoop_uri
        if query.is_local:
            # Spark's state reader escapes a path's spaces twice: it reads
            # through a link whose path has none.
            readable = os.path.join(scratch, "query")
            os.symlink(query.path, readable)
        for operator in operators:
            frame = (
                spark.read.format("statestore")
                .option("path", readable)
                .option("operatorId", int(operator))
                .option("stateVarName", "slots")
                .load()
            )
            rows.extend((r.key.grp, bytes(r.user_map_value.entries)) for r in frame.collect())
    return rows


def summary(where: Union[str, Location]) -> RecoveryInfo:
    """Last completed epoch and the number of keys each stateful step holds (`where`: a path or URI, or a location)."""
    directory = storage.as_location(where)
    meta = _meta(directory)
    steps = [s["step"] for s in meta["shape"]["stateful"]]
    last = _last_commit(directory.join("query"))
    info = RecoveryInfo(meta["flow"], None if last is None else last + 1)
    info.keys_per_step = {step: 0 for step in steps}
    for grp, blob in _slots(directory):
        info.keys_per_step[steps[parse(grp).index]] += len(slot_keys(blob))
    ledger = directory.join(LEDGER)
    if storage.exists(ledger):
        written = read_ledger(ledger)[0]
        info.sinks_epoch = written + 1 if written >= 0 else None
    return info


def snapshot_of(where: Union[str, Location], step_id: str, key: str) -> Any:
    """The unpickled snapshot a stateful step holds for `key`; `KeyError` if none.

    `step_id` is a stateful step's id or the id of the operator around it
    (`flow.sum` for the `stateful_batch` inside `stateful_map("sum", ...)`).
    """
    directory = storage.as_location(where)
    steps = [s["step"] for s in _meta(directory)["shape"]["stateful"]]
    matches = [i for i, s in enumerate(steps) if s == step_id or s.startswith(step_id + ".")]
    if len(matches) != 1:
        msg = f"{step_id!r} names {len(matches)} stateful steps of this recovery directory; it has {steps}"
        raise KeyError(msg)
    for grp, blob in _slots(directory):
        if parse(grp).index == matches[0] and key in slot_keys(blob):
            return decoded(blob)[1][key]
    msg = f"step {step_id!r} holds no state for key {key!r}"
    raise KeyError(msg)
