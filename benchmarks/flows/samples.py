"""What the paced latency flows share on every engine: the key count and where the samples go."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List, Tuple

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


def stamped(start: float, rate: float, first: int, end: int) -> List[Tuple[int, float]]:
    """Items `first` to `end` (excluded) of a source started at `start`: item `i` is due, and stamped, at `start + i / rate`."""
    return [(i, start + i / rate) for i in range(first, end)]


def mark_first(path: Path, when: float) -> None:
    """Create `path` holding `when`, unless another sink partition did first."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{when:.6f}\n")


def write_samples(path: Path, stamps: Iterable[float], written: Iterable[float]) -> None:
    """One `stamp written` line per item, as `benchmarks/responsiveness.py` reads them."""
    path.write_text("".join(f"{s:.6f} {w:.6f}\n" for s, w in zip(stamps, written)))
