"""`WriteBehind`: writes run one at a time, in order, off the caller's thread; an error stops the later ones."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

from flowspark.engine.sinks.async_write import WriteBehind


def test_writes_run_in_order_in_another_thread_and_join_waits_for_the_last() -> None:
    done: List[int] = []
    threads: List[str] = []
    behind = WriteBehind()

    def write(n: int) -> None:
        time.sleep(0.05)
        threads.append(threading.current_thread().name)
        done.append(n)

    for n in range(3):
        behind.submit(lambda n=n: write(n))  # type: ignore[misc]
    behind.join()
    assert done == [0, 1, 2]
    assert threading.current_thread().name not in threads


def test_a_failed_write_is_raised_by_every_later_call_and_nothing_after_it_runs() -> None:
    ran: List[str] = []
    behind = WriteBehind()

    def fail() -> None:
        msg = "lost"
        raise KeyError(msg)

    behind.submit(fail)
    with pytest.raises(KeyError, match="lost"):
        behind.submit(lambda: ran.append("later"))
    with pytest.raises(KeyError, match="lost"):
        behind.join()
    assert ran == []
