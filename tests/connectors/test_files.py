"""File connectors, driven partition by partition and checked against Bytewax's own."""

from __future__ import annotations

import importlib
import os
import pickle
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import bytewax.connectors.files as bw
import pytest
from support.oracle import Engine, run_both

from flowspark.connectors.files import CSVSource, DirSink, DirSource, FileSink, FileSource
from flowspark.connectors.files.reading import _Lines


def _fs(_dir: Path) -> str:
    return "fs"


def drain(part: Any) -> List[Tuple[List[Any], int]]:
    """Every batch of a source partition, each with the snapshot taken after it."""
    out: List[Tuple[List[Any], int]] = []
    while True:
        try:
            got = part.next_batch()
        except StopIteration:
            part.close()
            return out
        out.append((list(got), part.snapshot()))


def assert_same_batches(ours: List[Tuple[List[Any], int]], theirs: List[Tuple[List[Any], int]], size: int) -> None:
    r"""Bytewax's batches of lines, with our snapshot the byte offset after each.

    Bytewax's is the text file's `tell()`, which is the same byte offset
    except after a lone `\r`, where it packs the newline decoder's state
    into a number past the file's end.
    """
    assert [got for got, _ in ours] == [got for got, _ in theirs]
    for (_, mine), (_, bytewax) in zip(ours, theirs):
        assert mine == bytewax if bytewax <= size else mine <= size


def items_from(source: Any, resume_state: Any = None) -> List[Any]:
    """All items of a one-partition source, optionally resumed."""
    (part_name,) = source.list_parts()
    return [x for got, _ in drain(source.build_part("in", part_name, resume_state)) for x in got]


LINE_FILES = {
    "empty": b"",
    "trailing_newline": b"a\nb\n",
    "no_trailing_newline": b"a\nb",
    "blank_lines": b"\n\nx\n\n\n",
    "crlf": b"one\r\ntwo\r\n",
    "lone_cr": b"one\rtwo\rthree",
    "mixed": b"one\r\ntwo\rthree\n\nfour\n\n",
    "cr_at_end": b"x\r",
    "utf8": "é\nü€\n𝄞".encode(),
    "spaces": b"  padded  \n\ttab\t\n",
}


@pytest.mark.parametrize("batch_size", [0, 1, 2, 1000])
@pytest.mark.parametrize("content", LINE_FILES.values(), ids=LINE_FILES.keys())
def test_file_source_matches_bytewax(tmp_path: Path, content: bytes, batch_size: int) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(content)
    ours = FileSource(path, batch_size, _fs)
    theirs = bw.FileSource(path, batch_size, _fs)
    assert ours.list_parts() == theirs.list_parts() == [f"fs::{path}"]
    (part,) = ours.list_parts()
    batches = drain(ours.build_part("in", part, None))
    assert_same_batches(batches, drain(theirs.build_part("in", part, None)), len(content))
    for i, (_, snap) in enumerate(batches):
        rest = [x for got, _ in batches[i + 1 :] for x in got]
        assert items_from(ours, pickle.loads(pickle.dumps(snap))) == rest


def _text_mode_lines(path: Path) -> List[Tuple[str, int]]:
    """Each line as text mode's `readline` gives it, with the byte offset after it (from a binary re-read)."""
    with open(path, newline=None) as f:
        lines = [line.rstrip("\n") for line in iter(f.readline, "")]
    data, ends, at = path.read_bytes(), [], 0
    for _ in lines:
        nl = min((i for i in (data.find(b"\n", at), data.find(b"\r", at)) if i >= 0), default=len(data) - 1)
        at = nl + (2 if data[nl : nl + 2] == b"\r\n" else 1)
        ends.append(min(at, len(data)))
    return list(zip(lines, ends))


@pytest.mark.parametrize("seed", range(40))
def test_lines_cut_from_blocks_are_text_modes_lines_at_their_byte_offsets(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [b"a", b"bc", "é".encode(), b"\n", b"\r", b"\r\n", b"\n\n", b"\r\r"]
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))))
    expected = _text_mode_lines(path)
    for block in (1, 2, 3, 7, 1 << 20):
        with open(path, "rb") as f:
            lines = _Lines(f, "utf-8", block)
            got = []
            while block := lines.take(rng.randrange(1, 4)):
                taken = block.lines()
                assert block.count == len(taken)
                got.extend((line, None) for line in taken[:-1])
                got.append((taken[-1], lines.position()))
        assert [line for line, _ in got] == [line for line, _ in expected], block
        assert all(at is None or at == end for (_, at), (_, end) in zip(got, expected)), block


def test_file_source_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\r\ntwo\rthree\n\nfour\n\n")
    assert items_from(FileSource(path)) == ["one", "two", "three", "", "four", ""]


def _get_dev(path: Path) -> str:
    return hex(path.parent.stat().st_dev)


def test_file_source_snapshot_is_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("ab\r\né\nc".encode())
    batches = drain(FileSource(path, batch_size=1).build_part("in", f"{_get_dev(path)}::{path}", None))
    assert [snap for _, snap in batches] == [4, 7, 8]


def test_file_source_default_fs_id_matches_bytewax(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    assert FileSource(path).list_parts() == bw.FileSource(path).list_parts() == [f"{_get_dev(path)}::{path}"]


def test_file_source_accepts_str_and_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("in.txt").write_text("x\ny\n")
    source = FileSource("in.txt", get_fs_id=_fs)
    assert source.list_parts() == bw.FileSource("in.txt", get_fs_id=_fs).list_parts() == ["fs::in.txt"]
    assert items_from(source) == ["x", "y"]


def test_file_source_missing_file_has_no_parts(tmp_path: Path) -> None:
    assert FileSource(tmp_path / "nope.txt").list_parts() == []
    assert bw.FileSource(tmp_path / "nope.txt").list_parts() == []


def test_file_source_missing_dir_fails_at_construction(tmp_path: Path) -> None:
    missing = tmp_path / "nodir" / "in.txt"
    with pytest.raises(FileNotFoundError, match="nodir"):
        FileSource(missing)
    with pytest.raises(FileNotFoundError):
        bw.FileSource(missing)


def test_file_source_lists_parts_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    source = FileSource(path, get_fs_id=_fs)
    assert source.list_parts() == []
    path.write_text("x\n")
    assert source.list_parts() == [f"fs::{path}"]


@pytest.mark.parametrize("make", [FileSource, bw.FileSource, CSVSource, bw.CSVSource])
def test_fs_id_with_separator_is_rejected(tmp_path: Path, make: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="must not contain `::`; got 'a::b'"):
        make(tmp_path / "in.txt", get_fs_id=lambda _dir: "a::b")


def test_file_source_rejects_other_files_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    with pytest.raises(ValueError, match="other.txt"):
        FileSource(path, get_fs_id=_fs).build_part("in", f"fs::{tmp_path / 'other.txt'}", None)
    # Bytewax asserts instead.
    with pytest.raises(AssertionError):
        bw.FileSource(path, get_fs_id=_fs).build_part("in", f"fs::{tmp_path / 'other.txt'}", None)


def test_file_source_part_name_may_contain_separator(tmp_path: Path) -> None:
    path = tmp_path / "a::b.txt"
    path.write_text("x\n")
    assert items_from(FileSource(path, get_fs_id=_fs)) == ["x"]


def test_undecodable_file_error_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n\xff\xfe\n")
    part = FileSource(path, get_fs_id=_fs).build_part("in", f"fs::{path}", None)
    with pytest.raises(UnicodeDecodeError, match="bad.txt"):
        part.next_batch()


def test_directory_as_file_error_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "adir"
    path.mkdir()
    source = FileSource(path, get_fs_id=_fs)
    (part,) = source.list_parts()
    with pytest.raises(IsADirectoryError, match="adir"):
        source.build_part("in", part, None)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_error_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("x\n")
    path.chmod(0)
    with pytest.raises(PermissionError, match="secret.txt"):
        FileSource(path, get_fs_id=_fs).build_part("in", f"fs::{path}", None)


def test_file_deleted_after_listing_error_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    path.write_text("x\n")
    source = FileSource(path, get_fs_id=_fs)
    (part,) = source.list_parts()
    path.unlink()
    with pytest.raises(FileNotFoundError, match="gone.txt"):
        source.build_part("in", part, None)


def test_sources_pickle_without_get_fs_id(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    sources: List[Any] = [FileSource(path, get_fs_id=lambda _d: "fs"), CSVSource(path, get_fs_id=lambda _d: "fs")]
    for source in sources:
        clone = pickle.loads(pickle.dumps(source))
        assert clone.list_parts() == source.list_parts()
    assert items_from(pickle.loads(pickle.dumps(DirSource(tmp_path, get_fs_id=lambda _d: "fs")))) == ["x"]


def _dir_tree(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "a.txt").write_bytes(b"a1\na2\r\na3")
    (root / "b.log").write_bytes(b"b1\n")
    (root / "c.txt").write_bytes(b"")
    (root / "sub" / "d.txt").write_bytes(b"d1\rd2\n")


@pytest.mark.parametrize("glob_pat", ["*.txt", "**/*.txt", "*.log", "sub/*"])
def test_dir_source_matches_bytewax(tmp_path: Path, glob_pat: str) -> None:
    _dir_tree(tmp_path)
    ours = DirSource(tmp_path, glob_pat, 1, _fs)
    theirs = bw.DirSource(tmp_path, glob_pat, 1, _fs)
    parts = ours.list_parts()
    assert parts == sorted(theirs.list_parts())
    for part in parts:
        batches = drain(ours.build_part("in", part, None))
        size = (tmp_path / part.split("::", 1)[1]).stat().st_size
        assert_same_batches(batches, drain(theirs.build_part("in", part, None)), size)
        for i, (_, snap) in enumerate(batches):
            rest = [x for got, _ in batches[i + 1 :] for x in got]
            assert [x for got, _ in drain(ours.build_part("in", part, snap)) for x in got] == rest


def test_dir_source_parts(tmp_path: Path) -> None:
    _dir_tree(tmp_path)
    assert DirSource(tmp_path, get_fs_id=_fs).list_parts() == ["fs::a.txt", "fs::b.log", "fs::c.txt"]
    assert DirSource(str(tmp_path), "**/*.txt", get_fs_id=_fs).list_parts() == [
        "fs::a.txt",
        "fs::c.txt",
        "fs::sub/d.txt",
    ]
    assert DirSource(tmp_path).list_parts()[0] == f"{hex(tmp_path.stat().st_dev)}::a.txt"


def test_dir_source_leaves_out_directories(tmp_path: Path) -> None:
    _dir_tree(tmp_path)
    assert "fs::sub" not in DirSource(tmp_path, get_fs_id=_fs).list_parts()
    # Bytewax lists the directory, then fails to open it.
    assert "fs::sub" in bw.DirSource(tmp_path, get_fs_id=_fs).list_parts()


def test_dir_source_missing_dir(tmp_path: Path) -> None:
    msg = f"input directory `{tmp_path / 'nope'}` does not exist"
    with pytest.raises(ValueError, match=msg):
        DirSource(tmp_path / "nope")
    with pytest.raises(ValueError, match=msg):
        bw.DirSource(tmp_path / "nope")


def test_dir_source_not_a_dir(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("")
    msg = f"input directory `{path}` is not a directory"
    with pytest.raises(ValueError, match=msg):
        DirSource(path)
    with pytest.raises(ValueError, match=msg):
        bw.DirSource(path)


def test_dir_source_fs_id_with_separator(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must not contain `::`"):
        DirSource(tmp_path, get_fs_id=lambda _d: "x::y")


def test_dir_source_dir_removed_later(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    source = DirSource(root)
    root.rmdir()
    assert source.list_parts() == []


CSV_FILES = {
    "simple": b"h1,h2\n1,2\n3,4\n",
    "crlf_blank_quoted_ragged": b'h1,h2\r\n1,2\r\n\r\n"a\nb",3\r\n4\r\n5,6,7\n',
    "no_trailing_newline": b"h1,h2\n1,2",
    "header_only": b"h1,h2\n",
    "empty": b"",
    "utf8": "név,város\nÉva,Győr\n".encode(),
}


@pytest.mark.parametrize("batch_size", [0, 1, 2, 1000])
@pytest.mark.parametrize("content", CSV_FILES.values(), ids=CSV_FILES.keys())
def test_csv_source_matches_bytewax(tmp_path: Path, content: bytes, batch_size: int) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(content)
    ours = CSVSource(path, batch_size, _fs)
    theirs = bw.CSVSource(path, batch_size, _fs)
    assert ours.list_parts() == theirs.list_parts() == [f"fs::{path}"]
    (part,) = ours.list_parts()
    batches = drain(ours.build_part("in", part, None))
    assert batches == drain(theirs.build_part("in", part, None))
    for i, (_, snap) in enumerate(batches):
        rest = [x for got, _ in batches[i + 1 :] for x in got]
        assert items_from(ours, snap) == rest
        assert items_from(theirs, snap) == rest


def test_csv_source_rows(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b'h1,h2\r\n1,2\r\n\r\n"a\nb",3\r\n4\r\n5,6,7\n')
    assert items_from(CSVSource(path)) == [
        {"h1": "1", "h2": "2"},
        {"h1": "a\nb", "h2": "3"},
        {"h1": "4", "h2": None},
        {"h1": "5", "h2": "6", None: ["7"]},
    ]


@pytest.mark.parametrize(
    "fmtparams",
    [{"delimiter": ";"}, {"fieldnames": ["x", "y"]}, {"restval": "-", "restkey": "more"}, {"dialect": "excel-tab"}],
)
def test_csv_source_fmtparams_match_bytewax(tmp_path: Path, fmtparams: Any) -> None:
    path = tmp_path / "in.csv"
    path.write_text("a;b,c\n1;2,3\n4\n5,6,7,8\n")
    ours = items_from(CSVSource(path, get_fs_id=_fs, **fmtparams))
    assert ours == items_from(bw.CSVSource(path, get_fs_id=_fs, **fmtparams))
    assert ours


def test_csv_source_fieldnames_given_resumes_without_header(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("1,2\n3,4\n")
    source = CSVSource(path, batch_size=1, get_fs_id=_fs, fieldnames=["x", "y"])
    batches = drain(source.build_part("in", f"fs::{path}", None))
    assert batches[0][0] == [{"x": "1", "y": "2"}]
    assert items_from(source, batches[0][1]) == [{"x": "3", "y": "4"}]


def test_csv_source_missing_file(tmp_path: Path) -> None:
    assert CSVSource(tmp_path / "nope.csv").list_parts() == []


def test_csv_source_undecodable_header_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"h\xff\n1\n")
    with pytest.raises(UnicodeDecodeError, match="bad.csv"):
        CSVSource(path, get_fs_id=_fs).build_part("in", f"fs::{path}", None)


def test_csv_source_rejects_other_files_snapshot(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="other.csv"):
        CSVSource(tmp_path / "in.csv", get_fs_id=_fs).build_part("in", "fs::other.csv", None)


SinkScript = List[Tuple[str, Any]]


def run_sink(sink: Any, part: str, script: SinkScript) -> List[int]:
    """Play ("build", resume_state) / ("write", values) steps; return the snapshots after each write."""
    snaps: List[int] = []
    built = None
    for step, arg in script:
        if step == "build":
            if built is not None:
                built.close()
            built = sink.build_part("out", part, arg)
        else:
            assert built is not None
            built.write_batch(arg)
            snaps.append(built.snapshot())
    if built is not None:
        built.close()
    return snaps


SINK_SCRIPTS = {
    "fresh": [("build", None), ("write", ["a", "b"]), ("write", []), ("write", ["é", ""])],
    "resume_cuts_back": [("build", None), ("write", ["a"]), ("write", ["b"]), ("build", 2), ("write", ["c"])],
    "resume_at_end": [("build", None), ("write", ["a"]), ("build", 2), ("write", ["b"])],
    "resume_at_start": [("build", None), ("write", ["a"]), ("build", 0), ("write", ["b"])],
    "rebuild_fresh_empties": [("build", None), ("write", ["a"]), ("build", None), ("write", ["b"])],
    "resume_past_end_pads": [("build", None), ("build", 3), ("write", ["x"])],
}


@pytest.mark.parametrize("end", ["\n", "", "\r\n", ";"])
@pytest.mark.parametrize("script", SINK_SCRIPTS.values(), ids=SINK_SCRIPTS.keys())
def test_file_sink_matches_bytewax(tmp_path: Path, script: SinkScript, end: str) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ours, theirs = tmp_path / "ours" / "out.txt", tmp_path / "theirs" / "out.txt"
    for path in (ours, theirs):
        path.write_text("left over\n")
    assert run_sink(FileSink(ours, end), str(ours), script) == run_sink(bw.FileSink(theirs, end), str(theirs), script)
    assert ours.read_bytes() == theirs.read_bytes()


def test_file_sink_resume_writes_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    sink = FileSink(path)
    first = sink.build_part("out", str(path), None)
    first.write_batch(["1", "2"])
    snap = first.snapshot()
    first.write_batch(["3"])  # the batch that did not complete before the crash
    first.close()
    again = sink.build_part("out", str(path), pickle.loads(pickle.dumps(snap)))
    assert path.read_text() == "1\n2\n"
    again.write_batch(["3", "4"])
    again.close()
    assert path.read_text() == "1\n2\n3\n4\n"


def test_file_sink_parts(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path / "out.txt"))
    assert sink.list_parts() == [str(tmp_path / "out.txt")]
    assert sink.part_fn("any") == sink.part_fn("key") == 0


def test_file_sink_missing_dir(tmp_path: Path) -> None:
    path = tmp_path / "nodir" / "out.txt"
    with pytest.raises(FileNotFoundError, match="nodir"):
        FileSink(path).build_part("out", str(path), None)


def test_file_sink_rejects_other_files_snapshot(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="other.txt"):
        FileSink(tmp_path / "out.txt").build_part("out", "other.txt", None)


def test_file_sink_needs_str_values(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with pytest.raises(TypeError):
        FileSink(path).build_part("out", str(path), None).write_batch([1])  # type: ignore[list-item]


def test_dir_sink_parts_and_routing_match_bytewax(tmp_path: Path) -> None:
    ours, theirs = DirSink(str(tmp_path), 3), bw.DirSink(tmp_path, 3)
    assert ours.list_parts() == theirs.list_parts() == ["part_0", "part_1", "part_2"]
    for key in ["a", "b", "user-1", "ü", ""]:
        assert ours.part_fn(key) == theirs.part_fn(key)


def test_dir_sink_custom_naming_and_assignment(tmp_path: Path) -> None:
    sink = DirSink(tmp_path, 2, file_namer=lambda i, n: f"{i}-of-{n}.csv", assign_file=len, end=";")
    assert sink.list_parts() == ["0-of-2.csv", "1-of-2.csv"]
    assert sink.part_fn("abc") == 3
    part = sink.build_part("out", "1-of-2.csv", None)
    part.write_batch(["x", "y"])
    part.close()
    assert (tmp_path / "1-of-2.csv").read_text() == "x;y;"


@pytest.mark.parametrize("script", SINK_SCRIPTS.values(), ids=SINK_SCRIPTS.keys())
def test_dir_sink_files_match_bytewax(tmp_path: Path, script: SinkScript) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ours, theirs = DirSink(tmp_path / "ours", 2), bw.DirSink(tmp_path / "theirs", 2)
    for part in ours.list_parts():
        assert run_sink(ours, part, script) == run_sink(theirs, part, script)
        assert (tmp_path / "ours" / part).read_bytes() == (tmp_path / "theirs" / part).read_bytes()


def test_dir_sink_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nodir"):
        DirSink(tmp_path / "nodir", 1).build_part("out", "part_0", None)


def test_sinks_pickle(tmp_path: Path) -> None:
    sink = pickle.loads(pickle.dumps(DirSink(tmp_path, 2)))
    assert sink.list_parts() == ["part_0", "part_1"]
    assert sink.part_fn("a") == DirSink(tmp_path, 2).part_fn("a")
    assert pickle.loads(pickle.dumps(FileSink(tmp_path / "o"))).list_parts() == [str(tmp_path / "o")]


def _file_sinks_flow(e: Engine, directory: Path, file_path: Union[Path, str]) -> Any:
    """Running counts per key to a three-file `DirSink`, and every count's line to a `FileSink`."""
    flow = e.Dataflow("sinks")
    words = e.op.input("inp", flow, e.TestingSource([f"w{n % 5}" for n in range(60)], 4))
    counts = e.op.stateful_map(
        "count", e.op.key_on("key", words, lambda w: w), lambda n, w: ((n or 0) + 1, f"{w}:{(n or 0) + 1}")
    )
    e.op.output("dir", counts, importlib.import_module(f"{e.name}.connectors.files").DirSink(directory, 3))
    e.op.output("file", counts, importlib.import_module(f"{e.name}.connectors.files").FileSink(file_path))
    return flow


def _per_key(lines: List[str]) -> Dict[str, List[str]]:
    """Each key's lines in file order: what two workers keep in order, whichever writes first."""
    found: Dict[str, List[str]] = {}
    for line in lines:
        found.setdefault(line.split(":")[0], []).append(line)
    return found


@pytest.mark.quick
def test_dir_and_file_sinks_written_in_spark_tasks_under_two_workers_match_bytewax(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the file sink's path is relative: tasks must still write the user's file
    for name in ("bytewax", "flowspark"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "part_2").write_text("left from an earlier run\n")
        flow = _file_sinks_flow(Engine(name), tmp_path / name, f"{name}/all.txt")
        importlib.import_module(f"{name}.testing").cluster_main(flow, [], 0, worker_count_per_proc=2)
    for file in ("part_0", "part_1", "part_2", "all.txt"):
        ours = (tmp_path / "flowspark" / file).read_text().splitlines()
        theirs = (tmp_path / "bytewax" / file).read_text().splitlines()
        assert sorted(ours) == sorted(theirs), file
        assert _per_key(ours) == _per_key(theirs), file
    assert len((tmp_path / "flowspark" / "all.txt").read_text().splitlines()) == 60


def test_a_source_extending_bytewaxs_private_file_partition_reads_as_on_bytewax(tmp_path: Path) -> None:
    """As Bytewax's own workshop code does: a `FileSource` whose `build_part` builds a subclass of
    `_FileSourcePartition` that paces its batches with `next_awake`."""
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(7)))

    def build(e: Engine) -> Tuple[Any, Dict[str, List[Any]]]:
        class Paced(e.files._FileSourcePartition):  # type: ignore[misc]
            def __init__(self, path: Path, batch_size: int, resume_state: Optional[int]) -> None:
                super().__init__(path, batch_size, resume_state)
                self._next_awake = datetime.now(timezone.utc)

            def next_batch(self) -> List[str]:
                self._next_awake += timedelta(milliseconds=10)
                return [f"{line}!" for line in super().next_batch()]

            def next_awake(self) -> Optional[datetime]:
                return self._next_awake

        class PacedSource(e.files.FileSource):  # type: ignore[misc]
            def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> Paced:
                return Paced(self._path, self._batch_size, resume_state)

        flow = e.Dataflow("paced")
        out: List[Any] = []
        e.op.output("out", e.op.input("inp", flow, PacedSource(path, batch_size=3)), e.TestingSink(out))
        return flow, {"out": out}

    theirs, ours = run_both(build)
    assert ours == theirs == {"out": [f"line {i}!" for i in range(7)]}
