"""The helpers of `inputs` end and cut batches as Bytewax's do, and partitions are polled when their `next_awake`
says, as Bytewax polls them."""

from __future__ import annotations

import importlib
import json
import queue
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from support.oracle import ENGINES, Engine, run_both

CLOSED = object()
"""What a producer puts on the queue after its last item."""


def _getter(items: List[Any]) -> Callable[[], Any]:
    """A getter over a queue holding `items`, then closed: `None` when empty, `StopIteration` once closed."""
    q: "queue.Queue[Any]" = queue.Queue()
    for item in items:
        q.put(item)

    def get() -> Any:
        try:
            item = q.get_nowait()
        except queue.Empty:
            return None
        if item is CLOSED:
            raise StopIteration
        return item

    return get


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_batch_cuts_an_iterable_as_bytewax_does(size: int) -> None:
    engines = [importlib.import_module(f"{engine}.inputs") for engine in ENGINES]
    assert [list(inputs.batch(iter(range(7)), size)) for inputs in engines] == [
        [list(range(i, min(i + size, 7))) for i in range(0, 7, size)]
    ] * 2


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_of_size_zero_gives_no_batch_and_a_negative_size_is_a_value_error(engine: str) -> None:
    inputs = importlib.import_module(f"{engine}.inputs")
    assert list(inputs.batch(iter(range(3)), 0)) == []
    with pytest.raises(ValueError):
        list(inputs.batch(iter(range(3)), -1))


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_getter_ends_cleanly_on_stop_iteration(engine: str) -> None:
    inputs = importlib.import_module(f"{engine}.inputs")
    batches: Iterator[List[int]] = inputs.batch_getter(_getter([1, 2, 3, None, 4, CLOSED]), 2)
    assert list(batches) == [[1, 2], [3], [4]]


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_getter_ex_ends_cleanly_on_stop_iteration(engine: str) -> None:
    inputs = importlib.import_module(f"{engine}.inputs")
    items = iter([1, 2, 3])

    def get() -> int:
        return next(items)

    assert list(inputs.batch_getter_ex(get, 2)) == [[1, 2], [3]]


def test_queue_source_built_on_batch_getter_ends_the_flow() -> None:
    def build(e: Engine) -> Any:
        class QueuePartition(e.inputs.StatelessSourcePartition):  # type: ignore[misc]
            def __init__(self) -> None:
                self._batches = e.inputs.batch_getter(_getter(["a", "b", None, "c", CLOSED]), 10)

            def next_batch(self) -> List[str]:
                return next(self._batches)  # type: ignore[no-any-return]

        class QueueSource(e.inputs.DynamicSource):  # type: ignore[misc]
            def build(self, step_id: str, worker_index: int, worker_count: int) -> QueuePartition:
                return QueuePartition()

        flow = e.Dataflow("queue_flow")
        out: List[str] = []
        e.op.output("out", e.op.input("inp", flow, QueueSource()), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out == {"out": ["a", "b", "c"]}


def _polling_schedule(engine: str) -> List[Any]:
    """What a `SimplePollingSource` partition returns and when it next wakes, call after call, relative to its first wake-up."""
    inputs = importlib.import_module(f"{engine}.inputs")

    class Flaky(inputs.SimplePollingSource):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__(timedelta(minutes=30))
            self.calls = 0
            self.resumed_from: Any = None

        def next_item(self) -> Any:
            self.calls += 1
            if self.calls == 2:
                raise inputs.SimplePollingSource.Retry(timedelta(seconds=5))
            return None if self.calls == 3 else self.calls

        def snapshot(self) -> Any:
            return self.calls

        def resume(self, resume_state: Any) -> None:
            self.resumed_from = resume_state

    source = Flaky()
    part = source.build_part("step", "singleton", 7)
    first = part.next_awake()
    steps: List[Any] = [source.resumed_from]
    for _ in range(4):
        batch = part.next_batch()
        steps.append((batch, part.next_awake() - first, part.snapshot()))
    return steps


def test_simple_polling_source_wakes_every_interval_and_a_retry_postpones_its_due_time() -> None:
    schedules = {engine: _polling_schedule(engine) for engine in ENGINES}
    assert schedules["flowspark"] == schedules["bytewax"]
    minutes = timedelta(minutes=30)
    assert schedules["bytewax"] == [
        7,
        ([1], minutes, 1),
        ([], minutes + timedelta(seconds=5), 2),
        ([], 2 * minutes + timedelta(seconds=5), 3),
        ([4], 3 * minutes + timedelta(seconds=5), 4),
    ]


PLACEMENTS = ("driver", "executor", "dynamic")
"""Where a paced partition is read on flowspark: a driver-resident or an executor-read fixed partition, or a dynamic source's."""

ITEMS = [1, 2, 3, 4]

UNHEARD = 20
"""A paced partition asked this often when to wake, and never polled, fails its run rather than wait forever.

Bytewax asks once after the build and once after each batch.
"""


def _paced_flow(
    e: Engine, placement: str, pauses: Callable[[int], timedelta], log: Path, abort_at: Optional[int] = None
) -> Any:
    """A flow reading `ITEMS` one a batch from a partition that asks, at every `next_awake`, to sleep `pauses(read)` from now.

    `read` is how many items it emitted.  Each call is appended to `log`
    with its wall time (and the time `next_awake` answered), from whichever
    process makes it.  With `abort_at`, `next_batch` raises `AbortExecution`
    once that many items were emitted.
    """
    inputs = e.inputs
    base = inputs.StatelessSourcePartition if placement == "dynamic" else inputs.StatefulSourcePartition

    def note(call: str, answer: Optional[datetime] = None) -> None:
        with open(log, "a") as f:
            f.write(json.dumps([time.time(), call, None if answer is None else answer.timestamp()]) + "\n")

    class Paced(base):  # type: ignore[misc, valid-type]
        def __init__(self, start: int) -> None:
            self._read = start
            note("build")

        def next_batch(self) -> List[int]:
            note("next_batch")
            if self._read == abort_at:
                raise inputs.AbortExecution()
            if self._read == len(ITEMS):
                raise StopIteration()
            self._read += 1
            return [ITEMS[self._read - 1]]

        def next_awake(self) -> Optional[datetime]:
            calls = [call for _, call, _ in _calls(log)]
            polled = len(calls) - calls[::-1].index("next_batch") if "next_batch" in calls else 0
            if calls[polled:].count("next_awake") >= UNHEARD:
                msg = f"asked {UNHEARD} times when to wake without being polled in between"
                raise RuntimeError(msg)
            answer = datetime.now(timezone.utc) + pauses(self._read)
            note("next_awake", answer)
            return answer

        def snapshot(self) -> int:
            return self._read

    class PacedSource(inputs.FixedPartitionedSource):  # type: ignore[misc]
        lives_in_driver = placement == "driver"

        def list_parts(self) -> List[str]:
            return ["only"]

        def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> Paced:
            return Paced(resume_state or 0)

    class PacedDynamic(inputs.DynamicSource):  # type: ignore[misc]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Paced:
            return Paced(0)

    flow = e.Dataflow("paced")
    out: List[int] = []
    source = PacedDynamic() if placement == "dynamic" else PacedSource()
    e.op.output("out", e.op.input("inp", flow, source), e.TestingSink(out))
    return flow, {"out": out}


def _calls(log: Path) -> List[Tuple[float, str, Optional[float]]]:
    return [tuple(json.loads(line)) for line in log.read_text().splitlines()]  # type: ignore[misc]


def _polls_before_their_time(calls: List[Tuple[float, str, Optional[float]]]) -> List[float]:
    """The times of the `next_batch` calls made before the time the last `next_awake` answered."""
    early: List[float] = []
    due: Optional[float] = None
    for at, call, answer in calls:
        if call == "next_awake":
            due = answer
        elif call == "next_batch" and due is not None and at < due:
            early.append(at)
    return early


def _asked_after_build(calls: List[Tuple[float, str, Optional[float]]]) -> bool:
    """Whether `next_awake` was asked after the first build and before the first `next_batch`."""
    names = [call for _, call, _ in calls]
    return names[0] == "build" and names.index("next_awake") < names.index("next_batch")


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_a_partition_awake_again_an_interval_after_each_batch_is_read_as_bytewax_reads_it(
    tmp_path: Path, placement: str
) -> None:
    logs = {engine: tmp_path / f"{engine}.log" for engine in ENGINES}
    pause = timedelta(milliseconds=10)
    bytewax_out, flowspark_out = run_both(lambda e: _paced_flow(e, placement, lambda read: pause, logs[e.name]))
    assert flowspark_out == bytewax_out == {"out": ITEMS}
    for engine, log in logs.items():
        calls = _calls(log)
        assert _asked_after_build(calls), engine
        assert _polls_before_their_time(calls) == [], engine


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_a_partition_sleeping_between_batches_is_not_polled_before_it_wakes(tmp_path: Path, placement: str) -> None:
    logs = {engine: tmp_path / f"{engine}.log" for engine in ENGINES}
    pause = timedelta(seconds=0.3)
    bytewax_out, flowspark_out = run_both(lambda e: _paced_flow(e, placement, lambda read: pause, logs[e.name]))
    assert flowspark_out == bytewax_out == {"out": ITEMS}
    for engine, log in logs.items():
        calls = _calls(log)
        assert _asked_after_build(calls), engine
        assert _polls_before_their_time(calls) == [], engine
        polls = [at for at, call, _ in calls if call == "next_batch"]
        assert len(polls) == len(ITEMS) + 1, engine  # one a batch, and the one that ends it
        assert all(later - earlier >= pause.total_seconds() for earlier, later in zip(polls, polls[1:])), engine


@pytest.mark.parametrize("placement", ["driver", "executor"])
def test_a_resumed_partition_is_asked_when_to_wake_again_after_it_is_built(tmp_path: Path, placement: str) -> None:
    """Bytewax keeps no `next_awake` in its recovery data: a resumed partition's answer after its build is the one it keeps."""
    outputs: Dict[str, List[List[int]]] = {}
    for engine in ENGINES:
        e = Engine(engine)
        recovery = importlib.import_module(f"{engine}.recovery")
        directory = tmp_path / engine
        directory.mkdir()
        recovery.init_db_dir(directory, 1)
        outputs[engine] = []
        for run in (1, 2):
            log = tmp_path / f"{engine}-{run}.log"
            # The first run asks for no pause and aborts after two items;
            # the resumed one asks, after its build, to sleep 0.3 s.
            pauses = (
                (lambda read: timedelta(0)) if run == 1 else (lambda read: timedelta(seconds=0.3 if read == 2 else 0))
            )
            flow, out = _paced_flow(e, placement, pauses, log, abort_at=2 if run == 1 else None)
            e.run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery.RecoveryConfig(directory))
            outputs[engine].append(out["out"])
        calls = _calls(tmp_path / f"{engine}-2.log")
        assert _asked_after_build(calls), engine
        assert _polls_before_their_time(calls) == [], engine
    assert outputs["flowspark"] == outputs["bytewax"] == [[1, 2], [3, 4]]
