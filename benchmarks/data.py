"""The benchmark input: `key,second,value` lines, generated once per size and key count into a cache dir.

200 keys by default (`k000`..`k199`; `--keys` gives other counts, with
names as wide as the largest), 50 events per second of event time, values
0..999.  About one line in ten is up to 5 s early relative to its
neighbours (mild disorder, well inside the windowed flow's 30 s wait, so no
item is late on any engine).  The same seed and size always give the same
file.  A second form gives each event's second as its ISO 8601 time after
`TIME_ORIGIN` (`ensure_text_time_input`).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

KEYS = 200
EVENTS_PER_SECOND = 50
SEED = 20240101
CHUNK = 1_000_000
TIME_ORIGIN = datetime(2024, 1, 1, tzinfo=timezone.utc)
"""The time of second 0 of the event time, for the flows that read times."""


def input_path(cache_dir: Path, size: int, keys: int = KEYS) -> Path:
    suffix = "" if keys == KEYS else f"-{keys}keys"
    return cache_dir / "inputs" / f"events-{size}{suffix}.csv"


def ensure_input(cache_dir: Path, size: int, keys: int = KEYS) -> Path:
    """The input file of `size` lines over `keys` keys, written on first use."""
    path = input_path(cache_dir, size, keys)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    width = max(3, len(str(keys - 1)))
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        for start in range(0, size, CHUNK):
            n = min(CHUNK, size - start)
            drawn = rng.integers(0, keys, n)
            early = np.where(rng.random(n) < 0.1, rng.integers(1, 6, n), 0)
            seconds = (np.arange(start, start + n) // EVENTS_PER_SECOND) + 5 - early
            values = rng.integers(0, 1000, n)
            f.write(
                "".join(
                    f"k{k:0{width}d},{s},{v}\n" for k, s, v in zip(drawn.tolist(), seconds.tolist(), values.tolist())
                )
            )
    tmp.replace(path)
    return path


def ensure_split_input(cache_dir: Path, size: int, keys: int = KEYS, files: int = 8) -> Path:
    """A directory holding the input of `size` lines cut into `files` files of consecutive lines, written on first use."""
    source = ensure_input(cache_dir, size, keys)
    folder = source.with_name(source.stem + f"-{files}files")
    if folder.exists():
        return folder
    lines = source.read_bytes().splitlines(keepends=True)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True)
    per_file = -(-len(lines) // files)
    for index in range(files):
        (tmp / f"part-{index:02d}.csv").write_bytes(b"".join(lines[index * per_file : (index + 1) * per_file]))
    tmp.replace(folder)
    return folder


def ensure_text_time_input(cache_dir: Path, size: int, keys: int = KEYS) -> Path:
    """The input of `ensure_input` with each second written as its time (`k007,2024-01-01T00:00:05+00:00,412`),
    written on first use."""
    source = ensure_input(cache_dir, size, keys)
    path = source.with_name(source.stem + "-texttime.csv")
    if path.exists():
        return path
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    times: dict[str, str] = {}
    with open(source) as lines, open(tmp, "w") as f:
        for line in lines:
            key, second, value = line.split(",")
            at = times.get(second)
            if at is None:
                at = times[second] = (TIME_ORIGIN + timedelta(seconds=int(second))).isoformat()
            f.write(f"{key},{at},{value}")
    tmp.replace(path)
    return path
