"""Stateful operators: logics driven directly, then whole flows, against Bytewax.

The unit tests take the `stateful_batch` builder an operator expands to on
each engine and feed it the same events.  flowspark's logics are also driven
with a snapshot-pickle-rebuild after every call, since its runtime may
rebuild a logic from its snapshot at any micro-batch.
"""

from __future__ import annotations

import operator
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Optional, Tuple

import pytest
from support.oracle import (
    ENGINES,
    Engine,
    Event,
    Make,
    assert_same_by_key,
    cause_chain,
    core_arg,
    core_steps,
    drive,
    last_core_arg,
    run_both,
    run_on,
)

from flowspark.operators import StatefulLogic


def _assert_drives_like_bytewax(make: Make, events: List[Event], expected: List[Any]) -> None:
    bytewax_builder = last_core_arg(Engine("bytewax"), make, "builder")
    flowspark_builder = last_core_arg(Engine("flowspark"), make, "builder")
    assert drive(bytewax_builder, events) == expected
    assert drive(flowspark_builder, events) == expected
    assert drive(flowspark_builder, events, rebuild=True) == expected


def _running_sum(state: Optional[int], v: int) -> Tuple[Optional[int], int]:
    total = (state or 0) + v
    return (None if total > 10 else total, total)


def _echo_n_times(state: Optional[int], v: str) -> Tuple[Optional[int], List[str]]:
    n = (state or 0) + 1
    return (n, [v] * n)


def _max_logic(base: Any) -> Callable[[Optional[int]], Any]:
    """A `StatefulLogic` on `base` that emits new maxima and resets on negatives."""

    class MaxLogic(base):  # type: ignore[misc, valid-type]
        def __init__(self, best: Optional[int]) -> None:
            self.best = best

        def on_item(self, value: int) -> Tuple[List[Any], bool]:
            if value < 0:
                return (["reset"], base.DISCARD)
            if self.best is None or value > self.best:
                self.best = value
                return ([value], base.RETAIN)
            return ([], base.RETAIN)

        def on_eof(self) -> Tuple[List[Any], bool]:
            return ([("final", self.best)], base.DISCARD)

        def snapshot(self) -> Optional[int]:
            return self.best

    return MaxLogic


STATEFUL_CASES: List[Tuple[str, Make, List[Event], List[Any]]] = [
    (
        "stateful_map",
        lambda op, up: op.stateful_map("s", up, _running_sum),
        [[1, 2], [3], [8, 1], "eof"],
        [1, 3, 6, 14, 1],
    ),
    (
        "stateful_flat_map",
        lambda op, up: op.stateful_flat_map("s", up, _echo_n_times),
        [["a", "b"], ["c"], "eof"],
        ["a", "b", "b", "c", "c", "c"],
    ),
    (
        "stateful",
        lambda op, up: op.stateful("s", up, _max_logic(op.StatefulLogic)),
        [[3, 1, 5], [-1, 2], [1], "eof", [7]],
        [3, 5, "reset", 2, ("final", 2), 7],
    ),
    (
        "collect_max_size",
        lambda op, up: op.collect("s", up, timedelta(hours=1), 2),
        [[1, 2, 3], [4], [5], "eof"],
        [[1, 2], [3, 4], [5]],
    ),
    (
        "collect_notify",
        lambda op, up: op.collect("s", up, timedelta(hours=1), 5),
        [[1], "notify", [2, 3], "notify", "eof"],
        [[1], [2, 3]],
    ),
    (
        "fold_final",
        lambda op, up: op.fold_final("s", up, list, lambda acc, v: [*acc, v]),
        [[1, 2], [3], "eof"],
        [[1, 2, 3]],
    ),
    ("reduce_final", lambda op, up: op.reduce_final("s", up, operator.sub), [[10, 1], [2], "eof"], [7]),
    (
        "max_final_ties",
        lambda op, up: op.max_final("s", up, by=len),
        [["ab", "c"], ["xy", "abc", "xyz"], "eof"],
        ["abc"],
    ),
    ("min_final", lambda op, up: op.min_final("s", up, by=abs), [[-3, 2], [-2, 5], "eof"], [2]),
    ("count_final", lambda op, up: op.count_final("s", up, str), [[2], [1, 3], "eof"], [6]),
]


@pytest.mark.parametrize(
    ("make", "events", "expected"), [c[1:] for c in STATEFUL_CASES], ids=[c[0] for c in STATEFUL_CASES]
)
def test_logic_matches_bytewax(make: Make, events: List[Event], expected: List[Any]) -> None:
    _assert_drives_like_bytewax(make, events, expected)


def test_reduce_final_pre_reduces_each_batch_per_key() -> None:
    batch = [("a", 1), ("b", 10), ("a", 2), ("c", 0), ("b", 5)]
    for name in ENGINES:
        e = Engine(name)
        flow = e.Dataflow("df")
        e.op.reduce_final("r", e.op.input("inp", flow, e.TestingSource([])), operator.sub)
        pre = core_arg(flow, "df.r.pre_reduce", "mapper")
        assert list(pre(batch)) == [("a", -1), ("b", 5), ("c", 0)], name


def test_core_steps_match_bytewax() -> None:
    def build(e: Engine) -> Any:
        op = e.op
        flow = e.Dataflow("df")
        up = op.input("inp", flow, e.TestingSource([]))
        op.stateful_map("sm", up, _running_sum)
        op.collect("c", up, timedelta(seconds=1), 3)
        op.count_final("cf", up, str)
        op.max_final("mx", up)
        op.min_final("mn", up)
        op.fold_final("ff", up, list, operator.add)
        return flow

    ids = [[s.step_id for s in core_steps(build(Engine(n)))] for n in ENGINES]
    assert ids[1] == ids[0]
    assert "df.sm.stateful_flat_map.stateful.stateful_batch" in ids[0]
    assert "df.cf.sum.fold_final.stateful.stateful_batch" in ids[0]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda op, up: op.stateful_map("s", up, lambda s, v: v), "`(updated_state, emit_value)`"),
        (lambda op, up: op.stateful_flat_map("s", up, lambda s, v: None), "`(updated_state, emit_values)`"),
    ],
    ids=["stateful_map", "stateful_flat_map"],
)
def test_mapper_return_errors_match_bytewax(make: Make, message: str) -> None:
    errors = []
    for name in ENGINES:
        logic = last_core_arg(Engine(name), make, "builder")(None)
        with pytest.raises(TypeError) as info:
            logic.on_batch([1])
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert f"in step 'df.s' must be a 2-tuple of {message}; got a <class " in errors[0]


def test_collect_times_out_after_the_last_item() -> None:
    builder = last_core_arg(
        Engine("flowspark"), lambda op, up: op.collect("s", up, timedelta(seconds=30), 5), "builder"
    )
    logic = builder(None)
    assert logic.notify_at() is None
    before = datetime.now(tz=timezone.utc)
    assert logic.on_batch(["x"]) == ([], False)
    at = logic.notify_at()
    assert before + timedelta(seconds=30) <= at <= datetime.now(tz=timezone.utc) + timedelta(seconds=30)
    rebuilt = builder(logic.snapshot())
    assert rebuilt.notify_at() == at
    assert rebuilt.on_notify() == ((["x"],), True)


def test_stateful_logic_defaults() -> None:
    class Nothing(StatefulLogic[int, int, None]):
        def on_item(self, value: int) -> Tuple[List[int], bool]:
            return ([], self.RETAIN)

        def snapshot(self) -> None:
            return None

    logic = Nothing()
    assert (StatefulLogic.RETAIN, StatefulLogic.DISCARD) == (False, True)
    assert logic.on_notify() == ((), False)
    assert logic.on_eof() == ((), False)
    assert logic.notify_at() is None


EVENTS = [("a", 1), ("b", 5), ("a", 3), ("c", 2), ("b", -1), ("a", 7), ("c", 2), ("a", -2), ("b", 4), ("a", 9)]


def _stateful_flow(e: Engine) -> Any:
    op = e.op
    flow = e.Dataflow("df")
    names = ("running", "resets", "echo", "custom", "count", "fold", "sum", "max", "min", "collect")
    out: dict[str, List[Any]] = {n: [] for n in names}

    def sink(name: str, stream: Any) -> None:
        op.output(f"out_{name}", stream, e.TestingSink(out[name]))

    kv = op.input("inp", flow, e.TestingSource(EVENTS, batch_size=3))
    sink("running", op.stateful_map("running", kv, lambda s, v: ((s or 0) + v, (s or 0) + v)))
    sink(
        "resets", op.stateful_map("resets", kv, lambda s, v: (None if (s or 0) + v > 5 else (s or 0) + v, (s or 0) + v))
    )
    sink("echo", op.stateful_flat_map("echo", kv, lambda s, v: ((s or 0) + 1, [v] * ((s or 0) + 1))))
    sink("custom", op.stateful("custom", kv, _max_logic(op.StatefulLogic)))
    sink("count", op.count_final("count", kv, lambda k_v: k_v[0]))
    sink("fold", op.fold_final("fold", kv, list, lambda acc, v: [*acc, v]))
    sink("sum", op.reduce_final("sum", kv, lambda a, b: a + b))
    sink("max", op.max_final("max", kv))
    sink("min", op.min_final("min", kv, by=abs))
    sink("collect", op.collect("collect", kv, timedelta(hours=1), max_size=2))
    return flow, out


@pytest.mark.quick
def test_stateful_flow_matches_bytewax() -> None:
    bytewax_out, flowspark_out = run_both(_stateful_flow)
    assert bytewax_out["fold"] == [("a", [1, 3, 7, -2, 9]), ("b", [5, -1, 4]), ("c", [2, 2])]
    assert bytewax_out["collect"] == [
        ("a", [1, 3]),
        ("b", [5, -1]),
        ("a", [7, -2]),
        ("c", [2, 2]),
        ("a", [9]),
        ("b", [4]),
    ]
    assert_same_by_key(bytewax_out, flowspark_out)


def _collect_timeout_flow(e: Engine) -> Any:
    op = e.op
    flow = e.Dataflow("df")
    out: List[Any] = []
    items = [("a", 1), ("a", 2), e.TestingSource.PAUSE(timedelta(seconds=6)), ("a", 3), ("b", 1)]
    kv = op.input("inp", flow, e.TestingSource(items))
    op.output("out", op.collect("collect", kv, timedelta(seconds=0.2), max_size=10), e.TestingSink(out))
    return flow, {"out": out}


def test_collect_timeout_matches_bytewax() -> None:
    """Not in the quick subset: the pause must outlast the micro-batch under way when it starts, or the timeout fires
    after the items read with the next one; the first micro-batch of a process's first streaming run (Spark's Python
    workers starting), or one on a loaded machine, took more than 2 s."""
    bytewax_out, flowspark_out = run_both(_collect_timeout_flow)
    assert sorted(bytewax_out["out"]) == [("a", [1, 2]), ("a", [3]), ("b", [1])]
    assert_same_by_key(bytewax_out, flowspark_out)


def _bad_stateful_map_flow(e: Engine) -> Any:
    flow = e.Dataflow("df")
    kv = e.op.input("inp", flow, e.TestingSource([("a", 1)]))
    e.op.output("out", e.op.stateful_map("sm", kv, lambda s, v: v), e.TestingSink([]))
    return flow, {}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.quick
def test_stateful_map_bad_return_aborts_the_run(engine: str) -> None:
    with pytest.raises(Engine(engine).BytewaxRuntimeError) as info:
        run_on(engine, _bad_stateful_map_flow)
    message = "in step 'df.sm' must be a 2-tuple of `(updated_state, emit_value)`; got a <class 'int'> instead"
    assert [ex for ex in cause_chain(info.value) if type(ex) is TypeError and message in str(ex)]


@pytest.mark.parametrize(
    ("mapper", "expected"),
    [
        (lambda seen, v: ((seen or []) + [v],) * 2, [[1], [1, 2], [1, 2, 3]]),
        (lambda seen, v: ((*(seen or ()), v),) * 2, [(1,), (1, 2), (1, 2, 3)]),
        (lambda seen, v: ((seen or 0) + v,) * 2, [1, 3, 6]),
    ],
    ids=["new-list", "tuple", "int"],
)
def test_a_keys_values_folded_at_once_emit_the_state_as_each_left_it(
    mapper: Callable[[Any, int], Any], expected: List[Any]
) -> None:
    fold = last_core_arg(Engine("flowspark"), lambda op, up: op.stateful_map("s", up, mapper), "builder")(
        None
    ).state_function()
    emits, _ = fold(None, [1, 2, 3])
    assert emits == expected


def test_a_state_changed_in_place_and_emitted_is_copied_for_each_value_folded_at_once() -> None:
    def grow(seen: Optional[List[int]], v: int) -> Tuple[List[int], List[int]]:
        seen = seen if seen is not None else []
        seen.append(v)
        return seen, seen

    fold = last_core_arg(Engine("flowspark"), lambda op, up: op.stateful_map("s", up, grow), "builder")(
        None
    ).state_function()
    emits, state = fold(None, [1, 2, 3])
    assert emits == [[1], [1, 2], [1, 2, 3]]
    assert emits[-1] is state
