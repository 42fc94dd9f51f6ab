"""examples/kubernetes/emucluster.yaml validates against the Kubernetes API schemas, offline,
and keeps the shape the docs promise: an Indexed Job of agents that name themselves from
JOB_COMPLETION_INDEX and dial the head by its name under the headless Service, a head Job
running ``emurun --launcher none``, the token only from a Secret, counts that agree."""

from __future__ import annotations

import copy
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kv

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "examples" / "kubernetes" / "emucluster.yaml"
VERSIONS = ("1.30.0", kv.latest_version())
HEX_SECRET = re.compile(r"\b[0-9a-fA-F]{32,}\b")


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def by_name(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def container(job: dict[str, Any]) -> dict[str, Any]:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env_of(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(job)["env"]}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any network connection during the test fails: the schemas must be the bundled ones."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the validation tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.usefixtures("offline")
def test_every_document_validates_strictly(version: str) -> None:
    docs = documents()
    assert sorted(by_name(docs)) == [
        "ConfigMap/emucluster-app", "Job/emucluster-head", "Job/emucluster-node",
        "Service/emucluster",
    ]  # fmt: skip
    for doc in docs:
        kv.validate(doc, version, strict=True)


@pytest.mark.usefixtures("offline")
def test_the_validation_can_fail() -> None:
    job = copy.deepcopy(by_name(documents())["Job/emucluster-node"])
    job["spec"]["paralelism"] = 4  # a misspelt field
    with pytest.raises(kv.ValidationError):
        kv.validate(job, VERSIONS[-1], strict=True)
    job = copy.deepcopy(by_name(documents())["Job/emucluster-node"])
    job["spec"]["completions"] = "four"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, VERSIONS[-1], strict=True)


def test_agents_dial_the_head_by_its_name_under_the_headless_service() -> None:
    docs = by_name(documents())
    service, head, node = (
        docs["Service/emucluster"],
        docs["Job/emucluster-head"],
        docs["Job/emucluster-node"],
    )
    assert service["spec"]["clusterIP"] == "None"
    selector = service["spec"]["selector"]
    for job in (head, node):
        pod = job["spec"]["template"]
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["subdomain"] == service["metadata"]["name"]
        assert pod["spec"]["restartPolicy"] == "Never"
    assert env_of(node)["HEAD_ADDR"] == f"{head['spec']['template']['spec']['hostname']}.emucluster"
    assert env_of(node)["HEAD_PORT"] == env_of(head)["HEAD_PORT"] == "7070"
    assert node["spec"]["completionMode"] == "Indexed"
    assert node["spec"]["completions"] == node["spec"]["parallelism"] == int(env_of(head)["NODES"])
    assert int(env_of(head)["NP"]) == int(env_of(head)["NODES"]) * int(env_of(node)["SLOTS"])
    head_script = container(head)["command"][-1]
    assert "emurun --launcher none" in head_script
    node_script = container(node)["command"][-1]
    assert "$JOB_COMPLETION_INDEX" in node_script
    assert "exec emuproxy --connect" in node_script


def test_the_token_comes_only_from_a_secret() -> None:
    text = MANIFEST.read_text()
    assert not HEX_SECRET.search(text.replace("token_hex(32)", ""))
    for job in ("Job/emucluster-head", "Job/emucluster-node"):
        doc = by_name(documents())[job]
        volumes = {v["name"]: v for v in doc["spec"]["template"]["spec"]["volumes"]}
        assert volumes["token"]["secret"]["secretName"] == "emucluster-token"
        mounts = {m["name"]: m for m in container(doc)["volumeMounts"]}
        assert mounts["token"]["readOnly"] is True
        assert env_of(doc)["TOKEN_FILE"].startswith(mounts["token"]["mountPath"] + "/")
        assert '--token-file "$TOKEN_FILE"' in container(doc)["command"][-1]
