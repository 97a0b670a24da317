"""Draw a flow's structure: Mermaid, PlantUML, JSON, and Spark's physical plan.

The first three describe the logical graph exactly as Bytewax 0.21.1's
`bytewax.visualize` does, so a flow gives the same text on both engines.
Every step's ports are given ids of the form `<step id>.<port name>`, and
each input port is linked to the port that produced its stream *at the same
nesting level*: inside a step, a stream that came in through the step's own
input port is credited to that port, not to the step outside that made it.

`to_physical` is a flowspark addition (`flowspark.engine.plan.physical_plan`, imported
here): the plan the runner makes, as Spark runs it.

From the command line:

    python -m flowspark.visualize my_module:flow [-o mermaid|plantuml|json] [-r] [-p [--list-parts]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import ChainMap
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, get_args

from flowspark.dataflow import Dataflow, Operator
from flowspark.engine.plan.physical_plan import (
    PhysicalInput,
    PhysicalOutput,
    PhysicalPlan,
    PhysicalRun,
    PhysicalTap,
    physical_plan,
    to_physical,
)

__all__ = [
    "PhysicalInput",
    "PhysicalOutput",
    "PhysicalPlan",
    "PhysicalRun",
    "PhysicalTap",
    "RenderedDataflow",
    "RenderedOperator",
    "RenderedPort",
    "physical_plan",
    "to_json",
    "to_mermaid",
    "to_physical",
    "to_plantuml",
    "to_rendered",
]


# ---------------------------------------------------------------------------
# The rendered model: ports resolved to ids unique in the whole flow.


@dataclass(frozen=True)
class RenderedPort:
    """One port of a step, with the ports (and streams) that feed it.

    `from_port_ids` and `from_stream_ids` run in parallel: the i-th stream
    arrives from the i-th port.  Output ports of core steps have both empty;
    output ports of composite steps name the inner port the stream leaves.
    """

    port_name: str
    port_id: str
    from_port_ids: List[str]
    from_stream_ids: List[str]


@dataclass(frozen=True)
class RenderedOperator:
    """One step with its ports linked up, and its substeps rendered likewise."""

    op_type: str
    step_name: str
    step_id: str
    inp_ports: List[RenderedPort]
    out_ports: List[RenderedPort]
    substeps: List["RenderedOperator"]


@dataclass(frozen=True)
class RenderedDataflow:
    """A whole flow with every port link resolved."""

    flow_id: str
    substeps: List[RenderedOperator]


_PortOf = ChainMap[str, str]
"""Stream id -> id of the port it is seen to come from at the current level."""


def _render_step(step: Operator, port_of: _PortOf) -> RenderedOperator:
    inputs = [
        RenderedPort(
            name,
            f"{step.step_id}.{name}",
            [port_of[stream_id] for stream_id in stream_ids],
            list(stream_ids),
        )
        for name, stream_ids in step.ups.items()
    ]
    # Later steps at this level see our output streams as coming from us.
    port_of.update({stream_id: f"{step.step_id}.{name}" for name, stream_id in step.downs.items()})
    # Inside this step, streams that entered through an input port are
    # credited to that port.  A child map shadows without touching outside.
    inner = port_of.new_child({sid: port.port_id for port in inputs for sid in port.from_stream_ids})
    substeps = [_render_step(sub, inner) for sub in step.substeps]
    outputs = [
        RenderedPort(
            name,
            f"{step.step_id}.{name}",
            [inner[stream_id]] if substeps else [],
            [stream_id] if substeps else [],
        )
        for name, stream_id in step.downs.items()
    ]
    return RenderedOperator(step.op_type, step.step_name, step.step_id, inputs, outputs, substeps)


def to_rendered(flow: Dataflow) -> RenderedDataflow:
    """Resolve every port link of `flow`.

    To draw an edge, connect each port id in a port's `from_port_ids` to
    that port's `port_id`.
    """
    port_of: _PortOf = ChainMap()
    return RenderedDataflow(flow.flow_id, [_render_step(step, port_of) for step in flow.substeps])


# ---------------------------------------------------------------------------
# JSON


def _port_json(port: RenderedPort) -> Dict[str, Any]:
    return {
        "typ": "RenderedPort",
        "port_name": port.port_name,
        "port_id": port.port_id,
        "from_port_ids": port.from_port_ids,
        "from_stream_ids": port.from_stream_ids,
    }


def _step_json(step: RenderedOperator) -> Dict[str, Any]:
    return {
        "typ": "RenderedOperator",
        "op_type": step.op_type,
        "step_name": step.step_name,
        "step_id": step.step_id,
        "inp_ports": [_port_json(p) for p in step.inp_ports],
        "out_ports": [_port_json(p) for p in step.out_ports],
        "substeps": [_step_json(s) for s in step.substeps],
    }


def to_json(flow: Dataflow) -> str:
    """The rendered flow as indented JSON, every nesting level included.

    Each object carries a `typ` field naming its kind (`RenderedDataflow`,
    `RenderedOperator`, `RenderedPort`); the format is Bytewax's own and
    meant for debugging and tooling.
    """
    rendered = to_rendered(flow)
    doc = {
        "typ": "RenderedDataflow",
        "flow_id": rendered.flow_id,
        "substeps": [_step_json(s) for s in rendered.substeps],
    }
    return json.dumps(doc, indent=2)


# ---------------------------------------------------------------------------
# PlantUML


def _plantuml_step(step: RenderedOperator, recursive: bool) -> List[str]:
    body: List[str] = []
    body.extend(f"portin {port.port_id}" for port in step.inp_ports)
    body.extend(f"portout {port.port_id}" for port in step.out_ports)
    for port in step.inp_ports:
        for src, stream_id in zip(port.from_port_ids, port.from_stream_ids):
            body.append(f"{src} --> {port.port_id} : {stream_id}")
    if recursive:
        for sub in step.substeps:
            body.extend(_plantuml_step(sub, recursive))
        for port in step.out_ports:
            for src, stream_id in zip(port.from_port_ids, port.from_stream_ids):
                body.append(f"{src} --> {port.port_id} : {stream_id}")
    return [
        f"component {step.step_id} [",
        f"    {step.step_id} ({step.op_type})",
        "]",
        f"component {step.step_id} {{",
        *("    " + line for line in body),
        "}",
    ]


def to_plantuml(flow: Dataflow, recursive: bool = False) -> str:
    """A PlantUML component diagram of the flow (https://plantuml.com/).

    Each step is a component with its ports; with `recursive`, substeps are
    drawn nested inside the step that contains them.
    """
    lines = ["@startuml"]
    for step in to_rendered(flow).substeps:
        lines.extend(_plantuml_step(step, recursive))
    lines.append("@enduml")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Mermaid


def to_mermaid(flow: Dataflow) -> str:
    """A Mermaid flowchart of the flow's top-level steps (https://mermaid.js.org/).

    Substeps are not drawn; each edge is labelled `out port → in port`.
    """
    top = to_rendered(flow).substeps
    port_name: Dict[str, str] = {}
    owner: Dict[str, str] = {}
    for step in top:
        for port in step.inp_ports + step.out_ports:
            port_name[port.port_id] = port.port_name
            owner[port.port_id] = step.step_id
    lines = ["flowchart TD", f'subgraph "{flow.flow_id} (Dataflow)"']
    for step in top:
        lines.append(f'{step.step_id}["{step.step_name} ({step.op_type})"]')
        for port in step.inp_ports:
            for src in port.from_port_ids:
                lines.append(f'{owner[src]} -- "{port_name[src]} \u2192 {port.port_name}" --> {step.step_id}')
    lines.append("end")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Command line

_Formats = Literal["json", "mermaid", "plantuml"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.visualize",
        description=(
            "Print a diagram of a dataflow's structure; pipe it into a file and "
            "render it with Mermaid (https://mermaid.js.org/) or PlantUML "
            "(https://plantuml.com/). The JSON format is for debugging. With "
            "-p, print which steps run in which stage of the Spark query instead."
        ),
    )
    parser.add_argument(
        "import_str",
        help="the flow as <module>[:<variable or factory call>], e.g. src.flow, "
        "src.flow:flow or src.flow:get_flow('arg')",
    )
    parser.add_argument(
        "-o",
        "--output-format",
        choices=get_args(_Formats),
        default="mermaid",
        help="diagram format; default mermaid",
    )
    parser.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="draw nested steps too (PlantUML only; Mermaid never does, JSON always does)",
    )
    parser.add_argument(
        "-p",
        "--physical",
        action="store_true",
        help="print the runtime's plan (stages, shuffles and their groups, outputs and their sinks) instead of a diagram",
    )
    parser.add_argument(
        "--list-parts",
        action="store_true",
        help="with -p, list each partitioned source's partitions (this calls list_parts, "
        "which may reach an external system such as Kafka)",
    )
    return parser


def render(
    flow: Dataflow,
    output_format: str = "mermaid",
    recursive: bool = False,
    physical: bool = False,
    list_parts: bool = False,
) -> str:
    """The text the command line prints for these options."""
    if physical:
        return to_physical(flow, list_parts=list_parts)
    if output_format == "json":
        return to_json(flow)
    if output_format == "mermaid":
        return to_mermaid(flow)
    if output_format == "plantuml":
        return to_plantuml(flow, recursive)
    msg = f"unknown visualization type {output_format!r}"
    raise ValueError(msg)


def cli_main(argv: Optional[List[str]] = None) -> int:
    """Parse the command line, print the requested view of the flow, return the exit code."""
    from flowspark._locate import locate_flow

    args = _parser().parse_args(argv)
    flow = locate_flow(args.import_str)
    try:
        print(render(flow, args.output_format, args.recursive, args.physical, args.list_parts), flush=True)
    except BrokenPipeError:
        # The reader (`| head`, say) left early; keep Python's exit-time
        # flush from complaining about the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
