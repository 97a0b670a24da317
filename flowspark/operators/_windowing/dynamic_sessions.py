"""Session windows whose gap comes from each value (Flink's dynamic session gaps).

Each value at `t` with gap `g = gap_for(value)` reaches over `[t, t + g]`;
values whose reaches touch or overlap share a session.  With a `gap_for`
that always returns the same gap this is `SessionWindower` exactly: same
sessions, same ids, same merges, same closing times.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.dataflow import f_repr
from flowspark.operators._windowing.base import (
    LATE_SESSION_ID,
    ZERO_TD,
    ValueWindowerLogic,
    Windower,
    WindowMetadata,
    add_clamped,
)
from flowspark.operators._windowing.windowers import INSTANT, SelfCheckingWindower

__all__ = [
    "DynamicSession",
    "DynamicSessionWindower",
    "DynamicSessionWindowerLogic",
    "DynamicSessionWindowerState",
]


@dataclass
class DynamicSession:
    """One open session: its metadata and how far its values reach."""

    meta: WindowMetadata
    """`open_time` and `close_time` are the first and last timestamps; `merged_ids` the sessions absorbed."""
    end: datetime
    """The latest `t + gap_for(value)` of its values; the session closes once the watermark passes it."""


@dataclass
class DynamicSessionWindowerState:
    """One key's sessions, the last id handed out and the merges not yet reported."""

    max_key: int = LATE_SESSION_ID
    sessions: Dict[int, DynamicSession] = field(default_factory=dict)
    merge_queue: List[Tuple[int, int]] = field(default_factory=list)


def _merge_touching(sessions: Dict[int, DynamicSession]) -> List[Tuple[int, int]]:
    """Merge, in place, sessions whose reaches touch; return the `(absorbed, absorber)` pairs.

    Sessions are walked by open time (creation order among equal ones); each
    one starting no later than the reach of the session before it is folded
    into that one, which keeps its id and records only the direct id, as
    `SessionWindower` does.
    """
    merges: List[Tuple[int, int]] = []
    by_open = sorted(sessions.items(), key=lambda id_session: id_session[1].meta.open_time)
    into_id, into = by_open[0]
    for this_id, this in by_open[1:]:
        if this.meta.open_time <= into.end:
            into.meta.close_time = max(into.meta.close_time, this.meta.close_time)
            into.end = max(into.end, this.end)
            into.meta.merged_ids.add(this_id)
            del sessions[this_id]
            merges.append((this_id, into_id))
        else:
            into_id, into = this_id, this
    return merges


class DynamicSessionWindowerLogic(ValueWindowerLogic[DynamicSessionWindowerState]):
    """Implements `DynamicSessionWindower` for one key."""

    def __init__(self, gap_for: Callable[[Any], timedelta], state: DynamicSessionWindowerState) -> None:
        self.gap_for = gap_for
        self.state = state

    def gap_of(self, value: Any) -> timedelta:
        """The gap `gap_for` gives `value`, checked to be a non-negative `timedelta`."""
        gap = self.gap_for(value)
        if isinstance(gap, timedelta) and gap >= ZERO_TD:
            return gap
        msg = (
            f"DynamicSessionWindower `gap_for` {f_repr(self.gap_for)} must return a "
            f"non-negative `timedelta`; got {gap!r} for value {value!r}"
        )
        raise (ValueError if isinstance(gap, timedelta) else TypeError)(msg)

    @override
    def open_for_value(self, value: Any, timestamp: datetime) -> Iterable[int]:
        reach = add_clamped(timestamp, self.gap_of(value))
        # The first session (in creation order) the value's reach touches wins.
        for window_id, session in self.state.sessions.items():
            if timestamp <= session.end and reach >= session.meta.open_time:
                meta = session.meta
                stretched = timestamp < meta.open_time or reach > session.end
                meta.open_time = min(meta.open_time, timestamp)
                meta.close_time = max(meta.close_time, timestamp)
                session.end = max(session.end, reach)
                if stretched and len(self.state.sessions) > 1:
                    self.state.merge_queue.extend(_merge_touching(self.state.sessions))
                return (window_id,)
        # Its reach touches no session: a new one, which cannot merge.
        self.state.max_key += 1
        self.state.sessions[self.state.max_key] = DynamicSession(WindowMetadata(timestamp, timestamp), reach)
        return (self.state.max_key,)

    @override
    def late_for(self, timestamp: datetime) -> Iterable[int]:
        return (LATE_SESSION_ID,)

    @override
    def merged(self) -> List[Tuple[int, int]]:
        merges, self.state.merge_queue = self.state.merge_queue, []
        return merges

    @override
    def new_id(self) -> int:
        """Hand out the next session id (for a session that a late value opens already closed)."""
        self.state.max_key += 1
        return self.state.max_key

    @override
    def reopen(self, window_id: int, meta: WindowMetadata, reach: datetime) -> None:
        """Open again a closed session, kept for allowed lateness, that a late value reaches."""
        self.state.sessions[window_id] = DynamicSession(meta, reach)

    def spans(self) -> Dict[int, Tuple[datetime, datetime]]:
        """Each open session's first timestamp and reach, by id.

        A value at `t` joins a session when its own `[t, t + gap_of(value)]`
        touches the session's span; the session closes once the watermark
        passes its reach.  Allowed lateness uses this to place late values.
        """
        return {i: (session.meta.open_time, session.end) for i, session in self.state.sessions.items()}

    @override
    def session_spans(self) -> Optional[Dict[int, Tuple[datetime, datetime]]]:
        return self.spans()

    @override
    def reach_of(self, value: Any, timestamp: datetime) -> datetime:
        return add_clamped(timestamp, self.gap_of(value))

    @override
    def kept_until(self, reach: datetime, lateness: timedelta) -> datetime:
        return add_clamped(add_clamped(reach, lateness), INSTANT)

    @override
    def close_for(self, watermark: datetime) -> List[Tuple[int, WindowMetadata]]:
        closed = [(i, session.meta) for i, session in self.state.sessions.items() if session.end < watermark]
        for window_id, _meta in closed:
            del self.state.sessions[window_id]
        return closed

    @override
    def notify_at(self) -> Optional[datetime]:
        return min((session.end for session in self.state.sessions.values()), default=None)

    @override
    def is_empty(self) -> bool:
        # Session ids are counted per key; forgetting the counter would reuse them.
        return False

    @override
    def snapshot(self) -> DynamicSessionWindowerState:
        return copy.deepcopy(self.state)


@dataclass
class DynamicSessionWindower(Windower[DynamicSessionWindowerState], SelfCheckingWindower):
    """Sessions whose inactivity gap each value sets: `gap_for(value)` (Flink's dynamic session gaps).

    A value at `t` keeps its session open until `t + gap_for(value)`; values
    whose reaches `[t, t + gap]` touch or overlap form one session, merging
    sessions as a bridging value arrives, exactly as `SessionWindower`
    merges (the session opened first keeps its id and lists the absorbed
    ids in `merged_ids`).  Use it when the gap depends on the data, as
    Flink's `EventTimeSessionWindows.withDynamicGap` and Spark's
    `session_window` with a gap column do: a chatty device type may call
    for a short gap, a quiet one for a long gap.

    A session closes once the watermark passes the furthest reach of its
    values; its metadata's `open_time` and `close_time` are its first and
    last timestamps (both included), as for `SessionWindower`.  With a
    `gap_for` that always returns `gap`, the output is `SessionWindower(gap)`'s.
    `gap_for` must return a non-negative `timedelta` (zero is allowed, as for
    `SessionWindower`: only equal timestamps share a session); anything else
    stops the run with an error naming `gap_for` and the value (Spark drops
    such rows silently, Flink refuses non-positive gaps).  Late values are
    reported with `LATE_SESSION_ID`.  `gap_for` must be picklable (lambdas
    are fine) and is called once per on-time value.
    """

    gap_for: Callable[[Any], timedelta]

    def __post_init__(self) -> None:
        self._refuse_problems()

    @override
    def problems(self) -> List[str]:
        if callable(self.gap_for):
            return []
        return [f"`gap_for` must be a function from a value to its `timedelta` gap; got {self.gap_for!r}"]

    @override
    def build(self, resume_state: Optional[DynamicSessionWindowerState]) -> DynamicSessionWindowerLogic:
        state = DynamicSessionWindowerState() if resume_state is None else resume_state
        return DynamicSessionWindowerLogic(self.gap_for, state)
