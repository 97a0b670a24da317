"""The suite's time, per marker, printed at the end of every run, and a warning when a run passes its budget.

CI has a hard wall; a suite that grows a little with every change reaches
it on a slow day, when nothing can land any more.  So each run says where
its time went (the tests' own time summed per marker: `cluster`, `kafka`,
`postgres`, `wheel`, the rest as `other`) and, past the budget (minutes,
`FLOWSPARK_TEST_BUDGET_MINUTES`, 20 by default), names the slowest tests in
a warning.  It never fails a run: a slow day must not block a landing.

With pytest-xdist the reports reach the controlling process, which sums them.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import DefaultDict, Dict, List, Tuple

import pytest

BUDGET_MINUTES = float(os.environ.get("FLOWSPARK_TEST_BUDGET_MINUTES", "20"))
"""The wall time past which a run warns."""

MARKERS = ("cluster", "kafka", "postgres", "wheel")
"""The markers of tests that start real components; a test with none counts as `other`."""

CULPRITS = 10
"""How many of the slowest tests a warning names."""


class SuiteBudget:
    """Sums each test's setup, call and teardown time per marker and per test."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.per_marker: DefaultDict[str, float] = defaultdict(float)
        self.per_test: DefaultDict[str, float] = defaultdict(float)

    @staticmethod
    def marker_of(keywords: Dict[str, object]) -> str:
        return next((name for name in MARKERS if name in keywords), "other")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.per_marker[self.marker_of(dict(report.keywords))] += report.duration
        self.per_test[report.nodeid] += report.duration

    def slowest(self) -> List[Tuple[str, float]]:
        return sorted(self.per_test.items(), key=lambda test: -test[1])[:CULPRITS]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        wall = (time.monotonic() - self.started) / 60
        summed = sum(self.per_marker.values()) / 60
        terminalreporter.section("time per marker")
        for name, seconds in sorted(self.per_marker.items(), key=lambda entry: -entry[1]):
            terminalreporter.write_line(f"{name:>9}: {seconds / 60:6.1f} min")
        terminalreporter.write_line(f"tests' time {summed:.1f} min, wall {wall:.1f} min, budget {BUDGET_MINUTES:g} min")
        if wall > BUDGET_MINUTES:
            culprits = ", ".join(f"{nodeid} ({seconds:.0f} s)" for nodeid, seconds in self.slowest())
            terminalreporter.write_line(
                f"WARNING: the suite took {wall:.1f} min, past its {BUDGET_MINUTES:g}-minute budget; "
                f"the slowest tests: {culprits}",
                yellow=True,
                bold=True,
            )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controlling process (or a run without pytest-xdist)
        config.pluginmanager.register(SuiteBudget(), "suite_budget")
