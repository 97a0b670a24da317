"""The parts of a key's window logic that steps may swap, with what the logic emits.

`per_key.KeyWindowLogic` is given two parts by its step's config: an
`Emission` (how its windows emit) and a `Lateness` (what becomes of late
values and closed windows).  The ones here behave as Bytewax does;
`emission.PaneEmission` and `lateness.KeptLateness` are flowspark's.  The
logic emits `WindowEvent`s, which the operator splits into its streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Protocol, Tuple, Union

from typing_extensions import TypeAlias

from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import WindowerLogic, WindowLogic, WindowMetadata
from flowspark.operators._windowing.panes import Pane

__all__ = [
    "Closed",
    "Emission",
    "Emitted",
    "Fired",
    "KeyWindows",
    "Late",
    "Lateness",
    "WindowCloser",
    "WindowEvent",
]


@dataclass(frozen=True)
class Emitted(Generic[W]):
    """An item a window logic returned, bound for `down`."""

    window_id: int
    value: W


@dataclass(frozen=True)
class Fired(Emitted[W]):
    """An emission of a step that reports panes: bound for `down` and, with `pane`, for `panes`."""

    pane: Pane[W]


@dataclass(frozen=True)
class Late(Generic[V]):
    """A value that arrived after the watermark passed it, bound for `late`."""

    window_id: int
    value: V


@dataclass(frozen=True)
class Closed:
    """A window closed, bound for `meta`."""

    window_id: int
    meta: WindowMetadata


WindowEvent: TypeAlias = Union[Late[V], Emitted[W], Closed]
"""What the per-key logic emits; the operator splits it into three streams."""


WindowCloser: TypeAlias = Callable[[int, WindowLogic[V, W, S], WindowMetadata], List[WindowEvent[V, W]]]
"""What a lateness part does with a window the watermark closed (its id, live logic and metadata)."""


class KeyWindows(Protocol[V, W, S]):
    """What a lateness part may use of the key's logic it is a part of (`per_key.KeyWindowLogic`).

    `lateness.KeptLateness` places a late value among the key's windows as
    they stand at the watermark, through these and nothing else.
    """

    @property
    def watermark(self) -> datetime:
        """The key's watermark."""
        ...

    @property
    def windower(self) -> WindowerLogic[Any]:
        """The key's windower logic."""
        ...

    @property
    def logics(self) -> Dict[int, WindowLogic[V, W, S]]:
        """The key's open windows' logics, by window id (live: a part may open one)."""
        ...

    def flush_to_watermark(self) -> List[WindowEvent[V, W]]:
        """Apply the queued values the watermark has reached and close the windows it passed."""
        ...

    def apply(self, due: List[Tuple[V, datetime]]) -> List[WindowEvent[V, W]]:
        """Apply `(value, timestamp)` pairs to their windows, as on-time values are."""
        ...

    def remember(self, value: V, timestamp: datetime) -> None:
        """Keep an applied value for windows the windower opens later over its timestamp."""
        ...


class Emission(Generic[V, W, S]):
    """How a key's windows emit, as Bytewax does: each item a window logic returns, as it is, none early.

    A key's logic is given its emission part by the step's config;
    `emission.PaneEmission` adds emit modes, panes and triggers.
    """

    def merges_first(self) -> bool:
        """Whether merges go out before the value that caused them is taken in, as in Flink.

        Bytewax reports a batch's merges after all its values; a step with
        triggers must see the merged session when the value arrives.
        """
        return False

    def wrap(self, window_id: int, items: Iterable[W]) -> List[WindowEvent[V, W]]:
        """The events for what a window logic returned from `on_value` or `on_merge`."""
        return [Emitted(window_id, w) for w in items]

    def took_in(self, window_id: int, logics: Dict[int, WindowLogic[V, W, S]], value: V) -> List[WindowEvent[V, W]]:
        """What to emit after window `window_id` (in `logics`) took in `value`: nothing."""
        return []

    def seeded(self, window_id: int, values: List[V]) -> None:
        """Window `window_id` was just opened over remembered `values`: nothing to note."""

    def merged(self, original_id: int, target_id: int, items: Iterable[W]) -> List[WindowEvent[V, W]]:
        """Window `original_id` merged into `target_id`, whose `on_merge` returned `items`."""
        return self.wrap(target_id, items)

    def close(self, window_id: int, logic: WindowLogic[V, W, S], meta: WindowMetadata) -> List[WindowEvent[V, W]]:
        """Window `window_id` closed for good: its final items, then its metadata."""
        events: List[WindowEvent[V, W]] = [Emitted(window_id, w) for w in logic.on_close()]
        events.append(Closed(window_id, meta))
        return events

    def due(self, logics: Dict[int, WindowLogic[V, W, S]]) -> List[WindowEvent[V, W]]:
        """What open windows emit when the key is woken up or flushed, whatever the watermark: nothing."""
        return []

    def wake_at(self, at: Optional[datetime]) -> Optional[datetime]:
        """When to wake the key up, given `at` for its windows: then."""
        return at

    def snapshot(self) -> Optional[Dict[int, Any]]:
        """Its bookkeeping of open windows, for `KeySnapshot.books`: none."""
        return None


class Lateness(Generic[V, W, S]):
    """How a key's windows treat late values and closed windows, as Bytewax does.

    A late value goes to `late`, once for every window it would have
    joined; a closed window is gone.  `lateness.KeptLateness` keeps closed
    windows for `allowed_lateness` instead.
    """

    def __init__(self, emission: Emission[V, W, S]) -> None:
        self._emission = emission

    def late(self, windower: WindowerLogic[Any], value: V, timestamp: datetime) -> List[WindowEvent[V, W]]:
        """A value stamped before the watermark: to `late`, for every window it would have joined."""
        return [Late(i, value) for i in windower.late_for(timestamp)]

    def closer(self, windower: WindowerLogic[Any], watermark: datetime) -> WindowCloser[V, W, S]:
        """What to do with each window the watermark closes, asked before the windower forgets them: emit, drop."""
        return self._emission.close

    def purge(self, watermark: datetime) -> None:
        """Drop the kept windows the watermark has taken past their lateness: none are kept."""

    def holds_any(self) -> bool:
        """Whether it keeps a closed window (so the key keeps its windower): no."""
        return False

    def notify_at(self) -> Optional[datetime]:
        """When the first kept window is to be dropped: never."""
        return None

    def snapshot(self) -> Optional[Dict[int, Any]]:
        """The kept windows, for `KeySnapshot.kept`: none."""
        return None
