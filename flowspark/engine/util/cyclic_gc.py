"""Bulk work without CPython's cyclic garbage collector.

Decoding a chunk makes millions of small objects (tuples, strings,
datetimes) that stay alive until the chunk is done.  The cyclic collector
runs after every few hundred net allocations and, as those survivors pile
up, walks them again and again in its older generations: on the windowed
benchmark that was a quarter of all CPU time.  Reference counting frees
these objects anyway; the rare cycles made during a pause are found by the
first collection after it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["collector_paused", "freeze_start_up_objects"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, if it was on; turn it back on after.

    Overlapping pauses from several threads are fine: whichever found the
    collector on turns it back on, so it never stays off for good (unless
    the program had turned it off itself).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_frozen = False


def freeze_start_up_objects() -> None:
    """Hide everything alive now from the cyclic collector, once per process.

    Spark's Python worker runs a full `gc.collect()` after every task.  A
    worker that has imported PySpark, pandas and pyarrow holds hundreds of
    thousands of objects, and each such collection walked all of them
    again (60 ms a task, about 3 CPU-seconds of a 10M-event run).  Frozen
    objects are still freed by reference counting; only garbage cycles among
    them would stay, and what is alive at a worker's first task is its
    imports and the task's plan.
    """
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()
