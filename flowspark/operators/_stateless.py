"""Stateless operators, each a thin shim over `flat_map_batch`.

The inner step ids (`flat_map_batch`, `flat_map`, `map`, ...) match
Bytewax's, so qualified ids in error messages read the same on both engines.
Mappers return lists rather than lazy generators so that a user function's
exception is raised while the runtime is calling the step's mapper.

Bytewax writes `filter`, `filter_map`, `key_on`, `key_rm` and `map_value`
as a function of one item handed to `flat_map` or `map`.  Here each also
comes with the same mapping written for a whole batch (`_BatchForm`), which
`flat_map` and `map` give straight to `flat_map_batch`: the steps and their
ids are Bytewax's, and an item no longer costs a call of the one-item
function, a tuple and a generator step on top of the user's own function.
"""

from __future__ import annotations

from collections.abc import Iterable as IterableABC
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, List, NoReturn, Optional, Tuple

from typing_extensions import override

from flowspark.dataflow import KeyedStream, Stream, f_repr, operator
from flowspark.operators._core import V, W, X, Y, flat_map_batch, inspect_debug, output
from flowspark.outputs import DynamicSink, StatelessSinkPartition


def _check_bool(keep: Any, predicate: Callable[..., Any], step_id: str) -> bool:
    if not isinstance(keep, bool):
        msg = (
            f"return value of `predicate` {f_repr(predicate)} in step {step_id!r} "
            f"must be a `bool`; got a {type(keep)!r} instead"
        )
        raise TypeError(msg)
    return keep


def _not_str_key(k: Any, key: Callable[..., Any], step_id: str) -> NoReturn:
    msg = f"return value of `key` {f_repr(key)} in step {step_id!r} must be a `str`; got a {type(k)!r} instead"
    raise TypeError(msg)


class _BatchForm(Generic[X, Y]):
    """A one-item mapper for `map` or `flat_map`, with the same mapping over a whole batch (`batch`).

    `map` and `flat_map` give `batch` to `flat_map_batch` in place of their
    own loop over the one-item function (see the module's doc).
    """

    __slots__ = ("_one", "batch")

    def __init__(self, one: Callable[[X], Y], batch: Callable[[List[X]], List[Any]]) -> None:
        self._one = one
        self.batch = batch

    def __call__(self, item: X) -> Y:
        return self._one(item)


@operator
def map(  # noqa: A001 - Bytewax's operator name
    step_id: str,
    up: Stream[X],
    mapper: Callable[[X], Y],
) -> Stream[Y]:
    """Replace each item with `mapper(item)`; `None` results are kept.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("map_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3]))
    out = []
    op.output("out", op.map("plus_ten", nums, lambda x: x + 10), TestingSink(out))
    run_main(flow)
    assert out == [11, 12, 13]
    ```
    """
    if isinstance(mapper, _BatchForm):
        return flat_map_batch("flat_map_batch", up, mapper.batch)

    def shim_mapper(xs: List[X]) -> List[Y]:
        return [mapper(x) for x in xs]

    return flat_map_batch("flat_map_batch", up, shim_mapper)


@operator
def flat_map(
    step_id: str,
    up: Stream[X],
    mapper: Callable[[X], Iterable[Y]],
) -> Stream[Y]:
    """Replace each item with every item of `mapper(item)`, in order.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("flat_map_eg")
    lines = op.input("inp", flow, TestingSource(["to be", "or not"]))
    out = []
    op.output("out", op.flat_map("words", lines, str.split), TestingSink(out))
    run_main(flow)
    assert out == ["to", "be", "or", "not"]
    ```
    """
    if isinstance(mapper, _BatchForm):
        return flat_map_batch("flat_map_batch", up, mapper.batch)

    def shim_mapper(xs: List[X]) -> List[Y]:
        out: List[Y] = []
        extend = out.extend
        for x in xs:
            extend(mapper(x))
        return out

    return flat_map_batch("flat_map_batch", up, shim_mapper)


@operator
def flatten(step_id: str, up: Stream[Iterable[X]]) -> Stream[X]:
    """Emit the elements of each iterable item; non-iterables are a `TypeError`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("flatten_eg")
    lists = op.input("inp", flow, TestingSource([[1, 2], [], [3]]))
    out = []
    op.output("out", op.flatten("flat", lists), TestingSink(out))
    run_main(flow)
    assert out == [1, 2, 3]
    ```
    """

    def shim_mapper(x: Iterable[X]) -> Iterable[X]:
        if not isinstance(x, IterableABC):
            msg = f"step {step_id!r} requires upstream to be iterables; got a {type(x)!r} instead"
            raise TypeError(msg)
        return x

    return flat_map("flat_map", up, shim_mapper)


@operator
def filter(  # noqa: A001 - Bytewax's operator name
    step_id: str,
    up: Stream[X],
    predicate: Callable[[X], bool],
) -> Stream[X]:
    """Keep the items for which `predicate` returns `True` (it must return a `bool`).

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("filter_eg")
    nums = op.input("inp", flow, TestingSource([1, 2, 3, 4]))
    out = []
    op.output("out", op.filter("evens", nums, lambda x: x % 2 == 0), TestingSink(out))
    run_main(flow)
    assert out == [2, 4]
    ```
    """

    def shim_mapper(x: X) -> Tuple[X, ...]:
        return (x,) if _check_bool(predicate(x), predicate, step_id) else ()

    def kept(xs: List[X]) -> List[X]:
        return [
            x
            for x in xs
            if (keep := predicate(x)) is True or (keep is not False and _check_bool(keep, predicate, step_id))
        ]

    return flat_map("flat_map", up, _BatchForm(shim_mapper, kept))


@operator
def filter_map(
    step_id: str,
    up: Stream[X],
    mapper: Callable[[X], Optional[Y]],
) -> Stream[Y]:
    """Map each item and drop the `None` results.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("filter_map_eg")
    texts = op.input("inp", flow, TestingSource(["1", "x", "3"]))
    out = []
    op.output("out", op.filter_map("ints", texts, lambda s: int(s) if s.isdigit() else None), TestingSink(out))
    run_main(flow)
    assert out == [1, 3]
    ```
    """

    def shim_mapper(x: X) -> Tuple[Y, ...]:
        y = mapper(x)
        return () if y is None else (y,)

    def mapped(xs: List[X]) -> List[Y]:
        return [y for x in xs if (y := mapper(x)) is not None]

    return flat_map("flat_map", up, _BatchForm(shim_mapper, mapped))


@operator
def key_on(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[X]:
    """Turn each item into `(key(item), item)`; the key must be a `str`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("key_on_eg")
    users = op.input("inp", flow, TestingSource([{"id": 7, "name": "ada"}]))
    out = []
    op.output("out", op.key_on("by_id", users, lambda u: str(u["id"])), TestingSink(out))
    run_main(flow)
    assert out == [("7", {"id": 7, "name": "ada"})]
    ```
    """

    def shim_mapper(x: X) -> Tuple[str, X]:
        k = key(x)
        if not isinstance(k, str):
            _not_str_key(k, key, step_id)
        return (k, x)

    def keyed(xs: List[X]) -> List[Tuple[str, X]]:
        return [(k, x) for x in xs if isinstance(k := key(x), str) or _not_str_key(k, key, step_id)]

    return map("map", up, _BatchForm(shim_mapper, keyed))


@operator
def key_rm(step_id: str, up: KeyedStream[X]) -> Stream[X]:
    """Drop the key of each `(key, value)` item, keeping the value.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("key_rm_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 2)]))
    out = []
    op.output("out", op.key_rm("values", keyed), TestingSink(out))
    run_main(flow)
    assert out == [1, 2]
    ```
    """

    def shim_mapper(k_v: Tuple[str, X]) -> X:
        _k, v = k_v
        return v

    def values(xs: List[Tuple[str, X]]) -> List[X]:
        return [v for _k, v in xs]

    return map("map", up, _BatchForm(shim_mapper, values))


@operator
def map_value(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[V], W],
) -> KeyedStream[W]:
    """Replace each `(key, value)` with `(key, mapper(value))`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("map_value_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 2)]))
    out = []
    op.output("out", op.map_value("double", keyed, lambda v: v * 2), TestingSink(out))
    run_main(flow)
    assert out == [("a", 2), ("b", 4)]
    ```
    """

    def shim_mapper(k_v: Tuple[str, V]) -> Tuple[str, W]:
        k, v = k_v
        return (k, mapper(v))

    def mapped(xs: List[Tuple[str, V]]) -> List[Tuple[str, W]]:
        return [(k, mapper(v)) for k, v in xs]

    return map("map", up, _BatchForm(shim_mapper, mapped))


@operator
def flat_map_value(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[V], Iterable[W]],
) -> KeyedStream[W]:
    """Replace each `(key, value)` with `(key, w)` for every `w` of `mapper(value)`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("flat_map_value_eg")
    keyed = op.input("inp", flow, TestingSource([("a", "x y"), ("b", "z")]))
    out = []
    op.output("out", op.flat_map_value("split", keyed, str.split), TestingSink(out))
    run_main(flow)
    assert out == [("a", "x"), ("a", "y"), ("b", "z")]
    ```
    """

    def shim_mapper(k_v: Tuple[str, V]) -> List[Tuple[str, W]]:
        try:
            k, v = k_v
        except TypeError as ex:
            msg = (
                f"step {step_id!r} requires `(key, value)` 2-tuple as upstream for routing; got a {type(k_v)!r} instead"
            )
            raise TypeError(msg) from ex
        return [(k, w) for w in mapper(v)]

    return flat_map("flat_map", up, shim_mapper)


@operator
def filter_value(
    step_id: str,
    up: KeyedStream[V],
    predicate: Callable[[V], bool],
) -> KeyedStream[V]:
    """Keep the `(key, value)` items whose value passes `predicate` (a `bool`).

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("filter_value_eg")
    keyed = op.input("inp", flow, TestingSource([("a", 1), ("b", 20)]))
    out = []
    op.output("out", op.filter_value("big", keyed, lambda v: v > 10), TestingSink(out))
    run_main(flow)
    assert out == [("b", 20)]
    ```
    """

    def shim_mapper(v: V) -> Tuple[V, ...]:
        return (v,) if _check_bool(predicate(v), predicate, step_id) else ()

    return flat_map_value("filter", up, shim_mapper)


@operator
def filter_map_value(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[V], Optional[W]],
) -> KeyedStream[W]:
    """Map each value and drop the items whose result is `None`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("filter_map_value_eg")
    keyed = op.input("inp", flow, TestingSource([("a", "1"), ("b", "x")]))
    out = []
    parsed = op.filter_map_value("ints", keyed, lambda s: int(s) if s.isdigit() else None)
    op.output("out", parsed, TestingSink(out))
    run_main(flow)
    assert out == [("a", 1)]
    ```
    """

    def shim_mapper(v: V) -> Tuple[W, ...]:
        w = mapper(v)
        return () if w is None else (w,)

    return flat_map_value("flat_map_value", up, shim_mapper)


def _default_inspector(step_id: str, item: Any) -> None:
    print(f"{step_id}: {item!r}", flush=True)


@operator
def inspect(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X], None] = _default_inspector,
) -> Stream[X]:
    """Call `inspector(step_id, item)` on each item and pass the items on.

    `step_id` is this step's qualified id; the default prints
    `"{step_id}: {item!r}"`.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("inspect_eg")
    nums = op.input("inp", flow, TestingSource([1, 2]))
    seen = []
    op.inspect("peek", nums, lambda step_id, x: seen.append((step_id, x)))
    run_main(flow)
    assert seen == [("inspect_eg.peek", 1), ("inspect_eg.peek", 2)]
    ```
    """

    def shim_inspector(_fq_step_id: str, item: X, _epoch: int, _worker_idx: int) -> None:
        inspector(step_id, item)

    return inspect_debug("inspect_debug", up, shim_inspector)


@dataclass
class _RaisePartition(StatelessSinkPartition[Any]):
    step_id: str

    @override
    def write_batch(self, items: List[Any]) -> None:
        for item in items:
            msg = f"`raises` step {self.step_id!r} got an item: {item!r}"
            raise RuntimeError(msg)


@dataclass
class _RaiseSink(DynamicSink[Any]):
    """A sink that fails the run on the first item it is given."""

    step_id: str

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _RaisePartition:
        return _RaisePartition(self.step_id)


@operator
def raises(step_id: str, up: Stream[Any]) -> None:
    """Fail the run with a `RuntimeError` if any item reaches this step.

    Useful to assert that a stream (e.g. a stream of errors) stays empty.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("raises_eg")
    nums = op.input("inp", flow, TestingSource([1, -2]))
    op.raises("no_negatives", op.filter("negatives", nums, lambda x: x < 0))
    try:
        run_main(flow)
    except Exception as ex:
        assert "no_negatives" in str(ex)
    else:
        raise AssertionError("a negative number went through")
    ```
    """
    output("output", up, _RaiseSink(step_id))
