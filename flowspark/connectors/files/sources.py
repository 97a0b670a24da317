"""`FileSource`, `CSVSource` and `DirSource`: one partition per file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from typing_extensions import override

from flowspark.connectors.files.reading import (
    TextPartition,
    X,
    check_fs_id,
    csv_partition,
    get_path_dev,
    line_partition,
)
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition


class _OneFileSource(FixedPartitionedSource[X, int]):
    """One partition, named `"{fs_id}::{path}"`, for one file; none if it is missing.

    Read in the driver (`lives_in_driver`): one partition would be read by
    one Spark task, and so would the steps fused after it, while the
    driver's hub splits each micro-batch of the file over all the tasks.
    The file is still opened by its absolute path as of the source's
    creation, as `DirSource`'s files are in the tasks that read them.
    """

    lives_in_driver = True

    def __init__(self, path: Union[Path, str], batch_size: int, get_fs_id: Callable[[Path], str]) -> None:
        self._path = Path(path)
        self._absolute = self._path.absolute()
        self._batch_size = batch_size
        self._fs_id = check_fs_id(get_fs_id(self._path.parent))

    @override
    def list_parts(self) -> List[str]:
        return [f"{self._fs_id}::{self._path}"] if self._path.exists() else []

    def _own_path(self, for_part: str) -> Path:
        _fs_id, path = for_part.split("::", 1)
        if path != str(self._path):
            msg = f"partition {for_part!r} is not this source's file {str(self._path)!r}"
            raise ValueError(msg)
        return self._absolute


class FileSource(_OneFileSource[str]):
    r"""Read one file line by line, each line without its line ending.

    `\n`, `\r\n` and a lone `\r` all end a line; a last line without an
    ending is still emitted.  A missing file gives no partitions (so nothing
    is read), but its directory must exist.  Resumes after the last emitted
    line.

    :arg path: the file.
    :arg batch_size: most lines per batch.
    :arg get_fs_id: called with the file's directory; returns a name for its
        filesystem that stays the same across runs and must not contain
        `::`.  Defaults to the device number.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import FileSource

    (folder / "in.txt").write_text("one\ntwo\n")
    flow = Dataflow("file_source_eg")
    out = []
    op.output("out", op.input("inp", flow, FileSource(folder / "in.txt")), TestingSink(out))
    run_main(flow)
    assert out == ["one", "two"]
    ```
    """

    def __init__(
        self,
        path: Union[Path, str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = get_path_dev,
    ) -> None:
        super().__init__(path, batch_size, get_fs_id)

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
        return line_partition(self._own_path(for_part), self._batch_size, resume_state)


class CSVSource(_OneFileSource[Dict[str, str]]):
    r"""Read one CSV file as one `dict` per row, keyed by the header row.

    Rows are parsed by `csv.DictReader`, so its rules hold: blank rows are
    skipped, missing fields are `None` and extra fields are listed under the
    key `None`.  An empty file emits nothing.  Otherwise as `FileSource`.

    :arg path: the file.
    :arg batch_size: most rows per batch.
    :arg get_fs_id: as for `FileSource`.
    :arg fmtparams: passed on to `csv.DictReader` (for example `delimiter`,
        or `fieldnames` for a file without a header row).

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import CSVSource

    (folder / "users.csv").write_text("id,name\n7,ada\n8,alan\n")
    flow = Dataflow("csv_source_eg")
    out = []
    op.output("out", op.input("inp", flow, CSVSource(folder / "users.csv")), TestingSink(out))
    run_main(flow)
    assert out == [{"id": "7", "name": "ada"}, {"id": "8", "name": "alan"}]
    ```
    """

    def __init__(
        self,
        path: Union[Path, str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = get_path_dev,
        **fmtparams: Any,
    ) -> None:
        super().__init__(path, batch_size, get_fs_id)
        self._fmtparams = fmtparams

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> TextPartition[Dict[str, str]]:
        return csv_partition(self._own_path(for_part), self._batch_size, resume_state, self._fmtparams)


class DirSource(FixedPartitionedSource[str, int]):
    r"""Read every file in a directory matching a glob, line by line.

    Each file is a partition named `"{fs_id}::{path relative to the
    directory}"`, read line by line as `FileSource` reads, but in the
    Spark task that owns it (`lives_in_driver` is false), by its absolute
    path as of the source's creation.  Files are listed when
    the run starts, in sorted order; directories matching the pattern are
    left out (Bytewax lists them too and then fails to open them).

    :arg dir_path: the directory; it must exist when the source is created.
    :arg glob_pat: `pathlib` glob, relative to `dir_path`; `"**/*"` recurses.
    :arg batch_size: most lines per batch.
    :arg get_fs_id: called with `dir_path`; as for `FileSource`.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import DirSource

    (folder / "a.txt").write_text("a1\na2\n")
    (folder / "b.txt").write_text("b1\n")
    flow = Dataflow("dir_source_eg")
    out = []
    op.output("out", op.input("inp", flow, DirSource(folder, glob_pat="*.txt")), TestingSink(out))
    run_main(flow)
    assert sorted(out) == ["a1", "a2", "b1"]
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        dir_path: Union[Path, str],
        glob_pat: str = "*",
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = get_path_dev,
    ) -> None:
        self._dir_path = Path(dir_path)
        self._absolute_dir = self._dir_path.absolute()
        if not self._dir_path.exists():
            msg = f"input directory `{self._dir_path}` does not exist"
            raise ValueError(msg)
        if not self._dir_path.is_dir():
            msg = f"input directory `{self._dir_path}` is not a directory"
            raise ValueError(msg)
        self._glob_pat = glob_pat
        self._batch_size = batch_size
        self._fs_id = check_fs_id(get_fs_id(self._dir_path))

    @override
    def list_parts(self) -> List[str]:
        files = sorted(p for p in self._dir_path.glob(self._glob_pat) if p.is_file())
        return [f"{self._fs_id}::{p.relative_to(self._dir_path)}" for p in files]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
        _fs_id, rel_path = for_part.split("::", 1)
        return line_partition(self._absolute_dir / rel_path, self._batch_size, resume_state)
