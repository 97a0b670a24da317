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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    cluster = [item for item in items if item.get_closest_marker("cluster")]
    for item in cluster:
        item.add_marker(pytest.mark.xdist_group("cluster"))
    items[:] = cluster + [item for item in items if not item.get_closest_marker("cluster")]
