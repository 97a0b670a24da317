"""The Python floor: a flow's own functions in a plain loop, with no engine.

    python -m benchmarks.floor FLOW

Reads `FLOWBENCH_INPUT` and writes to `FLOWBENCH_OUTPUT` the same lines the
dataflow writes, calling the same user functions (`parse`, `keyed`,
`event_time`, `add`, `count`, `fmt`, ...) once per item, in one process,
with the least bookkeeping that gives that output: a dict for the windows
and the counts, no batches, no pickling, no clocks.  Any engine that runs
these functions in CPython spends at least this much CPU, so on `n` cores
no engine's wall time for the flow can go below `fixed start cost + floor
CPU / n`; the benchmark table shows it beside the engines.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from typing import Callable, Dict, Iterable, Iterator, Tuple

from benchmarks.data import TIME_ORIGIN

os.environ.setdefault("FLOWBENCH_ENGINE", "bytewax")  # the flow modules build their (unused) dataflow on import


def _lines(path: str) -> Iterator[str]:
    with open(path) as f:
        for line in f:
            yield line.rstrip("\n")


def windowed(lines: Iterable[str]) -> Iterator[str]:
    from benchmarks.flows import windowed as flow

    length = timedelta(seconds=60)
    sums: Dict[Tuple[str, int], int] = {}
    for line in lines:
        key, item = flow.keyed(line)
        window_id = (flow.event_time(item) - flow.ALIGN) // length
        sums[key, window_id] = flow.add(sums.get((key, window_id), 0), item)
    for (key, window_id), total in sums.items():
        yield flow.fmt((key, (window_id, total)))[1]


def windowed_text(lines: Iterable[str]) -> Iterator[str]:
    from benchmarks.flows import windowed_text as flow

    length = timedelta(seconds=60)
    stats: Dict[Tuple[str, int], Tuple[int, int]] = {}
    for line in lines:
        key, item = flow.parsed(flow.split(line))
        window_id = (flow.event_time(item) - TIME_ORIGIN) // length
        found = stats.get((key, window_id))
        stats[key, window_id] = flow.add(flow.empty() if found is None else found, item)
    for (key, window_id), window_stats in stats.items():
        yield flow.fmt((key, (window_id, window_stats)))[1]


def stateless(lines: Iterable[str]) -> Iterator[str]:
    from benchmarks.flows import parse
    from benchmarks.flows import stateless as flow

    for line in lines:
        item = parse(line)
        if flow.keep(item):
            for split in flow.split(item):
                yield flow.fmt(split)[1]


def running_count(lines: Iterable[str]) -> Iterator[str]:
    from benchmarks.flows import running_count as flow

    seen: Dict[str, int] = {}
    for line in lines:
        key, item = flow.keyed(line)
        seen[key], out = flow.count(seen.get(key), item)
        yield flow.fmt((key, out))[1]


def user_totals(lines: Iterable[str]) -> Iterator[str]:
    from benchmarks.flows import user_totals as flow

    seen: Dict[str, Tuple[int, int]] = {}
    for line in lines:
        key, value = flow.keyed(line)
        seen[key], now = flow.totals(seen.get(key), value)
        if flow.tenth((key, now)):
            yield flow.fmt((key, now))[1]


FLOWS: Dict[str, Callable[[Iterable[str]], Iterator[str]]] = {
    "windowed": windowed,
    "windowed_text": windowed_text,
    "stateless": stateless,
    "running_count": running_count,
    "user_totals": user_totals,
}


def main(flow: str) -> None:
    with open(os.environ["FLOWBENCH_OUTPUT"], "w") as out:
        out.writelines(line + "\n" for line in FLOWS[flow](_lines(os.environ["FLOWBENCH_INPUT"])))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in FLOWS:
        sys.exit(f"usage: python -m benchmarks.floor {{{','.join(FLOWS)}}}")
    main(sys.argv[1])
