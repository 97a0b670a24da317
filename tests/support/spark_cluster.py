"""A Spark standalone cluster on 127.0.0.1 for the cluster tests (tests/test_cluster.py, tests/test_spark_faults.py).

`StandaloneCluster` starts a master and two one-core workers from the
wheel's own Spark (`SPARK_HOME` is PySpark's folder), each in a process
group of its own, so that a test can lose a worker with everything it
started, as a host that went away; the `cluster` fixture keeps one for the
session, which the cluster tests share one after another
(`support.parallel`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import IO, Any, Dict, List

import pyspark

from support.ports import free_ports
from support.processes import ancestor, descendants, jvm_options, kill_group

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
WORKERS = 2
REGISTER_TIMEOUT = 90.0


def spark_env() -> Dict[str, str]:
    """The environment a cluster process (or a flow run on the cluster) starts with: the wheel's Spark, on loopback."""
    return dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1")


class StandaloneCluster:
    """A standalone master and workers, each in its own process group (JVMs, executors and all)."""

    def __init__(self, root: Path, workers: int = WORKERS) -> None:
        self.root = root
        self.workers = workers
        self.port, self.ui_port = free_ports(2)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.work_dirs: List[Path] = []
        self._procs: List["subprocess.Popen[bytes]"] = []
        self._logs: List[IO[bytes]] = []

    def _spawn(self, name: str, args: List[str]) -> None:
        log = open(self.root / f"{name}.log", "wb")
        self._logs.append(log)
        self._procs.append(
            subprocess.Popen(
                [os.path.join(SPARK_HOME, "bin", "spark-class"), *args],
                # Through the workers' environment the options reach the executors they start too.
                env=dict(spark_env(), JAVA_TOOL_OPTIONS=" ".join(jvm_options())),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def _spawn_worker(self, index: int, log_name: str) -> None:
        self._spawn(
            log_name,
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                "0",
                "--work-dir",
                str(self.work_dirs[index]),
                self.url,
            ],
        )

    def start(self) -> None:
        """Start the master, and the workers once the master's page answers.

        A worker's UI takes any free port: started together, it could take
        the one picked for the master's page before the master binds it.
        """
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        self._wait_for_master()
        for i in range(self.workers):
            work_dir = self.root / f"worker{i}"
            work_dir.mkdir()
            self.work_dirs.append(work_dir)
            self._spawn_worker(i, f"worker{i}")

    def worker_of(self, pid: int) -> int:
        """Which worker the process `pid` (an executor or one of its Python processes) runs under."""
        workers = {proc.pid: index for index, proc in enumerate(self._procs[1:])}
        return workers[ancestor(pid, lambda found: found in workers)]

    def lose_worker(self, index: int) -> None:
        """SIGKILL worker `index` with everything it started, as if its host went away (its executors' Python
        daemons lead process groups of their own); a fresh worker takes its place, as a replaced host would."""
        proc = self._procs[1 + index]
        doomed = descendants(proc.pid)
        kill_group(proc, signal.SIGKILL)
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        self._procs.remove(proc)
        self._spawn_worker(index, f"worker{index}-again")
        self._procs.insert(1 + index, self._procs.pop())

    def status(self) -> Dict[str, Any]:
        """The master's JSON status page (workers, apps)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as page:
            return json.load(page)  # type: ignore[no-any-return]

    def _wait_for_master(self, timeout: float = REGISTER_TIMEOUT) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self._procs[0].poll() is not None:
                msg = f"the master ended with {self._procs[0].returncode}; logs in {self.root}"
                raise RuntimeError(msg)
            try:
                self.status()
                return
            except OSError:
                time.sleep(0.5)
        msg = f"the master's page did not answer in {timeout:.0f} s; logs in {self.root}"
        raise TimeoutError(msg)

    def wait_for_workers(self, timeout: float = REGISTER_TIMEOUT) -> float:
        """Block until every worker registered with the master; return the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            for proc in self._procs:
                if proc.poll() is not None:
                    msg = f"a cluster process ended with {proc.returncode}; logs in {self.root}"
                    raise RuntimeError(msg)
            try:
                workers = self.status().get("workers", [])
            except OSError:
                workers = []
            alive = [w for w in workers if w.get("state") == "ALIVE"]
            if len(alive) >= self.workers:
                return time.monotonic() - started
            time.sleep(0.5)
        msg = f"{self.workers} workers did not register in {timeout:.0f} s; logs in {self.root}"
        raise TimeoutError(msg)

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                kill_group(proc, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_group(proc, signal.SIGKILL)
                proc.wait()
        for log in self._logs:
            log.close()

    def executor_logs(self) -> List[Path]:
        """Each executor's stderr log, `WORK_DIR/APP_ID/EXECUTOR_ID/stderr`, across all workers."""
        return sorted(p for d in self.work_dirs for p in d.glob("app-*/*/stderr"))
