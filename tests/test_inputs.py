"""The batching helpers of `inputs` end and cut batches as Bytewax's do."""

from __future__ import annotations

import importlib
import queue
from typing import Any, Callable, Iterator, List

import pytest
from oracle import ENGINES, Engine, run_both

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
    assert [list(inputs.batch(iter(range(7)), size)) for inputs in engines] == [[list(range(i, min(i + size, 7))) for i in range(0, 7, size)]] * 2


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
    from datetime import timedelta

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
    from datetime import timedelta

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
