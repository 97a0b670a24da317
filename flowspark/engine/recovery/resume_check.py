"""What a recovery directory was written by, and whether this flow may resume it.

The first run records the flow's shape in `flowspark-meta.json`: the key
bucket count and the Spark group of every bucket (`groups`), the stateful steps in order with a description of their
parameters (a windowing step's clock and windower, say), and every input's
partitions.  A later run with a different shape would read state into the
wrong steps or offsets into the wrong partitions, so it stops with a message
that says what changed.  Stateless steps, sinks and inspect steps are not
recorded: changing them is safe.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any, Dict, List

from flowspark.engine.plan.groups import DEFAULT_BUCKETS as DEFAULT_BUCKETS
from flowspark.engine.plan.groups import Groups, new_groups
from flowspark.engine.plan.plan import Plan, reads_in_executors
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location
from flowspark.errors import FlowsparkRuntimeError

META = "flowspark-meta.json"
STATE_LAYOUT = 4
"""How stateful steps store their keys (`engine.state.slots`): recorded, so that a directory of another layout is refused,
not misread."""
SOURCE_LAYOUT = 2
"""How the inputs' offsets and snapshots are kept (`executor_source.Position`, the snapshot store): recorded likewise."""


def describe(value: Any, depth: int = 0) -> Any:
    """A stable, JSON-able description of a step's parameters (functions by name only)."""
    if depth > 6:
        return type(value).__qualname__
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime, timedelta)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [describe(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): describe(v, depth + 1) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: describe(getattr(value, f.name), depth + 1)
            for f in dataclasses.fields(value)
            if f.name != "step_id"
        }
        return {"type": type(value).__qualname__, **fields}
    if callable(value):
        return getattr(value, "__qualname__", type(value).__qualname__)
    attrs = getattr(value, "__dict__", None)
    if attrs is not None:
        return {
            "type": type(value).__qualname__,
            **{k: describe(v, depth + 1) for k, v in sorted(attrs.items()) if not k.startswith("__")},
        }
    return type(value).__qualname__


def shape(plan: Plan, parts: List[List[str]]) -> Dict[str, Any]:
    """The parts of a flow that its checkpoint depends on."""
    return {
        "stateful": [
            {"step": step.step_id, "layer": layer, "params": describe(step.config.builder)}
            for step, layer in zip(plan.stateful, plan.layers)
        ],
        "inputs": [
            {"step": step.step_id, "partitions": names, "in_executors": reads_in_executors(step.config.source)}
            for step, names in zip(plan.inputs, parts)
        ],
    }


def _differences(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    changes: List[str] = []
    old_steps = [s["step"] for s in old["stateful"]]
    new_steps = [s["step"] for s in new["stateful"]]
    if old_steps != new_steps:
        changes.append(f"stateful steps were {old_steps}, now {new_steps}")
    else:
        for before, after in zip(old["stateful"], new["stateful"]):
            if before["layer"] != after["layer"]:
                changes.append(
                    f"step {after['step']!r} moved from stateful layer {before['layer']} to {after['layer']}"
                )
            if before["params"] != after["params"]:
                changes.append(
                    f"parameters of step {after['step']!r} changed: was {before['params']}, now {after['params']}"
                )
    if [i["step"] for i in old["inputs"]] != [i["step"] for i in new["inputs"]]:
        changes.append(
            f"input steps were {[i['step'] for i in old['inputs']]}, now {[i['step'] for i in new['inputs']]}"
        )
    else:
        for before, after in zip(old["inputs"], new["inputs"]):
            if before["partitions"] != after["partitions"]:
                changes.append(
                    f"partitions of input {after['step']!r} were {before['partitions']}, now {after['partitions']}"
                )
            if before.get("in_executors") != after["in_executors"]:
                where = "Spark's executors" if after["in_executors"] else "the driver"
                changes.append(f"input {after['step']!r} is now read in {where}, and its snapshots were kept elsewhere")
    return changes


def check_or_record(place: Location, plan: Plan, parts: List[List[str]]) -> Groups:
    """Record the flow's shape on first use, else check it; return the state groups to use."""
    meta_place = place.join(META)
    directory, path = str(place), str(meta_place)
    current = shape(plan, parts)
    if not storage.exists(meta_place):
        storage.private_dir(place)
        groups = new_groups(plan)
        meta = {
            "flow": plan.flow_id,
            "buckets": groups.buckets,
            "groups": groups.names,
            "shape": current,
            "state_layout": STATE_LAYOUT,
            "source_layout": SOURCE_LAYOUT,
        }
        storage.write_private(meta_place, json.dumps(meta, indent=1).encode())
        return groups
    try:
        recorded = json.loads(storage.read_trusted(meta_place))
    except ValueError as ex:
        msg = f"{path!r} is damaged ({ex}); start with an empty recovery directory, or restore it from a backup"
        raise FlowsparkRuntimeError(msg) from None
    if recorded.get("source_layout") != SOURCE_LAYOUT:
        msg = (
            f"recovery directory {directory!r} was written by an earlier flowspark, which kept the inputs' snapshots "
            "in Spark's offsets; finish its run with that version, or start with an empty recovery directory."
        )
        raise FlowsparkRuntimeError(msg)
    changes = _differences(recorded["shape"], json.loads(json.dumps(current)))
    if changes:
        listing = "; ".join(changes)
        msg = (
            f"recovery directory {directory!r} was written by a different flow ({recorded['flow']!r}): "
            f"{listing}. Resume with the flow that wrote it, or start with an empty recovery directory."
        )
        raise FlowsparkRuntimeError(msg)
    if plan.stateful and recorded.get("state_layout") != STATE_LAYOUT:
        msg = (
            f"recovery directory {directory!r} was written by an earlier flowspark, which stored the keys of stateful "
            "steps in another layout; finish its run with that version, or start with an empty recovery directory."
        )
        raise FlowsparkRuntimeError(msg)
    if "groups" in recorded:
        return Groups(int(recorded["buckets"]), recorded["groups"])
    return Groups.balanced(len(plan.stateful), int(recorded["buckets"]))
