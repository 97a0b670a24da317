"""Group names: what each function writes, `parse` reads back."""

from __future__ import annotations

import pytest

from flowspark.engine.plan.destinations import (
    CONTROL_GROUP,
    WRITTEN_GROUP,
    Destination,
    DestinationKind,
    origin_worker,
    output_group,
    parse,
    sink_part_group,
    sink_part_prefix,
    source_origin,
    stateful_group,
    tap_group,
)


def test_each_kind_of_name_reads_back() -> None:
    assert parse(stateful_group(3, 15)) == Destination(DestinationKind.STATEFUL, 3)
    assert parse(stateful_group(12, 0, salt=517)) == Destination(DestinationKind.STATEFUL, 12)
    assert parse(output_group(2, "000.00001.002")) == Destination(DestinationKind.OUTPUT, 2, "000.00001.002")
    assert parse(tap_group(0, stateful_group(1, 4, salt=9))) == Destination(DestinationKind.TAP, 0, "S1/4.9")
    assert parse(CONTROL_GROUP) == Destination(DestinationKind.CONTROL, 0)
    assert parse(sink_part_group(1, 7, "S0/3.2")) == Destination(DestinationKind.SINK_PART, 1, "S0/3.2", 7)
    assert parse(WRITTEN_GROUP) == Destination(DestinationKind.WRITTEN, 0)


def test_a_sink_partitions_groups_all_begin_with_its_prefix() -> None:
    assert sink_part_group(1, 7, "000.00001.000").split("@")[0] == sink_part_prefix(1, 7) == "P1/7"


def test_stateful_names_keep_the_text_spark_keeps_with_the_state() -> None:
    assert stateful_group(0, 3) == "S0/3"
    assert stateful_group(0, 3, salt=517) == "S0/3.517"


@pytest.mark.parametrize("text", ["", "X1@a", "O@a", "Sx/1", "P1@a", "P1/2", "Cx", "W1"])
def test_unknown_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)


def test_source_origins_sort_by_input_partition_and_piece() -> None:
    origins = [source_origin(i, p, k) for i in (0, 1) for p in (0, 2, 10) for k in (0, 1, 12)]
    assert sorted(origins) == origins


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_every_worker_gets_its_share_of_source_pieces_partitions_and_buckets(workers: int) -> None:
    pieces = [origin_worker(source_origin(0, 0, k), workers) for k in range(workers)]
    partitions = [origin_worker(source_origin(1, p, 0), workers) for p in range(2 * workers)]
    buckets = [origin_worker(stateful_group(0, b, salt=517), workers) for b in range(16)]
    assert sorted(pieces) == list(range(workers))
    assert sorted(partitions) == sorted(list(range(workers)) * 2)
    assert buckets == [b % workers for b in range(16)]
