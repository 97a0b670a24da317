"""Where flowspark keeps its own records: a local path or a URI on shared storage.

The recovery directory holds Spark's checkpoint (`query/`), which Spark
reaches through Hadoop's file systems, and flowspark's own records beside
and inside it (the flow's shape, the sinks' ledger, the executor-read
partitions' snapshots).  Those records are written by the driver, by
Spark's tasks and by Spark's source runner process, and only the driver has
a JVM gateway, so they go through this one Python-side layer everywhere:

- a local path or `file://` URI: the operating system's calls, with files
  private to the user (`private_files`); every node must mount the path;
- `s3://` or `s3a://`: `pyarrow.fs.S3FileSystem`, one PUT per record
  (objects are replaced atomically; there are no permissions to check);
  credentials come from the AWS chain of each process (environment
  variables, config files, instance roles), the endpoint from
  `AWS_ENDPOINT_URL(_S3)` or the Spark conf `spark.hadoop.fs.s3a.endpoint`;
- `hdfs://`: `pyarrow.fs.HadoopFileSystem` (needs libhdfs and a Hadoop
  client on every node), a temporary file moved into place.

A `Location` is picklable, so the driver resolves the endpoint once and
the tasks get it with their plan.
"""

from __future__ import annotations

import functools
import os
import posixpath
import shutil
import uuid
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Iterator, List, Mapping, Optional, Union
from urllib.parse import unquote, urlsplit

from flowspark.engine.util import private_files
from flowspark.errors import FlowsparkRuntimeError


class Scheme(Enum):
    """The kinds of storage a recovery directory can be on."""

    LOCAL = "file"
    S3 = "s3"
    HDFS = "hdfs"


@dataclass(frozen=True)
class S3Endpoint:
    """Which S3 service to talk to: AWS itself (no host) or a compatible server."""

    host: Optional[str] = None
    """`host:port` of an S3-compatible server; None for AWS."""
    scheme: str = "https"
    region: Optional[str] = None


@dataclass(frozen=True)
class Location:
    """A file or folder of flowspark's, on one kind of storage."""

    scheme: Scheme
    path: str
    """An absolute local path; `bucket/key` for S3; the absolute path on the name node for HDFS."""
    authority: str = ""
    """The HDFS name node (`host:port`); empty otherwise."""
    s3: Optional[S3Endpoint] = None

    def join(self, *names: str) -> Location:
        """The location of `names` inside this folder."""
        return replace(self, path=posixpath.join(self.path, *names))

    def sibling(self, name: str) -> Location:
        """The location of `name` in the same folder."""
        return replace(self, path=posixpath.join(posixpath.dirname(self.path), name))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def is_local(self) -> bool:
        return self.scheme is Scheme.LOCAL

    @property
    def hadoop_uri(self) -> str:
        """What Spark (Hadoop's file systems) is given for this location: a local path stays a path."""
        if self.scheme is Scheme.S3:
            return f"s3a://{self.path}"
        return str(self)

    def __str__(self) -> str:
        if self.scheme is Scheme.S3:
            return f"s3://{self.path}"
        if self.scheme is Scheme.HDFS:
            return f"hdfs://{self.authority}{self.path}"
        return self.path


_S3_CONF = "spark.hadoop.fs.s3a."


def _s3_endpoint(spark_conf: Mapping[str, str]) -> S3Endpoint:
    """The S3 service named by Spark's s3a settings, else by the standard AWS environment variables."""
    url = (
        spark_conf.get(_S3_CONF + "endpoint")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    region = (
        spark_conf.get(_S3_CONF + "endpoint.region")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    if not url:
        return S3Endpoint(region=region)
    if "://" in url:
        scheme, _, host = url.partition("://")
        return S3Endpoint(host.rstrip("/"), scheme, region)
    secure = spark_conf.get(_S3_CONF + "connection.ssl.enabled", "true").lower() != "false"
    return S3Endpoint(url.rstrip("/"), "https" if secure else "http", region)


def parse_location(
    text: str, spark_conf: Optional[Mapping[str, str]] = None, what: str = "recovery directory"
) -> Location:
    """The location a recovery directory (or the `what` of an error message) names: a path, or a `file://`,
    `s3://`, `s3a://` or `hdfs://` URI.

    `file:///data/my%20flow` and `file:/data/my flow` both name `/data/my
    flow`; a relative path is taken from the current directory.  Other
    schemes are refused with the ones that work.
    """
    parts = urlsplit(text)
    if len(parts.scheme) <= 1:  # a plain path (or a Windows drive letter)
        return Location(Scheme.LOCAL, os.path.abspath(text))
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            msg = f"{what} {text!r}: a file:// URI must name a local path (file:///path), not host {parts.netloc!r}"
            raise FlowsparkRuntimeError(msg)
        return Location(Scheme.LOCAL, os.path.abspath(unquote(parts.path)))
    if scheme in ("s3", "s3a"):
        if not parts.netloc:
            msg = f"{what} {text!r}: an S3 URI names a bucket, as in s3://bucket/folder"
            raise FlowsparkRuntimeError(msg)
        key = unquote(parts.path).strip("/")
        path = f"{parts.netloc}/{key}" if key else parts.netloc
        return Location(Scheme.S3, path, s3=_s3_endpoint(spark_conf or {}))
    if scheme == "hdfs":
        return Location(Scheme.HDFS, unquote(parts.path) or "/", authority=parts.netloc)
    msg = (
        f"{what} {text!r}: flowspark can't keep its records on {parts.scheme}:// storage; give a "
        "local path, or a file://, s3:// (s3a://) or hdfs:// URI"
    )
    raise FlowsparkRuntimeError(msg)


def as_location(place: Union[str, Location]) -> Location:
    """`place` itself, or the location a path or URI names."""
    return place if isinstance(place, Location) else parse_location(place)


@functools.lru_cache(maxsize=None)
def _arrow(scheme: Scheme, authority: str, s3: Optional[S3Endpoint]) -> Any:
    """One pyarrow file system per storage and process (they pool their connections)."""
    from pyarrow import fs

    if scheme is Scheme.S3:
        endpoint = s3 or S3Endpoint()
        # Without a delayed open, every write failed against an S3-compatible
        # server (moto) at `CompleteMultipartUpload`.
        return fs.S3FileSystem(
            region=endpoint.region, scheme=endpoint.scheme, endpoint_override=endpoint.host, allow_delayed_open=True
        )
    host, _, port = authority.partition(":")
    try:
        return fs.HadoopFileSystem(host or "default", int(port or 0))
    except OSError as ex:
        msg = (
            f"can't reach HDFS at hdfs://{authority} from Python ({str(ex).splitlines()[0]}): flowspark's own files "
            "there need libhdfs and a Hadoop client on every node (JAVA_HOME, HADOOP_HOME and "
            "CLASSPATH=$(hadoop classpath --glob) set); or use a path every node mounts"
        )
        raise FlowsparkRuntimeError(msg) from None


def _fs(place: Location) -> Any:
    return _arrow(place.scheme, place.authority, place.s3)


def _file_type(place: Location) -> Any:
    return _fs(place).get_file_info(place.path).type


def exists(place: Location) -> bool:
    if place.is_local:
        return os.path.exists(place.path)
    from pyarrow.fs import FileType

    return bool(_file_type(place) != FileType.NotFound)


def is_dir(place: Location) -> bool:
    """Whether `place` is a folder (on S3: whether any object's key starts with it)."""
    if place.is_local:
        return os.path.isdir(place.path)
    from pyarrow.fs import FileType

    return bool(_file_type(place) == FileType.Directory)


def list_names(place: Location) -> List[str]:
    """The names in folder `place`; none if it is missing."""
    if place.is_local:
        return os.listdir(place.path) if os.path.isdir(place.path) else []
    from pyarrow.fs import FileSelector

    return [info.base_name for info in _fs(place).get_file_info(FileSelector(place.path, allow_not_found=True))]


def walk_files(place: Location) -> Iterator[Location]:
    """Every file below folder `place`, at any depth."""
    if place.is_local:
        for folder, _, names in os.walk(place.path):
            yield from (replace(place, path=posixpath.join(folder, name)) for name in names)
        return
    from pyarrow.fs import FileSelector, FileType

    for info in _fs(place).get_file_info(FileSelector(place.path, recursive=True, allow_not_found=True)):
        if info.type == FileType.File:
            yield replace(place, path=info.path)


def read_bytes(place: Location) -> bytes:
    """The bytes of a file, whoever wrote it (Spark's checkpoint files)."""
    if place.is_local:
        with open(place.path, "rb") as f:
            return f.read()
    with _fs(place).open_input_stream(place.path) as f:
        return bytes(f.read())


def read_trusted(place: Location) -> bytes:
    """The bytes of a record flowspark wrote; a local one is refused if another user could have changed it."""
    if place.is_local:
        return private_files.read_trusted(place.path)
    return read_bytes(place)


def write_private(place: Location, data: bytes) -> None:
    """Replace the file at `place` with `data` atomically, private to the user where files have owners."""
    if place.is_local:
        private_files.write_private(place.path, data)
        return
    if place.scheme is Scheme.S3:
        _put(place, data)
        return
    tmp = f"{place.path}.{uuid.uuid4().hex}.tmp"
    _put(replace(place, path=tmp), data)
    _fs(place).move(tmp, place.path)


def _put(place: Location, data: bytes) -> None:
    with _fs(place).open_output_stream(place.path) as f:
        f.write(data)


def write_once(place: Location, data: bytes) -> bool:
    """Write `data` unless the file exists already; whether it was written.

    Locally this is atomic (a link that fails if the name is taken).  On
    S3 and HDFS it is a check, then a write: two attempts of one task
    running at once (speculative execution) could both write, so keep
    `spark.speculation` off there.
    """
    if place.is_local:
        return private_files.write_private_once(place.path, data)
    if exists(place):
        return False
    write_private(place, data)
    return True


def remove(place: Location) -> None:
    """Delete the file at `place`, if it is there."""
    try:
        if place.is_local:
            os.unlink(place.path)
        else:
            _fs(place).delete_file(place.path)
    except FileNotFoundError:
        pass


def move(source: Location, target: Location) -> None:
    """Move the file at `source` to `target` (same storage), replacing one there; missing folders are made.

    A rename locally and on HDFS; on S3 a copy, then a delete.
    """
    if source.is_local:
        private_files.make_dirs(os.path.dirname(target.path))
        os.replace(source.path, target.path)
        return
    if target.scheme is Scheme.HDFS:
        _fs(target).create_dir(posixpath.dirname(target.path), recursive=True)
    _fs(source).move(source.path, target.path)


def remove_tree(place: Location) -> None:
    """Delete folder `place` with everything in it, if it is there."""
    if place.is_local:
        shutil.rmtree(place.path, ignore_errors=True)
    elif is_dir(place):
        _fs(place).delete_dir(place.path)


def make_dirs(place: Location) -> None:
    """Create folder `place` and its parents if missing (0700 locally); nothing to do on S3."""
    if place.is_local:
        private_files.make_dirs(place.path)
    elif place.scheme is Scheme.HDFS:
        _fs(place).create_dir(place.path, recursive=True)


def private_dir(place: Location, what: str = "recovery directory") -> None:
    """Create folder `place` if it is missing (0700 locally, where one that others can write is refused).

    S3 has no folders: a key's prefix needs no creating.
    """
    if place.is_local:
        private_files.private_dir(place.path, what)
    else:
        make_dirs(place)
