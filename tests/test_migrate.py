"""`python -m flowspark.migrate` moves a Bytewax project to flowspark and reports what it can't."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from support.processes import run_module

from flowspark.migrate.inventory import BYTEWAX_MODULES
from flowspark.migrate.removed import REMOVED_MODULES, describe, removed_module

WORDCOUNT = '''"""Count words; Bytewax style."""
import bytewax.operators as op
from bytewax.connectors.stdio import StdOutSink
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

from myflows.sources import Countdown

LINES = ["to be or", "not to be"]

flow = Dataflow("wordcount")
lines = op.input("lines", flow, TestingSource(LINES))
words = op.flat_map("split", lines, str.split)
counts = op.count_final("count", words, lambda word: word)
op.output("print", op.map("show", counts, lambda kv: f"{kv[0]}={kv[1]}"), StdOutSink())
ticks = op.input("ticks", flow, Countdown(2))
op.output("print_ticks", op.map("tick", ticks, lambda n: f"tick={n}"), StdOutSink())
'''

SOURCES = """import bytewax.inputs
from bytewax.inputs import StatelessSourcePartition


class CountdownPartition(StatelessSourcePartition[int]):
    def __init__(self, start: int) -> None:
        self.left = start

    def next_batch(self) -> list:
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return [self.left]


class Countdown(bytewax.inputs.DynamicSource[int]):
    def __init__(self, start: int) -> None:
        self.start = start

    def build(self, step_id, worker_index, worker_count):
        return CountdownPartition(self.start)
"""

LEGACY = """from bytewax import operators as op
from bytewax.connectors.kafka import KafkaSourceMessage, serde
from bytewax.recovery import RecoveryConfig, InconsistentPartitionsError
from bytewax.redis import RedisSink

stream = op.no_such_operator("x", None)
COMMAND = ["python", "-m", "bytewax.run", "myflows.wordcount:flow"]
"""

PROJECT: Dict[str, str] = {
    "src/myflows/__init__.py": "",
    "src/myflows/wordcount.py": WORDCOUNT,
    "src/myflows/sources.py": SOURCES,
    "src/myflows/legacy.py": LEGACY,
    "src/myflows/broken.py": "import bytewax.operators as op\ndef oops(:\n",
    "scripts/run.sh": (
        "#!/bin/sh\n"
        "export BYTEWAX_WORKERS_PER_PROCESS=2\n"
        "export BYTEWAX_HOSTFILE_PATH=/etc/bytewax/hosts\n"
        "python -m bytewax.recovery /data/recovery 1\n"
        "exec python -m bytewax.run myflows.wordcount:flow -r /data/recovery\n"
    ),
    "Dockerfile": (
        "FROM bytewax/bytewax:0.21.1-python3.11\n"
        "COPY src /app/src\n"
        'CMD ["python", "-m", "bytewax.run", "myflows.wordcount:flow"]\n'
    ),
    "docker-compose.yml": (
        "services:\n"
        "  flow:\n"
        "    command: python -m bytewax.run myflows.wordcount:flow -s 5\n"
        "    environment:\n"
        "      BYTEWAX_RECOVERY_DIRECTORY: /data\n"
    ),
    "deploy/k8s.yaml": "command: waxctl dataflow deploy wordcount.py --name wordcount\n",
    "requirements.txt": "bytewax==0.21.1\nbytewax-redis>=0.1\n",
    "pyproject.toml": '[project]\nname = "myflows"\ndependencies = [\n    "bytewax==0.21.1",\n]\n',
    "README.md": "Run with `python -m bytewax.run myflows.wordcount:flow`.\n",
    ".venv/lib/site.py": "import bytewax.operators as op\n",
}


def _make_project(root: Path) -> Path:
    project = root / "myflows-project"
    for name, text in PROJECT.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (project / "scripts" / "run.sh").chmod(0o750)
    return project


def _migrate(*args: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    return run_module("flowspark.migrate", *args, cwd=cwd, timeout=120)


def _snapshot(project: Path) -> Dict[str, str]:
    return {str(p.relative_to(project)): p.read_text() for p in sorted(project.rglob("*")) if p.is_file()}


EXPECTED_FINDINGS = [
    "Dockerfile:1: Bytewax's Docker image",
    "deploy/k8s.yaml:1: `waxctl` deploys Bytewax only",
    "requirements.txt:1: depends on bytewax",
    "pyproject.toml:4: depends on bytewax",
    "scripts/run.sh:3: flowspark ignores `BYTEWAX_HOSTFILE_PATH`",
    "src/myflows/broken.py:2: not migrated: can't parse it",
    "src/myflows/legacy.py:4: `bytewax.redis` is not part of Bytewax itself",
    "src/myflows/legacy.py:6: flowspark's `flowspark.operators` has no `no_such_operator`",
    "src/myflows/legacy.py:7: string 'bytewax.run' names a Bytewax module",
]


def test_diff_shows_every_rewrite_and_changes_nothing(tmp_path: Path) -> None:
    project = _make_project(tmp_path)
    before = _snapshot(project)
    done = _migrate("--diff", ".", cwd=project)
    assert done.returncode == 0, done.stderr
    assert _snapshot(project) == before
    added = [line[1:] for line in done.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == [
        'CMD ["python", "-m", "flowspark.run", "myflows.wordcount:flow"]',
        "    command: python -m flowspark.run myflows.wordcount:flow -s 5",
        "python -m flowspark.recovery /data/recovery 1",
        "exec python -m flowspark.run myflows.wordcount:flow -r /data/recovery",
        "from flowspark import operators as op",
        "from flowspark.connectors.kafka import KafkaSourceMessage, serde",
        "from flowspark.recovery import RecoveryConfig, InconsistentPartitionsError",
        "import flowspark.inputs",
        "from flowspark.inputs import StatelessSourcePartition",
        "class Countdown(flowspark.inputs.DynamicSource[int]):",
        "import flowspark.operators as op",
        "from flowspark.connectors.stdio import StdOutSink",
        "from flowspark.dataflow import Dataflow",
        "from flowspark.testing import TestingSource",
    ]
    assert "--- a/Dockerfile\n+++ b/Dockerfile" in done.stdout
    for expected in EXPECTED_FINDINGS:
        assert any(line.startswith(expected) for line in done.stderr.splitlines()), (expected, done.stderr)
    assert not any(line.startswith("src/myflows/legacy.py:2:") for line in done.stderr.splitlines()), done.stderr
    assert "would rewrite 6 file(s); 9 finding(s)" in done.stderr


def test_in_place_rewrite_runs_on_flowspark_as_it_ran_on_bytewax(tmp_path: Path) -> None:
    project = _make_project(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(project / "src"))

    def run(engine: str) -> List[str]:
        done = subprocess.run(
            [sys.executable, "-m", f"{engine}.run", "myflows.wordcount:flow"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return sorted(done.stdout.splitlines())

    on_bytewax = run("bytewax")
    done = _migrate(str(project), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "rewrote 6 file(s)" in done.stderr
    assert run("flowspark") == on_bytewax == ["be=2", "not=1", "or=1", "tick=0", "tick=1", "to=2"]

    after = _snapshot(project)
    assert after["README.md"] == PROJECT["README.md"]
    assert after[".venv/lib/site.py"] == PROJECT[".venv/lib/site.py"]
    assert after["src/myflows/broken.py"] == PROJECT["src/myflows/broken.py"]
    assert "from bytewax.redis import RedisSink" in after["src/myflows/legacy.py"]
    assert not re.search(
        r"^(import|from) bytewax\.(operators|inputs|dataflow|testing)",
        after["src/myflows/wordcount.py"] + after["src/myflows/sources.py"],
        re.MULTILINE,
    )
    assert stat.S_IMODE((project / "scripts" / "run.sh").stat().st_mode) == 0o750

    again = _migrate(str(project), cwd=tmp_path)
    assert "rewrote 0 file(s)" in again.stderr
    assert _snapshot(project) == after


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    done = _migrate(str(tmp_path / "nowhere"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr


def test_known_bytewax_modules_are_those_bytewax_ships() -> None:
    bytewax_dir = Path(__import__("bytewax.dataflow").dataflow.__file__).parent
    shipped = set()
    for path in bytewax_dir.rglob("*.py"):
        parts = path.relative_to(bytewax_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            shipped.add(".".join(parts))
    shipped.add("bytewax")
    assert shipped == BYTEWAX_MODULES


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("import bytewax.operators as op  # ops\n", "import flowspark.operators as op  # ops\n"),
        ("from  bytewax . testing import run_main\n", "from  flowspark . testing import run_main\n"),
        ("from \\\n    bytewax.dataflow import Dataflow\n", "from \\\n    flowspark.dataflow import Dataflow\n"),
        (
            "s = 'é'; import bytewax.testing; bytewax.testing.run_main\n",
            "s = 'é'; import flowspark.testing; flowspark.testing.run_main\n",
        ),
        ("from .bytewax import x\n", "from .bytewax import x\n"),
        ("import bytewaxish\n", "import bytewaxish\n"),
        ("bytewax = 3\nprint(bytewax)\n", "bytewax = 3\nprint(bytewax)\n"),
    ],
)
def test_python_rewrites_only_bytewax_module_names(line: str, expected: str) -> None:
    from flowspark.migrate.python_files import migrate_python

    assert migrate_python(Path("f.py"), line).text == expected


OLD_PROJECT = """import bytewax
import bytewax._encoder
import bytewax.operators.window as win
from bytewax.window import TumblingWindow, WindowMetadata
from bytewax import window
from bytewax.connectors.kafka.message import KafkaSourceMessage, KafkaSinkMessage
from bytewax.connectors.kafka import KafkaSource, source
from bytewax import operators as op

clock = bytewax.window.SystemClockConfig()
windower = op.window
"""


def test_removed_modules_are_reported_with_file_line_and_replacement(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text(OLD_PROJECT)
    done = _migrate("--diff", "old.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    windowing = (
        "use `flowspark.operators.windowing` (Bytewax 0.20 renamed `*ClockConfig` to `*Clock`, "
        "`*Window` to `*Windower`, `WindowConfig` to `Windower`)"
    )
    assert done.stderr.splitlines()[:-1] == [
        "old.py:2: `bytewax._encoder` was removed in Bytewax 0.20; "
        "use `flowspark.visualize` (`to_json`, `to_mermaid`, `to_plantuml`); import left as is",
        f"old.py:3: `bytewax.operators.window` was removed in Bytewax 0.20; {windowing}; import left as is",
        "old.py:4: `bytewax.window` was removed in Bytewax 0.18; import `WindowMetadata` from "
        f"`flowspark.operators.windowing`; flowspark has no `TumblingWindow`; {windowing}; import left as is",
        f"old.py:5: `bytewax.window` was removed in Bytewax 0.18; {windowing}; import left as is",
        "old.py:6: `bytewax.connectors.kafka.message` was removed in Bytewax 0.19; "
        "import `KafkaSourceMessage`, `KafkaSinkMessage` from `flowspark.connectors.kafka`; import left as is",
        "old.py:7: `bytewax.connectors.kafka.source` was removed in Bytewax 0.19; "
        "import from `flowspark.connectors.kafka`; import left as is",
        f"old.py:10: `bytewax.window` was removed in Bytewax 0.18; {windowing}",
        f"old.py:11: `bytewax.operators.window` was removed in Bytewax 0.20; {windowing}",
    ]
    added = [line[1:] for line in done.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == [
        "import flowspark",
        "from flowspark import operators as op",
        "clock = flowspark.window.SystemClockConfig()",
    ]


@pytest.mark.parametrize("module", sorted(REMOVED_MODULES))
@pytest.mark.parametrize("form", ["import {m}", "import {m} as alias", "from {m} import thing", "from {p} import {n}"])
def test_every_removed_module_is_reported_in_every_import_form_and_left_as_is(module: str, form: str) -> None:
    from flowspark.migrate.python_files import migrate_python

    parent, name = module.rsplit(".", 1)
    source = "import json\n" + form.format(m=module, p=parent, n=name) + "\n"
    # `from bytewax.connectors.bigquery import outputs` is reported as its removed package.
    reported = (removed_module(parent) if form.startswith("from {p}") else None) or module
    migrated = migrate_python(Path("f.py"), source)
    assert migrated.text == source
    assert [str(f) for f in migrated.findings] == [
        f"f.py:2: {describe(reported, ['thing'] if 'thing' in source else [])}"
    ]
    [finding] = migrated.findings
    assert finding.message.startswith(f"`{reported}` "), finding.message
    assert finding.message.endswith("; import left as is"), finding.message
    if REMOVED_MODULES[reported].replacement is None:
        assert "; nothing replaces it;" in finding.message


def test_a_line_mixing_a_removed_module_with_others_is_left_whole() -> None:
    from flowspark.migrate.python_files import migrate_python

    source = "from bytewax import operators as op, window, dataflow\nimport bytewax.connectors.kafka.sink\n"
    migrated = migrate_python(Path("f.py"), source)
    assert migrated.text == source
    assert [(f.line, f.message.split(";")[0]) for f in migrated.findings] == [
        (1, "`bytewax.window` was removed in Bytewax 0.18"),
        (2, "`bytewax.connectors.kafka.sink` was removed in Bytewax 0.19"),
    ]


def test_names_of_bytewaxs_core_are_sent_to_the_modules_that_export_them() -> None:
    from flowspark.migrate.python_files import migrate_python

    source = (
        "from bytewax._bytewax import run_main, RecoveryConfig, setup_tracing\n"
        "from bytewax.execution import cluster_main, spawn_cluster\n"
    )
    assert [str(f) for f in migrate_python(Path("f.py"), source).findings] == [
        "f.py:1: `bytewax._bytewax` is private to Bytewax; import `run_main` from `flowspark.testing`, "
        "`RecoveryConfig` from `flowspark.recovery`, `setup_tracing` from `flowspark.tracing`; import left as is",
        "f.py:2: `bytewax.execution` was removed in Bytewax 0.16; import `cluster_main` from `flowspark.testing`; "
        "flowspark has no `spawn_cluster`; `run_main` and `cluster_main` are in `flowspark.testing`; "
        "`spawn_cluster` became `python -m flowspark.testing -p PROCESSES -w WORKERS`; import left as is",
    ]


def test_removed_modules_are_absent_from_bytewax_021_and_private_ones_present() -> None:
    bytewax_dir = Path(__import__("bytewax.dataflow").dataflow.__file__).parent
    shipped = {"bytewax"}
    for path in bytewax_dir.rglob("*"):
        if path.suffix in (".py", ".so", ".pyd"):
            parts = list(path.relative_to(bytewax_dir.parent).parts)
            parts[-1] = parts[-1].split(".")[0]
            if parts[-1] == "__init__":
                parts.pop()
            shipped.add(".".join(parts))
    for module, entry in REMOVED_MODULES.items():
        assert module not in BYTEWAX_MODULES
        assert (module in shipped) == (entry.removed_in is None), module


def test_replacements_name_public_modules_flowspark_has() -> None:
    from flowspark.migrate.inventory import flowspark_name, has_module, has_name

    for module, entry in REMOVED_MODULES.items():
        assert set(entry.homes) <= BYTEWAX_MODULES, module
        for mention in re.findall(r"\bbytewax(?:\.\w+)+", entry.replacement or ""):
            parts = mention.split(".")
            public = next(
                ".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in BYTEWAX_MODULES
            )
            assert has_module(flowspark_name(public)), mention
            rest = parts[len(public.split(".")) :]
            assert len(rest) <= 1 and all(has_name(flowspark_name(public), name) for name in rest), mention
