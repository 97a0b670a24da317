"""Find damaged files in Spark's checkpoint before a run resumes from it.

Spark reports a truncated log or state file without naming it (`Unexpected
end-of-input in field name`, or a long Java stack), and a retry cannot
help.  So before the query starts, the files Spark reads at start are
checked: each against its Hadoop checksum file (`.NAME.crc`, CRC-32 per
chunk) where there is one, the offset and commit logs as Spark's JSON
records, and the state store's checkpoint archives as zip files.  The
error names the first damaged file.
"""

from __future__ import annotations

import io
import json
import posixpath
import struct
import zipfile
import zlib
from typing import Iterator, List, Optional, Tuple

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location
from flowspark.errors import FlowsparkRuntimeError

DAMAGE_SIGNS = (
    "Unexpected end-of-input",
    "CANNOT_LOAD_STATE_STORE",
    "ChecksumException",
    "Checksum error",
    "Unexpected end of ZLIB input stream",
    "Unrecognized token",
    "JsonParseException",
)
"""Texts of Spark errors that mean the checkpoint itself is damaged: no retry can help."""


def _crc_problem(data: bytes, crc: Location) -> Optional[str]:
    raw = storage.read_bytes(crc)
    header, sums = raw[:8], raw[8:]
    if len(header) < 8 or header[:4] != b"crc\0":
        return f"its checksum file {crc.name!r} is damaged"
    chunk = struct.unpack(">i", header[4:])[0]
    if chunk <= 0:
        return f"its checksum file {crc.name!r} is damaged"
    expected = [struct.unpack(">I", sums[i : i + 4])[0] for i in range(0, len(sums) - len(sums) % 4, 4)]
    actual = [zlib.crc32(data[i : i + chunk]) for i in range(0, len(data), chunk)] if data else []
    if expected != actual:
        return "it does not match its checksum (truncated or changed)"
    return None


def _log_problem(data: bytes) -> Optional[str]:
    """An offset or commit log entry: `v1`, then one JSON value per line."""
    lines = data.decode("utf-8", "replace").split("\n")
    if not lines or not lines[0].startswith("v"):
        return "it does not start with a log version"
    if len(lines) < 2:
        return "it ends after its version line"
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            json.loads(line)
        except ValueError as ex:
            return f"a line is not valid JSON ({ex})"
    return None


def _zip_problem(data: bytes) -> Optional[str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as ex:
        return f"it is not a readable zip archive ({ex})"
    return None if bad is None else f"its member {bad!r} is damaged"


def _checked(files: List[Location]) -> Iterator[Tuple[str, Location]]:
    """`(kind, file)` of every file worth checking: `log`, `zip`, or `other` (checksum only)."""
    for place in files:
        name = place.name
        if name.startswith(".") or name.endswith(".tmp"):
            continue
        if posixpath.basename(posixpath.dirname(place.path)) in ("offsets", "commits") and name.isdigit():
            yield "log", place
        elif name.endswith(".zip"):
            yield "zip", place
        elif not name.endswith(".sst"):  # table files can be large; RocksDB checks its own
            yield "other", place


def check_checkpoint(query_dir: Location) -> None:
    """Raise `FlowsparkRuntimeError` naming the first damaged file of Spark's checkpoint in `query_dir`."""
    files = list(storage.walk_files(query_dir))
    present = {place.path for place in files}
    for kind, place in sorted(_checked(files), key=lambda found: found[1].path):
        crc = place.sibling(f".{place.name}.crc")
        if kind == "other" and crc.path not in present:
            continue
        data = storage.read_bytes(place)
        problem = _crc_problem(data, crc) if crc.path in present else None
        if problem is None and kind == "log":
            problem = _log_problem(data)
        if problem is None and kind == "zip":
            problem = _zip_problem(data)
        if problem is not None:
            raise FlowsparkRuntimeError(damaged_message(str(place), problem))


def damaged_message(path: str, problem: str) -> str:
    return (
        f"the checkpoint file {path!r} is damaged: {problem}. flowspark can't resume from it: restore the "
        "recovery directory from a backup, or start with an empty recovery directory"
    )


def looks_damaged(error_text: str) -> bool:
    """Whether a Spark error says the checkpoint is damaged (see `DAMAGE_SIGNS`)."""
    return any(sign in error_text for sign in DAMAGE_SIGNS)
