"""The flow the dataflow API tests run on both engines, scraped while it runs.

Its source emits `ITEMS` numbers, then holds the run open (emitting
nothing) until the file `release` exists, so that a scraper can read the
final counts while the API is still up.  Each batch also counts itself in
a `prometheus_client` counter of the default registry, the way a user's
own metrics reach `/metrics`.
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any, List, Optional

import prometheus_client

ITEMS = 40
BATCH = 4
HOLD_SECONDS = 120.0
"""The longest the source waits for `release` (so a failed test can't hang the run)."""

BATCHES = prometheus_client.Counter("api_flow_batches", "batches the test source emitted")


def build(engine: str, release: str, out: Optional[List[Any]] = None) -> Any:
    """The flow on `engine` ("bytewax" or "flowspark"); its output goes to `out`."""
    op = importlib.import_module(f"{engine}.operators")
    inputs = importlib.import_module(f"{engine}.inputs")
    testing = importlib.import_module(f"{engine}.testing")
    dataflow = importlib.import_module(f"{engine}.dataflow")

    class Part(inputs.StatelessSourcePartition):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self._next = 1
            self._held: Optional[float] = None

        def next_batch(self) -> List[int]:
            if self._next <= ITEMS:
                batch = list(range(self._next, min(ITEMS, self._next + BATCH - 1) + 1))
                self._next += len(batch)
                BATCHES.inc()
                time.sleep(0.05)
                return batch
            self._held = self._held or time.monotonic()
            if os.path.exists(release) or time.monotonic() - self._held > HOLD_SECONDS:
                raise StopIteration()
            time.sleep(0.05)
            return []

        def lag(self) -> int:
            """Items yet to emit (flowspark's `flowspark_input_lag_items`; Bytewax ignores it)."""
            return ITEMS + 1 - self._next

    class Numbers(inputs.DynamicSource):  # type: ignore[misc, name-defined]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Part:
            return Part()

    flow = dataflow.Dataflow("api")
    nums = op.input("inp", flow, Numbers())
    doubled = op.map("double", nums, lambda x: x * 2)
    fours = op.filter("fours", doubled, lambda x: x % 4 == 0)
    keyed = op.key_on("key", fours, lambda x: str(x % 3))
    sums = op.stateful_map("running", keyed, lambda total, x: ((total or 0) + x, (total or 0) + x))
    op.output("out", sums, testing.TestingSink([] if out is None else out))
    return flow


def bytewax_flow(release: str) -> Any:
    """For `python -m bytewax.run "api_flow:bytewax_flow('...')"`."""
    return build("bytewax", release)
