"""Made-up data for examples: `RandomMetricSource`."""

from __future__ import annotations

import dataclasses
import random
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, List, Optional, Tuple

from typing_extensions import override

from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["RandomMetricSource"]


def _random_digit() -> float:
    return random.randrange(0, 10)


@dataclass
class _RandomMetricState:
    """When the next value is due, and how many values have been emitted."""

    awake_at: datetime
    count: int


class _RandomMetricPartition(StatefulSourcePartition[Tuple[str, float], _RandomMetricState]):
    def __init__(
        self,
        metric_name: str,
        interval: timedelta,
        count: int,
        next_random: Callable[[], float],
        state: _RandomMetricState,
    ) -> None:
        self._metric_name = metric_name
        self._interval = interval
        self._count = count
        self._next_random = next_random
        self._state = state

    @override
    def next_batch(self) -> List[Tuple[str, float]]:
        self._state.awake_at += self._interval
        self._state.count += 1
        if self._state.count > self._count:
            raise StopIteration
        return [(self._metric_name, self._next_random())]

    @override
    def next_awake(self) -> Optional[datetime]:
        return self._state.awake_at

    @override
    def snapshot(self) -> _RandomMetricState:
        return dataclasses.replace(self._state)


class RandomMetricSource(FixedPartitionedSource[Tuple[str, float], _RandomMetricState]):
    """Emit `(metric_name, next_random())` every `interval`, `count` times.

    There is one partition, named `metric_name`.  The first value comes at
    once; each later one is due `interval` after the previous one was due
    (not after it was emitted), so after a resume that comes late the
    missed values are emitted back to back until the source has caught up.
    For several metrics, use one `input` step per metric and `merge` them.

    :arg metric_name: first element of every item, and the partition name.
    :arg interval: time between values; 0.7 s by default.
    :arg count: how many values in all (across resumes); unlimited by default.
    :arg next_random: makes each value; a random `int` in `[0, 10)` by default.

    ```python
    from datetime import timedelta

    import flowspark.operators as op
    from flowspark.connectors.demo import RandomMetricSource
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, run_main

    flow = Dataflow("metrics_eg")
    source = RandomMetricSource("cpu", interval=timedelta(0), count=3, next_random=lambda: 0.5)
    out = []
    op.output("out", op.input("inp", flow, source), TestingSink(out))
    run_main(flow)
    assert out == [("cpu", 0.5)] * 3
    ```
    """

    def __init__(
        self,
        metric_name: str,
        interval: timedelta = timedelta(seconds=0.7),
        count: int = sys.maxsize,
        next_random: Callable[[], float] = _random_digit,
    ) -> None:
        self._metric_name = metric_name
        self._interval = interval
        self._count = count
        self._next_random = next_random

    @override
    def list_parts(self) -> List[str]:
        return [self._metric_name]

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: Optional[_RandomMetricState]
    ) -> _RandomMetricPartition:
        if resume_state is None:
            state = _RandomMetricState(datetime.now(timezone.utc), 0)
        else:
            state = dataclasses.replace(resume_state)
        return _RandomMetricPartition(for_part, self._interval, self._count, self._next_random, state)
