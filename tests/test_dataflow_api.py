"""The dataflow API: `/dataflow` and `/metrics` of a running flow, as Bytewax serves them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Mapping, Set, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import api_flow
from support.failures import usage_error

from flowspark import _dataflow_api as dataflow_api
from flowspark._dataflow_api import ApiSettings, DataflowApi, settings_from_env
from flowspark.engine.reports.metrics import FlowMetrics
from flowspark.errors import FlowsparkRuntimeError
from flowspark.run import main
from flowspark.testing import run_main

HALF = api_flow.ITEMS // 2
EXPECTED = {
    # step_id: (items in, items out); `None` where Bytewax has no such counter.
    "api.inp": (None, api_flow.ITEMS),
    "api.double.flat_map_batch": (api_flow.ITEMS, api_flow.ITEMS),
    "api.fours.flat_map.flat_map_batch": (api_flow.ITEMS, HALF),
    "api.key.map.flat_map_batch": (HALF, HALF),
    "api.running.stateful_flat_map.stateful.stateful_batch": (HALF, HALF),
    "api.out": (HALF, None),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.headers["Content-Type"], reply.read()


@dataclass
class Scrape:
    """What the API served once the flow's items were all through."""

    dataflow: Dict[str, Any]
    dataflow_type: str
    metrics_type: str
    families: Dict[str, Any]

    def items(self, name: str) -> Dict[str, float]:
        """A counter's value per step_id, summed over workers."""
        totals: Dict[str, float] = {}
        for sample in self.families[name].samples:
            if sample.name == name + "_total":
                step = sample.labels["step_id"]
                totals[step] = totals.get(step, 0.0) + sample.value
        return totals

    def names(self, prefix: str) -> Set[str]:
        return {name for name in self.families if name.startswith(prefix)}

    def step_series(self) -> Set[Tuple[str, str]]:
        """Every `(metric, step_id)` with a sample for a step of the test flow.

        (Other modules the test process imported may have put their own
        `bytewax_` metrics in the default registry, such as Bytewax's Kafka
        connector.)
        """
        return {
            (f.name, s.labels["step_id"])
            for f in self.families.values()
            for s in f.samples
            if s.labels.get("step_id", "").startswith("api.")
        }

    def step_names(self) -> Set[str]:
        return {name for name, _ in self.step_series()}


QUERY_GAUGES = frozenset({"flowspark_micro_batch_duration_seconds", "flowspark_micro_batch_id", "flowspark_state_rows"})
"""flowspark's gauges of the running query, from its last reported progress."""


def _scrape_when_done(url: str, release: str, deadline: float = 120.0, also: FrozenSet[str] = frozenset()) -> Scrape:
    """Poll the API until the output took every item (and metrics `also` are served), read both routes, then let the flow end.

    A micro-batch's items are counted as the driver writes them, before
    Spark reports the batch's progress, which the query gauges come from.
    """
    end = time.monotonic() + deadline
    try:
        while time.monotonic() < end:
            try:
                metrics_type, body = _get(url + "/metrics")
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
                continue
            families = {f.name: f for f in text_string_to_metric_families(body.decode())}
            scrape = Scrape({}, "", metrics_type, families)
            done = (
                "bytewax_item_inp_count" in families and scrape.items("bytewax_item_inp_count").get("api.out") == HALF
            )
            if done and also <= set(families):
                dataflow_type, dataflow = _get(url + "/dataflow")
                return Scrape(json.loads(dataflow), dataflow_type, metrics_type, families)
            time.sleep(0.2)
        msg = f"{url}/metrics never counted {HALF} items into 'api.out'"
        raise AssertionError(msg)
    finally:
        open(release, "w").close()


def _scrape_flowspark(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Tuple[Scrape, List[Any]]:
    port = _free_port()
    monkeypatch.setenv("FLOWSPARK_DATAFLOW_API_ENABLED", "1")
    monkeypatch.setenv("FLOWSPARK_DATAFLOW_API_PORT", str(port))
    release = str(tmp_path / "release-flowspark")
    out: List[Any] = []
    found: Dict[str, Any] = {}

    def scrape() -> None:
        try:
            found["scrape"] = _scrape_when_done(f"http://127.0.0.1:{port}", release, also=QUERY_GAUGES)
        except BaseException as ex:
            found["error"] = ex

    scraper = threading.Thread(target=scrape)
    scraper.start()
    run_main(api_flow.build("flowspark", release, out))
    scraper.join()
    if "error" in found:
        raise found["error"]
    return found["scrape"], out


def _scrape_bytewax(tmp_path: Any) -> Scrape:
    port = _free_port()
    release = str(tmp_path / "release-bytewax")
    env = dict(
        os.environ,
        BYTEWAX_DATAFLOW_API_ENABLED="1",
        BYTEWAX_DATAFLOW_API_PORT=str(port),
        PYTHONPATH=os.path.dirname(__file__),
    )
    # In `tmp_path`: Bytewax also writes the flow's JSON to `dataflow.json` in its working directory.
    flow = subprocess.Popen(
        [sys.executable, "-m", "bytewax.run", f"support.api_flow:bytewax_flow({release!r})"], env=env, cwd=tmp_path
    )
    try:
        return _scrape_when_done(f"http://127.0.0.1:{port}", release)
    finally:
        try:
            flow.wait(timeout=60)
        except subprocess.TimeoutExpired:
            flow.kill()
            flow.wait()
            raise


def test_running_flow_serves_bytewax_routes_and_metrics(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, out = _scrape_flowspark(tmp_path, monkeypatch)
    theirs = _scrape_bytewax(tmp_path)

    assert len(out) == HALF
    # Every step's counts once all items went through, as Bytewax counts them.
    items_in, items_out = ours.items("bytewax_item_inp_count"), ours.items("bytewax_item_out_count")
    for step_id, (want_in, want_out) in EXPECTED.items():
        if want_in is not None:
            assert items_in[step_id] == want_in, step_id
        if want_out is not None:
            assert items_out[step_id] == want_out, step_id
    for name in ("bytewax_item_inp_count", "bytewax_item_out_count"):
        assert ours.items(name) == theirs.items(name), name

    # Same routes, same JSON, same metric names and series.
    assert ours.dataflow == theirs.dataflow
    assert ours.dataflow_type == theirs.dataflow_type == "application/json"
    assert ours.metrics_type.startswith("text/plain") and theirs.metrics_type.startswith("text/plain")
    assert theirs.step_series() <= ours.step_series()
    assert ours.step_names() - theirs.step_names() <= {
        "bytewax_out_part_write_batch_duration_seconds",
        "flowspark_input_lag_items",
    }
    # The user's own prometheus_client metrics, and flowspark's gauges.
    assert "api_flow_batches" in ours.names("api_flow") and "api_flow_batches" in theirs.names("api_flow")
    assert QUERY_GAUGES <= ours.names("flowspark_")
    assert [s.value for s in ours.families["flowspark_input_lag_items"].samples] == [0]
    labels = ours.families["bytewax_item_out_count"].samples[0].labels
    assert set(labels) == {"step_id", "worker_index", "otel_scope_name"}


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, None),
        ({"BYTEWAX_DATAFLOW_API_ENABLED": "1"}, ApiSettings("127.0.0.1", 3030)),
        ({"BYTEWAX_DATAFLOW_API_ENABLED": "true", "BYTEWAX_DATAFLOW_API_PORT": "4000"}, ApiSettings("127.0.0.1", 4000)),
        (
            {
                "FLOWSPARK_DATAFLOW_API_ENABLED": "1",
                "FLOWSPARK_DATAFLOW_API_PORT": "4001",
                "BYTEWAX_DATAFLOW_API_PORT": "4000",
                "FLOWSPARK_DATAFLOW_API_HOST": "0.0.0.0",
            },
            ApiSettings("0.0.0.0", 4001),
        ),
        ({"FLOWSPARK_DATAFLOW_API_ENABLED": "0", "BYTEWAX_DATAFLOW_API_ENABLED": "1"}, None),
        ({"BYTEWAX_DATAFLOW_API_ENABLED": "false"}, None),
    ],
)
def test_settings_from_environment(environ: Mapping[str, str], expected: Any) -> None:
    assert settings_from_env(environ) == expected


@pytest.mark.parametrize("port", ["http", "-1", "70000", "²"])
def test_bad_port_is_named(port: str) -> None:
    with pytest.raises(ValueError, match=f"BYTEWAX_DATAFLOW_API_PORT='{port}' is not a port number"):
        settings_from_env({"BYTEWAX_DATAFLOW_API_ENABLED": "1", "BYTEWAX_DATAFLOW_API_PORT": port})


def test_busy_port_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(FlowsparkRuntimeError, match=f"can't serve the dataflow API on 127.0.0.1:{port}"):
            DataflowApi(ApiSettings(port=port), "{}", FlowMetrics())


def test_other_routes_are_not_found_and_bind_is_loopback() -> None:
    api = DataflowApi(ApiSettings(port=0), '{"flow_id": "x"}', FlowMetrics())
    try:
        assert api.url.startswith("http://127.0.0.1:")
        assert _get(api.url + "/dataflow") == ("application/json", b'{"flow_id": "x"}')
        with pytest.raises(urllib.error.HTTPError, match="404"):
            _get(api.url + "/")
    finally:
        api.close()


def test_a_silent_connection_is_dropped_and_does_not_block_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataflow_api, "REQUEST_SECONDS", 0.5)
    api = DataflowApi(ApiSettings(port=0), "{}", FlowMetrics())
    try:
        host, port = api.url.rsplit("/", 1)[1].split(":")
        with socket.create_connection((host, int(port))) as silent:
            assert _get(api.url + "/dataflow")[1] == b"{}"
            silent.settimeout(5)
            assert silent.recv(1) == b""  # closed by the server, well before our 5 s
    finally:
        api.close()


def test_the_command_line_names_a_bad_port_before_starting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BYTEWAX_DATAFLOW_API_ENABLED", "1")
    monkeypatch.setenv("BYTEWAX_DATAFLOW_API_PORT", "api")
    assert "BYTEWAX_DATAFLOW_API_PORT='api' is not a port number" in usage_error(capsys, main, ["no_such_module:flow"])
