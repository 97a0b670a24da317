"""The deployment files of `deploy/` agree with each other and with flowspark (docs/deploying.md says how they were run)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List

import yaml

from flowspark.engine.spark.spark_version import unsupported
from flowspark.run import _parser

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def _manifests(name: str) -> List[Dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if doc]


def test_the_sparkapplication_runs_the_images_main_file_with_arguments_flowspark_takes() -> None:
    (app,) = _manifests("sparkapplication.yaml")
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert app["spec"]["mainApplicationFile"] == "local:///opt/flowspark/run.py"
    assert "> /opt/flowspark/run.py" in dockerfile
    args = _parser().parse_args(app["spec"]["arguments"])
    assert args.import_str == "flowspark.examples.kafka_windowed:flow"
    assert args.driver_link_port == 7100
    image_pyspark = re.search(r"^ARG PYSPARK_VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert image_pyspark is not None
    assert app["spec"]["sparkVersion"] == image_pyspark[1]
    assert unsupported(image_pyspark[1], "PySpark") is None


def test_the_recovery_directory_is_on_the_claim_of_the_namespace_in_the_driver_and_executors() -> None:
    (app,) = _manifests("sparkapplication.yaml")
    (claim,) = _manifests("recovery-pvc.yaml")
    namespaces = [doc["metadata"]["name"] for doc in _manifests("namespace-rbac.yaml") if doc["kind"] == "Namespace"]
    assert namespaces == [app["metadata"]["namespace"]] == [claim["metadata"]["namespace"]]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    conf = app["spec"]["sparkConf"]
    volume = "spark.kubernetes.{}.volumes.persistentVolumeClaim.recovery.{}"
    mounts = {conf[volume.format(role, "mount.path")] for role in ("driver", "executor")}
    claims = {conf[volume.format(role, "options.claimName")] for role in ("driver", "executor")}
    assert claims == {claim["metadata"]["name"]}
    (mount,) = mounts
    recovery = _parser().parse_args(app["spec"]["arguments"]).recovery_directory
    assert recovery.startswith(mount + "/")


def test_the_driver_service_account_may_manage_its_executors() -> None:
    docs = {doc["kind"]: doc for doc in _manifests("namespace-rbac.yaml")}
    (rule,) = docs["Role"]["rules"]
    assert {"pods", "services", "configmaps", "persistentvolumeclaims"} <= set(rule["resources"])
    assert {"create", "get", "list", "watch", "delete"} <= set(rule["verbs"])
    binding = docs["RoleBinding"]
    assert binding["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": docs["ServiceAccount"]["metadata"]["name"],
            "namespace": docs["Namespace"]["metadata"]["name"],
        }
    ]
