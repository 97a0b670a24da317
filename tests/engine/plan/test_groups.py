"""State group names: Spark's own hash spreads balanced names evenly over shuffle partitions."""

from __future__ import annotations

from collections import Counter

import pytest

from flowspark.engine.plan.destinations import parse
from flowspark.engine.plan.groups import BALANCED_MODULUS, Groups, spark_string_hash
from flowspark.engine.spark.session import get_session


def test_the_hash_is_sparks() -> None:
    names = ["", "a", "ab", "abc", "abcd", "S0/1", "S12/15.1234", "héllo wörld", "日本語のキー"]
    frame = get_session().createDataFrame([(n,) for n in names], "n string").selectExpr("n", "hash(n) AS h")
    assert {row.n: row.h for row in frame.collect()} == {n: spark_string_hash(n) for n in names}


@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 6, 8, 16])
def test_balanced_names_land_in_bucket_mod_p_by_sparks_own_partitioning(partitions: int) -> None:
    groups = Groups.balanced(2, 16)
    names = [n for step in groups.names for n in step]
    frame = get_session().createDataFrame([(n,) for n in names], "n string")
    spread = frame.selectExpr("n", f"pmod(hash(n), {partitions}) AS p").collect()
    assert {row.n: row.p for row in spread} == {groups.name(s, b): b % partitions for s in range(2) for b in range(16)}
    first_step = [row.p for row in spread if parse(row.n).index == 0]
    assert max(Counter(first_step).values()) == -(-16 // partitions)


def test_names_are_stable_and_name_their_step() -> None:
    assert Groups.balanced(3, 16) == Groups.balanced(3, 16)
    assert [parse(n).index for n in Groups.balanced(3, 16).names[2]] == [2] * 16
    assert parse("S11/3").index == 11


def test_a_bucket_count_that_does_not_divide_the_modulus_still_gets_names() -> None:
    groups = Groups.balanced(1, 32)
    assert BALANCED_MODULUS % 32 != 0
    assert [spark_string_hash(n) % 32 for n in groups.names[0]] == list(range(32))
