"""How the suite shares two cores: pytest-xdist runs it in two processes (pyproject's `addopts`).

Tests that start their own Spark, broker or server run side by side with
pure-Python tests and each other; cluster tests share one standalone
cluster (two one-core workers) and fault it, so they run one after another
in one process: a pytest-xdist group (`--dist loadgroup`), collected first
so that this longest serial run starts at once.  `-n 0` runs everything in
one process, in the same order.
"""

from __future__ import annotations

from typing import List

import pytest

CLUSTER_GROUP = "cluster"


def _join_group(item: pytest.Item, group: str) -> None:
    """Put `item` in a pytest-xdist group.

    pytest-xdist reads the group from the node id's `@group` suffix, which
    it adds by setting `_nodeid`; pytest 9 keeps a node's id in `_id`
    instead, so the suffix is added here where that is so.
    """
    item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(item, "_id") and not item.nodeid.endswith(f"@{group}"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    cluster = [item for item in items if item.get_closest_marker("cluster")]
    if getattr(config.option, "loadgroup", False):
        for item in cluster:
            _join_group(item, CLUSTER_GROUP)
    items[:] = cluster + [item for item in items if not item.get_closest_marker("cluster")]
