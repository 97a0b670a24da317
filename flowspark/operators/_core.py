"""The eight core operators: the only steps the planner translates to Spark.

Every other operator is built from these in plain Python, so each piece of
semantics lives in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Generic,
    Iterable,
    List,
    Optional,
    TypeVar,
    overload,
)

from typing_extensions import TypeGuard

from flowspark._batch_logic import StatefulBatchLogic
from flowspark._bytewax_io import adapt_sink, adapt_source
from flowspark._step_config import (
    BranchConfig,
    FlatMapBatchConfig,
    InputConfig,
    InspectDebugConfig,
    MergeConfig,
    OutputConfig,
    RedistributeConfig,
    StatefulBatchConfig,
    port_ids,
)
from flowspark.dataflow import Dataflow, KeyedStream, Stream, core_step, operator
from flowspark.inputs import Source
from flowspark.outputs import Sink

X = TypeVar("X")
"""Type of upstream items."""
Y = TypeVar("Y")
"""Type of modified downstream items."""
V = TypeVar("V")
"""Type of upstream values."""
W = TypeVar("W")
"""Type of modified downstream values."""
S = TypeVar("S")
"""Type of state snapshots."""
W_co = TypeVar("W_co", covariant=True)
"""Type of emitted values, covariant."""
X_co = TypeVar("X_co", covariant=True)
Y_co = TypeVar("Y_co", covariant=True)


@dataclass(frozen=True)
class BranchOut(Generic[X_co, Y_co]):
    """The two streams of `branch`."""

    trues: Stream[X_co]
    falses: Stream[Y_co]


def _default_debug_inspector(step_id: str, item: Any, epoch: int, worker_idx: int) -> None:
    print(f"{step_id} W{worker_idx} @{epoch}: {item!r}", flush=True)


@operator
def input(  # noqa: A001 - Bytewax's operator name
    step_id: str,
    flow: Dataflow,
    source: Source[X],
) -> Stream[X]:
    """Introduce items from `source` into the flow (a Bytewax source is adapted).

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("input_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3]))
    out = []
    op.output("out", nums, TestingSink(out))
    run_main(flow)
    assert out == [1, 2, 3]
    ```
    """
    (down,) = core_step(InputConfig(ups=(), downs=port_ids(step_id, "down"), source=adapt_source(source)))
    return down


@operator
def output(step_id: str, up: Stream[X], sink: Sink[X]) -> None:
    """Write every item of `up` to `sink` (a Bytewax sink is adapted).

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("output_eg")
    words = op.input("inp", flow, TestingSource(["a", "b"]))
    out = []
    op.output("out", words, TestingSink(out))
    run_main(flow)
    assert out == ["a", "b"]
    ```
    """
    core_step(OutputConfig(ups=(up.stream_id,), downs=(), sink=adapt_sink(sink)))


@operator
def flat_map_batch(step_id: str, up: Stream[X], mapper: Callable[[List[X]], Iterable[Y]]) -> Stream[Y]:
    """Transform a whole batch of items at once; emit what `mapper` returns.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("flat_map_batch_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3]))
    out = []
    op.output("out", op.flat_map_batch("squares", nums, lambda batch: [x * x for x in batch]), TestingSink(out))
    run_main(flow)
    assert out == [1, 4, 9]
    ```
    """
    (down,) = core_step(FlatMapBatchConfig(ups=(up.stream_id,), downs=port_ids(step_id, "down"), mapper=mapper))
    return down


@operator
def stateful_batch(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[Optional[S]], StatefulBatchLogic[V, W, S]],
) -> KeyedStream[W]:
    """Run a `StatefulBatchLogic` per key; emits `(key, value)` for what it returns.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main


    class CountAtEnd(op.StatefulBatchLogic):
        def __init__(self, resume_state):
            self.count = resume_state or 0

        def on_batch(self, values):
            self.count += len(values)
            return [], op.StatefulBatchLogic.RETAIN

        def on_eof(self):
            return [self.count], op.StatefulBatchLogic.DISCARD

        def snapshot(self):
            return self.count


    flow = Dataflow("stateful_batch_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 1), ("a", 1)]))
    out = []
    op.output("out", op.stateful_batch("count", keyed, CountAtEnd), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", 2), ("b", 1)]
    ```
    """
    (down,) = core_step(StatefulBatchConfig(ups=(up.stream_id,), downs=port_ids(step_id, "down"), builder=builder))
    return down


@overload
def branch(step_id: str, up: Stream[X], predicate: Callable[[X], TypeGuard[Y]]) -> BranchOut[Y, X]: ...


@overload
def branch(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> BranchOut[X, X]: ...


@operator
def branch(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> BranchOut[Any, Any]:
    """Send each item to `trues` or `falses` by `predicate`, keeping order.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("branch_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3, 4]))
    split = op.branch("evens", nums, lambda x: x % 2 == 0)
    evens, odds = [], []
    op.output("evens_out", split.trues, TestingSink(evens))
    op.output("odds_out", split.falses, TestingSink(odds))
    run_main(flow)
    assert (evens, odds) == ([2, 4], [1, 3])
    ```
    """
    trues, falses = core_step(
        BranchConfig(ups=(up.stream_id,), downs=port_ids(step_id, "trues", "falses"), predicate=predicate)
    )
    return BranchOut(trues, falses)


@operator
def merge(step_id: str, *ups: Stream[Any]) -> Stream[Any]:
    """Combine several streams into one; no order across them.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("merge_eg")
    left = op.input("left", flow, TestingSource([1, 2]))
    right = op.input("right", flow, TestingSource([10]))
    out = []
    op.output("out", op.merge("both", left, right), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [1, 2, 10]
    ```
    """
    if not ups:
        msg = f"step {step_id!r}: `merge` needs at least one upstream stream"
        raise AssertionError(msg)
    (down,) = core_step(MergeConfig(ups=tuple(u.stream_id for u in ups), downs=port_ids(step_id, "down")))
    return down


@operator
def redistribute(step_id: str, up: Stream[X]) -> Stream[X]:
    """Spread items evenly over the workers; content unchanged, order not kept.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("redistribute_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3]))
    out = []
    op.output("out", op.redistribute("spread", nums), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [1, 2, 3]
    ```
    """
    (down,) = core_step(RedistributeConfig(ups=(up.stream_id,), downs=port_ids(step_id, "down")))
    return down


@operator
def inspect_debug(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X, int, int], None] = _default_debug_inspector,
) -> Stream[X]:
    """Call `inspector(step_id, item, epoch, worker_index)` on each item; pass items on.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("inspect_debug_eg")
    nums = op.input("inp", flow, TestingSource([1, 2]))
    seen = []
    op.inspect_debug("peek", nums, lambda step_id, x, epoch, worker: seen.append((step_id, x, worker)))
    run_main(flow)
    assert seen == [("inspect_debug_eg.peek", 1, 0), ("inspect_debug_eg.peek", 2, 0)]
    ```
    """
    (down,) = core_step(InspectDebugConfig(ups=(up.stream_id,), downs=port_ids(step_id, "down"), inspector=inspector))
    return down
