"""`sum_window`, `mean_window` and `aggregate_window` with Quix Streams' aggregations.

Expected values are Quix Streams' documented examples (docs/aggregations.md:
custom `PowerSum`, multiple aggregations; docs/windowing.md: session windows
with `.current()` and `.final()`), with millisecond timestamps as seconds.
"""

from __future__ import annotations

import operator
from datetime import datetime, timedelta
from typing import Any, Dict, List, Tuple

import pytest
from support.event_time import ALIGN
from support.firing_helpers import Outputs, by_key, downs, drive_op, events, flow_clock, logic_builder, sec, sink_all

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.logics import FinishingFoldBuilder
from flowspark.operators._windowing.per_key import MergingKeyWindowLogic, WindowConfig
from flowspark.testing import TestingSource, run_main

TEN_MINUTES = timedelta(minutes=10)


def ts_of(record: Dict[str, Any]) -> datetime:
    """Quix-style records carry their timestamp in milliseconds."""
    return ALIGN + timedelta(milliseconds=record["timestamp"])


def results(records: Any) -> List[Any]:
    return [value for _s, _w, value in downs(records)]


def test_quix_multiple_aggregations() -> None:
    """Quix: min, max, mean and count of temperatures over a 10-minute tumbling window."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        aggs = {
            "min_temp": win.Min("temperature"),
            "max_temp": win.Max("temperature"),
            "avg_temp": win.Mean("temperature"),
            "total_events": win.Count(),
        }
        return win.aggregate_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN), aggs)

    temps = [{"temperature": t, "timestamp": i * 1000} for i, t in enumerate([21, 25, 18, 30])]
    records = drive_op(build, [temps, "eof"], ts_getter=ts_of)
    assert results(records) == [{"min_temp": 18, "max_temp": 30, "avg_temp": 23.5, "total_events": 4}]


def test_quix_custom_power_sum() -> None:
    """Quix's custom aggregator: the sum of squares of `amount`; inputs 2 and 3 give 13."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        power_sum = win.Aggregation(lambda: 0, lambda acc, v: acc + v["amount"] * v["amount"], operator.add)
        return win.aggregate_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN), {"sum": power_sum})

    records = drive_op(build, [[{"amount": 2, "timestamp": 1}, {"amount": 3, "timestamp": 2}], "eof"], ts_getter=ts_of)
    assert results(records) == [{"sum": 13}]


def test_quix_session_current() -> None:
    """Quix: session gap 10 s, `Sum("amount")` and `Count()`, `.current()`: 25/1, 75/2, 125/3."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        aggs = {"total_amount": win.Sum("amount"), "purchase_count": win.Count()}
        gap = win.SessionWindower(timedelta(seconds=10))
        return win.aggregate_window("win", up, clock, gap, aggs, emit="current")

    script: List[Any] = [
        [{"amount": 25, "timestamp": 1000}],
        [{"amount": 50, "timestamp": 5000}],
        [{"amount": 50, "timestamp": 8000}],
    ]
    assert results(drive_op(build, script, ts_getter=ts_of)) == [
        {"total_amount": 25, "purchase_count": 1},
        {"total_amount": 75, "purchase_count": 2},
        {"total_amount": 125, "purchase_count": 3},
    ]


def test_quix_session_final() -> None:
    """Quix: a 30-minute session of four actions, `Count()` and `Collect("user_action")`, `.final()`."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        aggs = {"action_count": win.Count(), "actions": win.Collect("user_action")}
        gap = win.SessionWindower(timedelta(minutes=30))
        return win.aggregate_window("win", up, clock, gap, aggs)

    actions = [("page_view", 1000), ("click", 800000), ("page_view", 1200000), ("purchase", 2000000)]
    script: List[Any] = [[{"user_action": a, "timestamp": t}] for a, t in actions] + ["eof"]
    records = drive_op(build, script, ts_getter=ts_of)
    assert results(records) == [{"action_count": 4, "actions": ["page_view", "click", "page_view", "purchase"]}]
    assert [e for e in events(records) if e[0] == "meta"] == [("meta", 0, (sec(1), sec(2000)))]


def test_first_last_min_max_collect_and_session_merges() -> None:
    """Ties keep the earlier value; merging sessions combine every aggregation."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        aggs = {
            "first": win.First(1),
            "last": win.Last(1),
            "min": win.Min(lambda v: v[1][0]),
            "max": win.Max(lambda v: v[1][0]),
            "all": win.Collect(1),
            "n": win.Count(),
        }
        return win.aggregate_window("win", up, clock, win.SessionWindower(timedelta(seconds=3)), aggs, False)

    # Unordered: 0 s and 6 s open two sessions; 3 s bridges them into the first.
    records = drive_op(build, [[(0, "a0"), (6, "c9"), (3, "b0")], "eof"], wait=timedelta(seconds=60))
    # The first session keeps its first value; the absorbed one's last value wins.
    assert results(records) == [
        {"first": "a0", "last": "c9", "min": "a", "max": "c", "all": ["a0", "b0", "c9"], "n": 3}
    ]


def test_sum_and_mean_of_plain_numbers_and_by() -> None:
    def build_sum(up: Any, clock: Any, _getter: Any) -> Any:
        return win.sum_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN))

    def build_mean(up: Any, clock: Any, _getter: Any) -> Any:
        return win.mean_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN))

    def at_align(_value: Any) -> datetime:
        return ALIGN

    assert results(drive_op(build_sum, [[1, 2.5, 3], "eof"], ts_getter=at_align)) == [6.5]
    assert results(drive_op(build_mean, [[1, 2, 4], "eof"], ts_getter=at_align)) == [7 / 3]


def fold_all(agg: Any, values: List[Any]) -> Any:
    """Run one aggregation over `values` as a window would: `builder`, `folder` per value, `finish`."""
    acc = agg.builder()
    for value in values:
        acc = agg.folder(acc, value)
    return agg.finish(acc)


# Quix Streams' own cases and expected values: tests/test_quixstreams/test_dataframe/
# test_windows/test_aggregations.py, `TestAggregators.test_number_aggregation` (Quix's
# `column="foo"` is flowspark's `by="foo"`; a missing key reads as `None`).
QUIX_NUMBER_CASES: List[Tuple[Any, List[Any], Any]] = [
    (win.Sum(), [1, 2], 3),
    (win.Sum(), [0], 0),
    (win.Sum(), [], 0),
    (win.Sum(), [1, None, 2], 3),
    (win.Sum(), [None], 0),
    (win.Sum("foo"), [{"foo": 1}, {"foo": 2}], 3),
    (win.Sum("foo"), [{"foo": 1}, {"foo": None}], 1),
    (win.Sum("foo"), [{"foo": 1}, {"bar": 2}], 1),
    (win.Sum("foo"), [{"foo": 1}, {}], 1),
    (win.Count(), [1, "2", None], 2),
    (win.Count(), [1, "2", "x"], 3),
    (win.Count("foo"), [{"foo": 1}, {"foo": 2}, {"foo": 3}], 3),
    (win.Count("foo"), [{"foo": 1}, {"foo": None}, {"foo": 3}], 2),
    (win.Count("foo"), [{"bar": 1}, {"foo": 2}, {}], 1),
    (win.Mean(), [1, 2], 1.5),
    (win.Mean(), [0], 0),
    (win.Mean(), [1, None, 2], 1.5),
    (win.Mean(), [None], None),
    (win.Mean("foo"), [{"foo": 1}, {"foo": 2}], 1.5),
    (win.Mean("foo"), [{"foo": 1}, {"foo": None}], 1),
    (win.Mean("foo"), [{"foo": 1}, {"bar": 2}], 1),
    (win.Mean("foo"), [{"foo": 1}, {}], 1),
    (win.Max(), [3, 1, 2], 3),
    (win.Max(), [3, None, 2], 3),
    (win.Max(), [None, 3, 2], 3),
    (win.Max(), [None], None),
    (win.Max("foo"), [{"foo": 3}, {"foo": 1}], 3),
    (win.Max("foo"), [{"foo": 3}, {"foo": None}], 3),
    (win.Max("foo"), [{"foo": 3}, {"bar": 2}], 3),
    (win.Max("foo"), [{"foo": 3}, {}], 3),
    (win.Min(), [3, 1, 2], 1),
    (win.Min(), [3, None, 2], 2),
    (win.Min(), [None, 3, 2], 2),
    (win.Min(), [None], None),
    (win.Min("foo"), [{"foo": 3}, {"foo": 1}], 1),
    (win.Min("foo"), [{"foo": 3}, {"foo": None}], 3),
    (win.Min("foo"), [{"foo": 3}, {"bar": 2}], 3),
    (win.Min("foo"), [{"foo": 3}, {}], 3),
]


@pytest.mark.parametrize(("agg", "values", "expected"), QUIX_NUMBER_CASES)
def test_quix_number_aggregations(agg: Any, values: List[Any], expected: Any) -> None:
    assert fold_all(agg, values) == expected


# Quix's `TestAggregators.test_other_aggregation`, the processing-order `First`/`Last` cases
# (their timestamps play no part there): `None`s, missing keys included, are skipped.
QUIX_FIRST_LAST_CASES: List[Tuple[Any, List[Any], Any]] = [
    (win.First(), [1, 2, 3], 1),
    (win.First("foo"), [{"foo": 1}, {"foo": 2}, {"foo": 3}], 1),
    (win.First("foo"), [{"bar": 1}, {"bar": 2}, {"foo": 3}], 3),
    (win.First("foo"), [{"bar": 1}, {}, {"foo": 3}], 3),
    (win.Last(), [1, 2, 3], 3),
    (win.Last("foo"), [{"foo": 1}, {"foo": 2}, {"foo": 3}], 3),
    (win.Last("foo"), [{"foo": 1}, {"bar": 2}, {"bar": 3}], 1),
    (win.Last("foo"), [{"foo": 1}, {}, {"bar": 3}], 1),
]


@pytest.mark.parametrize(("agg", "values", "expected"), QUIX_FIRST_LAST_CASES)
def test_quix_first_and_last_skip_none(agg: Any, values: List[Any], expected: Any) -> None:
    assert fold_all(agg, values) == expected


def test_none_values_in_a_window() -> None:
    """`None`s through real windows: `sum_window`, `mean_window` and `aggregate_window`, merges included."""
    script: List[Any] = [[(1, 2), (2, None), (3, 4)], [(20, None)], "eof"]

    def amount(value: Tuple[float, Any]) -> Any:
        return value[1]

    tumbling = win.TumblingWindower(timedelta(seconds=10), ALIGN)
    sums = drive_op(lambda up, clock, _g: win.sum_window("win", up, clock, tumbling, amount), script)
    assert results(sums) == [6, 0]
    means = drive_op(lambda up, clock, _g: win.mean_window("win", up, clock, tumbling, amount, emit="current"), script)
    assert results(means) == [2.0, 2.0, 3.0, None]
    aggs = {
        "n": win.Count(amount),
        "all": win.Count(),
        "min": win.Min(amount),
        "max": win.Max(amount),
        "c": win.Collect(amount),
    }
    sessions = win.SessionWindower(timedelta(seconds=5))
    merged: List[Any] = [[(1, None), (9, 5)], [(5, 3)], [(30, None)], "eof"]
    # Unordered: 1 s and 9 s open two sessions, which 5 s then merges.
    got = drive_op(
        lambda up, clock, _g: win.aggregate_window("win", up, clock, sessions, aggs, ordered=False),
        merged,
        wait=timedelta(seconds=10),
    )
    assert results(got) == [
        {"n": 2, "all": 3, "min": 3, "max": 5, "c": [None, 3, 5]},
        {"n": 0, "all": 1, "min": None, "max": None, "c": [None]},
    ]


def test_default_aggregations_keep_the_fast_path() -> None:
    """Without emit, lateness or trigger these are plain folds: one call per micro-batch per key."""
    for build in (
        lambda up, clock, _g: win.aggregate_window(
            "win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN), {"n": win.Count()}
        ),
        lambda up, clock, _g: win.mean_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN)),
        lambda up, clock, _g: win.sum_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN)),
    ):
        builder, _getter, _out = logic_builder(build)
        assert type(builder) is WindowConfig and builder.merges_batches
        assert isinstance(builder(None), MergingKeyWindowLogic)
    builder, _getter, _out = logic_builder(
        lambda up, clock, _g: win.mean_window("win", up, clock, win.TumblingWindower(TEN_MINUTES, ALIGN))
    )
    assert isinstance(builder.builder, FinishingFoldBuilder)


def test_hopping_windower_is_on_the_fast_path() -> None:
    """`HoppingWindower` has sliding windows: the batch-merging fast path takes it too."""
    from flowspark.operators._windowing.per_key import _FAST_WINDOWERS

    assert win.HoppingWindower in _FAST_WINDOWERS


def test_bad_aggregations_fail_naming_the_step() -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    clock = win.SystemClock()
    tumbling = win.TumblingWindower(TEN_MINUTES, ALIGN)
    with pytest.raises(TypeError, match=r"^step 'df\.a1': `aggregations` must be a non-empty mapping"):
        win.aggregate_window("a1", up, clock, tumbling, {})
    with pytest.raises(TypeError, match=r"^step 'df\.a2': aggregation 'n' must be a `str` name for an `Aggregation`"):
        win.aggregate_window("a2", up, clock, tumbling, {"n": len})  # type: ignore[dict-item]
    no_merger = win.Aggregation(lambda: 0, lambda acc, v: acc + 1)
    with pytest.raises(
        ValueError, match=r"^step 'df\.a3': SessionWindower merges sessions, but aggregations \['n'\] have no `merger`"
    ):
        win.aggregate_window("a3", up, clock, win.SessionWindower(timedelta(seconds=1)), {"n": no_merger})
    with pytest.raises(TypeError, match=r"`by` must be a function of the value, a key to look up, or `None`"):
        win.Sum(by=1.5)  # type: ignore[arg-type]


# A whole flow through Spark.

AGG_INPUT = [
    ("a", (1, 10)),
    ("b", (2, 4)),
    ("a", (5, 20)),
    ("a", (12, 7)),
    ("b", (3, 6)),
    ("b", (25, 1)),
]


def build_agg_flow() -> Tuple[Dataflow, Outputs]:
    flow = Dataflow("aggs")
    up = op.input("inp", flow, TestingSource(AGG_INPUT))
    outputs: Outputs = {}
    tumbling = win.TumblingWindower(timedelta(seconds=10), ALIGN)

    def amount(value: Tuple[float, int]) -> int:
        return value[1]

    aggs = {
        "sum": win.Sum(amount),
        "mean": win.Mean(amount),
        "max": win.Max(amount),
        "n": win.Count(),
        "last": win.Last(amount),
    }
    sink_all(outputs, "agg", win.aggregate_window("agg", up, flow_clock(), tumbling, aggs), ("down", "meta"))
    sink_all(outputs, "sum", win.sum_window("sum", up, flow_clock(), tumbling, amount), ("down",))
    sink_all(
        outputs, "mean", win.mean_window("mean", up, flow_clock(), tumbling, amount, emit="current"), ("down", "panes")
    )
    return flow, outputs


def test_aggregations_flow() -> None:
    flow, outputs = build_agg_flow()
    run_main(flow)
    assert by_key(outputs["agg.down"]) == {
        "a": [
            (0, {"sum": 30, "mean": 15.0, "max": 20, "n": 2, "last": 20}),
            (1, {"sum": 7, "mean": 7.0, "max": 7, "n": 1, "last": 7}),
        ],
        "b": [
            (0, {"sum": 10, "mean": 5.0, "max": 6, "n": 2, "last": 6}),
            (2, {"sum": 1, "mean": 1.0, "max": 1, "n": 1, "last": 1}),
        ],
    }
    assert by_key(outputs["sum.down"]) == {"a": [(0, 30), (1, 7)], "b": [(0, 10), (2, 1)]}
    assert by_key(outputs["mean.down"]) == {"a": [(0, 10.0), (0, 15.0), (1, 7.0)], "b": [(0, 4.0), (0, 5.0), (2, 1.0)]}
    assert [p.timing for _key, (_w, p) in outputs["mean.panes"]] == ["early"] * 6
