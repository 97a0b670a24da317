"""What the paced latency flows share on every engine: the key count and where the samples go."""

from __future__ import annotations

import os
from pathlib import Path

KEYS = 100
"""Keys of the running-count flows (`index % KEYS`)."""

FIRST = "FIRST"
"""The file the sink creates at its first write, holding that write's time."""


def latency_dir() -> Path:
    """Where the sink writes its samples (`FLOWBENCH_LATENCY_DIR`)."""
    try:
        return Path(os.environ["FLOWBENCH_LATENCY_DIR"])
    except KeyError:
        msg = "set FLOWBENCH_LATENCY_DIR (benchmarks/responsiveness.py does)"
        raise RuntimeError(msg) from None
