"""A window operator's firing options as one value, `Firing`, and the configuration of steps that use them.

`Firing(emit=..., allowed_lateness=..., trigger=...)` holds what Beam's
`Windowing` holds beside its window function: when panes go out (emit mode
and trigger) and how long closed windows wait for late values.  Every window
operator but `join_window` takes it as `firing=`, or its fields as the
keywords `emit=`, `allowed_lateness=` and `trigger=` (`firing_of` turns
either into one `Firing`, refusing both at once).

A `FiringWindowConfig` gives each key's `per_key.KeyWindowLogic` two parts:
`emission.PaneEmission` (emit modes, panes, triggers) and
`lateness.KeptLateness` (allowed lateness).  A step that uses none of
these features never builds them, so Bytewax flows keep their exact
behaviour and the batch-merging fast path.  The rules, in the order a call applies them:

1. **Late values** (stamped before the watermark).  With `allowed_lateness`
   zero they go to `late`, as in Bytewax.  Otherwise lateness is judged per
   window, as in Flink, and a late value meets the windows as they stand at
   the watermark (the batch is flushed up to it first), so where it goes
   does not depend on how values were batched.

   * Fixed windows (`late_for` names them): each one still open takes the
     value at once (out of timestamp order, even with `ordered`); each one
     closed but still *kept* takes it and immediately emits its corrected
     result as a `"late"` pane.  One that does not exist yet is created, as
     Flink and Kafka Streams do, if the watermark has not passed its end
     plus the lateness: opened as usual if it has not ended, else created
     closed and kept, emitting its result as a `"late"` pane and then its
     metadata on `meta`.  The rest go to `late`.  Record sliding windows
     also offer the value to every kept window whose span holds it (their
     `late_for` names open ones only), and remember it, if any window took
     it, for windows opened later; they create no window for it.
   * Sessions (`SessionWindower`, `DynamicSessionWindower`): the value
     reaches over `[t, t + gap]` (`gap_for(value)` for dynamic ones); every
     open or kept session whose `[open_time, reach]` touches it, or touches
     one that does, forms one session with it, as in Flink's merging window
     set.  If that session ends at or after the watermark (it holds an open
     session, or the value reaches that far) the kept ones are opened again
     and the value is applied as if on time, merging them; the session
     closes again later, its emission then a `"late"` pane.  Otherwise the
     kept ones merge into the one opened first (the others' ids go to
     `merged_ids`), which takes the value, stretches, re-fires as a
     `"late"` pane, and reports its new metadata on `meta`.  A value that
     touches no session opens one that way, closed and kept, if the
     watermark has not passed its reach plus the lateness; else it goes to
     `late`.
   * Other windowers that return `LATE_SESSION_ID`: the first kept window
     whose `[open_time, reach]` holds `t` re-fires; else `late`.

   Count windows refuse `allowed_lateness` (`window` checks).
2. **Values taken in** (on time, or late as above): a value that bridges
   sessions first merges them (see 3), then the merged session takes it.
   After each value the window's running result is emitted as an
   `"early"` pane if `emit` is `"current"`/`"current_and_final"` or the
   trigger fires (once if both); a purging trigger then resets the window
   to `builder(None)`.  A record sliding window opened over remembered
   values is fed them first: its trigger counts them, but only the value
   that opened it can fire it or emit its running result, so seeding adds
   no pane of its own (only items a custom logic returns from `on_value`).
3. **Merges** (sessions) happen before the value that causes them is taken
   in, as in Flink: trigger counts add up, and the trigger then sees the
   value in the merged session (a merge does not fire by itself).  Items a
   custom logic returns from `on_merge` are emitted as `"early"` panes.
4. **Closes**: if `emit` includes final and the window was not purged
   without new values since, its result is emitted as an `"on_time"` pane
   (`"late"` if it had closed before and was opened again by a late
   value), then its metadata goes to `meta`.  If `allowed_lateness` is
   positive and the watermark has not yet reached the window's *reach*
   plus the lateness (for sessions: not yet passed it, since their gap
   counts inclusively), the window is *kept* for late values instead of
   being dropped; it is dropped, silently, once the watermark gets there.
   The reach is where the window closed: `close_time`, `close_time + gap`
   for a `SessionWindower`, the furthest `t + gap_for(value)` of its
   values for a `DynamicSessionWindower`.
5. **Processing-time triggers** fire open windows whose wake-up has come.

The *running result* of a window is, for the fold-based operators, a deep
copy of the accumulator (finished, e.g. a mean, where the operator has a
finishing step), so later values cannot change what was emitted.  For a
custom `WindowLogic` it is what the window would emit if it closed now: a
copy is rebuilt from `logic.snapshot()` with the step's builder and its
`on_close()` items are emitted (one pane each); the live logic is never
closed early.  A kept window's results (on time and late) are computed the
same way, since its live logic must keep taking values.  Items a custom
logic returns from `on_value`/`on_merge` are emitted as they are, as
`"early"` panes (`"late"` for a kept window).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Mapping, Optional, Tuple

from typing_extensions import TypedDict, override

from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import (
    ZERO_TD,
)
from flowspark.operators._windowing.emission import PaneEmission

# `KeptWindow` lands in a key's snapshot: pickles written before it moved to `lateness` name it here.
from flowspark.operators._windowing.lateness import KeptLateness as KeptLateness
from flowspark.operators._windowing.lateness import KeptWindow as KeptWindow
from flowspark.operators._windowing.panes import EmitMode, check_allowed_lateness, check_emit
from flowspark.operators._windowing.parts import Emission, Lateness
from flowspark.operators._windowing.per_key import KeySnapshot, KeyWindowLogic, WindowConfig
from flowspark.operators._windowing.triggers import Trigger, check_trigger

__all__ = [
    "Firing",
    "FiringKeyWindowLogic",
    "FiringKeywords",
    "FiringWindowConfig",
    "KeptLateness",
    "KeptWindow",
    "firing_of",
]


@dataclass(frozen=True)
class Firing:
    """When a window operator emits and how long it waits for late values: one value, as Beam's `Windowing`.

    Pass it as `firing=` to any window operator but `join_window`.  The
    default, `Firing()`, is Bytewax's behaviour: the step is wired and runs
    exactly as in Bytewax 0.21.1.  Any other value also builds the
    operator's `panes` stream; see `window` for the rules.

    * `emit`: `"final"` (default), `"current"` or `"current_and_final"`
      (an `EmitMode`): emit when the window closes, after each value, or
      both (Beam's accumulating early panes, Quix Streams' `.current()`).
    * `allowed_lateness`: how long, in event time, a closed window is kept
      for late values that correct it (Beam's and Flink's allowed lateness,
      Kafka Streams' grace); a non-negative `timedelta`, zero by default.
    * `trigger`: fire a window early (`CountTrigger`,
      `ProcessingTimeTrigger`, `PredicateTrigger`, or several combined
      with `AfterAny`, `AfterAll`, `AfterEach`, `Repeatedly` and `Once`).

    The old keywords `emit=`, `allowed_lateness=` and `trigger=` are still
    accepted by every operator (one or the other, not both).  Bad values
    fail when the flow is built, naming the step.

    ```python
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    clock = win.EventClock(lambda v: v[0], wait_for_system_duration=timedelta(0))
    ten_s = win.TumblingWindower(timedelta(seconds=10), T0)
    every_two = win.Firing(trigger=win.CountTrigger(2))

    readings = [("a", (T0 + timedelta(seconds=s), 1)) for s in [1, 2, 3]]
    flow = Dataflow("firing_eg")
    keyed = op.input("inp", flow, TestingSource(readings))
    counts = win.sum_window("count", keyed, clock, ten_s, by=lambda v: v[1], firing=every_two)
    out = []
    op.output("out", counts.panes, TestingSink(out))
    run_main(flow)
    assert [(p.value, p.timing) for _key, (_window_id, p) in out] == [(2, "early"), (3, "on_time")]
    ```
    """

    emit: EmitMode = "final"
    """When results go out: `"final"`, `"current"` or `"current_and_final"`."""

    allowed_lateness: timedelta = ZERO_TD
    """How long a closed window is kept for late values; zero is Bytewax's behaviour."""

    trigger: Optional[Trigger] = None
    """What fires a window before it closes, if anything."""

    @property
    def is_plain(self) -> bool:
        """Whether this is Bytewax's behaviour: emit when closed, nothing kept, no trigger."""
        return self.emit == "final" and self.allowed_lateness == ZERO_TD and self.trigger is None

    def check(self, step_id: str) -> None:
        """Refuse a bad field, naming the step (at build time)."""
        check_emit(step_id, self.emit)
        check_allowed_lateness(step_id, self.allowed_lateness)
        check_trigger(step_id, self.trigger)


class FiringKeywords(TypedDict, total=False):
    """The fields of `Firing` as separate keywords, as window operators took them before it (still accepted)."""

    emit: EmitMode
    allowed_lateness: timedelta
    trigger: Optional[Trigger]


_FIRING_FIELDS = ("emit", "allowed_lateness", "trigger")


def firing_of(step_id: str, firing: Optional[Firing], keywords: Mapping[str, Any]) -> Firing:
    """The one `Firing` a window operator was given: `firing`, or one made of the old keywords.

    Raises `TypeError`, naming the step, for both at once, for a `firing`
    that is not a `Firing`, and for a keyword the operators do not take.
    """
    unknown = sorted(set(keywords) - set(_FIRING_FIELDS))
    if unknown:
        names = ", ".join(f"`{name}`" for name in unknown)
        msg = f"step {step_id!r}: unexpected keyword argument(s) {names}; the window operators take `firing=`"
        raise TypeError(msg)
    if firing is None:
        return Firing(**keywords)
    if not isinstance(firing, Firing):
        msg = f"step {step_id!r}: `firing` must be a `Firing` (or `None`); got {firing!r}"
        raise TypeError(msg)
    if keywords:
        given = ", ".join(f"`{name}=`" for name in _FIRING_FIELDS if name in keywords)
        msg = (
            f"step {step_id!r}: got both `firing=` and {given}; pass one or the other "
            "(put the keywords' values in the `Firing`, e.g. `Firing(emit=..., trigger=...)`)"
        )
        raise TypeError(msg)
    return firing


@dataclass(frozen=True)
class FiringWindowConfig(WindowConfig[V, W, S]):
    """A window step's configuration with flowspark's emission features.

    `window` uses it only when `emit`, `allowed_lateness` or `trigger` is
    not the default, so a Bytewax flow's configuration (and its recovery
    fingerprint) stays a plain `WindowConfig`.
    """

    emit: EmitMode = "final"
    allowed_lateness: timedelta = ZERO_TD
    trigger: Optional[Trigger] = None

    @property
    @override
    def merges_batches(self) -> bool:
        """Never: output depends on each value's moment (early panes, lateness per window)."""
        return False

    @override
    def parts(
        self, keys: KeyWindowLogic[V, W, S], resume_state: Optional[KeySnapshot[V, S]]
    ) -> Tuple[Emission[V, W, S], Lateness[V, W, S]]:
        """Panes for emission; closed windows kept for `allowed_lateness` (if positive)."""
        books = None if resume_state is None else resume_state.books
        kept = None if resume_state is None else resume_state.kept
        emission: PaneEmission[V, W, S] = PaneEmission(self.builder, self.emit, self.trigger, books)
        return emission, KeptLateness(keys, emission, self.allowed_lateness, self.builder, kept)


FiringKeyWindowLogic = KeyWindowLogic
"""The key logic a `FiringWindowConfig` builds: `KeyWindowLogic` with its panes and lateness parts."""
