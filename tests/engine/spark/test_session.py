"""The driver JVM: a user's `extraJavaOptions` add to flowspark's, a user's `defaultJavaOptions` replace them; no
data-source listing; a JVM that ends as it starts says why.

Each case starts its own session in a child process (a process has one) and
reads what the driver JVM was started with back from the JVM, or what the
run left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[3]

_CHILD = """
import json, sys
from flowspark.engine.spark.session import get_session
spark = get_session("local[1]", json.loads(sys.argv[1]))
jvm = spark.sparkContext._jvm
print(json.dumps({
    "args": list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()),
    "mine": jvm.System.getProperty("flowspark.test.mine"),
    "log4j": jvm.System.getProperty("log4j2.configurationFile"),
    "code_cache": sum(
        pool.getUsage().getMax() for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        if "Code" in pool.getName()
    ),
}))
"""


def _driver_jvm(conf: Dict[str, str]) -> Dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(conf)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: Dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.quick
def test_user_extra_java_options_add_to_flowspark_options() -> None:
    jvm = _driver_jvm({"spark.driver.extraJavaOptions": "-Dflowspark.test.mine=hello"})
    args = jvm["args"]
    assert isinstance(args, list)
    assert jvm["mine"] == "hello"
    assert str(jvm["log4j"]).endswith("flowspark/engine/spark/log4j2.properties")
    assert "-Xss16m" in args and "-XX:+UseSerialGC" in args
    # Spark puts the default options first, so the user's win where they clash.
    assert args.index("-Xss16m") < args.index("-Dflowspark.test.mine=hello")
    # Room for the code of every query a long-lived driver (the warm server) compiles: with the JVM's 48 MiB, a
    # full code cache stalled micro-batches for a second while it swept and compiled again.
    assert int(str(jvm["code_cache"])) >= 240 * 1024 * 1024


def test_user_default_java_options_replace_flowspark_options() -> None:
    jvm = _driver_jvm({"spark.driver.defaultJavaOptions": "-Dflowspark.test.mine=own"})
    args = jvm["args"]
    assert isinstance(args, list)
    assert jvm["mine"] == "own"
    flowspark_options: List[str] = [a for a in args if a == "-Xss16m" or "Archive" in a or a.startswith("-Dlog4j2")]
    assert flowspark_options == []


_RUN_A_FLOW = """
import os
from flowspark.dataflow import Dataflow
import flowspark.operators as op
from flowspark.testing import TestingSink, TestingSource, run_main
flow = Dataflow("f")
out = []
op.output("out", op.map("double", op.input("inp", flow, TestingSource([1, 2])), lambda x: 2 * x), TestingSink(out))
run_main(flow)
print(out, os.environ.get("PYSPARK_DRIVER_PYTHON"))
"""


def test_a_run_imports_no_installed_spark_data_source_package(tmp_path: Path) -> None:
    # Spark's own start lists the `pyspark_*` packages on the Python path by
    # importing each one; flowspark's query needs none of them.
    marker = tmp_path / "imported"
    packages = tmp_path / "packages"
    packages.mkdir()
    (packages / "pyspark_flowspark_probe.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(packages), str(ROOT)]),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [sys.executable, "-c", _RUN_A_FLOW],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[2,", "4]", sys.executable]
    assert not marker.exists()


def test_the_jvm_stderr_filter_drops_worker_hangups_and_keeps_real_tracebacks(
    monkeypatch: Any, capfdbinary: Any
) -> None:
    import io

    from flowspark.engine.spark import session

    hangup = (
        b"Traceback (most recent call last):\n"
        b'  File "/x/site-packages/pyspark/daemon.py", line 264, in manager\n'
        b"    code = worker(sock, authenticated)\n"
        b'  File "/x/site-packages/pyspark/daemon.py", line 95, in worker\n'
        b"    outfile.flush()\n"
        b"BrokenPipeError: [Errno 32] Broken pipe\n"
    )
    chained = (
        b"Traceback (most recent call last):\n"
        b'  File "/x/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 265, in main\n'
        b"    func_id = read_int(infile)\n"
        b"ConnectionResetError: [Errno 104] Connection reset by peer\n"
        b"\n"
        b"During handling of the above exception, another exception occurred:\n"
        b"\n"
        b"Traceback (most recent call last):\n"
        b'  File "/x/site-packages/pyspark/serializers.py", line 90, in write_int\n'
        b"    stream.flush()\n"
        b"OSError: [Errno 32] Broken pipe\n"
    )
    stdlib = os.path.dirname(os.__file__).encode()
    through_python = (  # the planner's hang-up as a stop cuts its write: Python's own frames around PySpark's
        b"Traceback (most recent call last):\n"
        b'  File "/x/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 299, in main\n'
        b"    outfile.flush()\n"
        b'  File "' + stdlib + b'/socket.py", line 724, in write\n'
        b"    return self._sock.send(b)\n"
        b"BrokenPipeError: [Errno 32] Broken pipe\n"
        b"During handling of the above exception, another exception occurred:\n"
        b"\n"
        b"Traceback (most recent call last):\n"
        b'  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        b'  File "/x/site-packages/pyspark/worker_util.py", line 255, in get_sock_file_to_executor\n'
        b"    sock_file.close()\n"
        b'  File "' + stdlib + b'/socket.py", line 724, in write\n'
        b"    return self._sock.send(b)\n"
        b"BrokenPipeError: [Errno 32] Broken pipe\n"
    )
    real = b'Traceback (most recent call last):\n  File "/u/flow.py", line 3, in f\n    boom()\nValueError: x\n'
    in_python_only = b'Traceback (most recent call last):\n  File "' + stdlib + b'/socket.py", line 1, in f\nEOFError\n'
    session._forward(io.BytesIO(hangup + b"a user print\n" + chained + real + through_python + hangup + in_python_only))
    assert capfdbinary.readouterr().err == b"a user print\n" + real + in_python_only


def test_a_driver_jvm_that_ends_before_it_answers_says_why_on_stderr() -> None:
    """What the JVM wrote to its stderr before it ended is written out before PySpark's error goes up."""
    agent = "/nonexistent/flowspark-test-agent.jar"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps({"spark.driver.extraJavaOptions": f"-javaagent:{agent}"})],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    said, _, error = done.stderr.partition("Traceback (most recent call last):")
    assert agent in said, done.stderr
    assert "JAVA_GATEWAY_EXITED" in error
