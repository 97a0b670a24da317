"""What a window emits, and when: emit modes, pane timing and the `Pane` record.

These are flowspark additions to Bytewax's windowing (the ideas of Quix
Streams' `.current()`/`.final()`, Flink's allowed lateness and triggers, and
Beam's `PaneInfo`).  A window step that uses none of them behaves, and is
wired, exactly as in Bytewax 0.21.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, Tuple, get_args

from typing_extensions import TypeAlias

from flowspark.operators._core import W_co
from flowspark.operators._windowing.base import ZERO_TD

__all__ = [
    "EMIT_MODES",
    "EmitMode",
    "Pane",
    "PaneTiming",
    "check_allowed_lateness",
    "check_emit",
]

EmitMode: TypeAlias = Literal["final", "current", "current_and_final"]
"""When a window operator emits a window's result.

* `"final"` (the default, Bytewax's behaviour): once, when the window closes.
* `"current"` (Quix Streams' `.current()`): the window's running result after
  every value it takes in (a value that merges sessions emits the merged
  session's result once); nothing extra when it closes.
* `"current_and_final"`: both: the running result after every value, and the
  result again when the window closes (marked `on_time` on `panes`).
"""

EMIT_MODES: Tuple[str, ...] = get_args(EmitMode)
"""The accepted `emit` values, in documentation order."""

PaneTiming: TypeAlias = Literal["early", "on_time", "late"]
"""When, relative to the watermark, an emission happened.

* `"early"`: before the window closed (`emit="current"`, a trigger firing, or
  an item a custom `WindowLogic` returned from `on_value`/`on_merge`).
* `"on_time"`: when the watermark passed the window's close time.
* `"late"`: after that, because a late value updated (or created) a window
  kept for `allowed_lateness`, or a session it opened again closed again.
"""


@dataclass(frozen=True)
class Pane(Generic[W_co]):
    """One emission of one window, with when it happened (Beam's `PaneInfo`).

    A window operator's `panes` stream carries `(key, (window_id, pane))` for
    every `(key, (window_id, pane.value))` it puts on `down`, in the same
    order.
    """

    value: W_co
    """What was emitted on `down`."""

    timing: PaneTiming
    """`"early"`, `"on_time"` or `"late"`; see `PaneTiming`."""

    index: int
    """How many emissions this window (of this key) made before this one: 0, 1, 2, ..."""

    is_last: bool = False
    """Whether the window's state is dropped right after this emission.

    True on the last item a window emits when it closes with nothing kept for
    lateness (`allowed_lateness` is zero, or the watermark is already past
    `close_time + allowed_lateness`, as at end of input).  Never true on early
    panes, nor for windows whose kept state is dropped later without emitting
    (then no pane is marked last).
    """

    @property
    def is_early(self) -> bool:
        """Shorthand for `timing == "early"`."""
        return self.timing == "early"

    @property
    def is_late(self) -> bool:
        """Shorthand for `timing == "late"`."""
        return self.timing == "late"


def check_emit(step_id: str, emit: Any) -> None:
    """Refuse an unknown `emit` mode, naming the step (at build time)."""
    if not isinstance(emit, str) or emit not in EMIT_MODES:
        allowed = ", ".join(repr(m) for m in EMIT_MODES)
        msg = f"step {step_id!r}: unknown `emit` mode {emit!r}; expected one of {allowed}"
        raise ValueError(msg)


def check_allowed_lateness(step_id: str, allowed_lateness: Any) -> None:
    """Refuse an `allowed_lateness` that is not a non-negative `timedelta`, naming the step."""
    if not isinstance(allowed_lateness, timedelta) or allowed_lateness < ZERO_TD:
        msg = f"step {step_id!r}: `allowed_lateness` must be a non-negative `timedelta`; got {allowed_lateness!r}"
        raise ValueError(msg)
