"""Where a run of items stands in the order one Bytewax worker would give.

A Bytewax worker polls every source partition once per activation (a
*round*: one batch of each), and each step handles what a round brought
before the next round: a stateful step calls its keys' logics in sorted key
order, then wakes the keys whose `notify_at` is due, and calls `on_eof` in
sorted key order at the end.  flowspark reads many rounds per micro-batch
and spreads them over Spark's tasks, so every run of items carries an
`Order`, per source batch or per logic call (never per item):

- `round`: the driver inputs' global poll number of the batch it came from
  (`EOF_ROUND`, plus the step's `plan.eof_delays`, for `on_eof`;
  `START_ROUND` for wake-ups that fell due
  before the micro-batch began, which Spark's timers and the check of
  keys with new values serve);
- `phase`: `SOURCE` for items straight from a source, else which stateful
  layer emitted them and whether from `on_batch` or `on_notify`;
- `rank`: the source partition's place in a round: its input's rank
  (`plan.input_ranks`, the order `merge` takes inputs in), then its global
  index; after a stateful step, that step's rank among its layer's
  (`plan.stateful_ranks`, again the order `merge` takes them in);
- `key`: the key whose logic emitted them ("" from a source).

Sorting runs by their `Order` gives Bytewax's single-worker order; the
stateful processor handles one `(round, phase)` *tick* at a time.
"""

from __future__ import annotations

from typing import Tuple

Order = Tuple[int, int, int, str]
"""`(round, phase, rank, key)` of a run of items (see the module doc)."""

Tick = Tuple[int, int]
"""`(round, phase)`: what one Bytewax activation of a step would take in."""

SOURCE = 0
"""Phase of items straight from a source."""

START_ROUND = -1
"""Round of the wake-ups that were due before a micro-batch began: before its every round.

Spark runs a micro-batch's expired timers after its rows, but they expired
by the micro-batch's start time, so one Bytewax worker would have woken
those keys before the micro-batch's rounds.
"""

EOF_ROUND = 1 << 62
"""Round of what `on_eof` emits: after everything else."""


def batch_phase(layer: int) -> int:
    """Phase of what a stateful layer's `on_batch` (and `on_eof`) emit."""
    return 2 * layer - 1


def notify_phase(layer: int) -> int:
    """Phase of what a stateful layer's `on_notify` emits: after its `on_batch` of the same round."""
    return 2 * layer
