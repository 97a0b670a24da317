"""The rows that travel between Spark stages.

A row is one *chunk*: a pickled list of batches (each a list of items) bound
for one destination.  `grp` names the destination and is what Spark groups
by: `S<step>/<bucket>` for a stateful step's bucket of keys, `O<output>@<origin>`
and `T<tap>@<origin>` for rows bound for the driver, `C` for control rows.
`seq` orders the chunks of one origin; `kind` tells data, end-of-input
markers and control rows apart.  Pickling whole batches keeps the number of
JVM rows in the hundreds, whatever the number of items.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any, Iterable, List, Tuple

import pyarrow as pa

SCHEMA_DDL = "grp string, seq long, kind int, payload binary"
ARROW_SCHEMA = pa.schema([("grp", pa.string()), ("seq", pa.int64()), ("kind", pa.int32()), ("payload", pa.binary())])

DATA = 0
EOF = 1
CONTROL = 2

LAST_SEQ = 1 << 62
"""Sequence number of end-of-input markers: after every data chunk."""

Row = Tuple[str, int, int, bytes]


def bucket_of(key: str, buckets: int) -> int:
    """The bucket a key's state lives in; stable across processes and runs."""
    return zlib.crc32(key.encode()) % buckets


def stateful_group(step: int, bucket: int) -> str:
    return f"S{step}/{bucket}"


def parse_stateful_group(grp: str) -> Tuple[int, int]:
    step, bucket = grp[1:].split("/")
    return int(step), int(bucket)


def output_group(output: int, origin: str) -> str:
    return f"O{output}@{origin}"


def tap_group(tap: int, origin: str) -> str:
    return f"T{tap}@{origin}"


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def loads(payload: bytes) -> Any:
    return pickle.loads(payload)


def to_arrow(rows: List[Row]) -> pa.RecordBatch:
    """Rows as one Arrow record batch in the chunk schema."""
    grp, seq, kind, payload = (list(col) for col in zip(*rows)) if rows else ([], [], [], [])
    return pa.RecordBatch.from_arrays(
        [pa.array(grp, pa.string()), pa.array(seq, pa.int64()), pa.array(kind, pa.int32()), pa.array(payload, pa.binary())],
        schema=ARROW_SCHEMA,
    )


def batches_of(payload: bytes) -> Iterable[List[Any]]:
    """The batches a data chunk carries, in order."""
    batches: List[List[Any]] = loads(payload)
    return batches
