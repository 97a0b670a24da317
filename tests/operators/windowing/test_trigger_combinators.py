"""Combined triggers: `AfterAny`, `AfterAll`, `AfterEach`, `Repeatedly` and `Once`, as Beam's combine.

Expected panes follow Beam's own tests (`sdks/python/apache_beam/transforms/
trigger_test.py`, `run_trigger_simple` with one value per bundle) where
flowspark can say the same: Beam's one-shot `AfterCount(n)` is
`Once(CountTrigger(n))` here, its accumulating mode is the default and
discarding is `purge=True`.  Beam's `AfterWatermark` has no counterpart (a
flowspark window always emits when it closes), so where Beam writes
`AfterAny(AfterCount(3), AfterWatermark())` the count alone stands here.
Every per-key test rebuilds the logic from a pickled snapshot after each
call (a kill and resume between any two batches), so the subtriggers'
state (counts, steps, finished ones, wake-ups) survives it.
"""

from __future__ import annotations

import inspect
import pickle
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, List

import pytest
from support.event_time import ALIGN
from support.firing_helpers import (
    SYSTEM_START,
    by_key,
    downs,
    drive_op,
    flow_clock,
    logic_builder,
    on_system_clock,
    panes,
    payload,
    run,
    sink_all,
)

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators._windowing.triggers import WindowBook
from flowspark.testing import TestingSource, run_main

BIG = win.TumblingWindower(timedelta(seconds=100), ALIGN)
GAP = win.SessionWindower(timedelta(seconds=10))


def letters(windower: Any, trigger: win.Trigger, ordered: bool = True, **kwargs: Any) -> Any:
    """A `collect_window` of the payloads (letters) over `windower` with `trigger`."""

    def build(up: Any, clock: Any, _getter: Any) -> Any:
        return win.collect_window(
            "win", up, clock, windower, list, ordered, firing=win.Firing(trigger=trigger, **kwargs)
        )

    return build


def collected(records: Any) -> List[str]:
    """Each `down` emission as a string of its letters."""
    return ["".join(payload(v) for v in value) for _step, _window, value in downs(records)]


def timings(records: Any) -> List[str]:
    return [timing for _w, _v, timing, _i, _last in panes(records)]


ABCDEFG = [[(i, "abcdefg"[i])] for i in range(7)] + ["eof"]
"""Beam's `zip(range(7), 'abcdefg')`, one value per batch, then end of input."""


def test_beam_repeatedly_after_first() -> None:
    """Beam's `test_repeatedly_after_first`: `Repeatedly(AfterAny(AfterCount(3), AfterWatermark()))`.

    Each fire finishes the `AfterAny` (its `AfterCount(3)` is one-shot),
    and `Repeatedly` starts it over: abc, abcdef, then abcdefg when the
    window closes, then one late pane per late value.
    """
    trigger = win.Repeatedly(win.AfterAny(win.Once(win.CountTrigger(3)), win.Once(win.CountTrigger(100))))
    late = [[(1, "x")], [(0, "y")], [(2, "z")]]
    # 150 s moves the watermark past window 0 (kept for lateness) before the late values come.
    script = ABCDEFG[:-1] + [[(150, "!")]] + late + ["eof"]
    records = drive_op(letters(BIG, trigger, allowed_lateness=timedelta(seconds=100)), script)
    # Beam's expected panes of window [0, 100), in order; then window 1 closes at end of input.
    assert collected(records) == ["abc", "abcdef", "abcdefg", "abcdefgx", "abcdefgxy", "abcdefgxyz", "!"]
    assert timings(records) == ["early", "early", "on_time", "late", "late", "late", "on_time"]


def test_after_any_fires_on_the_first_and_resets_only_it() -> None:
    """Without `Once`, each subtrigger fires again and again (Flink's kind); only the one that fired resets."""
    records = drive_op(letters(BIG, win.AfterAny(win.CountTrigger(3), win.CountTrigger(5))), ABCDEFG)
    # c: the 3-count fires (and restarts), the 5-count is at 3; e: the 5-count fires; f: the 3-count again.
    assert collected(records) == ["abc", "abcde", "abcdef", "abcdefg"]
    assert timings(records) == ["early", "early", "early", "on_time"]


def test_after_any_finishes_with_a_one_shot_subtrigger() -> None:
    """Beam's `AfterAny` finishes as soon as a subtrigger that fired finishes: no more early panes."""
    records = drive_op(letters(BIG, win.AfterAny(win.Once(win.CountTrigger(2)), win.CountTrigger(3))), ABCDEFG)
    assert collected(records) == ["ab", "abcdefg"]
    assert timings(records) == ["early", "on_time"]


@pytest.mark.parametrize(
    "trigger", [win.Repeatedly(win.Once(win.CountTrigger(2))), win.CountTrigger(2), win.Repeatedly(win.CountTrigger(2))]
)
def test_beam_sessions_repeatedly_after_count(trigger: win.Trigger) -> None:
    """Beam's `test_sessions_repeatedly_after_count`, accumulating: sessions merge, their counts add up.

    a at 1 s and b at 15 s open two sessions; c at 6 s bridges them (counts
    1 + 1, then c makes 3: fire abc); d and e fire abcde.  Over a trigger
    that never finishes, `Repeatedly` changes nothing.
    """
    script: List[Any] = [[(1, "a")], [(15, "b")], [(6, "c")], [(2, "d")], [(7, "e")], "eof"]
    records = drive_op(letters(GAP, trigger, ordered=False), script, wait=timedelta(seconds=60))
    assert collected(records)[:2] == ["abc", "abcde"]
    assert [set(p) for p in collected(records)] == [set("abc"), set("abcde"), set("abcde")]


def test_beam_sessions_repeatedly_after_count_discarding() -> None:
    """The same, discarding (Beam's `AccumulationMode.DISCARDING`): `purge=True` on the outer trigger."""
    trigger = win.Repeatedly(win.Once(win.CountTrigger(2)), purge=True)
    script: List[Any] = [[(1, "a")], [(15, "b")], [(6, "c")], [(2, "d")], [(7, "e")], "eof"]
    records = drive_op(letters(GAP, trigger, ordered=False), script, wait=timedelta(seconds=60))
    assert [set(p) for p in collected(records)] == [set("abc"), set("de")]


TEN_VALUES = [[(i, "abcdefghij"[i])] for i in range(10)] + ["eof"]
"""Beam's `zip(range(10), 'abcdefghij')`: one growing session (gap 10 s), one value per batch."""


def test_beam_sessions_after_each() -> None:
    """Beam's `test_sessions_after_each`: `AfterEach(AfterCount(2), AfterCount(3))`, then finished.

    Beam feeds two values per bundle and counts per bundle (ab, abcdef);
    flowspark's triggers see each value, as Beam's do with one value per
    bundle: ab, then three more, abcde; then the window only closes.
    """
    trigger = win.AfterEach(win.Once(win.CountTrigger(2)), win.Once(win.CountTrigger(3)))
    records = drive_op(letters(GAP, trigger), TEN_VALUES)
    assert collected(records) == ["ab", "abcde", "abcdefghij"]
    assert timings(records) == ["early", "early", "on_time"]


def test_beam_sessions_repeatedly_after_each() -> None:
    """Beam's `Repeatedly(AfterEach(AfterCount(2), AfterCount(3)))`: the sequence starts over when it ends."""
    trigger = win.Repeatedly(win.AfterEach(win.Once(win.CountTrigger(2)), win.Once(win.CountTrigger(3))))
    records = drive_op(letters(GAP, trigger), TEN_VALUES)
    assert collected(records) == ["ab", "abcde", "abcdefg", "abcdefghij", "abcdefghij"]
    assert timings(records) == ["early"] * 4 + ["on_time"]


def test_after_each_keeps_a_subtrigger_that_never_finishes() -> None:
    """As in Beam, `AfterEach(Repeatedly(x), y)` never reaches `y`: a built-in trigger never finishes."""
    trigger = win.AfterEach(win.CountTrigger(3), win.Once(win.CountTrigger(1)))
    records = drive_op(letters(BIG, trigger), ABCDEFG)
    assert collected(records) == ["abc", "abcdef", "abcdefg"]


def test_after_all_waits_for_every_subtrigger() -> None:
    """`AfterAll` fires once each subtrigger has fired since the last fire (Beam's `AfterAll`)."""
    trigger = win.AfterAll(win.CountTrigger(2), win.PredicateTrigger(lambda v: payload(v).isupper()))
    script: List[Any] = [[(i, c)] for i, c in enumerate("aBcdeFg")] + ["eof"]
    records = drive_op(letters(BIG, trigger), script)
    # B: two values and a capital.  d: two more, but no capital until F.
    assert collected(records) == ["aB", "aBcdeF", "aBcdeFg"]


def test_after_all_of_one_shots_finishes() -> None:
    trigger = win.AfterAll(win.Once(win.CountTrigger(1)), win.Once(win.CountTrigger(3)))
    records = drive_op(letters(BIG, trigger), ABCDEFG)
    assert collected(records) == ["abc", "abcdefg"]


def test_beam_after_all_of_count_and_processing_time() -> None:
    """Beam's `test_multiple_accumulating_firings`: `AfterAll(AfterCount(1), AfterProcessingTime(5))`, repeated.

    Ten values, five at a time, system time moving 5 s after each five:
    the trigger fires twice, with 1-5, then 1-10 (accumulating).
    """

    def build(up: Any, clock: Any, getter: Any) -> Any:
        every_5s = win.ProcessingTimeTrigger(timedelta(seconds=5), now_getter=getter.get)
        trigger = win.Repeatedly(win.AfterAll(win.Once(win.CountTrigger(1)), win.Once(every_5s)))
        return win.sum_window("win", up, clock, BIG, payload, False, firing=win.Firing(trigger=trigger))

    builder, getter, _out = logic_builder(build, to_system_utc=on_system_clock)
    script: List[Any] = [
        [(i, i) for i in range(1, 6)],  # system time +0 s: fire due at +5 s
        timedelta(seconds=5),
        "notify",  # +5 s: fire 1-5
        [(i + 5, i) for i in range(6, 11)],  # at 11-15 s, ahead of the watermark (10 s); a new fire due at +10 s
        timedelta(seconds=5),
        "notify",  # +10 s: fire 1-10
        "eof",
    ]
    records = run(builder, getter, script)
    second = timedelta(seconds=1)
    assert [at for _e, at in records][:2] == [SYSTEM_START + 5 * second, SYSTEM_START + 100 * second]
    assert records[2][1] == SYSTEM_START + 10 * second
    assert panes(records) == [(0, 15, "early", 0, False), (0, 55, "early", 1, False), (0, 55, "on_time", 2, True)]


def test_after_any_of_count_and_processing_time() -> None:
    """Every 3 values or 5 s after an unfired value, whichever comes first (Beam's docs' classic, repeated)."""

    def build(up: Any, clock: Any, getter: Any) -> Any:
        every_5s = win.ProcessingTimeTrigger(timedelta(seconds=5), now_getter=getter.get)
        trigger = win.Repeatedly(win.AfterAny(win.Once(win.CountTrigger(3)), win.Once(every_5s)))
        return win.sum_window("win", up, clock, BIG, payload, False, trigger=trigger)

    builder, getter, _out = logic_builder(build, to_system_utc=on_system_clock)
    script: List[Any] = [
        [(1, 1), (2, 2), (3, 3)],  # three values: fire 6; both subtriggers start over
        [(4, 4)],  # a fire due at +5 s
        timedelta(seconds=5),
        "notify",  # +5 s: fire 10
        "eof",
    ]
    records = run(builder, getter, script)
    assert records[0][1] == SYSTEM_START + 100 * timedelta(seconds=1)  # nothing pending after the count fired
    assert records[1][1] == SYSTEM_START + 5 * timedelta(seconds=1)
    assert panes(records) == [(0, 6, "early", 0, False), (0, 10, "early", 1, False), (0, 10, "on_time", 2, True)]


def test_once_fires_early_once() -> None:
    records = drive_op(letters(BIG, win.Once(win.PredicateTrigger(lambda v: payload(v) in "bd"))), ABCDEFG)
    assert collected(records) == ["ab", "abcdefg"]


@pytest.mark.parametrize(
    ("trigger", "message"),
    [
        (win.AfterAny(), r"`AfterAny` needs at least 1 trigger\(s\); got 0"),
        (win.AfterEach(win.CountTrigger(2), "x"), r"`AfterEach` combines triggers; got 'x'"),  # type: ignore[arg-type]
        (win.AfterAll(win.CountTrigger(2, purge=True)), r"`AfterAll`: set `purge=True` on the outermost trigger only"),
        (win.Repeatedly(win.CountTrigger(0)), r"`CountTrigger.count` must be a positive `int`; got 0"),
        (win.Once(win.CountTrigger(2), purge="y"), r"`Once.purge` must be a `bool`"),  # type: ignore[arg-type]
    ],
)
def test_bad_combinations_fail_naming_the_step(trigger: Any, message: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource([]))
    with pytest.raises(ValueError, match=r"^step 'df\.win\.window': " + message):
        win.sum_window("win", up, win.SystemClock(), BIG, trigger=trigger)


def test_combined_triggers_are_values() -> None:
    a = win.AfterAny(win.CountTrigger(2), win.Once(win.CountTrigger(3)), purge=True)
    assert a == win.AfterAny(win.CountTrigger(2), win.Once(win.CountTrigger(3)), purge=True)
    assert a.triggers == (win.CountTrigger(2), win.Once(win.CountTrigger(3))) and a.purge
    assert pickle.loads(pickle.dumps(a)) == a and hash(a) == hash(pickle.loads(pickle.dumps(a)))
    assert win.AfterFirst is win.AfterAny


def test_a_book_pickled_before_combined_triggers_still_loads() -> None:
    """A `WindowBook` written by the release before combined triggers has only its first five fields."""
    book = WindowBook(panes=2, count=1, purged=False, on_time=True)
    for name in ("ready", "finished", "step", "subs"):
        del book.__dict__[name]
    old = pickle.loads(pickle.dumps(book))
    assert (old.ready, old.finished, old.step, old.subs) == (False, False, 0, None)
    copied = old.copy()
    copied.absorb(WindowBook(count=2))
    assert (copied.panes, copied.count, copied.on_time) == (2, 3, True)
    assert win.CountTrigger(3).after_value(old, "v") is False and old.count == 2


# A whole flow through Spark: a combined trigger reaches the workers and fires per key.

COMBINED_INPUT = [("a", (i, f"a{i}")) for i in range(1, 8)] + [("b", (i, f"b{i}")) for i in range(1, 4)]


def test_combined_trigger_flow() -> None:
    flow = Dataflow("combined")
    up = op.input("inp", flow, TestingSource(COMBINED_INPUT, batch_size=2))
    outputs: dict[str, List[Any]] = {}
    trigger = win.AfterEach(win.Once(win.CountTrigger(2)), win.Repeatedly(win.CountTrigger(3)), purge=True)
    sink_all(
        outputs, "batches", win.collect_window("batches", up, flow_clock(), BIG, firing=win.Firing(trigger=trigger))
    )
    run_main(flow)
    got = by_key(outputs["batches.down"])
    assert [[v for _t, v in items] for _w, items in got["a"]] == [["a1", "a2"], ["a3", "a4", "a5"], ["a6", "a7"]]
    assert [[v for _t, v in items] for _w, items in got["b"]] == [["b1", "b2"], ["b3"]]
    assert [p.timing for _w, p in by_key(outputs["batches.panes"])["a"]] == ["early", "early", "on_time"]


# The examples: the docstrings of `Firing` and of the combinators (classes, which
# tests/test_docstring_examples.py does not collect) and docs/windowing.md's sections on them.

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "windowing.md"


@pytest.mark.parametrize("name", ["Firing", "AfterAny", "AfterEach", "Repeatedly"])
def test_its_docstring_example_runs(name: str) -> None:
    examples = _BLOCK.findall(inspect.getdoc(getattr(win, name)) or "")
    assert examples, f"{name} has no ```python example in its docstring"
    for code in examples:
        exec(compile(code, f"<example of {name}>", "exec"), {"__name__": f"example_{name}"})


def _docs_section(title: str) -> List[str]:
    text = DOCS.read_text()
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return _BLOCK.findall(text[start : end if end >= 0 else None])


@pytest.mark.parametrize("title", ["The options as one value", "Combining triggers"])
def test_the_docs_examples_run(title: str) -> None:
    (setup,) = _BLOCK.findall(DOCS.read_text())[:1]
    examples = _docs_section(title)
    assert examples
    for code in examples:
        namespace: dict[str, Any] = {"__name__": "docs_example"}
        exec(compile(setup + code, f"<docs/windowing.md: {title}>", "exec"), namespace)
