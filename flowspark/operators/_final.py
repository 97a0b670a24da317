"""The per-key operators that emit only at end of input: `fold_final` and those built on it.

`fold_final` runs a `StatefulLogic` (of `_stateful`) that folds a key's
values and emits the accumulator at EOF; `reduce_final`, `count_final`,
`max_final` and `min_final` are built on it.  The logic's snapshot is the
accumulator itself, so no class of this module is pickled into a step's
state.  Users import them from `flowspark.operators`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from typing_extensions import override

from flowspark.dataflow import KeyedStream, Stream, operator
from flowspark.operators._core import S, V, X, flat_map_batch
from flowspark.operators._stateful import StatefulLogic, stateful
from flowspark.operators._stateless import map  # noqa: A004 - Bytewax's operator name

__all__ = ["count_final", "fold_final", "max_final", "min_final", "reduce_final"]


@dataclass
class _FoldFinalLogic(StatefulLogic[V, S, S]):
    step_id: str
    folder: Callable[[S, V], S]
    state: S

    @override
    def on_item(self, value: V) -> Tuple[Iterable[S], bool]:
        self.state = self.folder(self.state, value)
        return ((), StatefulLogic.RETAIN)

    @override
    def on_eof(self) -> Tuple[Iterable[S], bool]:
        return ((self.state,), StatefulLogic.DISCARD)

    @override
    def snapshot(self) -> S:
        return self.state  # pickled as soon as it is taken


@operator
def fold_final(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
) -> KeyedStream[S]:
    """Fold each key's values into an accumulator; emit `(key, acc)` at EOF only.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("fold_final_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 5), ("a", 2)]))
    out = []
    op.output("out", op.fold_final("as_list", keyed, list, lambda acc, v: acc + [v]), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", [1, 2]), ("b", [5])]
    ```
    """

    def shim_builder(resume_state: Optional[S]) -> _FoldFinalLogic[V, S]:
        state = resume_state if resume_state is not None else builder()
        return _FoldFinalLogic(step_id, folder, state)

    return stateful("stateful", up, shim_builder)


def _no_state() -> Any:
    return None


@operator
def reduce_final(
    step_id: str,
    up: KeyedStream[V],
    reducer: Callable[[V, V], V],
) -> KeyedStream[V]:
    """Combine each key's values left to right with `reducer`; emit at EOF only.

    Each batch is pre-reduced per key before the stateful step, which cuts
    the state updates to one per key and batch.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("reduce_final_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 5), ("a", 2)]))
    out = []
    op.output("out", op.reduce_final("sum", keyed, lambda a, b: a + b), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", 3), ("b", 5)]
    ```
    """

    def pre_reducer(batch: List[Tuple[str, V]]) -> List[Tuple[str, V]]:
        accs: Dict[str, V] = {}
        for k, v in batch:
            accs[k] = reducer(accs[k], v) if k in accs else v
        return list(accs.items())

    def shim_folder(acc: Optional[V], v: V) -> V:
        return v if acc is None else reducer(acc, v)

    pre_up = flat_map_batch("pre_reduce", up, pre_reducer)
    return fold_final("fold_final", pre_up, _no_state, shim_folder)


@operator
def count_final(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[int]:
    """Count the items per `key(item)`; emit `(key, count)` at EOF only.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("count_final_eg")
    words = op.input("inp", flow, TestingSource(["a", "b", "a"]))
    out = []
    op.output("out", op.count_final("count", words, lambda w: w), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", 2), ("b", 1)]
    ```
    """

    def init_count(x: X) -> Tuple[str, int]:
        return (key(x), 1)

    def add(total: int, n: int) -> int:
        return total + n

    return reduce_final("sum", map("init_count", up, init_count), add)


def _identity(x: X) -> X:
    return x


@operator
def max_final(
    step_id: str,
    up: KeyedStream[V],
    by: Callable[[V], Any] = _identity,
) -> KeyedStream[V]:
    """Emit each key's largest value (by `by(value)`) at EOF; ties keep the earlier.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("max_final_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 5), ("a", 2)]))
    out = []
    op.output("out", op.max_final("max", keyed), TestingSink(out))
    run_main(flow)
    assert sorted(out) == [("a", 2), ("b", 5)]
    ```
    """

    def pick(a: V, b: V) -> V:
        return max(a, b, key=by)

    return reduce_final("reduce_final", up, pick)


@operator
def min_final(
    step_id: str,
    up: KeyedStream[V],
    by: Callable[[V], Any] = _identity,
) -> KeyedStream[V]:
    """Emit each key's smallest value (by `by(value)`) at EOF; ties keep the earlier.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("min_final_eg")
    keyed = op.input("inp", flow, TestingSource([("a", {"t": 3}), ("a", {"t": 1})]))
    out = []
    op.output("out", op.min_final("coolest", keyed, by=lambda r: r["t"]), TestingSink(out))
    run_main(flow)
    assert out == [("a", {"t": 1})]
    ```
    """

    def pick(a: V, b: V) -> V:
        return min(a, b, key=by)

    return reduce_final("reduce_final", up, pick)
