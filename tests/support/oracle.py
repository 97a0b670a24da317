"""Run the same flow on Bytewax (the oracle) and on flowspark.

A test writes one `build(engine)` function against the engine namespace and
gets both engines' outputs back:

    def build(e):
        flow = e.Dataflow("df")
        out = []
        nums = e.op.input("inp", flow, e.TestingSource([1, 2]))
        e.op.output("out", e.op.map("m", nums, str), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)

For unit tests without a run, `core_steps`, `core_arg` and `last_core_arg`
reach the core steps an operator expands to on either engine, and `drive`
feeds a `stateful_batch` builder the way a runtime would.

Both packages have the same module layout, so an engine is just the package
name; its modules are imported the first time a test touches them (the
windowing module, for instance, only when `e.win` is used).
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import cloudpickle

ENGINES = ("bytewax", "flowspark")

_MEMBERS: Dict[str, Tuple[str, str]] = {
    "Dataflow": ("dataflow", "Dataflow"),
    "TestingSource": ("testing", "TestingSource"),
    "TestingSink": ("testing", "TestingSink"),
    "run_main": ("testing", "run_main"),
    "cli_main": ("run", "cli_main"),
    "BytewaxRuntimeError": ("errors", "BytewaxRuntimeError"),
}
"""Names taken from a module of the engine: name -> (module, attribute)."""

_MODULES: Dict[str, str] = {
    "op": "operators",
    "win": "operators.windowing",
    "helpers": "operators.helpers",
    "inputs": "inputs",
    "outputs": "outputs",
    "files": "connectors.files",
}
"""Modules exposed whole: name -> module."""


class Engine:
    """One engine's API: `e.Dataflow`, `e.op`, `e.win`, `e.TestingSource`, ..."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        if attr in _MODULES:
            return importlib.import_module(f"{self.name}.{_MODULES[attr]}")
        if attr in _MEMBERS:
            module, member = _MEMBERS[attr]
            return getattr(importlib.import_module(f"{self.name}.{module}"), member)
        raise AttributeError(attr)

    def __repr__(self) -> str:
        return f"Engine({self.name!r})"


Outputs = Dict[str, List[Any]]
Build = Callable[[Engine], Tuple[Any, Outputs]]


def run_on(name: str, build: Build, **run_kwargs: Any) -> Outputs:
    """Build the flow for engine `name`, run it, return its outputs.

    It runs with `run_main`, or with `cli_main` when `workers_per_process`
    is among the run's arguments.
    """
    engine = Engine(name)
    flow, outputs = build(engine)
    if "workers_per_process" in run_kwargs:
        engine.cli_main(flow, **run_kwargs)
    else:
        engine.run_main(flow, **run_kwargs)
    return outputs


def run_both(build: Build, **run_kwargs: Any) -> Tuple[Outputs, Outputs]:
    """The outputs of the flow on Bytewax and on flowspark, in that order."""
    bytewax_out = run_on("bytewax", build, **run_kwargs)
    flowspark_out = run_on("flowspark", build, **run_kwargs)
    return bytewax_out, flowspark_out


def by_key(items: Iterable[Tuple[str, Any]]) -> Dict[str, List[Any]]:
    """Group `(key, value)` items per key, keeping each key's order.

    Engines agree on the order within a key but not across keys, so this is
    how keyed outputs are compared.
    """
    grouped: Dict[str, List[Any]] = defaultdict(list)
    for key, value in items:
        grouped[key].append(value)
    return dict(grouped)


def assert_same_by_key(bytewax_out: Outputs, flowspark_out: Outputs) -> None:
    """Every output holds the same values per key on both engines."""
    assert flowspark_out.keys() == bytewax_out.keys()
    for name, items in bytewax_out.items():
        assert by_key(flowspark_out[name]) == by_key(items), name


def cause_chain(ex: BaseException) -> List[BaseException]:
    """`ex` and its causes (or contexts), outermost first."""
    chain = [ex]
    while True:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            return chain
        chain.append(nxt)


def core_steps(flow: Any) -> List[Any]:
    """The core steps of a built flow (the steps without substeps), in order."""
    found: List[Any] = []

    def walk(steps: List[Any]) -> None:
        for step in steps:
            if step.substeps:
                walk(step.substeps)
            else:
                found.append(step)

    walk(flow.substeps)
    return found


def core_arg(flow: Any, step_id: str, name: str) -> Any:
    """Argument `name` (`mapper`, `builder`, `predicate`, ...) of core step `step_id`."""
    (step,) = [s for s in core_steps(flow) if s.step_id == step_id]
    config = getattr(step, "config", None)
    return getattr(config if config is not None else step, name)


Make = Callable[[Any, Any], Any]
"""Adds the operator under test to a flow: `make(op, up)`."""


def last_core_arg(engine: Engine, make: Make, name: str) -> Any:
    """Argument `name` of the last core step `make` adds to a one-input flow on `engine`."""
    flow = engine.Dataflow("df")
    make(engine.op, engine.op.input("inp", flow, engine.TestingSource([])))
    return core_arg(flow, core_steps(flow)[-1].step_id, name)


Event = Union[List[Any], str]
"""A batch of one key's values, or `"notify"` / `"eof"`."""


def drive(builder: Callable[[Any], Any], events: Sequence[Event], *, rebuild: bool = False) -> List[Any]:
    """Feed one key's events to the logics `builder` makes; return what they emit.

    A discarded logic is dropped and the next batch builds a fresh one with
    `None`; `"notify"` and `"eof"` go to the live logic, if any.  With
    `rebuild`, every retained logic is snapshotted, pickled and rebuilt
    from the copy after each call, as flowspark's runtime may do.
    """
    logic: Optional[Any] = None
    emitted: List[Any] = []
    for event in events:
        if isinstance(event, list):
            logic = logic if logic is not None else builder(None)
            ws, discard = logic.on_batch(event)
        elif logic is None:
            continue
        elif event == "notify":
            ws, discard = logic.on_notify()
        else:
            ws, discard = logic.on_eof()
        emitted.extend(ws)
        if discard:
            logic = None
        elif rebuild:
            logic = builder(cloudpickle.loads(cloudpickle.dumps(logic.snapshot())))
    return emitted
