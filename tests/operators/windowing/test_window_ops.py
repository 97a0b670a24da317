"""Window operators against Bytewax 0.21.1, first per key (fast), then as whole flows.

The per-key tests build the same operator on both engines, take the
`stateful_batch` builder each one expands to, and drive both with the same
script of batches, system-time advances, wake-ups and end of input.  The
flowspark logic is rebuilt from a pickled snapshot after every call, as the
Spark runtime may do.  The flow tests then run a few representative flows on
both engines with `run_main` and compare the `down`, `late` and `meta`
streams.

Everything is deterministic: every `EventClock` reads a `TimeTestingGetter`
that only the scripts move.  The one intended difference (the tombstone: a
key whose windows all closed keeps its clock) has its expected values written
out for each engine.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from importlib import import_module
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import pytest
from support.event_time import ALIGN
from support.firing_helpers import SYSTEM_START, meta_tuple, sec, stamp
from support.oracle import ENGINES, Engine, cause_chain, core_arg, core_steps, run_on


def norm_value(value: Any) -> Any:
    """Either engine's `WindowMetadata` as a tuple; anything else unchanged."""
    return meta_tuple(value) if hasattr(value, "merged_ids") else value


def norm_event(event: Any) -> Tuple[str, int, Any]:
    """A per-key event of either engine as `(stream, window_id, value)`."""
    if isinstance(event, tuple):
        window_id, tag, obj = event
        return ({"E": "down", "L": "late", "M": "meta"}[tag], window_id, norm_value(obj))
    stream = {"Emitted": "down", "Late": "late", "Closed": "meta"}[type(event).__name__]
    obj = event.meta if stream == "meta" else event.value
    return (stream, event.window_id, norm_value(obj))


Step = Union[List[Any], str, timedelta]
"""A batch of one key's values, `"notify"`, `"eof"`, or a system-time advance."""

BuildOp = Callable[[Engine, Any, Any], Any]
"""Adds the operator under test as step `win`: `(engine, upstream, clock) -> WindowOut`."""


def window_builder(
    engine: Engine,
    build_op: BuildOp,
    wait: timedelta = timedelta(seconds=5),
    ts_getter: Callable[[Any], datetime] = stamp,
) -> Tuple[Any, Any]:
    """Build `build_op` on `engine`; return its `stateful_batch` builder and the test clock."""
    getter = import_module(f"{engine.name}.testing").TimeTestingGetter(SYSTEM_START)
    clock = engine.win.EventClock(ts_getter, wait_for_system_duration=wait, now_getter=getter.get)
    flow = engine.Dataflow("df")
    up = engine.op.input("inp", flow, engine.TestingSource([]))
    build_op(engine, up, clock)
    (step_id,) = [s.step_id for s in core_steps(flow) if s.step_id.endswith(".stateful_batch")]
    return core_arg(flow, step_id, "builder"), getter


Record = Tuple[List[Tuple[str, int, Any]], Optional[datetime], bool, bool]
"""What one call did: the events, `notify_at()` after it, whether the logic asked to
be discarded, and (flowspark only) whether the key is left idle: no window, no queue."""


def _idle(engine: str, logic: Any) -> bool:
    if engine == "bytewax":
        return False
    snap = logic.snapshot()
    return not snap.logic_states and not snap.queue


def run_script(
    engine: str,
    build_op: BuildOp,
    script: Sequence[Step],
    through: Optional[Callable[[Any], Any]] = None,
    **kwargs: Any,
) -> List[Record]:
    """Drive one key of `build_op` on `engine` through `script`; one record per call.

    A logic Bytewax discards is replaced by a fresh one at the next batch
    (as its runtime does).  flowspark's logic is rebuilt from a pickled
    snapshot after every call.  `through` replaces the step's logic builder
    with one made from it.
    """
    builder, getter = window_builder(Engine(engine), build_op, **kwargs)
    if through is not None:
        builder = through(builder)
    logic: Optional[Any] = None
    records: List[Record] = []
    for step in script:
        if isinstance(step, timedelta):
            getter.advance(step)
            continue
        if isinstance(step, list):
            logic = logic if logic is not None else builder(None)
            events, discard = logic.on_batch(step)
        elif logic is None:
            continue
        elif step == "notify":
            events, discard = logic.on_notify()
        else:
            events, discard = logic.on_eof()
        records.append(([norm_event(e) for e in events], logic.notify_at(), discard, _idle(engine, logic)))
        if discard:
            logic = None
        elif engine == "flowspark":
            logic = builder(cloudpickle.loads(cloudpickle.dumps(logic.snapshot())))
    return records


def events_of(records: List[Record]) -> List[Tuple[str, int, Any]]:
    return [event for events, _at, _discard, _idle in records for event in events]


def assert_same_until_bytewax_forgets(build_op: BuildOp, script: Sequence[Step], **kwargs: Any) -> None:
    """Both engines do the same, call by call, up to the call after which Bytewax drops the key.

    What follows that call is where the engines deliberately differ (see the
    tombstone tests); at that point flowspark's key must be idle.  Wake-up
    times may be earlier on flowspark, never later.
    """
    theirs = run_script("bytewax", build_op, script, **kwargs)
    ours = run_script("flowspark", build_op, script, **kwargs)
    for i, (their, our) in enumerate(zip(theirs, ours)):
        (their_events, their_at, their_discard, _), (our_events, our_at, our_discard, our_idle) = their, our
        assert our_events == their_events, f"call {i}"
        assert not our_discard, f"call {i}"
        assert (our_at is None) == (their_at is None), f"call {i}"
        # Bytewax wakes up for the first *queued* value; flowspark for the earliest one.
        assert our_at is None or (their_at is not None and our_at <= their_at), f"call {i}"
        if their_discard:
            assert our_idle, f"call {i}"
            return
    assert len(ours) == len(theirs)


# The operators under test, each as step `win` with 10 s tumbling windows by default.


def tumbling(engine: Engine) -> Any:
    return engine.win.TumblingWindower(timedelta(seconds=10), ALIGN)


def sliding(engine: Engine) -> Any:
    return engine.win.SlidingWindower(timedelta(seconds=10), timedelta(seconds=4), ALIGN)


def session(engine: Engine) -> Any:
    return engine.win.SessionWindower(timedelta(seconds=3))


WINDOWERS: Dict[str, Callable[[Engine], Any]] = {"tumbling": tumbling, "sliding": sliding, "session": session}


def collect(windower: Callable[[Engine], Any], **kwargs: Any) -> BuildOp:
    return lambda e, up, clock: e.win.collect_window("win", up, clock, windower(e), **kwargs)


def fold_sum(windower: Callable[[Engine], Any]) -> BuildOp:
    def build(e: Engine, up: Any, clock: Any) -> Any:
        return e.win.fold_window(
            "win", up, clock, windower(e), lambda: 0, lambda acc, v: acc + v[0], lambda a, b: a + b
        )

    return build


def count(windower: Callable[[Engine], Any]) -> BuildOp:
    return lambda e, up, clock: e.win.count_window("win", up, clock, windower(e), lambda v: "k")


def max_by_payload(windower: Callable[[Engine], Any]) -> BuildOp:
    return lambda e, up, clock: e.win.max_window("win", up, clock, windower(e), by=lambda v: v[1])


def min_plain(windower: Callable[[Engine], Any]) -> BuildOp:
    return lambda e, up, clock: e.win.min_window("win", up, clock, windower(e))


def join(windower: Callable[[Engine], Any], **modes: Any) -> BuildOp:
    """A two-sided `join_window`; scripts tag values as `(side, (seconds, payload))`."""

    def build(e: Engine, up: Any, clock: Any) -> Any:
        left = e.op.filter_map_value("left", up, lambda sv: sv[1] if sv[0] == 0 else None)
        right = e.op.filter_map_value("right", up, lambda sv: sv[1] if sv[0] == 1 else None)
        return e.win.join_window("win", clock, windower(e), left, right, **modes)

    return build


# Hand-written scripts.


def test_tumbling_collect_out_of_order_late_and_eof() -> None:
    script: List[Step] = [[(1, "a"), (12, "b")], [(3, "c")], [(9, "d"), (30, "e")], [(2, "late")], "eof"]
    records = run_script("flowspark", collect(tumbling), script)
    assert events_of(records) == [
        ("late", 0, (3, "c")),
        ("down", 0, [(1, "a"), (9, "d")]),
        ("meta", 0, (sec(0), sec(10), [])),
        ("down", 1, [(12, "b")]),
        ("meta", 1, (sec(10), sec(20), [])),
        ("late", 0, (2, "late")),
        ("down", 3, [(30, "e")]),
        ("meta", 3, (sec(30), sec(40), [])),
    ]
    assert_same_until_bytewax_forgets(collect(tumbling), script)


def test_ordered_mode_waits_for_the_watermark_and_sorts() -> None:
    """With `ordered`, values wait until the watermark reaches them, then go in time order."""
    script: List[Step] = [[(10, "x"), (8, "y"), (6, "z")], [(16, "w")], "eof"]
    records = run_script("flowspark", collect(tumbling), script)
    # After the first batch the watermark is 5 s: nothing is due, so nothing opens and
    # the wake-up is the earliest queued timestamp (6 s).
    assert records[0] == ([], sec(6), False, False)
    # The watermark reaches 11 s: 6 s and 8 s and 10 s are applied in time order.
    assert records[1][:2] == ([("down", 0, [(6, "z"), (8, "y")]), ("meta", 0, (sec(0), sec(10), []))], sec(16))
    assert events_of(records[2:]) == [("down", 1, [(10, "x"), (16, "w")]), ("meta", 1, (sec(10), sec(20), []))]
    assert_same_until_bytewax_forgets(collect(tumbling), script)


def test_unordered_mode_applies_in_arrival_order_at_once() -> None:
    script: List[Step] = [[(10, "x"), (8, "y"), (6, "z")], [(16, "w")], "eof"]
    records = run_script("flowspark", collect(tumbling, ordered=False), script)
    assert records[0] == ([], sec(10), False, False)
    assert events_of(records) == [
        ("down", 0, [(8, "y"), (6, "z")]),
        ("meta", 0, (sec(0), sec(10), [])),
        ("down", 1, [(10, "x"), (16, "w")]),
        ("meta", 1, (sec(10), sec(20), [])),
    ]
    assert_same_until_bytewax_forgets(collect(tumbling, ordered=False), script)


def test_sliding_windows_overlap_and_report_every_late_window() -> None:
    script: List[Step] = [[(9, "a")], [(30, "b")], [(7, "late")], "eof"]
    records = run_script("flowspark", collect(sliding), script)
    assert [e for e in events_of(records) if e[0] != "meta"] == [
        ("down", 0, [(9, "a")]),
        ("down", 1, [(9, "a")]),
        ("down", 2, [(9, "a")]),
        ("late", 0, (7, "late")),
        ("late", 1, (7, "late")),
        ("down", 6, [(30, "b")]),
        ("down", 7, [(30, "b")]),
    ]
    assert_same_until_bytewax_forgets(collect(sliding), script)


def test_session_merge_that_only_happens_late_in_a_batch() -> None:
    """Unordered: two sessions open, and the last value of the same batch bridges them."""
    script: List[Step] = [[(0, "a"), (6, "b"), (3, "bridge")], [(40, "later")], "eof"]
    build = collect(session, ordered=False)
    records = run_script("flowspark", build, script)
    assert events_of(records) == [
        ("down", 0, [(0, "a"), (3, "bridge"), (6, "b")]),
        ("meta", 0, (sec(0), sec(6), [1])),
        ("down", 2, [(40, "later")]),
        ("meta", 2, (sec(40), sec(40), [])),
    ]
    assert_same_until_bytewax_forgets(build, script)
    # In time order the bridge arrives in between, so there is never anything to merge.
    ordered = events_of(run_script("flowspark", collect(session), script))
    assert ordered[:2] == [("down", 0, [(0, "a"), (3, "bridge"), (6, "b")]), ("meta", 0, (sec(0), sec(6), []))]


def test_session_merge_calls_on_merge_of_fold_and_reduce() -> None:
    script: List[Step] = [[(0, "a"), (6, "b"), (3, "c")], "eof"]
    sums = events_of(run_script("flowspark", fold_sum(session), script))
    assert sums[0] == ("down", 0, 9)
    maxima = events_of(run_script("flowspark", max_by_payload(session), script))
    assert maxima[0] == ("down", 0, (3, "c"))
    for build in (fold_sum(session), max_by_payload(session), count(session)):
        assert_same_until_bytewax_forgets(build, script)


def test_collect_into_set_and_dict() -> None:
    script: List[Step] = [[(1, "a"), (2, "a"), (3, "b")], "eof"]
    as_set = events_of(run_script("flowspark", collect(tumbling, into=set), script))
    assert as_set[0] == ("down", 0, {(1, "a"), (2, "a"), (3, "b")})
    as_dict = events_of(run_script("flowspark", collect(tumbling, into=dict), script))
    assert as_dict[0] == ("down", 0, {1: "a", 2: "a", 3: "b"})
    for into in (set, dict):
        assert_same_until_bytewax_forgets(collect(tumbling, into=into), script)
        assert_same_until_bytewax_forgets(
            collect(session, ordered=False, into=into), [*script[:1], [(1.5, "z")], "eof"]
        )


def test_max_and_min_keep_the_earlier_of_ties() -> None:
    script: List[Step] = [[(1, "b"), (2, "a"), (3, "b"), (4, "a")], "eof"]
    assert events_of(run_script("flowspark", max_by_payload(tumbling), script))[0] == ("down", 0, (1, "b"))
    assert events_of(run_script("flowspark", min_plain(tumbling), script))[0] == ("down", 0, (1, "b"))
    for build in (max_by_payload(tumbling), min_plain(tumbling), count(tumbling)):
        assert_same_until_bytewax_forgets(build, script)


JOIN_SCRIPT: List[Step] = [
    [(0, (1, "l1")), (1, (2, "r1"))],
    [(0, (3, "l2")), (1, (4, "r2"))],
    [(0, (15, "l3"))],
    "eof",
]


@pytest.mark.parametrize("insert_mode", ["first", "last", "product"])
@pytest.mark.parametrize("emit_mode", ["complete", "final", "running"])
@pytest.mark.parametrize("ordered", [True, False])
def test_join_window_modes(insert_mode: str, emit_mode: str, ordered: bool) -> None:
    build = join(tumbling, insert_mode=insert_mode, emit_mode=emit_mode, ordered=ordered)
    assert_same_until_bytewax_forgets(build, JOIN_SCRIPT)


def test_join_window_rows() -> None:
    def rows(**modes: Any) -> List[Tuple[int, Any]]:
        return [
            (i, v)
            for s, i, v in events_of(run_script("flowspark", join(tumbling, **modes), JOIN_SCRIPT))
            if s == "down"
        ]

    l1, r1, l2, r2, l3 = (1, "l1"), (2, "r1"), (3, "l2"), (4, "r2"), (15, "l3")
    assert rows() == [(0, (l2, r2)), (1, (l3, None))]
    assert rows(insert_mode="first", emit_mode="complete") == [(0, (l1, r1)), (0, (l2, r2))]
    assert rows(insert_mode="product", emit_mode="final") == [
        (0, (l1, r1)),
        (0, (l1, r2)),
        (0, (l2, r1)),
        (0, (l2, r2)),
        (1, (l3, None)),
    ]
    assert rows(insert_mode="last", emit_mode="running", ordered=False)[:3] == [
        (0, (l1, None)),
        (0, (l1, r1)),
        (0, (l2, r1)),
    ]


@pytest.mark.parametrize("insert_mode", ["first", "last", "product"])
def test_join_window_session_merges_keep_bytewax_precedence(insert_mode: str) -> None:
    """Merging sessions: with `first` the absorbed window's value wins (as in Bytewax)."""
    script: List[Step] = [[(0, (0, "L1")), (0, (6, "L2")), (0, (3, "x")), (1, (5, "R"))], "eof"]
    build = join(session, insert_mode=insert_mode, ordered=False)
    assert_same_until_bytewax_forgets(build, script)
    down = [v for s, _i, v in events_of(run_script("flowspark", build, script)) if s == "down"]
    expected = {
        "first": [((6, "L2"), (5, "R"))],
        "last": [((3, "x"), (5, "R"))],
        "product": [((0, "L1"), (5, "R")), ((3, "x"), (5, "R")), ((6, "L2"), (5, "R"))],
    }
    assert down == expected[insert_mode]


# Randomized scripts, compared call by call.


def random_script(seed: int, sides: int = 0) -> List[Step]:
    """Mostly increasing timestamps with jitter, stragglers, idle time and wake-ups."""
    rng = random.Random(seed)
    script: List[Step] = []
    now = 0.0
    for _ in range(40):
        roll = rng.random()
        if roll < 0.6:
            batch = []
            for _ in range(rng.randint(1, 4)):
                now += rng.uniform(0, 3)
                seconds = round(now + rng.choice([0, 0, 0, -2, -4, -9, 2]), 1)
                value = (seconds, rng.randint(0, 9))
                batch.append((rng.randrange(sides), value) if sides else value)
            script.append(batch)
        elif roll < 0.8:
            script.append(timedelta(seconds=rng.uniform(0, 8)))
        else:
            script.append("notify")
    script.append("eof")
    return script


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("windower", sorted(WINDOWERS))
@pytest.mark.parametrize(
    "op",
    ["collect", "collect_unordered", "fold", "count", "max", "min", "collect_set"],
)
def test_random_scripts_match_bytewax(op: str, windower: str, seed: int) -> None:
    w = WINDOWERS[windower]
    build = {
        "collect": collect(w),
        "collect_unordered": collect(w, ordered=False),
        "collect_set": collect(w, into=set),
        "fold": fold_sum(w),
        "count": count(w),
        "max": max_by_payload(w),
        "min": min_plain(w),
    }[op]
    assert_same_until_bytewax_forgets(build, random_script(seed))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("windower", sorted(WINDOWERS))
@pytest.mark.parametrize(
    ("insert_mode", "emit_mode", "ordered"),
    [("product", "final", True), ("first", "complete", False), ("last", "running", True), ("first", "final", False)],
)
def test_random_join_scripts_match_bytewax(
    insert_mode: str, emit_mode: str, ordered: bool, windower: str, seed: int
) -> None:
    build = join(WINDOWERS[windower], insert_mode=insert_mode, emit_mode=emit_mode, ordered=ordered)
    assert_same_until_bytewax_forgets(build, random_script(seed, sides=2))


@pytest.mark.parametrize("wait", [timedelta(0), timedelta.max])
def test_extreme_waits_match_bytewax(wait: timedelta) -> None:
    for windower in WINDOWERS.values():
        assert_same_until_bytewax_forgets(collect(windower), random_script(7), wait=wait)


# The tombstone: the one intended difference.

REOPEN_SCRIPT: List[Step] = [[(1, "first")], timedelta(seconds=60), "notify", [(2, "straggler")], "eof"]
"""The research repro: window 0 closes on system time alone, then a straggler for it arrives."""


def test_bytewax_reopens_a_closed_window_after_forgetting_the_key() -> None:
    records = run_script("bytewax", collect(tumbling, ordered=False), REOPEN_SCRIPT, wait=timedelta(0))
    assert [r[2] for r in records] == [False, True, False, True]
    assert events_of(records) == [
        ("down", 0, [(1, "first")]),
        ("meta", 0, (sec(0), sec(10), [])),
        ("down", 0, [(2, "straggler")]),
        ("meta", 0, (sec(0), sec(10), [])),
    ]


def test_flowspark_keeps_a_tombstone_so_the_straggler_is_late() -> None:
    records = run_script("flowspark", collect(tumbling, ordered=False), REOPEN_SCRIPT, wait=timedelta(0))
    assert events_of(records) == [
        ("down", 0, [(1, "first")]),
        ("meta", 0, (sec(0), sec(10), [])),
        ("late", 0, (2, "straggler")),
    ]
    assert [r[2:] for r in records] == [(False, False), (False, True), (False, True), (False, True)]


def test_tombstone_holds_only_clock_state_and_watermark() -> None:
    builder, getter = window_builder(Engine("flowspark"), collect(tumbling), wait=timedelta(0))
    logic = builder(None)
    logic.on_batch([(1, "a"), (5, "b")])
    getter.advance(timedelta(seconds=60))
    events, discard = logic.on_notify()
    assert not discard
    snap = logic.snapshot()
    assert (snap.logic_states, snap.queue, snap.windower_state.opened) == ({}, [], {})
    assert snap.watermark == sec(65)
    assert snap.clock_state.watermark_base == sec(5)
    assert logic.notify_at() is None


def test_sessions_are_never_forgotten_on_either_engine() -> None:
    script: List[Step] = [[(1, "a")], timedelta(seconds=60), "notify", [(2, "straggler")], "eof"]
    assert_same_until_bytewax_forgets(collect(session), script, wait=timedelta(0))
    assert ("late", -1, (2, "straggler")) in events_of(
        run_script("bytewax", collect(session), script, wait=timedelta(0))
    )


# Errors and flow structure.


def test_naive_timestamps_fail_naming_the_step() -> None:
    def naive(value: Any) -> datetime:
        return datetime(2024, 1, 1)

    builder, _getter = window_builder(Engine("flowspark"), collect(tumbling), ts_getter=naive)
    logic = builder(None)
    with pytest.raises(TypeError, match=r"^step 'df\.win\.fold_window\.window': `ts_getter` .*naive.* timezone-aware"):
        logic.on_batch([(1, "a")])


def test_windower_parameters_are_checked_when_the_flow_is_built() -> None:
    e = Engine("flowspark")
    flow = e.Dataflow("df")
    up = e.op.input("inp", flow, e.TestingSource([]))
    clock = e.win.EventClock(stamp, timedelta(0))
    with pytest.raises(ValueError, match=r"^step 'df\.win\.fold_window\.window': TumblingWindower `length`"):
        e.win.collect_window("win", up, clock, e.win.TumblingWindower(timedelta(0), ALIGN))
    with pytest.raises(ValueError, match=r"^step 'df\.win2': SlidingWindower `align_to`"):
        e.win.window("win2", up, clock, e.win.SlidingWindower(timedelta(1), timedelta(1), datetime(2024, 1, 1)), list)


@pytest.mark.parametrize("engine", ENGINES)
def test_collect_window_refuses_other_containers(engine: str) -> None:
    e = Engine(engine)
    flow = e.Dataflow("df")
    up = e.op.input("inp", flow, e.TestingSource([]))
    with pytest.raises(TypeError):
        e.win.collect_window("win", up, e.win.SystemClock(), tumbling(e), into=tuple)
    if engine == "flowspark":
        with pytest.raises(TypeError, match=r"step 'df\.win2': `collect_window` can't collect into <class 'tuple'>"):
            e.win.collect_window("win2", up, e.win.SystemClock(), tumbling(e), into=tuple)


def test_collect_into_dict_needs_pairs() -> None:
    builder, _getter = window_builder(Engine("flowspark"), collect(tumbling, into=dict, ordered=False))
    logic = builder(None)
    logic.on_batch([(1, "a")])
    with pytest.raises(TypeError, match=r"step 'df\.win' collecting into a `dict` requires `\(key, value\)` 2-tuple"):
        logic.on_batch([(3,)])


@pytest.mark.parametrize("engine", ENGINES)
def test_join_window_refuses_unknown_modes(engine: str) -> None:
    e = Engine(engine)
    flow = e.Dataflow("df")
    up = e.op.input("inp", flow, e.TestingSource([]))
    with pytest.raises(ValueError, match="unknown join insert mode 'all'"):
        e.win.join_window("j1", e.win.SystemClock(), tumbling(e), up, insert_mode="all")
    with pytest.raises(ValueError, match="unknown join emit mode 'never'"):
        e.win.join_window("j2", e.win.SystemClock(), tumbling(e), up, emit_mode="never")


OPS_FOR_STRUCTURE: Dict[str, BuildOp] = {
    "collect": collect(tumbling),
    "fold": fold_sum(tumbling),
    "count": count(tumbling),
    "max": max_by_payload(tumbling),
    "min": min_plain(tumbling),
    "join": join(tumbling),
}


@pytest.mark.parametrize("op", sorted(OPS_FOR_STRUCTURE))
def test_core_steps_have_bytewax_step_ids(op: str) -> None:
    """Same nesting, so qualified ids in errors and recovery keys read the same."""

    def step_ids(engine: str) -> List[str]:
        e = Engine(engine)
        flow = e.Dataflow("df")
        up = e.op.input("inp", flow, e.TestingSource([]))
        OPS_FOR_STRUCTURE[op](e, up, e.win.SystemClock())
        return [s.step_id for s in core_steps(flow)]

    assert step_ids("flowspark") == step_ids("bytewax")


# Whole flows, run by `run_main` on each engine.

Outputs = Dict[str, List[Any]]


def _window_outputs(e: Engine, outputs: Outputs, name: str, win_out: Any) -> None:
    for stream in ("down", "late", "meta"):
        items: List[Any] = []
        outputs[f"{name}.{stream}"] = items
        e.op.output(f"{name}_{stream}", getattr(win_out, stream), e.TestingSink(items))


def per_key(outputs: Outputs) -> Dict[str, Dict[str, List[Any]]]:
    """Each output's `(window_id, value)` items per key, metadata as tuples, in arrival order."""
    result: Dict[str, Dict[str, List[Any]]] = {}
    for name, items in outputs.items():
        grouped: Dict[str, List[Any]] = {}
        for key, (window_id, value) in items:
            grouped.setdefault(key, []).append((window_id, norm_value(value)))
        result[name] = grouped
    return result


def sorted_per_key(outputs: Outputs) -> Dict[str, Dict[str, List[Any]]]:
    """`per_key`, with each key's items sorted: for flows whose cross-window order may vary."""
    return {
        name: {key: sorted(items, key=repr) for key, items in grouped.items()}
        for name, grouped in per_key(outputs).items()
    }


def _test_clock(e: Engine, wait: float) -> Any:
    getter = import_module(f"{e.name}.testing").TimeTestingGetter(SYSTEM_START)
    return e.win.EventClock(lambda kv: sec(kv[0]), timedelta(seconds=wait), now_getter=getter.get)


FIXED_INPUT = [
    ("a", (1, 5)),
    ("b", (2, 1)),
    ("a", (12, 7)),
    ("a", (8, 2)),
    ("b", (14, 3)),
    ("a", (3, 9)),
    ("a", (25, 1)),
    ("b", (5, 4)),
    ("a", (19, 3)),
    ("b", (31, 8)),
    ("a", (13, 5)),
]
"""`(key, (seconds, amount))`: out of order within the 5 s wait, and a few later than that."""


def build_fixed_windows(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("fixed")
    up = e.op.input("inp", flow, e.TestingSource(FIXED_INPUT))
    clock = _test_clock(e, 5)
    outputs: Outputs = {}
    tumble = tumbling(e)
    _window_outputs(e, outputs, "collect", e.win.collect_window("collect", up, clock, tumble))
    fold = e.win.fold_window("fold", up, clock, sliding(e), lambda: 0, lambda acc, kv: acc + kv[1], lambda x, y: x + y)
    _window_outputs(e, outputs, "fold", fold)
    unkeyed = e.op.map("unkey", up, lambda kv: kv[1])
    counted = e.win.count_window(
        "count", unkeyed, _test_clock(e, 5), tumble, lambda sa: "even" if sa[1] % 2 == 0 else "odd"
    )
    _window_outputs(e, outputs, "count", counted)
    _window_outputs(e, outputs, "max", e.win.max_window("max", up, clock, tumble, by=lambda kv: kv[1]))
    _window_outputs(e, outputs, "set", e.win.collect_window("set", up, clock, sliding(e), into=set, ordered=False))
    return flow, outputs


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.quick
def test_fixed_windows_flow(engine: str) -> None:
    got = per_key(run_on(engine, build_fixed_windows))
    if engine == "bytewax":
        # 25 s pushes `a`'s watermark to 20 s: windows 0 and 1 close, 19 s and 13 s are late.
        assert got["collect.down"]["a"] == [(0, [(1, 5), (8, 2)]), (1, [(12, 7)]), (2, [(25, 1)])]
        assert got["collect.late"] == {"a": [(0, (3, 9)), (1, (19, 3)), (1, (13, 5))], "b": [(0, (5, 4))]}
        # Odd amounts at 1 s and 2 s; the one at 3 s is late for the "odd" key's watermark.
        assert got["count.down"]["odd"][0] == (0, 2)
    else:
        assert got == per_key(run_on("bytewax", build_fixed_windows))


SESSION_INPUT = [
    ("a", (0, "a0")),
    ("a", (6, "a6")),
    ("b", (0, "b0")),
    ("a", (3, "a3")),
    ("a", (30, "a30")),
    ("b", (2, "b2")),
    ("a", (20, "late")),
    ("a", (35, "a35")),
    ("b", (50, "b50")),
    ("a", (31, "a31")),
]
"""`a`'s first two sessions are bridged by the fourth item, in the same batch of five."""


def build_sessions(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("sessions")
    up = e.op.input("inp", flow, e.TestingSource(SESSION_INPUT, batch_size=5))
    clock = _test_clock(e, 8)
    outputs: Outputs = {}
    gap = e.win.SessionWindower(timedelta(seconds=3))
    _window_outputs(e, outputs, "ordered", e.win.collect_window("ordered", up, clock, gap))
    _window_outputs(e, outputs, "unordered", e.win.collect_window("unordered", up, clock, gap, ordered=False))
    _window_outputs(
        e, outputs, "reduce", e.win.reduce_window("reduce", up, clock, gap, lambda x, y: (x[0], x[1] + y[1]))
    )
    return flow, outputs


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.quick
def test_session_flow(engine: str) -> None:
    got = per_key(run_on(engine, build_sessions))
    if engine == "bytewax":
        # Unordered: a6 opens session 1, a3 bridges it into session 0; merging
        # appends session 1's list to session 0's.
        assert got["unordered.down"]["a"][0] == (0, [(0, "a0"), (3, "a3"), (6, "a6")])
        assert got["unordered.meta"]["a"][0] == (0, (sec(0), sec(6), [1]))
        assert got["ordered.meta"]["a"][0] == (0, (sec(0), sec(6), []))
        assert got["reduce.down"]["a"][0] == (0, (0, "a0a3a6"))
        assert got["ordered.late"]["a"] == [(-1, (20, "late"))]
    else:
        assert got == per_key(run_on("bytewax", build_sessions))


def build_joins(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("joins")
    left = e.op.input("left", flow, e.TestingSource([("k", (1, "l1")), ("k", (3, "l3")), ("k", (14, "l14"))]))
    right = e.op.input("right", flow, e.TestingSource([("k", (2, "r2")), ("k", (12, "r12")), ("j", (5, "r5"))]))
    outputs: Outputs = {}
    clock = _test_clock(e, 60)
    tumble = tumbling(e)
    _window_outputs(e, outputs, "final", e.win.join_window("final", clock, tumble, left, right))
    product = e.win.join_window("product", clock, tumble, left, right, insert_mode="product")
    _window_outputs(e, outputs, "product", product)
    complete = e.win.join_window("complete", clock, tumble, left, right, insert_mode="first", emit_mode="complete")
    _window_outputs(e, outputs, "complete", complete)
    running = e.win.join_window(
        "running", clock, e.win.SessionWindower(timedelta(seconds=5)), left, right, emit_mode="running"
    )
    _window_outputs(e, outputs, "running", running)
    return flow, outputs


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.quick
def test_join_window_flow(engine: str) -> None:
    """Two inputs: their interleaving may vary, so nothing is late and `ordered` is on."""
    got = sorted_per_key(run_on(engine, build_joins))
    if engine == "bytewax":
        assert got["final.down"]["k"] == [(0, ((3, "l3"), (2, "r2"))), (1, ((14, "l14"), (12, "r12")))]
        assert got["final.down"]["j"] == [(0, (None, (5, "r5")))]
        assert len(got["product.down"]["k"]) == 3
        assert got["complete.down"]["k"] == [(0, ((1, "l1"), (2, "r2"))), (1, ((14, "l14"), (12, "r12")))]
        assert got["running.meta"]["k"] == [(0, (sec(1), sec(3), [])), (1, (sec(12), sec(14), []))]
    else:
        assert got == sorted_per_key(run_on("bytewax", build_joins))


def custom_parts(win: Any) -> Tuple[Any, Any, Callable[[Optional[Any]], Any]]:
    """A user-defined clock, windower and window logic written against `win`'s ABCs.

    * `MarkerClock`: values are `(seconds, amount, marker)`; the watermark is
      the highest `seconds - 2` seen, or a marker's value if higher.  Its
      state is the watermark; it never asks to be woken up.
    * `BucketWindower`: windows between fixed boundaries (0, 10, 25, 60 s).
    * `RunningSum`: emits the running sum on each value and `("total", n)`
      when the window closes.
    """

    class MarkerClockLogic(win.ClockLogic):  # type: ignore[misc]
        def __init__(self, watermark: Optional[datetime]) -> None:
            self.watermark = watermark or win.UTC_MIN

        def before_batch(self) -> None:
            pass

        def on_item(self, value: Any) -> Tuple[datetime, datetime]:
            seconds, _amount, marker = value
            candidate = sec(marker) if marker is not None else sec(seconds - 2)
            self.watermark = max(self.watermark, candidate)
            return sec(seconds), self.watermark

        def on_notify(self) -> datetime:
            return self.watermark

        def on_eof(self) -> datetime:
            return win.UTC_MAX  # type: ignore[no-any-return]

        def to_system_utc(self, timestamp: datetime) -> Optional[datetime]:
            return None

        def snapshot(self) -> datetime:
            return self.watermark

    class MarkerClock(win.Clock):  # type: ignore[misc]
        def build(self, resume_state: Optional[datetime]) -> Any:
            return MarkerClockLogic(resume_state)

    bounds = [sec(0), sec(10), sec(25), sec(60)]

    class BucketWindowerLogic(win.WindowerLogic):  # type: ignore[misc]
        def __init__(self, opened: Optional[Dict[int, Any]]) -> None:
            self.opened: Dict[int, Any] = dict(opened or {})

        def _bucket(self, timestamp: datetime) -> List[int]:
            return [i for i in range(len(bounds) - 1) if bounds[i] <= timestamp < bounds[i + 1]]

        def open_for(self, timestamp: datetime) -> List[int]:
            ids = self._bucket(timestamp)
            for i in ids:
                self.opened.setdefault(i, win.WindowMetadata(bounds[i], bounds[i + 1]))
            return ids

        def late_for(self, timestamp: datetime) -> List[int]:
            return self._bucket(timestamp)

        def merged(self) -> List[Tuple[int, int]]:
            return []

        def close_for(self, watermark: datetime) -> List[Tuple[int, Any]]:
            done = [(i, m) for i, m in self.opened.items() if m.close_time <= watermark]
            for i, _m in done:
                del self.opened[i]
            return done

        def notify_at(self) -> Optional[datetime]:
            return None

        def is_empty(self) -> bool:
            return not self.opened

        def snapshot(self) -> Dict[int, Any]:
            return dict(self.opened)

    class BucketWindower(win.Windower):  # type: ignore[misc]
        def build(self, resume_state: Optional[Dict[int, Any]]) -> Any:
            return BucketWindowerLogic(resume_state)

    class RunningSum(win.WindowLogic):  # type: ignore[misc]
        def __init__(self, total: int) -> None:
            self.total = total

        def on_value(self, value: Any) -> List[int]:
            self.total += value[1]
            return [self.total]

        def on_merge(self, original: Any) -> List[int]:
            self.total += original.total
            return [self.total]

        def on_close(self) -> List[Any]:
            return [("total", self.total)]

        def snapshot(self) -> int:
            return self.total

    def running_sum(resume_state: Optional[int]) -> Any:
        return RunningSum(resume_state or 0)

    return MarkerClock(), BucketWindower(), running_sum


CUSTOM_INPUT = [
    ("a", (1, 10, None)),
    ("a", (4, 5, None)),
    ("a", (0, 0, 30)),
    ("a", (3, 7, None)),
    ("a", (40, 1, None)),
    ("b", (12, 2, None)),
    ("b", (70, 3, None)),
]
"""`a`: window 0 fills, a late marker pushes the watermark to 30 s (closing it and
leaving `a` idle), then a straggler for window 0 arrives.  `b`: a value past the
last bucket is in no window; it only moves the watermark, which closes window 1."""


def build_custom(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("custom")
    up = e.op.input("inp", flow, e.TestingSource(CUSTOM_INPUT))
    clock, windower, logic_builder = custom_parts(e.win)
    outputs: Outputs = {}
    _window_outputs(e, outputs, "sum", e.win.window("sum", up, clock, windower, logic_builder, ordered=False))
    return flow, outputs


@pytest.mark.parametrize("engine", ENGINES)
def test_custom_clock_windower_logic_and_the_tombstone(engine: str) -> None:
    got = per_key(run_on(engine, build_custom))
    no_merges: List[int] = []
    window_0, window_1, window_2 = (
        (sec(0), sec(10), no_merges),
        (sec(10), sec(25), no_merges),
        (sec(25), sec(60), no_merges),
    )
    if engine == "bytewax":
        # `a` was forgotten: the straggler (3 s) meets a fresh clock, reopens window 0,
        # which is emitted (and reported on `meta`) a second time.
        assert got["sum.down"]["a"] == [
            (0, 10),
            (0, 15),
            (0, ("total", 15)),
            (0, 7),
            (2, 1),
            (0, ("total", 7)),
            (2, ("total", 1)),
        ]
        assert got["sum.meta"]["a"] == [(0, window_0), (0, window_0), (2, window_2)]
        assert got["sum.late"] == {"a": [(0, (0, 0, 30))]}
    else:
        # The tombstone kept `a`'s watermark (30 s), so the straggler is late.
        assert got["sum.down"]["a"] == [(0, 10), (0, 15), (0, ("total", 15)), (2, 1), (2, ("total", 1))]
        assert got["sum.meta"]["a"] == [(0, window_0), (2, window_2)]
        assert got["sum.late"] == {"a": [(0, (0, 0, 30)), (0, (3, 7, None))]}
    assert got["sum.down"]["b"] == [(1, 2), (1, ("total", 2))]
    assert got["sum.meta"]["b"] == [(1, window_1)]


def build_naive(e: Engine) -> Tuple[Any, Outputs]:
    flow = e.Dataflow("naive")
    up = e.op.input("inp", flow, e.TestingSource([("a", 1)]))
    clock = e.win.EventClock(lambda v: datetime(2024, 1, 1, 0, 0, v), timedelta(0))
    outputs: Outputs = {}
    _window_outputs(e, outputs, "c", e.win.collect_window("c", up, clock, tumbling(e)))
    return flow, outputs


@pytest.mark.parametrize("engine", ENGINES)
def test_naive_timestamp_fails_the_run(engine: str) -> None:
    e = Engine(engine)
    with pytest.raises(e.BytewaxRuntimeError) as info:
        run_on(engine, build_naive)
    messages = " | ".join(str(ex) for ex in cause_chain(info.value))
    if engine == "bytewax":
        assert "can't compare offset-naive and offset-aware datetimes" in messages
    else:
        assert "step 'naive.c.fold_window.window': `ts_getter`" in messages
        assert "timezone-aware" in messages


def _general_path(builder: Any) -> Any:
    """The same step's logic builder, but every key on the value-at-a-time path."""
    from flowspark.operators._windowing.per_key import KeyWindowLogic

    return lambda resume: KeyWindowLogic(builder, resume)


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_the_tumbling_fold_fast_path_gives_what_the_general_path_gives(seed: int, ordered: bool) -> None:
    rng = random.Random(seed)
    script: List[Step] = []
    for _ in range(rng.randint(2, 8)):
        script.append([(rng.randint(0, 60) + rng.random(), rng.randint(1, 9)) for _ in range(rng.randint(1, 40))])
        script.append(rng.choice([timedelta(seconds=rng.randint(0, 20)), "notify", timedelta(0)]))
    script.append("eof")

    def summed(e: Engine, up: Any, clock: Any) -> Any:
        return e.win.fold_window(
            "win", up, clock, tumbling(e), lambda: 0, lambda acc, v: acc + v[1], lambda a, b: a + b, ordered=ordered
        )

    fast = run_script("flowspark", summed, script)
    builder, _getter = window_builder(Engine("flowspark"), summed)
    assert type(builder(None)).__name__ == "MergingKeyWindowLogic"
    assert fast == run_script("flowspark", summed, script, through=_general_path)
    assert any(events for events, *_ in fast)
