"""`StatefulBatchLogic`, the per-key state machine every stateful operator is built on (Bytewax's, re-exported by
`flowspark.operators`).

It lives apart from the operators so that the step configurations that
hold one (`flowspark._step_config`) need not import the operators.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any, ClassVar, Generic, Iterable, List, Optional, Tuple, TypeVar

__all__ = ["StatefulBatchLogic"]

V = TypeVar("V")
"""Type of the values a key's logic takes."""

W = TypeVar("W")
"""Type of what a key's logic emits."""

S = TypeVar("S")
"""Type of a key's logic's snapshot."""

_EMPTY: Tuple[Any, ...] = ()
"""Nothing to emit, shared by the logics that return it (Bytewax's name, which its plugins import from
`bytewax.operators`)."""


class StatefulBatchLogic(ABC, Generic[V, W, S]):
    """The per-key state machine of `stateful_batch`.

    One instance lives per key.  Each method returns the values to emit and
    whether to throw the logic away (`DISCARD`) or keep it (`RETAIN`).
    """

    RETAIN: ClassVar[bool] = False
    """Keep this logic after the call."""

    DISCARD: ClassVar[bool] = True
    """Drop this logic after the call; the key's next value builds a new one."""

    MERGE_BATCHES: ClassVar[bool] = False
    """A flowspark addition: set it when the logic's output does not depend
    on how a key's values are split into batches.  flowspark then calls
    `on_batch` once per key per micro-batch with all its values (in arrival
    order), which is much faster than one call per source round.  Runs
    that keep one worker's order (`run_main`, `-w 1`) don't merge, so that
    outputs come in Bytewax's order.  Every built-in stateful operator sets
    it."""

    @abstractmethod
    def on_batch(self, values: List[V]) -> Tuple[Iterable[W], bool]:
        """Handle the key's values of one batch, in arrival order."""

    def on_notify(self) -> Tuple[Iterable[W], bool]:
        """Called once the time `notify_at` returned has passed."""
        return (_EMPTY, StatefulBatchLogic.RETAIN)

    def on_eof(self) -> Tuple[Iterable[W], bool]:
        """Called once for every live key when the input ends."""
        return (_EMPTY, StatefulBatchLogic.RETAIN)

    def notify_at(self) -> Optional[datetime]:
        """When `on_notify` should next be called; `None` for never."""
        return None

    @abstractmethod
    def snapshot(self) -> S:
        """The state to rebuild this logic from; must not share mutable objects."""
