"""A flow on a real Spark standalone cluster: a master and two workers on 127.0.0.1.

The cluster is started from the pip-installed PySpark (its package folder is
a complete `SPARK_HOME`).  The flow module lives in a temporary folder that
the workers' Python can't import, so the test also proves that flowspark
ships the user's module to the executors (a `local[N]` run would hide a
missing module: its workers import from the driver's folders).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, List

import pytest
from support.postgres_server import pg_query, pg_table
from support.spark_cluster import StandaloneCluster, spark_env

from flowspark.engine.spark.cluster import check_recovery_dir_visible, is_local_master

RUN_TIMEOUT = 240.0


# The flow's own modules: a helper module with the parser, and the flow
# module importing it.  The parser also records, once per batch, where it
# ran (a side channel that works because TRACE_DIR's value travels inside
# the pickled function).
HELPER_MODULE = textwrap.dedent("""
    import os
    import socket

    TRACE_DIR = os.environ["CLUSTER_TRACE"]


    def parse_batch(lines):
        with open(os.path.join(TRACE_DIR, f"{socket.gethostname()}-{os.getpid()}"), "a") as f:
            f.write(os.getcwd() + "\\n")
        out = []
        for line in lines:
            key, second, value = line.split(",")
            out.append((key, (int(second), int(value))))
        return out
""")

FLOW_MODULE = textwrap.dedent("""
    import os
    from datetime import datetime, timedelta, timezone

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.connectors.files import FileSink, FileSource
    from flowspark.dataflow import Dataflow

    from cluster_user_helpers import parse_batch

    IN_PATH = os.environ["CLUSTER_IN"]
    OUT_PATH = os.environ["CLUSTER_OUT"]
    START = datetime(2024, 1, 1, tzinfo=timezone.utc)


    def event_time(event):
        return START + timedelta(seconds=event[0])


    def as_line(item):
        key, (window_id, total) = item
        return ("all", f"{key},{window_id},{total}")


    flow = Dataflow("cluster_windowed")
    events = op.flat_map_batch("parse", op.input("inp", flow, FileSource(IN_PATH, batch_size=500)), parse_batch)
    sums = win.fold_window(
        "sum",
        events,
        # In-order timestamps; a wait longer than any pause between batches,
        # so nothing is late and some windows still close before the end.
        win.EventClock(event_time, wait_for_system_duration=timedelta(minutes=10)),
        win.TumblingWindower(length=timedelta(seconds=60), align_to=START),
        lambda: 0,
        lambda total, event: total + event[1],
        lambda a, b: a + b,
    )
    op.output("out", op.map("line", sums.down, as_line), FileSink(OUT_PATH))
""")

KEYS = 20
LINES = 12_000


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside every installed package (and off the workers' `sys.path`): flow modules and input."""
    folder = tmp_path_factory.mktemp("userflow")
    (folder / "cluster_user_flow.py").write_text(FLOW_MODULE)
    (folder / "cluster_user_helpers.py").write_text(HELPER_MODULE)
    rng = random.Random(11)
    lines = (f"k{rng.randrange(KEYS)},{i // 10},{rng.randrange(1000)}\n" for i in range(LINES))
    (folder / "in.txt").write_text("".join(lines))
    return folder


def _start_flow(flow_dir: Path, name: str, *extra: str) -> "subprocess.Popen[str]":
    """`python -m flowspark.run` on the flow module, writing `NAME.txt` and tracing into `trace-NAME/`."""
    trace = flow_dir / f"trace-{name}"
    trace.mkdir()
    env = dict(
        spark_env(),
        CLUSTER_IN=str(flow_dir / "in.txt"),
        CLUSTER_OUT=str(flow_dir / f"{name}.txt"),
        CLUSTER_TRACE=str(trace),
    )
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{flow_dir / 'cluster_user_flow.py'}:flow",
        "--max-batch-items",
        "3000",
        *extra,
    ]
    return subprocess.Popen(
        cmd,
        cwd=flow_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc: "subprocess.Popen[str]", what: str) -> float:
    """Wait for a run started by `_start_flow`; kill its process group if it takes too long."""
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"{what} run took over {RUN_TIMEOUT:.0f} s: {err[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{what} run failed: {_short(err)}"
    return time.monotonic() - started


def _short(err: str) -> str:
    """A failed run's stderr without Java stack frames, which would bury the message."""
    kept = [line for line in err.splitlines() if not line.lstrip().startswith("at ")]
    return "\n".join(kept)[-8000:]


def _kill_once_written(proc: "subprocess.Popen[str]", err: Path, written: Callable[[], int], enough: int) -> int:
    """SIGKILL the run's whole process group once `written()` reaches `enough` lines; the lines written by then."""
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while written() < enough:
            assert proc.poll() is None, _short(err.read_text())
            assert time.monotonic() < deadline, "the cluster run wrote too little"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return written()


def _by_key(path: Path) -> Dict[str, List[str]]:
    """Each key's output lines, in output order."""
    out: Dict[str, List[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(line.split(",")[0], []).append(line)
    return out


def _windowed_sums(path: Path) -> Dict[str, List[str]]:
    """What the windowed flow writes for the input at `path`: each key's windows in order, as `key,window,sum`."""
    sums: Dict[str, Dict[int, int]] = {}
    for line in path.read_text().splitlines():
        key, second, value = line.split(",")
        windows = sums.setdefault(key, {})
        windows[int(second) // 60] = windows.get(int(second) // 60, 0) + int(value)
    return {
        key: [f"{key},{window},{total}" for window, total in sorted(windows.items())] for key, windows in sums.items()
    }


@pytest.mark.cluster
@pytest.mark.quick
def test_windowed_flow_on_cluster_gives_each_keys_windows(
    cluster: StandaloneCluster, flow_dir: Path, tmp_path: Path
) -> None:
    proc = _start_flow(flow_dir, "cluster", "--master", cluster.url, "-r", str(tmp_path / "recovery"))
    cluster_seconds = _finish(proc, "cluster")
    print(f"cluster run {cluster_seconds:.1f} s")

    expected = _windowed_sums(flow_dir / "in.txt")
    got = _by_key(flow_dir / "cluster.txt")
    assert len(expected) == KEYS
    assert sum(len(v) for v in expected.values()) >= KEYS * (LINES // 10 // 60)
    assert got == expected

    # The user's parser ran inside the executors: their working folders are
    # WORK_DIR/APP_ID/EXECUTOR_ID under the workers' work dirs.
    places = {Path(line) for f in (flow_dir / "trace-cluster").iterdir() for line in f.read_text().splitlines()}
    assert places, "the parser never ran"
    assert all(any(w in p.parents for w in cluster.work_dirs) for p in places), places
    # Both executors (one per worker) ran tasks of the flow's query.
    logs = cluster.executor_logs()
    assert {log.parents[2] for log in logs} == set(cluster.work_dirs), logs
    busy = [log for log in logs if "Running task" in log.read_text(errors="replace")]
    assert {log.parents[2] for log in busy} == set(cluster.work_dirs), [log.read_text()[-2000:] for log in logs]
    # The master saw the application finish.
    assert cluster.status()["completedapps"], cluster.status()


# A Kafka flow: each built partition records where it was built (in a Spark
# task or not, and the working folder, which is an executor's on a cluster).
KAFKA_FLOW_MODULE = textwrap.dedent("""
    import os

    from pyspark import TaskContext

    import flowspark.operators as op
    from flowspark.connectors.files import FileSink
    from flowspark.connectors.kafka import KafkaSource
    from flowspark.dataflow import Dataflow


    class TracedKafkaSource(KafkaSource):
        def __init__(self, trace_dir, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.trace_dir = trace_dir

        def build_part(self, step_id, for_part, resume_state):
            with open(os.path.join(self.trace_dir, str(os.getpid())), "a") as f:
                f.write(f"{for_part} {TaskContext.get() is not None} {os.getcwd()}\\n")
            return super().build_part(step_id, for_part, resume_state)


    source = TracedKafkaSource(os.environ["CLUSTER_TRACE"], [os.environ["KAFKA_BROKER"]], [os.environ["KAFKA_TOPIC"]],
                               tail=os.environ["KAFKA_TAIL"] == "1", batch_size=20)
    flow = Dataflow("cluster_kafka")
    messages = op.input("inp", flow, source)
    op.output("out", op.map("line", messages, lambda m: ("all", f"{m.partition} {m.offset} {m.value.decode()}")),
              FileSink(os.environ["CLUSTER_OUT"]))
""")
KAFKA_PARTITIONS = 3


def _start_kafka_flow(
    flow_dir: Path, name: str, broker: str, topic: str, tail: bool, *extra: str, stderr: Any = subprocess.PIPE
) -> "subprocess.Popen[str]":
    """`python -m flowspark.run` on the Kafka flow, writing `NAME.txt` and tracing into `trace-NAME/`."""
    trace = flow_dir / f"trace-{name}"
    trace.mkdir(exist_ok=True)
    env = dict(
        spark_env(),
        KAFKA_BROKER=broker,
        KAFKA_TOPIC=topic,
        KAFKA_TAIL="1" if tail else "0",
        CLUSTER_OUT=str(flow_dir / f"{name}.txt"),
        CLUSTER_TRACE=str(trace),
    )
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{flow_dir / 'cluster_kafka_flow.py'}:flow",
        "--max-batch-items",
        "40",
        *extra,
    ]
    return subprocess.Popen(
        cmd,
        cwd=flow_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )


def _produce(broker: str, topic: str, first: int, count: int) -> None:
    """Messages `first..first+count-1`, round robin over the partitions, one per request (tansu's end offsets)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(first, first + count):
        producer.produce(topic, f"m{i}".encode(), None, i % KAFKA_PARTITIONS)
        assert producer.flush(10) == 0


def _by_partition(path: Path) -> Dict[str, List[str]]:
    """Each Kafka partition's output lines, in output order."""
    out: Dict[str, List[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(line.split()[0], []).append(line)
    return out


@pytest.mark.cluster
@pytest.mark.kafka
def test_kafka_flow_killed_and_resumed_on_cluster_gives_every_message_once_in_order(
    cluster: StandaloneCluster, broker: str, flow_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"cluster-{os.getpid()}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, KAFKA_PARTITIONS, 1)])[topic].result(10)
    (flow_dir / "cluster_kafka_flow.py").write_text(KAFKA_FLOW_MODULE)
    _produce(broker, topic, 0, 600)
    out = flow_dir / "kafka-cluster.txt"
    recovery = str(tmp_path / "recovery")

    # Tailing on the cluster, killed (the driver's whole process group) part way.
    err = tmp_path / "killed.err"
    started = time.monotonic()
    with open(err, "w") as log:
        proc = _start_kafka_flow(
            flow_dir, "kafka-cluster", broker, topic, True, "--master", cluster.url, "-r", recovery, stderr=log
        )
    killed_at = _kill_once_written(proc, err, lambda: len(out.read_text().splitlines()) if out.exists() else 0, 150)
    _produce(broker, topic, 600, 150)
    # Resumed on the cluster to the end of the topic.
    resumed = _start_kafka_flow(
        flow_dir, "kafka-cluster", broker, topic, False, "--master", cluster.url, "-r", recovery
    )
    killed_seconds = time.monotonic() - started
    resumed_seconds = _finish(resumed, "resumed cluster")
    print(f"killed after {killed_at} of 750 lines and {killed_seconds:.1f} s; resumed run {resumed_seconds:.1f} s")

    # Message i went to partition i % 3, at offset i // 3 (`_produce`): each partition's lines in offset order.
    expected: Dict[str, List[str]] = {}
    for i in range(750):
        part = str(i % KAFKA_PARTITIONS)
        expected.setdefault(part, []).append(f"{part} {i // KAFKA_PARTITIONS} m{i}")
    assert _by_partition(out) == expected
    assert killed_at < 750
    # Every partition was built inside a Spark task, in an executor's working folder.
    built = [line.split() for f in (flow_dir / "trace-kafka-cluster").iterdir() for line in f.read_text().splitlines()]
    assert {part for part, _, _ in built} == {f"{p}-{topic}" for p in range(KAFKA_PARTITIONS)}
    assert all(in_task == "True" for _, in_task, _ in built), built
    places = {Path(cwd) for _, _, cwd in built}
    assert all(any(w in p.parents for w in cluster.work_dirs) for p in places), places


# A partitioned file flow: `DirSource` -> `DirSink`, each partition recording
# where it was built (in a Spark task or not, and the working folder, which
# is an executor's on a cluster).
FILES_FLOW_MODULE = textwrap.dedent("""
    import os
    from pathlib import Path

    from pyspark import TaskContext

    import flowspark.operators as op
    from flowspark.connectors.files import DirSink, DirSource
    from flowspark.dataflow import Dataflow

    TRACE_DIR = os.environ["CLUSTER_TRACE"]


    def trace(kind, for_part):
        with open(os.path.join(TRACE_DIR, f"{kind}-{os.getpid()}"), "a") as f:
            f.write(f"{kind} {for_part} {TaskContext.get() is not None} {os.getcwd()}\\n")


    class TracedDirSource(DirSource):
        def build_part(self, step_id, for_part, resume_state):
            trace("read", for_part)
            return super().build_part(step_id, for_part, resume_state)


    class TracedDirSink(DirSink):
        def build_part(self, step_id, for_part, resume_state):
            trace("write", for_part)
            return super().build_part(step_id, for_part, resume_state)


    flow = Dataflow("cluster_files")
    lines = op.input("inp", flow, TracedDirSource(Path(os.environ["CLUSTER_IN"])))
    keyed = op.map("key", lines, lambda line: (line.split(",")[0], line))
    op.output("out", keyed, TracedDirSink(Path(os.environ["CLUSTER_OUT"]), 3))
""")
IN_FILES = 4
LINES_PER_FILE = 3_000


def _start_files_flow(flow_dir: Path, name: str, *extra: str, stderr: Any = subprocess.PIPE) -> "subprocess.Popen[str]":
    """`python -m flowspark.run` on the partitioned file flow, writing folder `NAME/` and tracing into `trace-NAME/`."""
    trace = flow_dir / f"trace-{name}"
    trace.mkdir(exist_ok=True)
    (flow_dir / name).mkdir(exist_ok=True)
    env = dict(
        spark_env(), CLUSTER_IN=str(flow_dir / "in-files"), CLUSTER_OUT=str(flow_dir / name), CLUSTER_TRACE=str(trace)
    )
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{flow_dir / 'cluster_files_flow.py'}:flow",
        "--max-batch-items",
        "500",
        *extra,
    ]
    return subprocess.Popen(
        cmd,
        cwd=flow_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )


def _files_by_key(folder: Path) -> Dict[str, Dict[str, List[str]]]:
    """Each output file's lines, by key, in file order (a key's lines come from one input file, so their order is set)."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for path in sorted(folder.glob("part_*")):
        by_key = out.setdefault(path.name, {})
        for line in path.read_text().splitlines():
            by_key.setdefault(line.split(",")[0], []).append(line)
    return out


@pytest.mark.cluster
def test_partitioned_file_flow_killed_and_resumed_on_cluster_writes_each_keys_lines_once_in_order(
    cluster: StandaloneCluster, flow_dir: Path, tmp_path: Path
) -> None:
    (flow_dir / "cluster_files_flow.py").write_text(FILES_FLOW_MODULE)
    inputs = flow_dir / "in-files"
    inputs.mkdir()
    for index in range(IN_FILES):
        # Each input file holds its own keys, so each key's lines have one order.
        rows = (f"f{index}k{i % 7},{i}" for i in range(LINES_PER_FILE))
        (inputs / f"in{index}.txt").write_text("".join(f"{row}\n" for row in rows))
    out = flow_dir / "files-cluster"
    recovery = str(tmp_path / "recovery")

    # Killed (the driver's whole process group) once some output is written.
    err = tmp_path / "killed.err"
    with open(err, "w") as log:
        proc = _start_files_flow(flow_dir, "files-cluster", "--master", cluster.url, "-r", recovery, stderr=log)
    killed_at = _kill_once_written(
        proc, err, lambda: sum(len(p.read_text().splitlines()) for p in out.glob("part_*")), 2_000
    )
    resumed_seconds = _finish(
        _start_files_flow(flow_dir, "files-cluster", "--master", cluster.url, "-r", recovery), "resumed cluster"
    )
    print(f"killed after {killed_at} of {IN_FILES * LINES_PER_FILE} lines; resumed run {resumed_seconds:.1f} s")

    # Each key's lines, in its input file's order, all in one output file: the one the sink's partitioning picks.
    written = _files_by_key(out)
    keys_of_files = [set(lines_by_key) for lines_by_key in written.values()]
    assert sum(map(len, keys_of_files)) == len(set().union(*keys_of_files)), "a key's lines in two files"
    by_key = {key: lines for lines_by_key in written.values() for key, lines in lines_by_key.items()}
    expected: Dict[str, List[str]] = {}
    for path in sorted(inputs.iterdir()):
        for line in path.read_text().splitlines():
            expected.setdefault(line.split(",")[0], []).append(line)
    assert by_key == expected
    assert killed_at < IN_FILES * LINES_PER_FILE
    # Every input file was read, and every output file written, inside Spark tasks in the executors' folders.
    built = [line.split() for f in (flow_dir / "trace-files-cluster").iterdir() for line in f.read_text().splitlines()]
    assert {part.split("::")[-1] for kind, part, _, _ in built if kind == "read"} == {
        f"in{i}.txt" for i in range(IN_FILES)
    }
    assert {part for kind, part, _, _ in built if kind == "write"} == {"part_0", "part_1", "part_2"}
    assert all(in_task == "True" for _, _, in_task, _ in built), built
    places = {Path(cwd) for _, _, _, cwd in built}
    assert all(any(w in p.parents for w in cluster.work_dirs) for p in places), places


# Lines of files read in Spark's tasks, as rows of a PostgreSQL table written in Spark's tasks.
POSTGRES_FLOW_MODULE = textwrap.dedent("""
    import os
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.connectors.files import DirSource
    from flowspark.connectors.postgres import PostgresSink
    from flowspark.dataflow import Dataflow


    def as_row(line):
        key, _ = line.split(",")
        return key, {"key": key, "line": line}


    flow = Dataflow("cluster_postgres")
    lines = op.input("inp", flow, DirSource(Path(os.environ["CLUSTER_IN"])))
    sink = PostgresSink(os.environ["CLUSTER_PG"], os.environ["CLUSTER_TABLE"], ["key", "line"], partitions=3)
    op.output("out", op.map("row", lines, as_row), sink)
""")


@pytest.mark.cluster
@pytest.mark.postgres
def test_postgres_sink_killed_and_resumed_on_cluster_writes_every_row_once(
    cluster: StandaloneCluster, postgres: str, flow_dir: Path, tmp_path: Path
) -> None:
    (flow_dir / "cluster_postgres_flow.py").write_text(POSTGRES_FLOW_MODULE)
    inputs = flow_dir / "in-postgres"
    inputs.mkdir()
    for index in range(IN_FILES):
        (inputs / f"in{index}.txt").write_text("".join(f"f{index}k{i % 7},{i}\n" for i in range(LINES_PER_FILE)))
    table = pg_table(postgres, "key text NOT NULL, line text NOT NULL")
    env = dict(spark_env(), CLUSTER_IN=str(inputs), CLUSTER_PG=postgres, CLUSTER_TABLE=table)
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        f"{flow_dir / 'cluster_postgres_flow.py'}:flow",
        "--max-batch-items",
        "500",
        "--master",
        cluster.url,
        "-r",
        str(tmp_path / "recovery"),
    ]

    def start(stderr: Any) -> "subprocess.Popen[str]":
        return subprocess.Popen(
            cmd,
            cwd=flow_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )

    def rows() -> int:
        return int(pg_query(postgres, f"SELECT count(*) FROM {table}")[0][0])

    err = tmp_path / "killed.err"
    with open(err, "w") as log:
        killed_at = _kill_once_written(start(log), err, rows, 2_000)
    _finish(start(subprocess.PIPE), "resumed cluster")
    print(f"killed after {killed_at} of {IN_FILES * LINES_PER_FILE} rows")

    got = sorted(line for (line,) in pg_query(postgres, f"SELECT line FROM {table}"))
    expected = sorted(line for path in inputs.iterdir() for line in path.read_text().splitlines())
    assert got == expected
    assert killed_at < IN_FILES * LINES_PER_FILE


CHECK_SCRIPT = textwrap.dedent("""
    import sys
    from flowspark.engine.spark.cluster import check_recovery_dir_visible
    from flowspark.engine.spark.session import get_session
    from flowspark.errors import FlowsparkRuntimeError

    def check(spark, path, **kwargs):
        try:
            check_recovery_dir_visible(spark, path, **kwargs)
            print("ok")
        except FlowsparkRuntimeError as ex:
            print("error:", ex)

    url, shared, missing = sys.argv[1:]
    spark = get_session(url)
    check(spark, shared)
    check(spark, missing)
    check(spark, missing, temporary=True)
    spark.stop()
    # Executors bigger than any worker: Spark would wait for them forever.
    spark = get_session(url, {"spark.executor.memory": "4g"})
    check(spark, shared, timeout=3)
    spark.stop()
""")


@pytest.mark.cluster
def test_recovery_dir_check_on_cluster(cluster: StandaloneCluster, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    missing = tmp_path / "missing"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CHECK_SCRIPT, cluster.url, str(shared), str(missing)],
        env=spark_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        start_new_session=True,
        check=False,
    )
    print(f"check run {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, _short(done.stderr)
    visible, invisible, temporary, no_executor = done.stdout.splitlines()
    assert visible == "ok"
    assert not list(shared.iterdir()), "the probe left files behind"
    for line in (invisible, temporary):
        assert line.startswith("error: "), line
        assert repr(str(missing)) in line
        assert f"host {socket.gethostname()!r}" in line
        assert "it does not exist there" in line
        assert "storage every node sees" in line
    assert invisible.startswith(f"error: recovery directory {str(missing)!r}"), invisible
    assert "-r/--recovery-directory" in temporary
    assert no_executor.startswith("error: no Spark executor took flowspark's start-up job within 3 s"), no_executor
    assert "4g of free memory" in no_executor


def test_recovery_dir_check_skips_local_masters(tmp_path: Path) -> None:
    """Local masters never start a job (the stub has no way to run one)."""
    for master in ("local", "local[2]", "local[*, 3]", "local-cluster[2,1,1024]"):
        assert is_local_master(master)
        stub = SimpleNamespace(sparkContext=SimpleNamespace(master=master))
        check_recovery_dir_visible(stub, str(tmp_path / "does-not-exist"))
    assert not is_local_master("spark://127.0.0.1:7077")
    assert not is_local_master("yarn")
