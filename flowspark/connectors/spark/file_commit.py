"""Micro-batches committed exactly once into a folder of plain files (parquet, orc, json, csv...).

A folder of plain files has no log: files Spark writes there are the data,
so a batch written again after a crash would be there twice, and one cut
short would be there in part.  Each batch is therefore committed in steps,
recorded in a small JSON file under `<path>/_flowspark/<run>-<step>/`, a
folder that Spark's readers (and pyarrow's) skip as hidden:

1. Spark's writer writes the batch into the sink's staging folder there,
   with its own job commit (partition folders, compression and options as
   Spark makes them).  A crash here leaves no record of the batch, and the
   replay writes the staging folder again.
2. The record is replaced, atomically, by one that names the batch and the
   final name of each staged data file: `part-<run>-<batch>-<n><suffix>`,
   in the same partition folder.  From here on the batch is committed.
3. The files are moved to their names and the record is marked done.

Only the first batch a sink writes in a process can be one that was
written before (batches are written one after another, and a failed write
ends the run), so that write alone reads the record.  A record of the same
batch means Spark replays a batch that was committed before the crash: the
moves still missing are made and nothing is written again.  A record of an
earlier batch means this one is new; a record of a later one means the
recovery directory is older than the output folder (restored from a
backup), and the run stops.

Compaction (`compact_every`) is one more commit of the same kind: the files
of the batches since the last compaction are read back and written as one
file per partition folder, and the record names both the new files to move
in and the small files to delete, so a crash halfway is finished by the
next run instead of leaving both.  Readers listing the folder while a
batch's files are being moved in may see some of them and not yet the
others; each file appears whole.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, List, Optional, Tuple

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location
from flowspark.errors import FlowsparkRuntimeError

__all__ = ["CommitRecord", "FolderCommits"]

BOOKKEEPING = "_flowspark"
"""The hidden folder under the sink's path where its records and staging folders live."""

WriteFiles = Callable[[Any, str], None]
"""Writes a DataFrame into a folder (its Hadoop URI) with Spark's writer for the sink's format."""

ReadFiles = Callable[[List[str], str], Any]
"""Reads data files (Hadoop URIs) back as a DataFrame, with partition folders found below a base URI."""


@dataclass(frozen=True)
class CommitRecord:
    """The last commit of one sink's run into its folder; paths are relative to the folder."""

    batch: int
    moves: Tuple[Tuple[str, str], ...]
    """Each staged data file and its final name."""
    removes: Tuple[str, ...]
    """Files the commit replaces (a compaction's small files)."""
    uncompacted: Tuple[str, ...]
    """Data files written since the last compaction, which the next one rewrites (none without compaction)."""
    batches_since_compaction: int
    done: bool
    """Every move and removal is made."""

    def to_json(self) -> bytes:
        """The record as the JSON kept in the folder."""
        return json.dumps(
            {
                "batch": self.batch,
                "moves": [list(move) for move in self.moves],
                "removes": list(self.removes),
                "uncompacted": list(self.uncompacted),
                "batches_since_compaction": self.batches_since_compaction,
                "done": self.done,
            }
        ).encode()

    @staticmethod
    def from_json(data: bytes, where: str) -> CommitRecord:
        """The record `data` holds; one that is damaged, or names a file outside its folder, is refused."""
        try:
            raw = json.loads(data)
            record = CommitRecord(
                int(raw["batch"]),
                tuple((str(staged), str(final)) for staged, final in raw["moves"]),
                tuple(str(name) for name in raw["removes"]),
                tuple(str(name) for name in raw["uncompacted"]),
                int(raw["batches_since_compaction"]),
                bool(raw["done"]),
            )
        except (ValueError, KeyError, TypeError) as ex:
            msg = f"the commit record {where!r} of a SparkSink is damaged ({type(ex).__name__}: {ex})"
            raise FlowsparkRuntimeError(msg) from None
        names = [name for move in record.moves for name in move] + list(record.removes) + list(record.uncompacted)
        for name in names:
            if name.startswith("/") or posixpath.normpath(name) != name or name.split("/")[0] == "..":
                msg = (
                    f"the commit record {where!r} of a SparkSink names {name!r}, which is not a file inside its folder"
                )
                raise FlowsparkRuntimeError(msg)
        return record


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _data_files(folder: Location) -> List[str]:
    """The data files Spark wrote below `folder`, relative to it, in order; its markers and checksums left out."""
    names = []
    for place in storage.walk_files(folder):
        relative = posixpath.relpath(place.path, folder.path)
        if not any(part.startswith(("_", ".")) for part in relative.split("/")):
            names.append(relative)
    return sorted(names)


def _final_name(relative: str, stem: str) -> str:
    """`relative`'s name in its partition folder, with `stem` for Spark's `part-<task>-<job>` (its suffix kept)."""
    folder, name = posixpath.split(relative)
    suffix = name[name.index(".") :] if "." in name else ""
    return posixpath.join(folder, f"{stem}{suffix}")


class FolderCommits:
    """Commits the micro-batches of one sink's run into its folder (see the module notes)."""

    def __init__(self, step_id: str, root: Location, run_id: str) -> None:
        self._step_id = step_id
        self._root = root
        self._run_id = run_id
        self._own = posixpath.join(BOOKKEEPING, f"{_safe(run_id)}-{_safe(step_id)}")
        self._record_place = root.join(self._own, "record.json")
        self._record: Optional[CommitRecord] = None
        self._checked = False
        """Whether this process has read the record (and finished the commit it found)."""

    def write(
        self, frame: Any, batch_id: int, write: WriteFiles, read: ReadFiles, compact_every: Optional[int]
    ) -> None:
        """Commit batch `batch_id` of `frame`, unless it was committed before; then compact if due."""
        try:
            if not self._checked and self._committed_before(batch_id):
                return
            last = self._record
            moves = self._stage(frame, f"batch-{batch_id}", write, f"part-{self._run_id}-{batch_id:010d}")
            if compact_every is None:
                self._commit(CommitRecord(batch_id, moves, (), (), 0, done=False))
                return
            uncompacted = (last.uncompacted if last else ()) + tuple(final for _, final in moves)
            since = (last.batches_since_compaction if last else 0) + 1
            self._commit(CommitRecord(batch_id, moves, (), uncompacted, since, done=False))
            if since >= compact_every:
                self._compact(batch_id, write, read)
        except BaseException:
            # What this process knows may be behind the record: read it again before the next write.
            self._checked = False
            raise

    def _committed_before(self, batch_id: int) -> bool:
        """Read the record: finish the commit it names; whether that commit was of `batch_id`."""
        record = None
        if storage.exists(self._record_place):
            record = CommitRecord.from_json(storage.read_trusted(self._record_place), str(self._record_place))
        if record is not None and record.batch > batch_id:
            msg = (
                f"step {self._step_id!r}: the output folder {str(self._root)!r} holds micro-batch {record.batch} of this "
                f"run, later than batch {batch_id} that the recovery directory resumes from: one of them was restored "
                "from an older copy; restore both from the same time, or start with an empty recovery directory"
            )
            raise FlowsparkRuntimeError(msg)
        if record is not None and not record.done:
            self._finish(record)
        self._record = record
        storage.remove_tree(self._root.join(self._own, "staging"))
        self._checked = True
        return record is not None and record.batch == batch_id

    def _stage(self, frame: Any, name: str, write: WriteFiles, stem: str) -> Tuple[Tuple[str, str], ...]:
        """Have Spark write `frame` into the staging folder `name`; each data file's moves (paths relative to the
        sink's folder), to its name made of `stem` and the file's number in the batch."""
        staging = self._root.join(self._own, "staging", name)
        write(frame, staging.hadoop_uri)
        files = _data_files(staging)
        if not files:
            msg = (
                f"step {self._step_id!r}: Spark wrote the micro-batch into {str(staging)!r}, where this process finds no "
                "data file: the folder must be the same one here as where Spark writes (with a Spark Connect server "
                "on another machine, a path both mount, or s3:// or hdfs://)"
            )
            raise FlowsparkRuntimeError(msg)
        return tuple(
            (posixpath.join(self._own, "staging", name, file), _final_name(file, f"{stem}-{n:05d}"))
            for n, file in enumerate(files)
        )

    def _commit(self, record: CommitRecord) -> None:
        """Record `record` (the commit point), then make its moves and removals."""
        storage.make_dirs(self._root.join(self._own))
        storage.write_private(self._record_place, record.to_json())
        self._record = record
        self._finish(record)

    def _finish(self, record: CommitRecord) -> None:
        """Make the moves and removals `record` names that are not made yet; mark it done."""
        for staged, final in record.moves:
            source = self._root.join(staged)
            if storage.exists(source):
                storage.move(source, self._root.join(final))
        for name in record.removes:
            storage.remove(self._root.join(name))
        storage.remove_tree(self._root.join(self._own, "staging"))
        done = replace(record, done=True)
        storage.write_private(self._record_place, done.to_json())
        self._record = done

    def _compact(self, batch_id: int, write: WriteFiles, read: ReadFiles) -> None:
        """Rewrite the files of the batches since the last compaction as one file per partition folder."""
        record = self._record
        assert record is not None, "a compaction follows a batch's commit"
        files = [self._root.join(name).hadoop_uri for name in record.uncompacted]
        frame = read(files, self._root.hadoop_uri).coalesce(1)
        moves = self._stage(frame, f"compaction-{batch_id}", write, f"part-{self._run_id}-{batch_id:010d}-compacted")
        self._commit(CommitRecord(batch_id, moves, record.uncompacted, (), 0, done=False))
