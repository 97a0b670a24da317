"""A model of flowspark's throughput past this machine, fitted from runs on it, and checked where it can be.

    python -m benchmarks.scale_model [--flow windowed] [--sizes 1000000,4000000] [--repeat 2]

It runs the flow on flowspark (each run with a Spark of its own) on
`local[1]`, then fits the model's costs from those runs:

- `e`: executor CPU per event (Spark's Python workers and the JVM), which
  more cores and executors spread;
- `d`: driver-side CPU per event (the user's process and the Python
  processes Spark starts for it), which nothing spreads: the driver reads
  a driver-resident source's items and plans every micro-batch (and the
  same for the `partitioned` flow, whose partitions Spark's tasks read);
- `f`: the fixed cost of a run (wall time at no events), and `b`, the wall
  time each extra micro-batch costs (from a run of the same size in
  micro-batches of `--batch-items`);
- `k`: CPU per key touched in a micro-batch, beyond an item's own cost
  (from `user_totals` with few and with many keys, both in micro-batches
  of `--batch-items`).

It then predicts the same flow on `local[2]` (the cores shared by the
driver and the executors: the per-event wall time is `max(d, (d + e) / 2)`)
and measures it, giving the error; and prints what the model says for a
cluster of executors of `--cores` cores each, the driver on a machine of its
own: throughput `min(E * C / e, 1 / d)` events/s, less the share that
micro-batches and many keys take, and which part limits it first.  See
docs/performance.md, "Past this machine".
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from benchmarks import run

DEFAULT_BATCH_ITEMS = 1_000_000
"""flowspark's micro-batch limit per source partition (`--max-batch-items`)."""
FEW_KEYS = 2_000
MANY_KEYS = 200_000


@dataclass
class Fit:
    """The model's costs, in seconds."""

    executor_per_event: float
    driver_per_event: float
    fixed: float
    per_batch: float
    per_key_touched: float
    wall_per_event: float
    driver_per_event_partitioned: float
    """`d` when the source's partitions are read in Spark's tasks (the `partitioned` flow: `DirSource` in, `DirSink`
    out), as a `KafkaSource`'s are."""


def _runs(args: argparse.Namespace, master: str, flow: str, size: int, keys: int, batch: Optional[int]) -> run.Result:
    """The fastest of `--repeat` runs (a run this machine slowed down would skew the fit)."""
    args.conf = [f"spark.master={master}"]
    args.max_batch_items = batch
    path = run.input_for(args.cache_dir, flow, size, keys)
    runs = [run.run_one(args, flow, "flowspark", size, path, {}, keys=keys) for _ in range(args.repeat)]
    return min(runs, key=lambda r: r.wall if r.ok and r.wall is not None else math.inf)


def _executor_cpu(r: run.Result) -> float:
    return r.cpu_by_role.get("jvm", 0.0) + r.cpu_by_role.get("python", 0.0)


def keys_touched(events: int, keys: int, batch: int) -> float:
    """Distinct keys the micro-batches of `batch` items touch in all, for `events` items over `keys` uniform keys.

    >>> round(keys_touched(200_000, 200_000, 100_000))
    157388
    """
    batches = events / batch
    return batches * keys * (1 - math.exp(-batch / keys))


def fit(args: argparse.Namespace) -> Fit:
    """Fit the costs from runs on `local[1]`."""
    small, large = args.sizes
    a = _runs(args, "local[1]", args.flow, small, run.KEYS, None)
    b = _runs(args, "local[1]", args.flow, large, run.KEYS, None)
    batched = _runs(args, "local[1]", args.flow, small, run.KEYS, args.batch_items)
    span = large - small
    assert a.wall is not None and b.wall is not None and batched.wall is not None
    wall_per_event = (b.wall - a.wall) / span
    extra_batches = math.ceil(small / args.batch_items) - math.ceil(small / DEFAULT_BATCH_ITEMS)
    few = _runs(args, "local[1]", "user_totals", args.keys_events, FEW_KEYS, args.batch_items)
    many = _runs(args, "local[1]", "user_totals", args.keys_events, MANY_KEYS, args.batch_items)
    assert few.cpu is not None and many.cpu is not None
    touched = keys_touched(args.keys_events, MANY_KEYS, args.batch_items) - keys_touched(
        args.keys_events, FEW_KEYS, args.batch_items
    )
    split_small = _runs(args, "local[1]", "partitioned", small, run.KEYS, None)
    split_large = _runs(args, "local[1]", "partitioned", large, run.KEYS, None)
    return Fit(
        # A few hundredths of a microsecond: two runs may measure it below zero, which means none.
        driver_per_event_partitioned=max(0.0, (split_large.driver_side_cpu - split_small.driver_side_cpu) / span),
        executor_per_event=(_executor_cpu(b) - _executor_cpu(a)) / span,
        driver_per_event=(b.driver_side_cpu - a.driver_side_cpu) / span,
        fixed=a.wall - wall_per_event * small,
        per_batch=max(0.0, (batched.wall - a.wall) / max(1, extra_batches)),
        per_key_touched=(many.cpu - few.cpu) / touched,
        wall_per_event=wall_per_event,
    )


def check(args: argparse.Namespace, costs: Fit) -> List[str]:
    """Predict the flow on `local[2]` from the fit, measure it, and give the error."""
    small, large = args.sizes
    a = _runs(args, "local[2]", args.flow, small, run.KEYS, None)
    b = _runs(args, "local[2]", args.flow, large, run.KEYS, None)
    assert a.wall is not None and b.wall is not None
    slope = max(costs.driver_per_event, (costs.driver_per_event + costs.executor_per_event) / 2)
    rows = []
    for size, result in ((small, a), (large, b)):
        assert result.wall is not None
        predicted = costs.fixed + slope * size
        error = 100 * (predicted - result.wall) / result.wall
        rows.append(f"| local[2] | {size:,} | {predicted:.1f} | {result.wall:.1f} | {error:+.0f} % |")
    measured_slope = (b.wall - a.wall) / (large - small)
    rows.append(
        f"| local[2], per event | - | {slope * 1e6:.2f} us | {measured_slope * 1e6:.2f} us | "
        f"{100 * (slope - measured_slope) / measured_slope:+.0f} % |"
    )
    return ["| run | events | predicted wall s | measured wall s | error |", "|---|---|---|---|---|", *rows]


def cluster(costs: Fit, driver_per_event: float, cores: int, batch: int) -> List[str]:
    """The model's throughput for clusters of `executors` x `cores` with `batch` items per micro-batch and task, the
    driver spending `driver_per_event`."""
    rows = [
        "| executors | keys | events/s | limited by | micro-batch s | driver's share of its core |",
        "|---|---|---|---|---|---|",
    ]
    for executors in (1, 10, 100):
        for keys in (10_000, 100_000, 1_000_000):
            slots = executors * cores
            items = batch * slots  # one source partition per core, each `batch` items a micro-batch
            touched = keys * (1 - math.exp(-items / keys))
            work = items * costs.executor_per_event + touched * costs.per_key_touched
            executor_time = work / slots
            driver_time = items * driver_per_event
            batch_time = costs.per_batch + max(executor_time, driver_time)
            rate = items / batch_time
            limit = "driver" if driver_time > executor_time else "executors"
            if costs.per_batch > max(executor_time, driver_time):
                limit = "micro-batch cost"
            rows.append(
                f"| {executors} | {keys:,} | {rate:,.0f} | {limit} | {batch_time:.2f} | "
                f"{100 * rate * driver_per_event:.0f} % |"
            )
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--flow", default="windowed", choices=sorted(run.NATIVE))
    parser.add_argument("--sizes", type=run._csv(int), default=[1_000_000, 4_000_000], help="two sizes (events)")
    parser.add_argument("--batch-items", type=int, default=100_000, help="items per micro-batch of the batched runs")
    parser.add_argument("--keys-events", type=int, default=2_000_000, help="events of the many-keys runs")
    parser.add_argument("--cores", type=int, default=4, help="cores per executor of the modelled clusters")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement; the fastest counts (default 2)")
    parser.add_argument("--cache-dir", type=Path, default=run.ROOT / "benchmarks" / ".cache")
    args = parser.parse_args(argv)
    if len(args.sizes) != 2:
        parser.error("--sizes takes two sizes")
    args.cache_dir = args.cache_dir.resolve()
    args.timeout, args.sample, args.pss_sample = 1800.0, 0.1, 0.0
    os.environ["FLOWSPARK_WARM_SPARK"] = "0"
    print("flowspark warm-up run (untimed):", file=sys.stderr)
    _runs(args, "local[1]", "windowed", 1000, run.KEYS, None)
    costs = fit(args)
    out = [
        f"### Costs fitted on local[1] ({args.flow}; {os.getloadavg()[0]:.1f} load at the end)",
        "",
        f"- executor CPU per event e = {costs.executor_per_event * 1e6:.2f} us; driver-side CPU per event d = "
        f"{costs.driver_per_event * 1e6:.3f} us ({costs.driver_per_event_partitioned * 1e6:.3f} us when the source's "
        f"partitions are read in Spark's tasks); wall per event on one core {costs.wall_per_event * 1e6:.2f} us",
        f"- fixed cost of a run f = {costs.fixed:.1f} s; each extra micro-batch b = {costs.per_batch * 1000:.0f} ms; "
        f"CPU per key touched in a micro-batch k = {costs.per_key_touched * 1e6:.1f} us",
        "",
        "### The model checked on local[2]",
        "",
        *check(args, costs),
        "",
        f"### The model for clusters, a source the driver reads ({args.cores} cores per executor, the driver on its "
        f"own machine, {args.batch_items:,} items per source partition and micro-batch)",
        "",
        *cluster(costs, costs.driver_per_event, args.cores, args.batch_items),
        "",
        "### The same, a source whose partitions Spark's tasks read (Kafka, `DirSource`)",
        "",
        *cluster(costs, costs.driver_per_event_partitioned, args.cores, args.batch_items),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
