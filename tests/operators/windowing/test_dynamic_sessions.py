"""`DynamicSessionWindower`: session gaps taken from each value (Flink's `withDynamicGap`).

With a constant gap it must be `SessionWindower` exactly, so randomized
scripts compare the two through the per-key logic (ids, merges, metadata,
wake-ups).  The per-value examples follow the shape of Flink's documentation
("determine and return session gap" per element): a device kind picks the
gap.
"""

from __future__ import annotations

import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Tuple

import pytest
from support.firing_helpers import Outputs, Step, by_key, downs, drive_op, events, logic_builder, sec, sink_all, stamp
from support.oracle import cause_chain
from test_window_ops import random_script, run_script

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.errors import FlowsparkRuntimeError
from flowspark.operators._windowing.windowers import check_windower
from flowspark.testing import TestingSource, TimeTestingGetter, run_main

GAPS = {"fast": timedelta(seconds=2), "slow": timedelta(seconds=10)}


def gap_of_kind(value: Tuple[float, str]) -> timedelta:
    """A device kind's gap: `(seconds, kind)` values."""
    return GAPS[value[1]]


def dynamic(gap_for: Callable[[Any], Any] = gap_of_kind) -> win.DynamicSessionWindower:
    return win.DynamicSessionWindower(gap_for)


def collect(windower: Any, ordered: bool = True) -> Any:
    return lambda up, clock, _getter: win.collect_window("win", up, clock, windower, ordered=ordered)


# The same as `SessionWindower` with a constant gap.


def constant(gap: timedelta) -> Callable[[Any], timedelta]:
    return lambda _value: gap


OPS = {
    "collect": lambda w: lambda e, up, clock: e.win.collect_window("win", up, clock, w),
    "collect_unordered": lambda w: lambda e, up, clock: e.win.collect_window("win", up, clock, w, ordered=False),
    "fold": lambda w: (
        lambda e, up, clock: e.win.fold_window(
            "win", up, clock, w, lambda: 0, lambda acc, v: acc + v[0], lambda a, b: a + b
        )
    ),
    "count": lambda w: lambda e, up, clock: e.win.count_window("win", up, clock, w, lambda v: "k"),
    "reduce": lambda w: lambda e, up, clock: e.win.reduce_window("win", up, clock, w, lambda a, b: (a[0], a[1] + b[1])),
}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("op_name", sorted(OPS))
@pytest.mark.parametrize("gap", [timedelta(seconds=3), timedelta(0)])
def test_constant_gap_is_session_windower(op_name: str, gap: timedelta, seed: int) -> None:
    build = OPS[op_name]
    script = random_script(seed)
    theirs = run_script("flowspark", build(win.SessionWindower(gap)), script)
    ours = run_script("flowspark", build(dynamic(constant(gap))), script)
    assert ours == theirs


def _random_calls(logic: Any, seed: int, gap: Callable[[float], timedelta], rebuild: Any = None) -> List[Any]:
    """Seeded windower calls on `logic` (`open_for_value` when it has it); with `rebuild`, the
    logic is rebuilt from a pickled snapshot after every call."""
    rng = random.Random(seed)
    watermark = sec(0)
    results: List[Any] = []
    for _ in range(200):
        roll = rng.random()
        if roll < 0.7:
            moment = watermark + timedelta(seconds=rng.uniform(-5, 60))
            if hasattr(logic, "open_for_value"):
                results.append(("open", list(logic.open_for_value(gap(moment.timestamp()), moment))))
            else:
                results.append(("open", list(logic.open_for(moment))))
        elif roll < 0.85:
            results.append(("merged", list(logic.merged())))
        else:
            watermark += timedelta(seconds=rng.uniform(0, 30))
            results.append(("closed", logic.close_for(watermark), logic.notify_at(), logic.is_empty()))
        if rebuild is not None:
            logic = rebuild(pickle.loads(pickle.dumps(logic.snapshot())))
    results.append(("closed", logic.close_for(win.UTC_MAX)))
    return results


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("gap", [timedelta(seconds=4), timedelta(0)])
def test_constant_gap_logic_matches_session_logic_call_by_call(gap: timedelta, seed: int) -> None:
    windower = dynamic(lambda _gap: _gap)
    theirs = _random_calls(win.SessionWindower(gap).build(None), seed, lambda _t: gap)
    assert _random_calls(windower.build(None), seed, lambda _t: gap, rebuild=windower.build) == theirs


@pytest.mark.parametrize("seed", range(3))
def test_logic_round_trips_its_snapshot_with_varying_gaps(seed: int) -> None:
    windower = dynamic(lambda _gap: _gap)

    def gap(moment: float) -> timedelta:
        return timedelta(seconds=int(moment) % 7)

    assert _random_calls(windower.build(None), seed, gap, rebuild=windower.build) == _random_calls(
        windower.build(None), seed, gap
    )


# Gaps that differ per value.


def test_each_value_sets_its_own_gap() -> None:
    values = [(0, "fast"), (1, "fast"), (5, "slow"), (14, "fast"), (20, "fast"), (21, "slow"), (40, "fast")]
    records = drive_op(collect(dynamic()), [values, "eof"])
    assert downs(records) == [
        ("down", 0, [(0, "fast"), (1, "fast")]),  # reach 3: 5 is too far
        ("down", 1, [(5, "slow"), (14, "fast")]),  # 5 reaches 15, so 14 joins; reach 16
        ("down", 2, [(20, "fast"), (21, "slow")]),
        ("down", 3, [(40, "fast")]),
    ]
    assert [e[1:] for e in events(records) if e[0] == "meta"] == [
        (0, (sec(0), sec(1))),
        (1, (sec(5), sec(14))),
        (2, (sec(20), sec(21))),
        (3, (sec(40), sec(40))),
    ]


def test_a_long_gap_bridges_two_sessions() -> None:
    builder, _getter, _out = logic_builder(collect(dynamic(), ordered=False), wait=timedelta(seconds=20))
    logic = builder(None)
    logic.on_batch([(0, "fast"), (10, "fast"), (3, "slow"), (2, "slow")])
    evs, _discard = logic.on_eof()
    assert [(type(e).__name__, e.window_id) for e in evs] == [("Emitted", 0), ("Closed", 0)]
    # 3 joins the session of 10 (its reach [3, 13] touches it, not 0's [0, 2]); then 2, reaching
    # [2, 12], joins 0's session and bridges it to the other, which it absorbs.
    assert evs[0].value == [(0, "fast"), (2, "slow"), (10, "fast"), (3, "slow")]
    assert (evs[1].meta.open_time, evs[1].meta.close_time, evs[1].meta.merged_ids) == (sec(0), sec(10), {1})


def test_a_session_closes_when_the_watermark_passes_its_furthest_reach() -> None:
    script: List[Step] = [[(0, "slow"), (3, "fast")], [(13, "fast")], "eof"]
    records = drive_op(collect(dynamic()), script, wait=timedelta(0))
    # After 3 the session reaches 10 (0's slow gap), not 5; it closes only when 13 moves the watermark past 10.
    assert records[0] == ([], sec(10))
    assert records[1][0][:1] == [("down", 0, [(0, "slow"), (3, "fast")])]
    assert records[1][1] == sec(15)


def test_count_and_fold_windows() -> None:
    values = [(0, "fast"), (1, "fast"), (5, "slow"), (14, "fast")]

    def counted(up: Any, clock: Any, _getter: Any) -> Any:
        return win.count_window("win", op.map("unkey", up, lambda v: v), clock, dynamic(), lambda _v: "k")

    def seconds(up: Any, clock: Any, _getter: Any) -> Any:
        return win.fold_window("win", up, clock, dynamic(), lambda: 0, lambda acc, v: acc + v[0], lambda a, b: a + b)

    assert downs(drive_op(counted, [values, "eof"])) == [("down", 0, 2), ("down", 1, 2)]
    assert downs(drive_op(seconds, [values, "eof"])) == [("down", 0, 1), ("down", 1, 19)]


def test_late_values_and_idle_keys_behave_as_sessions() -> None:
    script: List[Step] = [[(0, "fast")], timedelta(seconds=60), "notify", [(1, "fast")], [(100, "fast")], "eof"]
    records = drive_op(collect(dynamic()), script)
    assert [e for e in events(records) if e[0] != "meta"] == [
        ("down", 0, [(0, "fast")]),
        ("late", win.LATE_SESSION_ID, (1, "fast")),
        ("down", 1, [(100, "fast")]),  # ids are never reused
    ]


# Bad gaps.


@pytest.mark.parametrize(
    ("gap", "error"),
    [(5, TypeError), (timedelta(seconds=-1), ValueError), (None, TypeError)],
)
def test_a_bad_gap_names_the_function_and_the_value(gap: Any, error: type) -> None:
    def bad_gap(_value: Any) -> Any:
        return gap

    with pytest.raises(
        error,
        match=r"^DynamicSessionWindower `gap_for` <function '.*bad_gap' line \d+> must return "
        r"a non-negative `timedelta`; got .* for value \(1, 'a'\)$",
    ):
        drive_op(collect(dynamic(bad_gap)), [[(1, "a")]])


def test_gap_for_must_be_callable() -> None:
    with pytest.raises(ValueError, match="^DynamicSessionWindower `gap_for` must be a function"):
        win.DynamicSessionWindower(timedelta(seconds=1))  # type: ignore[arg-type]
    windower = dynamic()
    windower.gap_for = "gap"  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"^step 'df\.win': DynamicSessionWindower `gap_for` must be a function"):
        check_windower("df.win", windower)


# Whole flows on Spark.


def _flow(gap_for: Callable[[Any], Any]) -> Tuple[Dataflow, Outputs]:
    flow = Dataflow("dynamic")
    items = [
        ("a", (0, "fast")),
        ("b", (0, "slow")),
        ("a", (1, "fast")),
        ("b", (9, "fast")),
        ("a", (5, "slow")),
        ("a", (14, "fast")),
    ]
    up = op.input("inp", flow, TestingSource(items, batch_size=2))
    getter = TimeTestingGetter(datetime(2030, 1, 1, tzinfo=timezone.utc))
    clock = win.EventClock(stamp, timedelta(seconds=5), now_getter=getter.get)
    outputs: Outputs = {}
    sink_all(outputs, "s", win.collect_window("s", up, clock, win.DynamicSessionWindower(gap_for)), ("down", "meta"))
    return flow, outputs


def test_flow_on_spark() -> None:
    flow, outputs = _flow(gap_of_kind)
    run_main(flow)
    assert by_key(outputs["s.down"]) == {
        "a": [(0, [(0, "fast"), (1, "fast")]), (1, [(5, "slow"), (14, "fast")])],
        "b": [(0, [(0, "slow"), (9, "fast")])],
    }
    assert by_key(outputs["s.meta"])["b"][0][1].close_time == sec(9)


def test_a_bad_gap_fails_the_run_naming_the_step() -> None:
    flow, _outputs = _flow(lambda _v: -1)
    with pytest.raises(FlowsparkRuntimeError) as info:
        run_main(flow)
    messages = " | ".join(str(ex) for ex in cause_chain(info.value))
    assert "step 'dynamic.s.fold_window.window.stateful_batch'" in messages
    assert "DynamicSessionWindower `gap_for`" in messages and "got -1 for value (0, " in messages
