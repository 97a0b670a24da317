"""The emission part of a key's window logic for steps with emit modes, panes or triggers.

`per_key.KeyWindowLogic` is given an emission part by its config: Bytewax's
own (`per_key.Emission`) for plain steps, a `PaneEmission` for steps that
use `emit`, `allowed_lateness` or `trigger` (see `firing` for the rules).
A `PaneEmission` wraps every item in a `Pane`, emits running results early
(emit modes and triggers), merges the bookkeeping of merged sessions and
emits each window's final pane when it closes.  It keeps each open window's
`WindowBook`; the lateness part keeps those of closed windows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.operators._core import S, V, W
from flowspark.operators._windowing.base import WindowLogic, WindowMetadata
from flowspark.operators._windowing.panes import EmitMode, Pane, PaneTiming
from flowspark.operators._windowing.parts import Closed, Emission, Fired, WindowEvent
from flowspark.operators._windowing.triggers import Trigger, WindowBook, earlier

__all__ = ["PaneEmission"]


class PaneEmission(Emission[V, W, S]):
    """Emits panes: early ones for emit modes and triggers, a final one at close, late ones for kept windows."""

    def __init__(
        self,
        builder: Callable[[Optional[S]], WindowLogic[V, W, S]],
        emit: EmitMode,
        trigger: Optional[Trigger],
        books: Optional[Dict[int, WindowBook]],
    ) -> None:
        self._builder = builder
        self._emits_current = emit != "final"
        self._emits_final = emit != "current"
        self._trigger = trigger
        self._books: Dict[int, WindowBook] = {i: book.copy() for i, book in (books or {}).items()}

    @override
    def merges_first(self) -> bool:
        return True

    def book(self, window_id: int) -> WindowBook:
        """The bookkeeping of open window `window_id`, started if it has none yet."""
        book = self._books.get(window_id)
        if book is None:
            book = self._books[window_id] = WindowBook()
        return book

    def adopt(self, window_id: int, book: WindowBook) -> None:
        """Take back the bookkeeping of a kept window that a late value opened again."""
        self._books[window_id] = book

    def emit(
        self,
        window_id: int,
        items: Iterable[W],
        timing: PaneTiming,
        book: WindowBook,
        last: bool = False,
    ) -> List[WindowEvent[V, W]]:
        """One `Fired` event per item, numbered by `book`; `last` marks the final one."""
        values = list(items)
        events: List[WindowEvent[V, W]] = []
        for i, value in enumerate(values):
            pane = Pane(value, timing, book.panes, last and i == len(values) - 1)
            book.panes += 1
            events.append(Fired(window_id, value, pane))
        return events

    def running(self, logic: WindowLogic[V, W, S]) -> List[W]:
        """The window's result if it closed now, without closing it (see `firing`)."""
        return list(logic.running(self._builder))

    @override
    def wrap(self, window_id: int, items: Iterable[W]) -> List[WindowEvent[V, W]]:
        return self.emit(window_id, items, "early", self.book(window_id))

    @override
    def took_in(self, window_id: int, logics: Dict[int, WindowLogic[V, W, S]], value: V) -> List[WindowEvent[V, W]]:
        book = self.book(window_id)
        book.purged = False
        trigger = self._trigger
        if trigger is not None and not book.finished and trigger.after_value(book, value):
            return self._fire(window_id, logics, book, trigger)
        if self._emits_current:
            return self.emit(window_id, self.running(logics[window_id]), "early", book)
        return []

    def _fire(
        self, window_id: int, logics: Dict[int, WindowLogic[V, W, S]], book: WindowBook, trigger: Trigger
    ) -> List[WindowEvent[V, W]]:
        """Emit an open window's running result for its trigger, then reset (or finish) it, and purge."""
        events = self.emit(window_id, self.running(logics[window_id]), "early", book)
        if trigger.on_fire(book):
            book.finished = True
        if trigger.purge:
            logics[window_id] = self._builder(None)
            book.purged = True
        return events

    @override
    def seeded(self, window_id: int, values: List[V]) -> None:
        """A seeded window's trigger counts the seeded values but cannot fire on them.

        The window fires (or emits its running result) at most once, after
        the value that opened it, so a window seeded with `n` values does
        not emit `n` early panes.
        """
        trigger = self._trigger
        if trigger is not None and not self.book(window_id).finished:
            book = self.book(window_id)
            for value in values:
                trigger.after_value(book, value)

    @override
    def merged(self, original_id: int, target_id: int, items: Iterable[W]) -> List[WindowEvent[V, W]]:
        """Trigger counts add up, but, as in Flink, a merge does not fire the trigger by itself."""
        events = self.wrap(target_id, items)
        book = self.book(target_id)
        absorbed = self._books.pop(original_id, None)
        if absorbed is not None:
            book.absorb(absorbed)
            book.purged = book.purged and absorbed.purged
            book.on_time = book.on_time or absorbed.on_time
        return events

    @override
    def close(self, window_id: int, logic: WindowLogic[V, W, S], meta: WindowMetadata) -> List[WindowEvent[V, W]]:
        return self.finish(window_id, logic, meta, keep=False)[0]

    def finish(
        self, window_id: int, logic: WindowLogic[V, W, S], meta: WindowMetadata, keep: bool
    ) -> Tuple[List[WindowEvent[V, W]], WindowBook]:
        """Close a window: its final pane (unless purged since), then its metadata; return its book.

        A window `keep`-t for late values emits its running result and stays
        live; one closing again after a late value opened it emits a
        `"late"` pane.
        """
        book = self._books.pop(window_id, None) or WindowBook()
        events: List[WindowEvent[V, W]] = []
        if self._emits_final and not book.purged:
            items = self.running(logic) if keep else logic.on_close()
            timing: PaneTiming = "late" if book.on_time else "on_time"
            events.extend(self.emit(window_id, items, timing, book, last=not keep))
        book.on_time = True
        book.clear_wakeups()
        events.append(Closed(window_id, meta))
        return events, book

    @override
    def due(self, logics: Dict[int, WindowLogic[V, W, S]]) -> List[WindowEvent[V, W]]:
        """Fire the open windows whose processing-time trigger is due."""
        trigger = self._trigger
        if trigger is None:
            return []
        waiting = [
            (i, book) for i, book in self._books.items() if not book.finished and trigger.wake_at(book) is not None
        ]
        if not waiting:
            return []
        now = trigger.now()
        events: List[WindowEvent[V, W]] = []
        for window_id, book in waiting:
            if now is not None and window_id in logics and trigger.due(book, now):
                events.extend(self._fire(window_id, logics, book, trigger))
        return events

    @override
    def wake_at(self, at: Optional[datetime]) -> Optional[datetime]:
        trigger = self._trigger
        if trigger is not None:
            for book in self._books.values():
                if not book.finished:
                    at = earlier(at, trigger.wake_at(book))
        return at

    @override
    def snapshot(self) -> Optional[Dict[int, Any]]:
        return {i: book.copy() for i, book in self._books.items()}
