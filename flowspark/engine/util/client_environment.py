"""The run's working directory and environment variables, lent to a task of the warm server.

User code in Spark's Python workers runs, on a Spark the run started
itself, with the run's working directory and environment (the workers are
its grandchildren), as it would in Bytewax's own process.  The warm server
(`connect_server`) was started by some earlier run, from anywhere: so a
task that runs user code for a run on it takes that run's directory and
variables for its duration, and gives them back after.  Spark's and
Python's own variables stay the worker's.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterator

_WORKERS_OWN = ("SPARK_", "PYSPARK_", "PYTHON", "_SPARK_")
"""Variables that belong to the worker process, whatever the run's are."""


def _lent(name: str) -> bool:
    return not name.startswith(_WORKERS_OWN)


@dataclass(frozen=True)
class ClientEnvironment:
    """A run's working directory and environment variables (picklable)."""

    cwd: str
    variables: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_this_process(cls) -> ClientEnvironment:
        return cls(os.getcwd(), {name: value for name, value in os.environ.items() if _lent(name)})

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Run the block in the run's directory with its variables; the worker's own are back afterwards."""
        saved_cwd, saved = os.getcwd(), dict(os.environ)
        for name in [name for name in os.environ if _lent(name) and name not in self.variables]:
            del os.environ[name]
        os.environ.update(self.variables)
        try:
            os.chdir(self.cwd)
        except OSError:
            pass  # the run's directory is not on this machine: the worker's is the best there is
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved)
