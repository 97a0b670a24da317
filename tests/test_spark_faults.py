"""Faults that are not the user's: killed Python workers, lost executors, a lost worker host, a lost driver, SIGTERM,
a broker killed and started again; and the same from Kafka into an exactly-once `KafkaSink`.

Each run is `python -m flowspark.run` on a keyed, windowed flow from files
(`DirSource` -> tumbling `fold_window` -> `DirSink`, exactly once), or from
the same lines in a Kafka topic, and
each faulted run's output is compared with what the input makes, computed
here in plain Python (`expected`; equal to an undisturbed run's output):
nothing lost, nothing repeated.  The flow's own functions mark where a
fault is to strike (`hook`): at a chosen point (a line read in the
source's task, an event folded in the stateful stage, a sink partition's
write, half of its lines written) the first call of a run writes its
process id to a marker file and pauses, and the test kills what it wants
meanwhile (or the call kills its own Python worker).  Faults strike as the
run gets there, never after a fixed sleep.  The cluster is the standalone
one of `support.spark_cluster` (a master and two one-core workers on
127.0.0.1), the broker the session's Apache Kafka.

Where two faults test recovery at different points of a run, one run
carries both (a lost worker host and a lost executor; an executor Spark
may not retry and a lost driver): each cluster run costs a minute or more
of starting Spark, the faults only seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Tuple
from zlib import adler32

import pytest
from support.kafka_broker import KafkaBroker
from support.kafka_topics import new_topic, read_back
from support.processes import ancestor, command_line
from support.spark_cluster import StandaloneCluster, spark_env

FLOW_MODULE = textwrap.dedent('''
    import os
    import signal
    import time
    from datetime import datetime, timedelta, timezone
    from pathlib import Path

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.connectors.files import DirSink, DirSource
    from flowspark.dataflow import Dataflow
    from flowspark.outputs import StatefulSinkPartition

    CHAOS_DIR = os.environ["CHAOS_DIR"]
    POINTS = [p for p in os.environ.get("CHAOS_POINTS", "").split(",") if p]
    RAISE_AT = os.environ.get("CHAOS_RAISE", "")
    START = datetime(2024, 1, 1, tzinfo=timezone.utc)
    OUT_FILES = int(os.environ["CHAOS_OUT_FILES"])


    def hook(point):
        """The first call at an active point (named in `CHAOS_POINTS`, or armed by the test since, with a file
        `POINT.armed`): write this process's id to its marker, then pause (or die)."""
        if point not in POINTS and not os.path.exists(os.path.join(CHAOS_DIR, f"{point}.armed")):
            return
        try:
            fd = os.open(os.path.join(CHAOS_DIR, point), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        if os.environ.get("CHAOS_SELF_KILL") == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
        time.sleep(float(os.environ.get("CHAOS_PAUSE", "5")))  # the test strikes meanwhile


    def source():
        """The input: the files, or a Kafka topic holding each file's lines in one partition (`CHAOS_KAFKA`)."""
        broker = os.environ.get("CHAOS_KAFKA")
        if broker is None:
            return DirSource(Path(os.environ["CHAOS_IN"]))
        from flowspark.connectors.kafka import KafkaSource

        return KafkaSource([broker], [os.environ["CHAOS_TOPIC"]], tail=False)


    def parse(line):
        hook("read")
        if not isinstance(line, str):
            line = line.value.decode()
        key, second, value = line.split(",")
        return key, (int(second), int(value))


    def event_time(event):
        return START + timedelta(seconds=event[0])


    def add(total, event):
        hook("state")
        if RAISE_AT and RAISE_AT == f"{event[0]},{event[1]}":
            with open(os.path.join(CHAOS_DIR, "raised"), "a") as f:
                f.write(f"{os.getpid()}\\n")
            raise ValueError(f"no event may be worth {event[1]}")
        return total + event[1]


    def as_line(item):
        key, (window_id, total) = item
        return key, f"{key},{window_id},{total}"


    class _HookedPart(StatefulSinkPartition):
        def __init__(self, inner):
            self._inner = inner

        def write_batch(self, values):
            half = len(values) // 2
            self._inner.write_batch(values[:half])
            self._inner.snapshot()  # half the lines are on disk when the fault strikes
            hook("write")
            self._inner.write_batch(values[half:])

        def snapshot(self):
            return self._inner.snapshot()

        def close(self):
            self._inner.close()


    class HookedDirSink(DirSink):
        def build_part(self, step_id, for_part, resume_state):
            return _HookedPart(super().build_part(step_id, for_part, resume_state))


    def kafka_sink():
        """An exactly-once `KafkaSink` into `CHAOS_SINK_TOPIC`, its writes paused half-way as `_HookedPart`'s are (half
        the messages produced in the batch's open transaction)."""
        from flowspark.connectors.kafka import KafkaSink, KafkaSinkMessage
        from flowspark.connectors.kafka.transactions import TransactionalKafkaSink

        class HookedPart(StatefulSinkPartition):
            def __init__(self, inner):
                self._inner = inner

            def write_batch(self, values):
                messages = [KafkaSinkMessage(line.split(",")[0].encode(), line.encode()) for line in values]
                half = len(messages) // 2
                self._inner.write_batch(messages[:half])
                hook("write")
                self._inner.write_batch(messages[half:])

            def snapshot(self):
                return self._inner.snapshot()

            def close(self):
                self._inner.close()

        class HookedTransactions(TransactionalKafkaSink):
            def build_part(self, step_id, for_part, resume_state):
                return HookedPart(super().build_part(step_id, for_part, resume_state))

        class HookedKafkaSink(KafkaSink):
            def transactional(self):
                inner = super().transactional()
                return HookedTransactions(inner.brokers, inner.topic, inner.add_config, inner.prefix)

        return HookedKafkaSink([os.environ["CHAOS_KAFKA"]], os.environ["CHAOS_SINK_TOPIC"], exactly_once=True)


    flow = Dataflow("chaos")
    events = op.map("parse", op.input("inp", flow, source()), parse)
    sums = win.fold_window(
        "sum",
        events,
        # Events come in time order; windows close ten minutes of event time behind the newest
        # one, so most close before the end, and nothing is late: the watermark also moves on with
        # the system time, stopped runs included, and no run here stops that long.
        win.EventClock(event_time, wait_for_system_duration=timedelta(minutes=10)),
        win.TumblingWindower(length=timedelta(seconds=60), align_to=START),
        lambda: 0,
        add,
        lambda a, b: a + b,
    )
    lines = op.map("line", sums.down, as_line)
    if "CHAOS_SINK_TOPIC" in os.environ:
        op.output("out", op.key_rm("unkey", lines), kafka_sink())
    else:
        op.output("out", lines, HookedDirSink(Path(os.environ["CHAOS_OUT"]), OUT_FILES))
''')
IN_FILES = 4
KEYS_PER_FILE = 5
LINES_PER_FILE = 3_000
LINES_PER_SECOND = 2
OUT_FILES = 4
RUN_TIMEOUT = 300.0
STRIKE_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The flow module (off the workers' `sys.path`) and its input: each key's events in one file, in time order."""
    folder = tmp_path_factory.mktemp("chaosflow")
    (folder / "chaos_flow.py").write_text(FLOW_MODULE)
    inputs = folder / "in"
    inputs.mkdir()
    for index in range(IN_FILES):
        (inputs / f"in{index}.txt").write_text(
            "".join(f"{key},{second},{value}\n" for key, second, value in _events(index))
        )
    return folder


def _events(index: int) -> List[Tuple[str, int, int]]:
    """Input file `index`'s events, `(key, second, value)`, in time order: its keys take turns."""
    return [
        (f"f{index}k{i % KEYS_PER_FILE}", i // LINES_PER_SECOND, (i * 7 + index) % 100) for i in range(LINES_PER_FILE)
    ]


@pytest.fixture(scope="module")
def expected() -> Dict[str, Dict[str, List[str]]]:
    """The flow's output as `_lines` reads it, computed from the input: each key's sum per minute of event time,
    window by window, in the file `DirSink` sends the key to (`adler32` of the key).

    Computed, not taken from an undisturbed run: that run cost as much as a
    faulted one, and gave the same (checked when this replaced it).
    """
    sums: Dict[Tuple[str, int], int] = {}
    for index in range(IN_FILES):
        for key, second, value in _events(index):
            window = (key, second // 60)
            sums[window] = sums.get(window, 0) + value
    out: Dict[str, Dict[str, List[str]]] = {}
    for (key, window_id), total in sorted(sums.items()):
        by_key = out.setdefault(f"part_{adler32(key.encode()) % OUT_FILES}", {})
        by_key.setdefault(key, []).append(f"{key},{window_id},{total}")
    windows = LINES_PER_FILE // LINES_PER_SECOND // 60
    assert sum(len(lines) for by_key in out.values() for lines in by_key.values()) == IN_FILES * KEYS_PER_FILE * windows
    return out


class Run:
    """One `python -m flowspark.run` of the flow, in its own process group, its stderr kept in a file.

    Runs of one name write to one output folder; each has a folder of its
    own for its points' markers (`chaos`), so a point strikes once in every
    run that names it.
    """

    def __init__(self, flow_dir: Path, name: str, *extra: str, points: str = "", **env: str) -> None:
        runs = flow_dir / f"chaos-{name}"
        runs.mkdir(exist_ok=True)
        out = flow_dir / name
        out.mkdir(exist_ok=True)
        number = len(list(runs.glob("*.err")))
        self.err_path = runs / f"run{number}.err"
        self.chaos = runs / f"run{number}"
        self.chaos.mkdir()
        environment = dict(
            spark_env(),
            CHAOS_IN=str(flow_dir / "in"),
            CHAOS_OUT=str(out),
            CHAOS_OUT_FILES=str(OUT_FILES),
            CHAOS_DIR=str(self.chaos),
            CHAOS_POINTS=points,
            **env,
        )
        cmd = [
            sys.executable,
            "-m",
            "flowspark.run",
            f"{flow_dir / 'chaos_flow.py'}:flow",
            "--max-batch-items",
            "300",
            "--no-progress",
            *extra,
        ]
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                cmd,
                cwd=flow_dir,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    def struck(self, point: str) -> int:
        """Wait for the flow to reach `point`; the id of the process paused there."""
        marker = self.chaos / point
        deadline = time.monotonic() + STRIKE_TIMEOUT
        while not (marker.exists() and marker.read_text()):
            assert self.proc.poll() is None, f"the run ended before reaching {point!r}: {_short(self.err)}"
            assert time.monotonic() < deadline, f"the run did not reach {point!r}"
            time.sleep(0.05)
        return int(marker.read_text())

    def said(self, text: str) -> None:
        """Wait for the run to say `text` on its stderr."""
        deadline = time.monotonic() + STRIKE_TIMEOUT
        while text not in self.err:
            assert self.proc.poll() is None or text in self.err, (
                f"the run ended without saying {text!r}: {_short(self.err)}"
            )
            assert time.monotonic() < deadline, f"the run did not say {text!r}: {_short(self.err)}"
            time.sleep(0.05)

    def arm(self, point: str) -> None:
        """Make `point` strike from now on in this run, at its next call."""
        (self.chaos / f"{point}.armed").touch()

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the run took over {RUN_TIMEOUT:.0f} s: {_short(self.err)}")
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the driver: its Python process and its JVM (the Python workers of a local master die with it)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _short(err: str) -> str:
    """A run's stderr without Java stack frames."""
    return "\n".join(line for line in err.splitlines() if not line.lstrip().startswith("at "))[-6000:]


def _lines(folder: Path) -> Dict[str, Dict[str, List[str]]]:
    """Each output file's lines by key, in file order (a key's lines have one order: its windows')."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for path in sorted(folder.glob("part_*")):
        by_key = out.setdefault(path.name, {})
        for line in path.read_text().splitlines():
            by_key.setdefault(line.split(",")[0], []).append(line)
    return out


def _executor(pid: int) -> int:
    """The executor JVM a Python worker runs under."""
    return ancestor(pid, lambda found: "CoarseGrainedExecutorBackend" in command_line(found))


def test_killed_python_workers_are_retried_and_nothing_is_lost_or_repeated(
    flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    """A local master that retries tasks (`local[2,3]`), as a cluster does: a Python worker killed while it reads
    a source partition, while it folds, and half-way through a sink partition's write costs a retry, not the run."""
    run = Run(
        flow_dir,
        "python-workers",
        "--master",
        "local[2,3]",
        "-r",
        str(flow_dir / "recovery-python-workers"),
        points="read,state,write",
        CHAOS_SELF_KILL="1",
    )
    assert run.wait() == 0, _short(run.err)
    assert sorted(p.name for p in run.chaos.iterdir()) == ["read", "state", "write"]
    assert _lines(flow_dir / "python-workers") == expected
    assert "Traceback" not in run.err and "py4j" not in run.err, run.err


def test_sigterm_stops_at_a_micro_batch_boundary_and_a_second_one_at_once(
    flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    recovery = str(flow_dir / "recovery-sigterm")
    first = Run(flow_dir, "sigterm", "-r", recovery, points="state")
    first.struck("state")
    first.proc.send_signal(signal.SIGTERM)  # while a stateful task is paused inside the micro-batch
    assert first.wait() == 143, _short(first.err)
    last = first.err.strip().splitlines()[-1]
    assert last.startswith("flowspark: flow 'chaos' stopped on SIGTERM after micro-batch "), first.err
    assert last.endswith("was written and committed; start it again with the same recovery directory to resume")
    assert "Traceback" not in first.err, first.err

    second = Run(flow_dir, "sigterm", "-r", recovery, points="write")
    second.struck("write")
    second.proc.send_signal(signal.SIGTERM)
    second.said("SIGTERM: stopping once")  # two signals sent at once would be handled as one
    second.proc.send_signal(signal.SIGTERM)  # ... and at once: the paused write is cut short
    started = time.monotonic()
    assert second.wait() == 143, _short(second.err)
    print(f"stopped {time.monotonic() - started:.1f} s after the second SIGTERM")
    assert "flowspark: the run stopped at once on a second SIGTERM" in second.err, second.err

    third = Run(flow_dir, "sigterm", "-r", recovery)
    assert third.wait() == 0, _short(third.err)
    assert _lines(flow_dir / "sigterm") == expected


@pytest.mark.cluster
def test_a_lost_worker_host_in_the_stateful_stage_and_a_lost_executor_in_a_sink_write_cost_a_retry(
    cluster: StandaloneCluster, flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    """The issue's measurement, each fault where it costs most, in one run; Spark retries on what is left.  The
    worker host of a task in the stateful stage goes away (its executor, Python workers and state with it; a fresh
    worker registers meanwhile), then the executor writing a sink partition is SIGKILLed half-way through."""
    run = Run(flow_dir, "lost", "--master", cluster.url, "-r", str(flow_dir / "recovery-lost"), points="state,write")
    try:
        cluster.lose_worker(cluster.worker_of(run.struck("state")))
        os.kill(_executor(run.struck("write")), signal.SIGKILL)
        assert run.wait() == 0, _short(run.err)
    finally:
        cluster.wait_for_workers()
    assert _lines(flow_dir / "lost") == expected
    assert "Traceback" not in run.err and "py4j" not in run.err, run.err


@pytest.mark.cluster
def test_a_driver_restarted_by_its_supervisor_resumes_by_itself_and_an_executor_spark_may_not_retry_restarts_the_query(
    cluster: StandaloneCluster, flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    """A supervisor (a restart policy, systemd's `Restart=on-failure`) starts the same command again after any
    failure, a command that lets Spark try a task once (`spark.task.maxFailures=1`).  The first driver loses an
    executor in the stateful stage, which it reports in one line as it restarts its query, then is SIGKILLed half-way
    through a sink write; the second gets SIGTERM; the third ends."""
    recovery = str(flow_dir / "recovery-driver")
    strikes = ["state,write", "state", ""]
    statuses: List[int] = []
    runs: List[Run] = []
    while not statuses or statuses[-1] != 0:
        assert len(runs) < len(strikes), f"the supervisor gave up: {statuses}"
        points = strikes[len(runs)]
        run = Run(
            flow_dir,
            "driver",
            "--master",
            cluster.url,
            "-r",
            recovery,
            "--conf",
            "spark.task.maxFailures=1",
            points=points,
        )
        runs.append(run)
        if points == "state,write":
            os.kill(_executor(run.struck("state")), signal.SIGKILL)
            run.said("restarting from the last completed micro-batch")  # the report, before the driver goes
            run.struck("write")
            run.kill()  # the driver's Python process and its JVM, while an executor writes a sink partition
        elif points == "state":
            run.struck("state")
            run.proc.send_signal(signal.SIGTERM)
        statuses.append(run.wait())
    assert statuses == [-signal.SIGKILL, 143, 0], [_short(r.err) for r in runs]
    said = runs[0].err.strip().splitlines()
    assert len(said) == 1, runs[0].err
    assert said[0].startswith("flowspark: flow 'chaos': executor "), said
    assert " on 127.0.0.1 was lost (exit 137: SIGKILL), and Spark gave up after 1 attempt of task " in said[0]
    assert "; see the executor's log at http://127.0.0.1:" in said[0]
    assert said[0].endswith("; restarting from the last completed micro-batch (restart 1 of 2)")
    assert "stopped on SIGTERM after micro-batch" in runs[1].err
    assert _lines(flow_dir / "driver") == expected


@pytest.mark.cluster
def test_a_user_error_on_a_cluster_ends_the_run_on_its_first_raise(cluster: StandaloneCluster, flow_dir: Path) -> None:
    """Spark retries a failed task on a cluster; a user function that raised is not called again."""
    run = Run(
        flow_dir,
        "user-error",
        "--master",
        cluster.url,
        "-r",
        str(flow_dir / "recovery-user-error"),
        CHAOS_RAISE="45,30",
    )
    assert run.wait() == 1, _short(run.err)
    assert len((run.chaos / "raised").read_text().splitlines()) == 1
    assert run.err.strip().endswith(
        "flowspark.errors.FlowsparkRuntimeError: error calling `on_batch` in step "
        "'chaos.sum.window.stateful_batch' for key 'f0k0'"
    ), run.err
    assert (
        f'File "{flow_dir / "chaos_flow.py"}", line ' in run.err and "ValueError: no event may be worth 30" in run.err
    )
    assert "py4j" not in run.err and "at org.apache" not in run.err, run.err


@pytest.mark.cluster
@pytest.mark.kafka
def test_a_flow_from_kafka_on_a_cluster_survives_a_lost_executor_its_broker_killed_and_a_sigterm(
    cluster: StandaloneCluster, kafka: KafkaBroker, flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    """The faults one after another in one run from Kafka (the session's broker, a topic of the test's own): an
    executor SIGKILLed in the stateful stage and the broker SIGKILLed with it, started again once the run says it
    waits for it; then the driver sent SIGTERM during a sink write.  Started again, the run ends with the output the
    files make."""
    from confluent_kafka import Producer

    topic = new_topic(kafka.address, IN_FILES)
    producer = Producer({"bootstrap.servers": kafka.address})
    for index in range(IN_FILES):
        for line in (flow_dir / "in" / f"in{index}.txt").read_text().splitlines():
            producer.produce(topic, line.encode(), partition=index)
    assert producer.flush(60) == 0
    recovery = str(flow_dir / "recovery-kafka")
    source = {"CHAOS_KAFKA": kafka.address, "CHAOS_TOPIC": topic}
    first = Run(flow_dir, "kafka", "--master", cluster.url, "-r", recovery, points="state", **source)
    os.kill(_executor(first.struck("state")), signal.SIGKILL)
    kafka.process.kill()
    try:
        first.said(f"flowspark: Kafka brokers {kafka.address} unreachable (")
    finally:
        kafka.process.start()  # the session's other tests use it too
    first.arm("write")  # a write after the broker is back: one before may precede the outage's first bite
    first.struck("write")
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait() == 143, _short(first.err)
    assert f"flowspark: Kafka brokers {kafka.address} answer again after " in first.err, _short(first.err)
    second = Run(flow_dir, "kafka", "--master", cluster.url, "-r", recovery, **source)
    assert second.wait() == 0, _short(second.err)
    assert _lines(flow_dir / "kafka") == expected
    said = first.err + second.err
    assert "Traceback" not in said and "py4j" not in said, said


@pytest.mark.cluster
@pytest.mark.kafka
def test_kafka_to_kafka_exactly_once_on_a_cluster_survives_lost_executors_and_a_driver_killed_mid_transaction(
    cluster: StandaloneCluster, kafka: KafkaBroker, flow_dir: Path, expected: Dict[str, Dict[str, List[str]]]
) -> None:
    """From Kafka to an exactly-once `KafkaSink` on the cluster, two workers (so Spark's tasks write the sink, one
    per worker and micro-batch).  The first driver loses an executor in the stateful stage, then is SIGKILLed while
    an executor is half-way through a sink write, its transaction open; the second loses the executor of a sink
    write half-way through (Spark retries the task, whose producer fences the lost one) and ends.  A
    `read_committed` consumer reads each key's windows once, in order, as the files make them."""
    from confluent_kafka import Producer

    topic, sink_topic = new_topic(kafka.address, IN_FILES), new_topic(kafka.address, 2)
    producer = Producer({"bootstrap.servers": kafka.address})
    for index in range(IN_FILES):
        for line in (flow_dir / "in" / f"in{index}.txt").read_text().splitlines():
            producer.produce(topic, line.encode(), partition=index)
    assert producer.flush(60) == 0
    recovery = str(flow_dir / "recovery-kafka-eos")
    env = {"CHAOS_KAFKA": kafka.address, "CHAOS_TOPIC": topic, "CHAOS_SINK_TOPIC": sink_topic}
    first = Run(flow_dir, "kafka-eos", "--master", cluster.url, "-r", recovery, "-w", "2", points="state,write", **env)
    os.kill(_executor(first.struck("state")), signal.SIGKILL)
    first.struck("write")
    first.kill()
    second = Run(flow_dir, "kafka-eos", "--master", cluster.url, "-r", recovery, "-w", "2", points="write", **env)
    os.kill(_executor(second.struck("write")), signal.SIGKILL)
    assert second.wait() == 0, _short(second.err)
    want = {key: lines for by_key in expected.values() for key, lines in by_key.items()}
    got: Dict[str, List[str]] = {}
    for message in read_back(kafka.address, sink_topic, sum(len(lines) for lines in want.values())):
        got.setdefault(message.key().decode(), []).append(message.value().decode())
    assert got == want
    assert "Traceback" not in second.err and "py4j" not in second.err, second.err
