"""Shared drivers for the tests of flowspark's windowing additions.

`logic_builder` builds one window operator in a throwaway flow and returns
the `stateful_batch` builder it expands to, with a `TimeTestingGetter` that
both the `EventClock` and any processing-time trigger read.  `run` drives one
key through a script, rebuilding the logic from a pickled snapshot after
every call (as the Spark runtime may), and returns normalized events.

Values are `(seconds, payload)` pairs stamped at `ALIGN + seconds`.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSink, TestingSource, TimeTestingGetter
from support.event_time import ALIGN
from support.oracle import core_arg, core_steps

SYSTEM_START = datetime(2030, 1, 1, tzinfo=timezone.utc)


def sec(seconds: float) -> datetime:
    return ALIGN + timedelta(seconds=seconds)


def stamp(value: Tuple[float, Any]) -> datetime:
    """The timestamp of a `(seconds, payload)` value."""
    return sec(value[0])


def payload(value: Tuple[float, Any]) -> Any:
    """The payload of a `(seconds, payload)` value."""
    return value[1]


def meta_tuple(meta: Any) -> Tuple[datetime, datetime, List[int]]:
    """Either engine's `WindowMetadata` as a comparable tuple."""
    return (meta.open_time, meta.close_time, sorted(meta.merged_ids))


BuildOp = Callable[[Any, Any, TimeTestingGetter], Any]
"""`(upstream, clock, getter) -> WindowOut`: adds the operator under test as step `win`."""

Step = Union[List[Any], str, timedelta]
"""A batch of one key's values, `"notify"`, `"eof"`, or a system-time advance."""


def on_system_clock(moment: datetime) -> datetime:
    """An `EventClock.to_system_utc` for tests: event time `ALIGN` is system time `SYSTEM_START`."""
    return SYSTEM_START + (moment - ALIGN)


def logic_builder(
    build_op: BuildOp,
    wait: timedelta = timedelta(0),
    to_system_utc: Callable[[datetime], Optional[datetime]] = lambda moment: moment,
    ts_getter: Callable[[Any], datetime] = stamp,
) -> Tuple[Any, TimeTestingGetter, Any]:
    """Build `build_op`; return its `stateful_batch` builder, the test time getter and the `WindowOut`."""
    getter = TimeTestingGetter(SYSTEM_START)
    clock = win.EventClock(ts_getter, wait_for_system_duration=wait, now_getter=getter.get, to_system_utc=to_system_utc)
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    out = build_op(up, clock, getter)
    (step_id,) = [s.step_id for s in core_steps(flow) if s.step_id.endswith(".stateful_batch")]
    return core_arg(flow, step_id, "builder"), getter, out


def norm(event: Any) -> Tuple[Any, ...]:
    """`("down", id, value[, (timing, index, is_last)])`, `("late", id, value)` or `("meta", id, (open, close))`."""
    kind = type(event).__name__
    if kind == "Fired":
        pane = event.pane
        assert pane.value is event.value
        return ("down", event.window_id, event.value, (pane.timing, pane.index, pane.is_last))
    if kind == "Emitted":
        return ("down", event.window_id, event.value)
    if kind == "Late":
        return ("late", event.window_id, event.value)
    assert kind == "Closed", kind
    return ("meta", event.window_id, (event.meta.open_time, event.meta.close_time))


Record = Tuple[List[Tuple[Any, ...]], Optional[datetime]]
"""One call's normalized events and `notify_at()` after it."""


def run(builder: Any, getter: TimeTestingGetter, script: Sequence[Step]) -> List[Record]:
    """Drive one key through `script`; rebuild from a pickled snapshot after every call."""
    logic: Optional[Any] = None
    records: List[Record] = []
    for step in script:
        if isinstance(step, timedelta):
            getter.advance(step)
            continue
        if isinstance(step, list):
            logic = logic if logic is not None else builder(None)
            events, discard = logic.on_batch(step)
        elif logic is None:
            continue
        elif step == "notify":
            events, discard = logic.on_notify()
        else:
            events, discard = logic.on_eof()
        assert not discard
        at = logic.notify_at()
        records.append(([norm(e) for e in events], at))
        snap = logic.snapshot()
        logic = builder(cloudpickle.loads(cloudpickle.dumps(snap)))
        assert logic.notify_at() == at, "notify_at changed across a snapshot round trip"
    return records


def events(records: List[Record]) -> List[Tuple[Any, ...]]:
    return [event for evs, _at in records for event in evs]


def downs(records: List[Record]) -> List[Tuple[Any, ...]]:
    """The `down` events only, without the pane info."""
    return [e[:3] for e in events(records) if e[0] == "down"]


def panes(records: List[Record]) -> List[Tuple[Any, ...]]:
    """`(window_id, value, timing, index, is_last)` of every pane."""
    return [(e[1], e[2], *e[3]) for e in events(records) if e[0] == "down"]


def drive_op(build_op: BuildOp, script: Sequence[Step], wait: timedelta = timedelta(0), **kwargs: Any) -> List[Record]:
    builder, getter, _out = logic_builder(build_op, wait, **kwargs)
    return run(builder, getter, script)


def summing(windower: Any, **kwargs: Any) -> BuildOp:
    """A `sum_window` of the payloads over `windower` as step `win`; `kwargs` go to `sum_window`."""

    def build(up: Any, clock: Any, _getter: TimeTestingGetter) -> Any:
        return win.sum_window("win", up, clock, windower, payload, **kwargs)

    return build


Outputs = Dict[str, List[Any]]


def sink_all(outputs: Outputs, name: str, out: Any, streams: Sequence[str] = ("down", "late", "meta", "panes")) -> None:
    """Send each of `out`'s streams to a `TestingSink` list `outputs[f"{name}.{stream}"]`."""
    for stream in streams:
        items: List[Any] = []
        outputs[f"{name}.{stream}"] = items
        op.output(f"{name}_{stream}", getattr(out, stream), TestingSink(items))


def by_key(items: List[Any]) -> Dict[str, List[Any]]:
    grouped: Dict[str, List[Any]] = {}
    for key, value in items:
        grouped.setdefault(key, []).append(value)
    return grouped


def flow_clock(wait: float = 0) -> Any:
    """An `EventClock` over `(key, (seconds, payload))` values with frozen system time."""
    getter = TimeTestingGetter(SYSTEM_START)
    return win.EventClock(stamp, timedelta(seconds=wait), now_getter=getter.get)
