"""Building a flow wrongly raises Bytewax's exception types, so user code catching them keeps working."""

import importlib
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Type

import pytest
from support.oracle import ENGINES, Engine

Misuse = Callable[[Engine, Any, Any, Any], Any]
"""Given an engine, a flow and two of its streams, do something wrong."""


def _custom_ops(e: Engine) -> Any:
    """Custom operators declared the ways Bytewax allows; one set per engine."""
    dataflow = importlib.import_module(f"{e.name}.dataflow")
    Stream = dataflow.Stream  # noqa: N806 - the class's name

    class Ops:
        @dataflow.operator
        def merge_all(step_id: str, ups: List[Stream[Any]]) -> Stream[Any]:  # type: ignore[valid-type]  # noqa: N805 - Bytewax allows operators in a class body
            return e.op.merge("m", *ups)

        @dataflow.operator
        def merge_in_flow(step_id: str, flow: Any, ups: List[Stream[Any]]) -> Stream[Any]:  # type: ignore[valid-type]  # noqa: N805 - Bytewax allows operators in a class body
            return e.op.merge("m", *ups)

        @dataflow.operator
        def maybe(step_id: str, up: Optional[Stream[Any]]) -> Stream[Any]:  # type: ignore[valid-type]  # noqa: N805 - Bytewax allows operators in a class body
            return e.op.map("m", up, str)

        @dataflow.operator
        def untyped(step_id, up):  # type: ignore[no-untyped-def]  # noqa: N805 - Bytewax allows operators in a class body
            return e.op.map("m", up, str)

    return Ops


def _windower(e: Engine) -> Any:
    return e.win.TumblingWindower(timedelta(seconds=1), datetime(2024, 1, 1, tzinfo=timezone.utc))


MISUSES: Dict[str, Misuse] = {
    "map of a list": lambda e, flow, a, b: e.op.map("m", [a, b], str),
    "merge of a list": lambda e, flow, a, b: e.op.merge("m", [a, b]),
    "join of a list": lambda e, flow, a, b: e.op.join("j", [a, b]),
    "output of a list": lambda e, flow, a, b: e.op.output("o", [a], e.TestingSink([])),
    "map of a tuple": lambda e, flow, a, b: e.op.map("m", (a,), str),
    "map of a flow": lambda e, flow, a, b: e.op.map("m", flow, str),
    "collect_window of a list": lambda e, flow, a, b: e.win.collect_window("c", [a], e.win.SystemClock(), _windower(e)),
    "join_window of a list": lambda e, flow, a, b: e.win.join_window("j", e.win.SystemClock(), _windower(e), [a, b]),
    "input without a flow": lambda e, flow, a, b: e.op.input("i", None, e.TestingSource([1])),
    "input with a list as flow": lambda e, flow, a, b: e.op.input("i", [a], e.TestingSource([1])),
    "merge of nothing": lambda e, flow, a, b: e.op.merge("m"),
    "merge across flows": lambda e, flow, a, b: e.op.merge(
        "m", a, e.op.input("i", e.Dataflow("other"), e.TestingSource([1]))
    ),
    "custom operator given a list": lambda e, flow, a, b: _custom_ops(e).merge_all("c", [a, b]),
    "custom Optional[Stream] given a list": lambda e, flow, a, b: _custom_ops(e).maybe("c", [a]),
    "untyped custom operator given a list": lambda e, flow, a, b: _custom_ops(e).untyped("c", [a]),
    "duplicate step id": lambda e, flow, a, b: e.op.map("x", a, str),
    "step id not a str": lambda e, flow, a, b: e.op.map(3, a, str),
    "step id with a period": lambda e, flow, a, b: e.op.map("a.b", a, str),
    "missing argument": lambda e, flow, a, b: e.op.map("m", a),
    "flow id with a period": lambda e, flow, a, b: e.Dataflow("a.b"),
}

FINE: Dict[str, Misuse] = {
    "custom List[Stream] beside a flow": lambda e, flow, a, b: _custom_ops(e).merge_in_flow("c", flow, [a, b]),
    "custom Optional[Stream] given a stream": lambda e, flow, a, b: _custom_ops(e).maybe("c", a),
    "untyped custom operator given a stream": lambda e, flow, a, b: _custom_ops(e).untyped("c", a),
}


def _outcome(engine: str, misuse: Misuse) -> Optional[Type[BaseException]]:
    e = Engine(engine)
    flow = e.Dataflow("df")
    a = e.op.input("a", flow, e.TestingSource([1]))
    b = e.op.input("b", flow, e.TestingSource([2]))
    e.op.map("x", a, str)
    try:
        misuse(e, flow, a, b)
    except Exception as ex:  # the type is what is compared
        return type(ex)
    return None


@pytest.mark.parametrize("name", sorted(MISUSES))
def test_misuse_raises_bytewax_exception_type(name: str) -> None:
    expected = _outcome("bytewax", MISUSES[name])
    assert expected is not None
    assert _outcome("flowspark", MISUSES[name]) is expected


@pytest.mark.parametrize("name", sorted(FINE))
def test_what_bytewax_accepts_builds(name: str) -> None:
    assert _outcome("bytewax", FINE[name]) is None
    assert _outcome("flowspark", FINE[name]) is None


@pytest.mark.parametrize("engine", ENGINES)
def test_list_of_streams_is_bytewax_assertion_error(engine: str) -> None:
    with pytest.raises(AssertionError, match="inconsistent stream scoping"):
        MISUSES["custom operator given a list"](Engine(engine), None, *_two_streams(engine))


def test_scoping_error_names_the_step() -> None:
    with pytest.raises(AssertionError, match="step 'gather'"):
        _custom_ops(Engine("flowspark")).merge_all("gather", list(_two_streams("flowspark")))


def _two_streams(engine: str) -> List[Any]:
    e = Engine(engine)
    flow = e.Dataflow("df")
    return [e.op.input("a", flow, e.TestingSource([1])), e.op.input("b", flow, e.TestingSource([2]))]
