"""A unit test's flow, run again and again in one process: how long `run_main` takes.

    python -m benchmarks.flows.small_windowed [CALLS]

20 `(key, second)` items from a `TestingSource` -> `count_window` per key
(`EventClock` on the item's second, 5 s tumbling windows) -> `TestingSink`,
built and run with `run_main` CALLS times (default 10), as a test file of
small flows does.  The engine comes from `FLOWBENCH_ENGINE`.  Prints one
line, `RESULT {json}`: the seconds the engine's modules took to import, the
seconds of each `run_main` call, and the sink's items (the same on both
engines).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta, timezone
from types import ModuleType
from typing import Any, List, Optional, Tuple

from benchmarks.flows import Api, engine, module

ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)
ITEMS = [(f"user-{i % 4}", i) for i in range(20)]
RESULT = "RESULT "


def key_of(item: Tuple[str, int]) -> str:
    return item[0]


def event_time(item: Tuple[str, int]) -> datetime:
    return ALIGN + timedelta(seconds=item[1])


def build(api: Api, testing: ModuleType, out: List[Any]) -> Any:
    """The flow, writing its `(key, (window_id, count))` items to `out`."""
    flow = api.dataflow.Dataflow("small_windowed")
    items = api.op.input("inp", flow, testing.TestingSource(ITEMS))
    clock = api.windowing.EventClock(event_time, wait_for_system_duration=timedelta(0))
    windower = api.windowing.TumblingWindower(length=timedelta(seconds=5), align_to=ALIGN)
    counts = api.windowing.count_window("count", items, clock, windower, key_of)
    api.op.output("out", counts.down, testing.TestingSink(out))
    return flow


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    calls = int(args[0]) if args else 10
    start = time.perf_counter()
    api = engine()
    testing = module("testing")
    imported = time.perf_counter() - start
    seconds: List[float] = []
    out: List[Any] = []
    for _ in range(calls):
        out = []
        flow = build(api, testing, out)
        start = time.perf_counter()
        testing.run_main(flow)
        seconds.append(time.perf_counter() - start)
    print(RESULT + json.dumps({"import_seconds": imported, "call_seconds": seconds, "output": sorted(out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
