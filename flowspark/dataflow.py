"""The dataflow graph: `Dataflow`, `Stream` and the `operator` decorator.

Building a flow only records steps; nothing runs until the flow is handed to
a runner.  Every operator is a function decorated with `operator`: calling it
opens a nested scope named after its step id, runs the function (which calls
other operators), and records one `Operator` whose `substeps` are the steps
it called.  The eight *core* operators record their configuration instead of
sub-steps, and they are the only steps the planner ever looks at.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Optional,
    Tuple,
    TypeVar,
    cast,
    overload,
)

from typing_extensions import Concatenate, ParamSpec, Self, TypeAlias

from flowspark._step_config import CoreConfig

__all__ = [
    "Dataflow",
    "DataflowId",
    "KeyedStream",
    "Operator",
    "Stream",
    "f_repr",
    "operator",
]

X_co = TypeVar("X_co", covariant=True)
"""Type of the items flowing in a stream."""

P = ParamSpec("P")
R = TypeVar("R")


def f_repr(func: Callable[..., Any]) -> str:
    """Describe a function by its qualified name and first line, for error messages."""
    name = getattr(func, "__qualname__", repr(func))
    module = getattr(func, "__module__", None)
    code = getattr(func, "__code__", None)
    where = f" line {code.co_firstlineno}" if code is not None else ""
    qual = f"{module}.{name}" if module else name
    return f"<function {qual!r}{where}>"


@dataclass(frozen=True)
class DataflowId:
    """A reference to the flow a step belongs to, passed to `input`."""

    flow_id: str


@dataclass
class Operator:
    """One recorded step.

    `step_name` is the id the user gave, `step_id` the qualified one
    (`flow.outer.inner`).  `ups` and `downs` map port names to the ids of the
    streams that enter and leave the step.  Core steps carry their
    configuration in `config` and have no substeps.
    """

    step_name: str
    step_id: str
    substeps: List["Operator"] = field(default_factory=list)
    op_type: str = ""
    ups: Dict[str, List[str]] = field(default_factory=dict)
    downs: Dict[str, str] = field(default_factory=dict)
    config: Optional[CoreConfig] = None
    """What a core step runs (`_step_config`); None for a step made of substeps."""

    @property
    def core(self) -> bool:
        """Whether this is one of the eight core steps, the only ones the planner looks at."""
        return self.config is not None


@dataclass(frozen=True)
class _Scope:
    """Where new steps are recorded: the flow and the parent step's id."""

    flow: "Dataflow"
    parent_id: str
    substeps: List[Operator]


@dataclass(frozen=True)
class Stream(Generic[X_co]):
    """A handle on the items one step emits, used to wire the next step."""

    stream_id: str
    _scope: _Scope = field(repr=False, compare=False)

    def flow(self) -> "Dataflow":
        """The flow this stream belongs to."""
        return self._scope.flow

    def then(
        self,
        op_fn: Callable[Concatenate[str, Self, P], R],
        step_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Chain an operator: `s.then(op.map, "x", f)` is `op.map("x", s, f)`."""
        return op_fn(step_id, self, *args, **kwargs)


V = TypeVar("V")
KeyedStream: TypeAlias = Stream[Tuple[str, V]]
"""A stream of `(key, value)` 2-tuples, the input of every stateful step."""


@dataclass(frozen=True)
class Dataflow:
    """The top level of a flow: a named, ordered list of steps."""

    flow_id: str
    substeps: List[Operator] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.flow_id, str):
            msg = "'flow_id' must be a `str`"
            raise TypeError(msg)
        if "." in self.flow_id:
            msg = "flow ID can't contain a period `.`"
            raise ValueError(msg)

    def _scope(self) -> _Scope:
        return _Scope(self, self.flow_id, self.substeps)

    def core_steps(self) -> List[Operator]:
        """Every core step of the flow, in the order the steps were added."""
        found: List[Operator] = []

        def walk(steps: List[Operator]) -> None:
            for step in steps:
                if step.core:
                    found.append(step)
                else:
                    walk(step.substeps)

        walk(self.substeps)
        return found


_building: List[Tuple[_Scope, Operator]] = []
"""The steps being built, innermost last, with the scope their substeps go to."""


def _check_step_id(step_id: Any) -> None:
    if not isinstance(step_id, str):
        msg = "'step_id' must be a `str`"
        raise TypeError(msg)
    if "." in step_id:
        msg = "'step_id' can't contain any periods '.'"
        raise ValueError(msg)


def _arg_values(bound: inspect.BoundArguments, name: str) -> List[Any]:
    param = bound.signature.parameters[name]
    value = bound.arguments[name]
    if param.kind == param.VAR_POSITIONAL:
        return list(value)
    if param.kind == param.VAR_KEYWORD:
        return list(value.values())
    return [value]


def _find_scope(op_name: str, bound: inspect.BoundArguments) -> _Scope:
    """The scope of the new step: the one its `Stream` and `Dataflow` arguments share.

    A `Dataflow` stands for the enclosing builder's scope (or the flow's
    top level).  As in Bytewax, streams nested in other values are ignored.
    """
    scopes: List[_Scope] = []
    for name in bound.arguments:
        for item in _arg_values(bound, name):
            if isinstance(item, Stream):
                scopes.append(item._scope)
            elif isinstance(item, Dataflow):
                scopes.append(_building[-1][0] if _building else item._scope())
    if not scopes:
        msg = (
            f"inconsistent stream scoping: step {bound.arguments['step_id']!r} "
            f"(operator {op_name!r}) got no `Dataflow` or `Stream` argument; "
            "streams inside a list, tuple or `Optional` argument don't count, "
            "so pass the flow or each stream as its own argument"
        )
        raise AssertionError(msg)
    first = scopes[0]
    for other in scopes[1:]:
        if other.parent_id != first.parent_id or other.flow is not first.flow:
            msg = (
                "inconsistent stream scoping: streams of different flows or "
                f"nesting levels were passed to operator {op_name!r} "
                f"(found {first.parent_id!r} and {other.parent_id!r}); "
                "use streams of the same flow and level"
            )
            raise AssertionError(msg)
    return first


def _is_stream_annotation(annotation: Any) -> bool:
    """Whether a parameter is declared a stream: `Stream[X]` or `KeyedStream[V]` itself.

    As in Bytewax, only the outermost type counts: an `Optional[Stream[X]]`
    or `List[Stream[X]]` parameter takes any value.  Annotations may be
    strings (modules with `from __future__ import annotations`).
    """
    if isinstance(annotation, str):
        outer = annotation.strip("'\"").split("[", 1)[0].rsplit(".", 1)[-1].strip()
        return outer in ("Stream", "KeyedStream")
    origin = typing.get_origin(annotation) or annotation
    return inspect.isclass(origin) and issubclass(origin, Stream)


def _check_stream_args(sig: inspect.Signature, bound: inspect.BoundArguments) -> None:
    """Arguments of parameters declared as streams must be streams."""
    for name in bound.arguments:
        if not _is_stream_annotation(sig.parameters[name].annotation):
            continue
        for item in _arg_values(bound, name):
            if not isinstance(item, Stream):
                msg = (
                    f"{name!r} argument must be a `Stream`; got a {type(item)!r} "
                    "instead; did you forget to unpack the result of an operator "
                    "that returns multiple streams?"
                )
                raise TypeError(msg)


def _rescope(value: Any, scope: _Scope) -> Any:
    """The same streams (one, a tuple, a dict or a dataclass of them) in `scope`."""
    if isinstance(value, Stream):
        return Stream(value.stream_id, scope)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_rescope(v, scope) for v in value)
    if isinstance(value, dict):
        return {k: _rescope(v, scope) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _rescope(getattr(value, f.name), scope)
            for f in dataclasses.fields(value)
            if isinstance(getattr(value, f.name), Stream)
        }
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _stream_ports(bound: inspect.BoundArguments) -> Dict[str, List[str]]:
    ports: Dict[str, List[str]] = {}
    for name in bound.arguments:
        ids = [v.stream_id for v in _arg_values(bound, name) if isinstance(v, Stream)]
        if ids:
            ports[name] = ids
    return ports


def _output_ports(result: Any) -> Dict[str, str]:
    """The streams an operator returned, by port name (a private field's name without its `_`)."""
    if isinstance(result, Stream):
        return {"down": result.stream_id}
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {
            f.name.lstrip("_"): getattr(result, f.name).stream_id
            for f in dataclasses.fields(result)
            if isinstance(getattr(result, f.name), Stream)
        }
    return {}


@overload
def operator(builder: Callable[P, R]) -> Callable[P, R]: ...


@overload
def operator(*, _core: bool = False) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def operator(builder: Optional[Callable[P, R]] = None, *, _core: bool = False) -> Any:
    """Turn a function that wires other operators into an operator: `@operator` or, as Bytewax also takes,
    `@operator()`.

    The function's first parameter must be `step_id`.  Each call records one
    step, nested under the step (or flow) of its upstream streams, with the
    steps the function adds as its substeps.  As in Bytewax, the function
    receives the qualified id (`flow.outer.step`), ready for messages.
    `_core` is Bytewax's mark of its own core operators; flowspark's planner
    knows only its own, so an operator defined here can't be one.

        >>> @operator()
        ... def doubled(step_id: str, up: Stream[int]) -> Stream[int]:
        ...     import flowspark.operators as op
        ...
        ...     return op.map("double", up, lambda x: x * 2)
    """
    if _core:
        msg = "a user-defined operator can't be a core one: flowspark's planner knows only its own core operators"
        raise ValueError(msg)
    if builder is None:
        return _operator
    return _operator(builder)


def _operator(builder: Callable[P, R]) -> Callable[P, R]:
    """`operator`'s work: the operator that records a step around each call of `builder`."""
    sig = inspect.signature(builder)
    params = list(sig.parameters)
    if not params or params[0] != "step_id":
        msg = f"builder function {f_repr(builder)} requires a 'step_id' parameter"
        raise TypeError(msg)
    op_name = builder.__name__

    @functools.wraps(builder)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as ex:
            msg = f"operator {op_name!r} called incorrectly; see cause above"
            raise TypeError(msg) from ex
        _check_step_id(bound.arguments["step_id"])
        _check_stream_args(sig, bound)
        scope = _find_scope(op_name, bound)
        step_name = bound.arguments["step_id"]
        step_id = f"{scope.parent_id}.{step_name}"
        if any(s.step_id == step_id for s in scope.substeps):
            msg = f"step {step_id!r} already exists; do you have two steps with the same ID?"
            raise ValueError(msg)
        step = Operator(step_name, step_id, op_type=op_name, ups=_stream_ports(bound))
        inner = _Scope(scope.flow, step_id, step.substeps)
        bound.arguments["step_id"] = step_id
        inner_args = [_rescope(a, inner) for a in bound.args]
        inner_kwargs = {k: _rescope(v, inner) for k, v in bound.kwargs.items()}
        _building.append((inner, step))
        try:
            result = builder(*inner_args, **inner_kwargs)
        finally:
            _building.pop()
        result = _rescope(result, scope)
        step.downs = _output_ports(result)
        scope.substeps.append(step)
        return result

    return cast(Callable[P, R], call)


def core_step(config: CoreConfig) -> List[Stream[Any]]:
    """Mark the operator being built as a core step running `config`; return its outputs.

    Only the core operators in `flowspark.operators` call this, from inside
    their builder, with the streams they write named by `port_ids`.
    """
    scope, step = _building[-1]
    step.config = config
    return [Stream(stream_id, scope) for stream_id in config.downs]
