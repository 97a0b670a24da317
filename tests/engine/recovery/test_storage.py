"""The storage layer of flowspark's own records: recovery locations parsed, and every operation on local disk and on S3."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location, S3Endpoint, Scheme, parse_location
from flowspark.errors import FlowsparkRuntimeError


def test_a_file_uri_names_its_decoded_path() -> None:
    assert parse_location("file:///data/my%20flow") == Location(Scheme.LOCAL, "/data/my flow")
    assert parse_location("file:/data/my flow") == Location(Scheme.LOCAL, "/data/my flow")
    assert parse_location("file://localhost/data/x") == Location(Scheme.LOCAL, "/data/x")
    assert parse_location("file:///") == Location(Scheme.LOCAL, "/")


def test_a_path_with_spaces_stays_as_it_is_and_spark_gets_the_path() -> None:
    place = parse_location("/data/my flow")
    assert place == Location(Scheme.LOCAL, "/data/my flow")
    assert place.join("query").hadoop_uri == "/data/my flow/query"
    assert str(place) == "/data/my flow"


def test_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_location("rec") == Location(Scheme.LOCAL, str(tmp_path / "rec"))
    assert parse_location("./a/../rec dir") == Location(Scheme.LOCAL, str(tmp_path / "rec dir"))


def test_s3_and_s3a_name_the_same_place_and_spark_gets_s3a(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    place = parse_location("s3a://bucket/runs/my%20flow/")
    assert place == parse_location("s3://bucket/runs/my flow")
    assert place == Location(Scheme.S3, "bucket/runs/my flow", s3=S3Endpoint())
    assert place.join("query").hadoop_uri == "s3a://bucket/runs/my flow/query"
    assert str(place) == "s3://bucket/runs/my flow"
    assert parse_location("s3://bucket").path == "bucket"


def test_the_s3_endpoint_comes_from_spark_conf_before_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env-host:9000")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert parse_location("s3://b/d").s3 == S3Endpoint("env-host:9000", "http", "eu-west-1")
    conf = {
        "spark.hadoop.fs.s3a.endpoint": "minio:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-2",
    }
    assert parse_location("s3://b/d", conf).s3 == S3Endpoint("minio:9000", "http", "us-east-2")
    assert parse_location("s3://b/d", {"spark.hadoop.fs.s3a.endpoint": "https://s3.example"}).s3 == S3Endpoint(
        "s3.example", "https", "eu-west-1"
    )


def test_hdfs_keeps_its_name_node() -> None:
    place = parse_location("hdfs://namenode:8020/flows/rec")
    assert place == Location(Scheme.HDFS, "/flows/rec", authority="namenode:8020")
    assert place.join("query").hadoop_uri == "hdfs://namenode:8020/flows/rec/query"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gs://bucket/rec", "can't keep its records on gs:// storage; give a local path, or a file://, s3://"),
        ("abfss://c@acct.dfs.core.windows.net/rec", "abfss://"),
        ("file://otherhost/data", "must name a local path (file:///path), not host 'otherhost'"),
        ("s3:///no-bucket", "an S3 URI names a bucket"),
    ],
)
def test_other_locations_are_refused_with_what_works(text: str, says: str) -> None:
    with pytest.raises(FlowsparkRuntimeError, match="recovery directory") as refused:
        parse_location(text)
    assert says in str(refused.value)


def _exercise(root: Location) -> None:
    """Every operation of the layer, in a folder that does not exist yet."""
    folder = root.join("sub dir")
    assert not storage.exists(folder.join("a"))
    assert storage.list_names(folder) == []
    storage.make_dirs(folder)
    storage.write_private(folder.join("a"), b"one")
    storage.write_private(folder.join("a"), b"two")
    assert storage.read_trusted(folder.join("a")) == b"two"
    assert storage.read_bytes(folder.join("a")) == b"two"
    assert storage.write_once(folder.join("b"), b"first")
    assert not storage.write_once(folder.join("b"), b"second")
    assert storage.read_trusted(folder.join("b")) == b"first"
    assert sorted(storage.list_names(folder)) == ["a", "b"]
    assert storage.is_dir(folder) and storage.exists(folder.join("b"))
    storage.make_dirs(folder.join("deeper"))
    storage.write_private(folder.join("deeper", "c"), b"3")
    assert sorted(p.path for p in storage.walk_files(root)) == sorted(
        folder.join(name).path for name in ("a", "b", "deeper/c")
    )
    storage.remove(folder.join("a"))
    storage.remove(folder.join("a"))  # already gone: fine
    assert sorted(storage.list_names(folder)) == ["b", "deeper"]


def test_every_operation_on_local_disk(tmp_path: Path) -> None:
    root = parse_location((tmp_path / "rec").as_uri())
    _exercise(root)
    assert [n for n in os.listdir(tmp_path / "rec" / "sub dir") if n.endswith(".tmp")] == []


def test_local_records_and_folders_are_private_and_refused_once_others_can_write(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        root = parse_location(str(tmp_path / "rec"))
        storage.private_dir(root)
        storage.make_dirs(root.join("x", "y"))
        storage.write_private(root.join("x", "y", "f"), b"data")
        storage.write_once(root.join("x", "y", "g"), b"data")
    finally:
        os.umask(old)
    for folder in ("rec", "rec/x", "rec/x/y"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700
    for name in ("f", "g"):
        assert stat.S_IMODE((tmp_path / "rec" / "x" / "y" / name).stat().st_mode) == 0o600
    (tmp_path / "rec" / "x" / "y" / "f").chmod(0o666)
    with pytest.raises(FlowsparkRuntimeError, match="can be written by other users"):
        storage.read_trusted(root.join("x", "y", "f"))
    (tmp_path / "rec").chmod(0o777)
    with pytest.raises(FlowsparkRuntimeError, match="can be written by other users"):
        storage.private_dir(root)


def test_every_operation_on_s3(s3_folder: str) -> None:
    root = parse_location(s3_folder)
    assert root.scheme is Scheme.S3
    _exercise(root)
    assert storage.list_names(root) == ["sub dir"]


def test_a_missing_s3_object_reads_as_missing(s3_folder: str) -> None:
    root = parse_location(s3_folder)
    with pytest.raises(FileNotFoundError):
        storage.read_trusted(root.join("nothing"))


def test_hdfs_without_a_hadoop_client_is_refused_with_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)
    with pytest.raises(FlowsparkRuntimeError, match="can't reach HDFS at hdfs://127.0.0.1:1 from Python .*libhdfs"):
        storage.exists(parse_location("hdfs://127.0.0.1:1/rec"))
