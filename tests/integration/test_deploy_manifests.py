"""Tock's deployment files (infra/deploy): rendered by `kubectl kustomize`, then validated by the
session's real kube-apiserver (`kubectl apply --dry-run=server`: its schemas, defaulting and
validation, strict about unknown fields), each test in its own namespace.

The image itself cannot be built here (no container runtime); its Dockerfile's inputs are checked.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "infra" / "deploy"
KUBECTL = "/usr/bin/kubectl"
DEPLOYMENTS = ("tock-scheduler", "tock-dag-processor", "tock-projector", "tock-api", "tock-worker", "tock-monitor",
               "tock-asset-watcher")


def render(variant: str, namespace: str | None, folder: Path) -> str:
    """`kubectl kustomize` of ``infra/deploy/<variant>``, moved into ``namespace`` when given
    (through a kustomization of our own, as an operator would do it)."""
    target = DEPLOY / variant
    if namespace is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "namespace": namespace, "resources": [os.path.relpath(target, folder)]}))
        target = folder
    result = subprocess.run([KUBECTL, "kustomize", str(target)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def server_dry_run(manifests: str, kube_namespace) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", str(kube_namespace.kubeconfig), "apply",
                           "--dry-run=server", "-n", kube_namespace.namespace, "-f", "-"],
                          input=manifests, capture_output=True, text=True, timeout=120)


def objects(manifests: str) -> dict[tuple[str, str], dict]:
    return {(item["kind"], item["metadata"]["name"]): item for item in yaml.safe_load_all(manifests)}


def pod_spec(rendered: dict, name: str) -> dict:
    return rendered[("Deployment", name)]["spec"]["template"]["spec"]


@pytest.mark.parametrize("variant", ["base", "overlays/production"])
def test_the_real_api_server_accepts_the_manifests(variant, kube_namespace, tmp_path):
    result = server_dry_run(render(variant, kube_namespace.namespace, tmp_path / "wrap"), kube_namespace)
    assert result.returncode == 0, result.stderr
    for name in DEPLOYMENTS:
        assert f"deployment.apps/{name} created (server dry run)" in result.stdout
    for kind_and_name in ("service/tock-api", "configmap/tock-settings", "secret/tock-secrets",
                          "role.rbac.authorization.k8s.io/tock-scheduler"):
        assert f"{kind_and_name} created (server dry run)" in result.stdout


def test_a_broken_manifest_is_refused(kube_namespace, tmp_path):
    manifests = render("base", kube_namespace.namespace, tmp_path / "wrap")
    bad_value = manifests.replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: Sometimes")
    refused = server_dry_run(bad_value, kube_namespace)
    assert refused.returncode != 0
    assert 'imagePullPolicy: Unsupported value: "Sometimes"' in refused.stderr

    unknown_field = re.sub(r"(?m)^(\s+)image: ", r"\1imag: ", manifests, count=1)
    refused = server_dry_run(unknown_field, kube_namespace)
    assert refused.returncode != 0 and 'unknown field "spec.template.spec.' in refused.stderr


def test_the_base_runs_every_service_with_resources_and_grace():
    rendered = objects(render("base", None, Path()))
    assert rendered[("Deployment", "tock-scheduler")]["spec"]["replicas"] == 2
    for name in DEPLOYMENTS:
        spec = pod_spec(rendered, name)
        container = spec["containers"][0]
        assert container["args"][0] == name.removeprefix("tock-")
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        assert spec["terminationGracePeriodSeconds"] >= 30 and spec["securityContext"]["runAsNonRoot"]
    api = pod_spec(rendered, "tock-api")["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/health" and "tcpSocket" in api["livenessProbe"]
    assert rendered[("Service", "tock-api")]["spec"]["ports"][0]["targetPort"] == "http"
    assert pod_spec(rendered, "tock-scheduler")["serviceAccountName"] == "tock-scheduler"


def test_the_production_overlay_pins_the_image_and_runs_three_schedulers():
    rendered = objects(render("overlays/production", None, Path()))
    assert rendered[("Deployment", "tock-scheduler")]["spec"]["replicas"] == 3
    images = {container["image"] for name in DEPLOYMENTS
              for container in pod_spec(rendered, name)["containers"]
              + pod_spec(rendered, name).get("initContainers", [])}
    assert images == {"registry.example.com/tock:0.1.0"}
    settings = rendered[("ConfigMap", "tock-settings")]["data"]
    assert settings["TOCK_KUBE_IMAGE"] == "registry.example.com/tock:0.1.0"
    assert settings["TOCK_HOME"] == "/var/lib/tock"  # the base's settings survive the overlay's patch
    assert {item["metadata"].get("namespace") for item in rendered.values()
            if item["kind"] != "Namespace"} == {"tock-production"}


def test_every_setting_in_the_config_map_is_a_tock_setting():
    from infra.settings import known_variables

    for variant in ("base", "overlays/production"):
        rendered = objects(render(variant, None, Path()))
        data = {**rendered[("ConfigMap", "tock-settings")]["data"],
                **rendered[("Secret", "tock-secrets")].get("stringData", {})}
        assert sorted(set(data) - known_variables()) == []


def test_the_dockerfile_copies_what_exists():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    assert 'ENTRYPOINT ["tock"]' in dockerfile
    sources = [source for line in dockerfile.splitlines() if line.startswith("COPY ") and "$" not in line
               for source in line.split()[1:-1]]
    assert "pyproject.toml" in sources and all((REPO / source).exists() for source in sources)
    assert (REPO / re.search(r"ARG DAGS=(\S+)", dockerfile).group(1)).is_dir()
