"""`Firing`: a window operator's emit mode, allowed lateness and trigger as one value (Beam's `Windowing`).

Every window operator but `join_window` takes it as `firing=`; the old
keywords `emit=`, `allowed_lateness=` and `trigger=` are still accepted and
mean the same; both at once is a `TypeError` naming the step.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, Callable, Dict

import pytest
from support.event_time import ALIGN
from support.firing_helpers import drive_op, panes, summing
from support.oracle import core_arg

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.firing import FiringWindowConfig
from flowspark.operators._windowing.per_key import WindowConfig
from flowspark.testing import TestingSource

BIG = win.TumblingWindower(timedelta(seconds=100), ALIGN)
TEN = win.TumblingWindower(timedelta(seconds=10), ALIGN)
SCRIPT = [[(i, i)] for i in range(1, 6)] + [[(150, 7)], [(20, 1)], "eof"]
"""Five values in window 0, one in window 1 that closes window 0, a late one for window 0, end of input."""


@pytest.mark.parametrize(
    "keywords",
    [
        {"emit": "current"},
        {"emit": "current_and_final"},
        {"allowed_lateness": timedelta(seconds=100)},
        {"trigger": win.CountTrigger(2)},
        {"trigger": win.CountTrigger(2, purge=True), "allowed_lateness": timedelta(seconds=60)},
        {"emit": "current", "trigger": win.PredicateTrigger(lambda v: v[1] > 3)},
    ],
)
def test_firing_means_what_its_keywords_mean(keywords: Dict[str, Any]) -> None:
    old = drive_op(summing(BIG, **keywords), SCRIPT)
    new = drive_op(summing(BIG, firing=win.Firing(**keywords)), SCRIPT)
    assert panes(new) == panes(old) and new == old
    assert panes(new)  # it did emit panes


def test_the_default_firing_is_bytewax_s_step() -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    out = win.count_window("win", up, win.SystemClock(), TEN, str, firing=win.Firing())
    config = core_arg(flow, "df.win.sum.window.stateful_batch", "builder")
    assert type(config) is WindowConfig and config.merges_batches
    with pytest.raises(AttributeError, match="has no `panes` stream"):
        _ = out.panes


def test_a_firing_builds_the_same_config_as_its_keywords() -> None:
    trigger = win.CountTrigger(3)
    flows = []
    for kwargs in ({"emit": "current", "trigger": trigger}, {"firing": win.Firing(emit="current", trigger=trigger)}):
        flow = Dataflow("df")
        up = op.input("inp", flow, TestingSource([]))
        win.count_window("win", up, win.SystemClock(), TEN, str, **kwargs)
        flows.append(core_arg(flow, "df.win.sum.window.stateful_batch", "builder"))
    assert type(flows[0]) is FiringWindowConfig and flows[0] == flows[1]


def test_firing_is_frozen_and_plain_by_default() -> None:
    firing = win.Firing()
    assert firing.is_plain and (firing.emit, firing.allowed_lateness, firing.trigger) == ("final", timedelta(0), None)
    assert not win.Firing(emit="current").is_plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        firing.emit = "current"  # type: ignore[misc]
    assert dataclasses.replace(firing, trigger=win.CountTrigger(2)).trigger == win.CountTrigger(2)


OPERATORS: Dict[str, Callable[..., Any]] = {
    "window": lambda up, **kw: win.window("w", up, win.SystemClock(), TEN, lambda s: None, **kw),
    "fold_window": lambda up, **kw: win.fold_window(
        "w", up, win.SystemClock(), TEN, lambda: 0, lambda a, v: a, lambda a, b: a, **kw
    ),
    "collect_window": lambda up, **kw: win.collect_window("w", up, win.SystemClock(), TEN, **kw),
    "count_window": lambda up, **kw: win.count_window("w", up, win.SystemClock(), TEN, str, **kw),
    "reduce_window": lambda up, **kw: win.reduce_window("w", up, win.SystemClock(), TEN, max, **kw),
    "max_window": lambda up, **kw: win.max_window("w", up, win.SystemClock(), TEN, **kw),
    "min_window": lambda up, **kw: win.min_window("w", up, win.SystemClock(), TEN, **kw),
    "sum_window": lambda up, **kw: win.sum_window("w", up, win.SystemClock(), TEN, **kw),
    "mean_window": lambda up, **kw: win.mean_window("w", up, win.SystemClock(), TEN, **kw),
    "aggregate_window": lambda up, **kw: win.aggregate_window(
        "w", up, win.SystemClock(), TEN, {"n": win.Count()}, **kw
    ),
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_operator_takes_firing(name: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    out = OPERATORS[name](up, firing=win.Firing(emit="current_and_final"))
    assert out.panes is not None


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_firing_and_an_old_keyword_together_fail_naming_the_step(name: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(TypeError, match=r"^step 'df\.w': got both `firing=` and `trigger=`; pass one or the other"):
        OPERATORS[name](up, firing=win.Firing(emit="current"), trigger=win.CountTrigger(2))
    with pytest.raises(TypeError, match=r"^step 'df\.w2': got both `firing=` and `emit=`, `allowed_lateness=`"):
        win.sum_window(
            "w2", up, win.SystemClock(), TEN, firing=win.Firing(), emit="final", allowed_lateness=timedelta(0)
        )


def test_a_firing_that_is_not_a_firing_fails_naming_the_step() -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(TypeError, match=r"^step 'df\.w': `firing` must be a `Firing` \(or `None`\); got 'current'"):
        win.sum_window("w", up, win.SystemClock(), TEN, firing="current")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^step 'df\.w2': unexpected keyword argument\(s\) `emitt`"):
        win.sum_window("w2", up, win.SystemClock(), TEN, emitt="current")  # type: ignore[call-arg]


def test_a_bad_field_fails_as_its_keyword_does() -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(ValueError, match=r"^step 'df\.w\.window': unknown `emit` mode 'sometimes'"):
        win.sum_window("w", up, win.SystemClock(), TEN, firing=win.Firing(emit="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^step 'df\.w2\.window': `allowed_lateness` must be a non-negative"):
        win.sum_window("w2", up, win.SystemClock(), TEN, firing=win.Firing(allowed_lateness=timedelta(seconds=-1)))
    with pytest.raises(ValueError, match=r"^step 'df\.w3\.window': `CountTrigger\.count` must be a positive"):
        win.sum_window("w3", up, win.SystemClock(), TEN, firing=win.Firing(trigger=win.CountTrigger(0)))
