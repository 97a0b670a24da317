"""Stateless operators: shims over `flat_map_batch`, checked against Bytewax.

Unit tests pull the core step's function out of a built flow on both
engines and call it directly; the end-to-end tests run whole flows.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, List

import pytest
from support.oracle import (
    ENGINES,
    Engine,
    Make,
    cause_chain,
    core_steps,
    last_core_arg,
    run_both,
    run_on,
)

from flowspark.operators import TTLCache
from flowspark.operators.helpers import map_dict_value


def _mappers(make: Make) -> List[Callable[[List[Any]], Any]]:
    return [last_core_arg(Engine(name), make, "mapper") for name in ENGINES]


def _is_even(x: int) -> bool:
    return x % 2 == 0


MAPPER_CASES = [
    ("map", lambda op, up: op.map("s", up, lambda x: None if x == 2 else x * 10), [1, 2, 3], [10, None, 30]),
    ("flat_map", lambda op, up: op.flat_map("s", up, range), [2, 0, 3], [0, 1, 0, 1, 2]),
    ("flatten", lambda op, up: op.flatten("s", up), [[1, 2], (), "ab"], [1, 2, "a", "b"]),
    ("filter", lambda op, up: op.filter("s", up, _is_even), [1, 2, 3, 4], [2, 4]),
    ("filter_map", lambda op, up: op.filter_map("s", up, lambda x: x or None), [0, 1, "", "a"], [1, "a"]),
    ("key_on", lambda op, up: op.key_on("s", up, lambda x: x[:1]), ["ab", "b"], [("a", "ab"), ("b", "b")]),
    ("key_rm", lambda op, up: op.key_rm("s", up), [("a", 1), ("b", None)], [1, None]),
    ("map_value", lambda op, up: op.map_value("s", up, len), [("a", "xy")], [("a", 2)]),
    (
        "flat_map_value",
        lambda op, up: op.flat_map_value("s", up, list),
        [("a", "xy"), ("b", "")],
        [("a", "x"), ("a", "y")],
    ),
    ("filter_value", lambda op, up: op.filter_value("s", up, _is_even), [("a", 1), ("b", 2)], [("b", 2)]),
    (
        "filter_map_value",
        lambda op, up: op.filter_map_value("s", up, lambda v: v.get("x")),
        [("a", {"x": 1}), ("b", {})],
        [("a", 1)],
    ),
    (
        "map_dict_value",
        lambda op, up: op.map("s", up, map_dict_value("n", abs)),
        [{"n": -1, "m": -2}],
        [{"n": 1, "m": -2}],
    ),
]


@pytest.mark.parametrize(("make", "batch", "expected"), [c[1:] for c in MAPPER_CASES], ids=[c[0] for c in MAPPER_CASES])
def test_mapper_matches_bytewax(make: Make, batch: List[Any], expected: List[Any]) -> None:
    bytewax_mapper, flowspark_mapper = _mappers(make)
    assert list(flowspark_mapper(list(batch))) == list(bytewax_mapper(list(batch))) == expected


ERROR_CASES = [
    ("filter", lambda op, up: op.filter("s", up, lambda x: x), [1]),
    ("filter_value", lambda op, up: op.filter_value("s", up, lambda v: None), [("a", 1)]),
    ("key_on", lambda op, up: op.key_on("s", up, lambda x: x), [1]),
    ("flatten", lambda op, up: op.flatten("s", up), [[1], 2]),
    ("flat_map_value", lambda op, up: op.flat_map_value("s", up, list), [5]),
    ("key_rm", lambda op, up: op.key_rm("s", up), [("a", 1, 2)]),
    ("filter_after_a_bool", lambda op, up: op.filter("s", up, lambda x: x > 1 or x), [2, 0]),
    ("key_on_after_a_str", lambda op, up: op.key_on("s", up, lambda x: x), ["a", 1]),
    ("map_value", lambda op, up: op.map_value("s", up, len), [("a", "x"), 5]),
    ("flat_map", lambda op, up: op.flat_map("s", up, lambda x: x), [[1], 2]),
]


@pytest.mark.parametrize(("make", "batch"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_mapper_errors_match_bytewax(make: Make, batch: List[Any]) -> None:
    errors = []
    for mapper in _mappers(make):
        with pytest.raises(Exception) as info:
            list(mapper(list(batch)))
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_filter_error_names_step_and_predicate() -> None:
    def not_a_bool(x: int) -> int:
        return x

    (_, mapper) = _mappers(lambda op, up: op.filter("odd", up, not_a_bool))
    with pytest.raises(
        TypeError,
        match=r"return value of `predicate` <function '.*not_a_bool' line \d+> "
        r"in step 'df.odd' must be a `bool`; got a <class 'int'> instead",
    ):
        mapper([1])


def test_core_steps_match_bytewax() -> None:
    def build(e: Engine) -> Any:
        op = e.op
        flow = e.Dataflow("df")
        up = op.input("inp", flow, e.TestingSource([]))
        keyed = op.key_on("key", up, str)
        op.filter_map_value("fmv", op.filter_value("fv", op.flat_map_value("fl", keyed, list), bool), len)
        op.flatten("flatten", op.filter_map("fm", op.filter("f", up, bool), str))
        op.raises("never", op.inspect("peek", op.key_rm("rm", op.map_value("mv", keyed, len))))
        op.enrich_cached("enrich", up, str, lambda c, x: c.get(x))
        return flow

    ids = [[(s.step_id, type(s).__name__) for s in core_steps(build(Engine(n)))] for n in ENGINES]
    assert [i for i, _ in ids[1]] == [i for i, _ in ids[0]]
    assert "df.fmv.flat_map_value.flat_map.flat_map_batch" in [i for i, _ in ids[0]]


def test_inspect_passes_its_qualified_id() -> None:
    for name in ENGINES:
        seen: List[Any] = []
        make: Make = lambda op, up: op.inspect("peek", up, lambda s, x: seen.append((s, x)))
        inspector = last_core_arg(Engine(name), make, "inspector")
        inspector("df.peek.inspect_debug", "item", 1, 0)
        assert seen == [("df.peek", "item")], name


def test_inspect_default_prints(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ENGINES:
        inspector = last_core_arg(Engine(name), lambda op, up: op.inspect("peek", up), "inspector")
        inspector("df.peek.inspect_debug", "x", 1, 0)
    assert capsys.readouterr().out == "df.peek: 'x'\n" * 2


def test_raises_sink_fails_on_first_item() -> None:
    messages = []
    for name in ENGINES:
        sink = last_core_arg(Engine(name), lambda op, up: op.raises("boom", up), "sink")
        part = sink.build("df.boom.output", 0, 1)
        part.write_batch([])
        with pytest.raises(RuntimeError) as info:
            part.write_batch([{"a": 1}, 2])
        messages.append(str(info.value))
    assert messages[1] == messages[0] == "`raises` step 'df.boom' got an item: {'a': 1}"


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def test_ttl_cache_refetches_after_ttl_and_remove() -> None:
    clock = _Clock()
    calls: List[str] = []

    def getter(k: str) -> int:
        calls.append(k)
        return len(calls)

    cache = TTLCache(getter, clock, timedelta(seconds=10))
    assert (cache.get("a"), cache.get("a")) == (1, 1)
    clock.now += timedelta(seconds=10)
    assert cache.get("a") == 1
    clock.now += timedelta(seconds=1)
    assert cache.get("a") == 2
    cache.remove("a")
    assert cache.get("a") == 3
    with pytest.raises(KeyError):
        cache.remove("b")
    assert calls == ["a", "a", "a"]


def test_enrich_cached_reads_now_once_per_batch() -> None:
    for name in ENGINES:
        clock = _Clock()
        reads: List[int] = []

        def now() -> datetime:
            reads.append(1)
            return clock()

        fetched: List[str] = []

        def getter(k: str) -> str:
            fetched.append(k)
            return k.upper()

        def make(op: Any, up: Any) -> Any:
            return op.enrich_cached(
                "e", up, getter, lambda c, x: (x, c.get(x)), ttl=timedelta(seconds=5), _now_getter=now
            )

        mapper = last_core_arg(Engine(name), make, "mapper")
        reads.clear()
        assert list(mapper(["a", "b", "a"])) == [("a", "A"), ("b", "B"), ("a", "A")]
        clock.now += timedelta(seconds=6)
        assert list(mapper(["a"])) == [("a", "A")]
        assert (len(reads), fetched) == (2, ["a", "b", "a"]), name


def test_map_dict_value_updates_in_place() -> None:
    d = {"name": "ann", "n": 1}
    assert map_dict_value("name", str.title)(d) is d
    assert d == {"name": "Ann", "n": 1}


def test_mypy_checks_user_functions(tmp_path: Path) -> None:
    src = tmp_path / "user_flow.py"
    src.write_text(
        textwrap.dedent(
            """
            from flowspark.dataflow import Dataflow, Stream
            import flowspark.operators as op

            def check(nums: Stream[int]) -> None:
                op.map("m", nums, lambda x: x.upper())
                words: Stream[str] = op.map("ok", nums, str)
                keyed = op.key_on("k", words, lambda w: w)
                lens: op.KeyedStream[int] = op.map_value("mv", keyed, len)
                reveal_type(op.join("j", keyed, lens))
                reveal_type(op.join("r", keyed, lens, emit_mode="running"))
                op.join("bad", keyed, lens, emit_mode="nope")
            """
        )
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir=/dev/null", str(src)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"MYPYPATH": str(repo), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    out = proc.stdout
    errors = [line for line in out.splitlines() if line.startswith("user_flow.py") and " error: " in line]
    assert 'error: "int" has no attribute "upper"' in out
    assert "Stream[tuple[str, tuple[str, int]]]" in out
    assert "Stream[tuple[str, tuple[str | None, int | None]]]" in out
    assert 'No overload variant of "join"' in out
    assert len(errors) == 2, out


def _stateless_flow(e: Engine) -> Any:
    op = e.op
    flow = e.Dataflow("df")
    out: dict[str, List[Any]] = {
        n: [] for n in ("lens", "evens", "halves", "vowels", "codes", "pairs", "recs", "enriched")
    }

    def sink(name: str, stream: Any) -> None:
        op.output(f"out_{name}", stream, e.TestingSink(out[name]))

    lines = op.input("inp", flow, e.TestingSource(["the cat", "", "a dog sat", "the end", "ox"], batch_size=2))
    words = op.inspect("peek", op.flat_map("split", lines, str.split), lambda step, x: None)
    lens = op.map("len", words, len)
    sink("lens", lens)
    sink("evens", op.filter("even", lens, _is_even))
    sink("halves", op.filter_map("half", lens, lambda n: n // 2 if n > 2 else None))
    upper = op.map_value("upper", op.key_on("key", words, lambda w: w[0]), str.upper)
    chars = op.flat_map_value("chars", upper, list)
    sink("vowels", op.filter_value("vowels", chars, lambda c: c in "AEIOU"))
    codes = op.key_rm("unkey", op.filter_map_value("codes", chars, lambda c: ord(c) if c > "M" else None))
    sink("codes", codes)
    sink("pairs", op.flatten("flatten", op.map("pair", words, lambda w: (w, len(w)))))
    recs = op.map("rec", words, lambda w: {"w": w, "n": 1})
    sink("recs", op.map("title", recs, e.helpers.map_dict_value("w", str.title)))
    enriched = op.enrich_cached("enrich", words, str.upper, lambda cache, w: (w, cache.get(w)))
    sink("enriched", enriched)
    op.raises("never", op.filter("none", words, lambda w: False))
    return flow, out


@pytest.mark.quick
def test_stateless_flow_matches_bytewax() -> None:
    bytewax_out, flowspark_out = run_both(_stateless_flow)
    assert bytewax_out["lens"] == [3, 3, 1, 3, 3, 3, 3, 2]
    vowels = [("t", "E"), ("c", "A"), ("a", "A"), ("d", "O"), ("s", "A"), ("t", "E"), ("e", "E"), ("o", "O")]
    assert bytewax_out["vowels"] == vowels
    assert flowspark_out == bytewax_out


def _failing_flow(kind: str) -> Callable[[Engine], Any]:
    def build(e: Engine) -> Any:
        op = e.op
        flow = e.Dataflow("df")
        nums = op.input("inp", flow, e.TestingSource([1, 2, 3]))
        if kind == "filter":
            nums = op.filter("odd", nums, lambda x: x % 2)
        else:
            op.raises("boom", op.filter("big", nums, lambda x: x > 2))
        op.output("out", nums, e.TestingSink([]))
        return flow, {}

    return build


@pytest.mark.parametrize(
    ("kind", "error", "message"),
    [
        ("filter", TypeError, "in step 'df.odd' must be a `bool`; got a <class 'int'> instead"),
        ("raises", RuntimeError, "`raises` step 'df.boom' got an item: 3"),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.quick
def test_run_time_errors_abort_the_run(engine: str, kind: str, error: type, message: str) -> None:
    with pytest.raises(Engine(engine).BytewaxRuntimeError) as info:
        run_on(engine, _failing_flow(kind))
    causes = [ex for ex in cause_chain(info.value) if type(ex) is error and message in str(ex)]
    assert causes, cause_chain(info.value)
