"""SIGTERM while a run lasts: the first asks for a stop at a micro-batch boundary, the second stops at once; Ctrl-C
while a run waits for its query: raised where the wait checks for it.

The runs themselves are stopped in `tests/test_spark_faults.py`; here the
handler is driven with real signals sent to this process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from types import FrameType
from typing import Iterator, List, Optional

import pytest

from flowspark.engine.util.shutdown import (
    STOPPED_STATUS,
    ctrl_c_between_calls,
    stop_on_sigterm,
    stop_requested,
    stopped,
)
from flowspark.errors import RunStopped


def _delivered() -> None:
    """Give the main thread the moment Python needs to run a signal's handler."""
    for _ in range(100):
        time.sleep(0.001)


def test_the_first_sigterm_asks_for_a_stop_and_the_second_stops_at_once() -> None:
    with stop_on_sigterm():
        assert not stop_requested()
        os.kill(os.getpid(), signal.SIGTERM)
        _delivered()
        assert stop_requested()
        with pytest.raises(RunStopped) as info:
            os.kill(os.getpid(), signal.SIGTERM)
            _delivered()
    assert info.value.status == STOPPED_STATUS == 143
    assert "stopped at once on a second SIGTERM" in str(info.value)
    assert not stop_requested() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@contextlib.contextmanager
def _own_handler(signum: int) -> Iterator[List[int]]:
    """A handler of the program's own for `signum` while the block runs; the signals it got. Afterwards the
    block must have left it in place."""
    got: List[int] = []

    def own(number: int, frame: Optional[FrameType]) -> None:
        got.append(number)

    previous = signal.signal(signum, own)
    try:
        yield got
        assert signal.getsignal(signum) is own
    finally:
        signal.signal(signum, previous)


def test_a_program_s_own_handler_is_kept() -> None:
    with _own_handler(signal.SIGTERM) as got:
        with stop_on_sigterm():
            os.kill(os.getpid(), signal.SIGTERM)
            _delivered()
            assert not stop_requested()
        assert got == [signal.SIGTERM]


def test_a_run_outside_the_main_thread_installs_nothing() -> None:
    seen: List[object] = []

    def run() -> None:
        with stop_on_sigterm():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.SIG_DFL]


def test_the_stop_says_what_was_committed_and_how_to_go_on() -> None:
    assert str(stopped("f", 41, resumable=True)) == (
        "flow 'f' stopped on SIGTERM after micro-batch 41 (epoch 42) was written and committed; "
        "start it again with the same recovery directory to resume"
    )
    assert str(stopped("f", -1, resumable=False)) == (
        "flow 'f' stopped on SIGTERM before it wrote any micro-batch; it has no recovery directory, so a new run starts over"
    )


HELD_MAIN_THREAD = """
import os, signal, time
from flowspark.engine.util import shutdown
from flowspark.errors import RunStopped

shutdown.HARD_STOP_SECONDS = 0.5
with shutdown.stop_on_sigterm():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.1)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
    except RunStopped:
        pass  # as a main thread held in a call that swallows the stop would be
    time.sleep(60)
"""


def test_a_second_sigterm_ends_the_process_even_if_the_run_can_not_unwind() -> None:
    import subprocess
    import sys

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HELD_MAIN_THREAD], capture_output=True, text=True, timeout=60)
    assert done.returncode == STOPPED_STATUS
    assert "flowspark: the run stopped at once on a second SIGTERM" in done.stderr
    assert time.monotonic() - started < 30


def test_the_hard_stop_is_called_off_once_the_run_has_unwound() -> None:
    with pytest.raises(RunStopped):
        with stop_on_sigterm():
            os.kill(os.getpid(), signal.SIGTERM)
            _delivered()
            os.kill(os.getpid(), signal.SIGTERM)
            _delivered()
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]


@pytest.fixture
def python_ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler for the test: PySpark puts its own in place in a process that started a
    SparkContext, as the suite's process has."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_ctrl_c")
def test_ctrl_c_is_raised_at_the_check_and_a_second_at_once() -> None:
    with ctrl_c_between_calls() as check:
        os.kill(os.getpid(), signal.SIGINT)
        _delivered()  # no KeyboardInterrupt here: it waits for the check
        with pytest.raises(KeyboardInterrupt):
            check()
        check()  # once raised, it is gone
        os.kill(os.getpid(), signal.SIGINT)
        _delivered()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            _delivered()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("python_ctrl_c")
def test_ctrl_c_during_the_block_s_last_moment_is_raised_as_it_ends() -> None:
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_between_calls():
            os.kill(os.getpid(), signal.SIGINT)
            _delivered()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("python_ctrl_c")
def test_ctrl_c_outside_the_main_thread_is_left_alone() -> None:
    seen: List[object] = []

    def run() -> None:
        with ctrl_c_between_calls() as check:
            seen.append(signal.getsignal(signal.SIGINT))
            check()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_ctrl_c_handled_by_someone_else_is_left_to_them() -> None:
    with _own_handler(signal.SIGINT) as got:
        with ctrl_c_between_calls() as check:
            os.kill(os.getpid(), signal.SIGINT)
            _delivered()
            check()
        assert got == [signal.SIGINT]
