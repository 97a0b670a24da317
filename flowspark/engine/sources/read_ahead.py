"""Read a source's next micro-batch while Spark works on the current one.

Spark asks for the next offset only once the current micro-batch is
committed, and reading a million lines in the driver then leaves the
workers idle (about 0.15 s a batch on the benchmark machine).  When the
sources have more waiting than one micro-batch takes, the hub reads the next
one ahead in a thread; the next offset request takes what it read.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Optional, TypeVar, cast

__all__ = ["ReadAhead"]

T = TypeVar("T")


class ReadAhead(Generic[T]):
    """One `read()` running in a thread; its result (or exception) for whoever takes it."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._result: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(read,), name="flowspark-read-ahead", daemon=True)
        self._thread.start()

    def _run(self, read: Callable[[], T]) -> None:
        try:
            self._result = read()
        except BaseException as ex:
            self._error = ex

    def take(self) -> T:
        """Wait for the read; its result, or its exception raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._result)

    def wait(self) -> None:
        """Wait for the read and drop what it read (the sources are rebuilt, or closed)."""
        self._thread.join()
