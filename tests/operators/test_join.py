"""`join`: its state and logic driven directly, then a whole flow, against Bytewax."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List

import pytest
from support.oracle import ENGINES, Engine, Event, assert_same_by_key, core_arg, core_steps, drive, run_both

from flowspark.operators._join import JoinState


def _join_builder(engine: Engine, sides: int, **modes: str) -> Any:
    op = engine.op
    flow = engine.Dataflow("df")
    ups = [op.input(f"in{i}", flow, engine.TestingSource([])) for i in range(sides)]
    op.join("j", *ups, **modes)
    return core_arg(flow, "df.j.join.stateful_batch", "builder")


def test_join_state_insert_modes() -> None:
    state = JoinState.for_side_count(3)
    for value in ("a", "b"):
        state.insert(0, value, "first")
        state.insert(1, value, "last")
        state.insert(2, value, "product")
    assert state.seen == [["a"], ["b"], ["a", "b"]]
    assert state.all_set()
    assert state.astuples() == [("a", "b", "a"), ("a", "b", "b")]
    state.clear()
    assert not state.all_set()
    assert state.astuples() == [(None, None, None)]


JOIN_CASES = [
    (
        "complete_last",
        2,
        {},
        [[(0, "a1")], [(0, "a2"), (1, "b1")], [(1, "b2")], "eof"],
        [("a2", "b1")],
    ),
    (
        "complete_first",
        2,
        {"insert_mode": "first"},
        [[(0, "a1"), (0, "a2"), (1, "b1"), (1, "b2"), (0, "a3")]],
        [("a1", "b1"), ("a3", "b2")],
    ),
    (
        "complete_product",
        2,
        {"insert_mode": "product"},
        [[(0, "a1"), (0, "a2")], [(1, "b1")], [(1, "b2")]],
        [("a1", "b1"), ("a2", "b1")],
    ),
    (
        "running_last",
        2,
        {"emit_mode": "running"},
        [[(1, "b1")], [(0, "a1"), (1, "b2")], "eof"],
        [(None, "b1"), ("a1", "b1"), ("a1", "b2")],
    ),
    (
        "running_product",
        2,
        {"insert_mode": "product", "emit_mode": "running"},
        [[(0, "a1"), (1, "b1"), (0, "a2")]],
        [("a1", None), ("a1", "b1"), ("a1", "b1"), ("a2", "b1")],
    ),
    (
        "final_first",
        3,
        {"insert_mode": "first", "emit_mode": "final"},
        [[(2, "c1"), (0, "a1")], [(0, "a2")], "eof", [(1, "b1")]],
        [("a1", None, "c1")],
    ),
    (
        "final_product",
        3,
        {"insert_mode": "product", "emit_mode": "final"},
        [[(0, "a1"), (2, "c1"), (0, "a2")], [(2, "c2")], "eof"],
        [("a1", None, "c1"), ("a1", None, "c2"), ("a2", None, "c1"), ("a2", None, "c2")],
    ),
    ("one_side", 1, {"emit_mode": "complete"}, [[(0, 1), (0, 2)]], [(1,), (2,)]),
]


@pytest.mark.parametrize(
    ("sides", "modes", "events", "expected"), [c[1:] for c in JOIN_CASES], ids=[c[0] for c in JOIN_CASES]
)
def test_join_logic_matches_bytewax(
    sides: int, modes: dict[str, str], events: List[Event], expected: List[Any]
) -> None:
    bytewax_builder, flowspark_builder = (_join_builder(Engine(n), sides, **modes) for n in ENGINES)
    assert drive(bytewax_builder, events) == expected
    assert drive(flowspark_builder, events) == expected
    assert drive(flowspark_builder, events, rebuild=True) == expected


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ({"insert_mode": "all"}, "unknown join insert mode 'all'"),
        ({"emit_mode": "never"}, "unknown join emit mode 'never'"),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
def test_unknown_modes_fail_at_build_time(engine: str, modes: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _join_builder(Engine(engine), 2, **modes)


def test_core_steps_match_bytewax() -> None:
    flows = []
    for name in ENGINES:
        e = Engine(name)
        flow = e.Dataflow("df")
        ups = [e.op.input(f"in{i}", flow, e.TestingSource([])) for i in range(3)]
        e.op.join("j", *ups, emit_mode="running")
        flows.append([s.step_id for s in core_steps(flow)])
    assert flows[1] == flows[0]
    assert "df.j.add_names.label_2.map.flat_map_batch" in flows[0]
    assert "df.j.add_names.merge" in flows[0]


def _join_flow(e: Engine) -> Any:
    """Names arrive first; ages after a pause, so row order per key is fixed."""
    op = e.op
    flow = e.Dataflow("df")
    out: dict[str, List[Any]] = {n: [] for n in ("last", "first", "running", "product", "three")}

    def sink(name: str, stream: Any) -> None:
        op.output(f"out_{name}", stream, e.TestingSink(out[name]))

    names = op.input("names", flow, e.TestingSource([("1", "ann"), ("2", "bob"), ("3", "cy"), ("1", "ann2")]))
    ages_in = [e.TestingSource.PAUSE(timedelta(seconds=1)), ("1", 30), ("2", 40), ("4", 50)]
    ages = op.input("ages", flow, e.TestingSource(ages_in))
    sink("last", op.join("last", names, ages))
    sink("first", op.join("first", names, ages, insert_mode="first"))
    sink("running", op.join("running", names, ages, emit_mode="running"))
    sink("product", op.join("product", names, ages, insert_mode="product", emit_mode="final"))
    lengths = op.map_value("len", names, len)
    sink("three", op.join("three", names, ages, lengths, insert_mode="first", emit_mode="final"))
    return flow, out


def test_join_flow_matches_bytewax() -> None:
    bytewax_out, flowspark_out = run_both(_join_flow)
    assert sorted(bytewax_out["last"]) == [("1", ("ann2", 30)), ("2", ("bob", 40))]
    assert sorted(bytewax_out["product"]) == [
        ("1", ("ann", 30)),
        ("1", ("ann2", 30)),
        ("2", ("bob", 40)),
        ("3", ("cy", None)),
        ("4", (None, 50)),
    ]
    assert_same_by_key(bytewax_out, flowspark_out)
