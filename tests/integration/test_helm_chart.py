"""Tock's Helm chart (infra/deploy/helm/tock): rendered by the real `helm` (built from the Go module
proxy by infra/scripts/build-helm.sh), then validated by the session's real kube-apiserver
(`kubectl apply --dry-run=server`: its schemas, defaulting and validation, strict about unknown
fields), each test in its own namespace. The chart and the Kustomize base (infra/deploy/base) are
compared object by object, so the two ways of deploying Tock cannot drift apart.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.settings import known_variables
from tests.integration.test_deploy_manifests import DEPLOYMENTS, KUBECTL, objects, pod_spec, server_dry_run
from tests.integration.test_deploy_manifests import render as render_kustomize

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "infra" / "deploy" / "helm" / "tock"
BUILD_HELM = REPO / "infra" / "scripts" / "build-helm.sh"
# With the release named "tock" the chart's objects have the Kustomize base's names.
RELEASE = "tock"
# Settings the chart writes from values of its own, and the secret ones (under `secrets`).
SECRET_SETTINGS = {"TOCK_API_TOKEN", "TOCK_DB_URL", "TOCK_FERNET_KEY", "TOCK_API_SECRET_KEY"}
OVERRIDES = ("--set", "scheduler.replicas=3", "--set", "worker.queues={default,heavy}",
             "--set", "image.repository=registry.example.com/tock", "--set", "nodeSelector.pool=tock",
             "--set", "monitor.nodeSelector.pool=monitoring", "--set", "secrets.existingSecret=tock-prod",
             "--set", "kafka.bootstrapServers=kafka-0.data:9092\\,kafka-1.data:9092",
             "--set-string", "settings.TOCK_PARTITIONS=24")


def built_helm() -> Path:
    """The real helm CLI: infra/scripts/build-helm.sh builds it once per machine (~4 minutes cold)
    and prints its path; later calls return at once."""
    result = subprocess.run(["bash", str(BUILD_HELM)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"infra/scripts/build-helm.sh failed:\n{result.stderr}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Helm:
    """The real helm, with its cache, config and data folders of the session (no kubeconfig: it
    only renders; the API server is asked through kubectl)."""

    binary: Path
    home: Path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        environment = {**os.environ, "HELM_CACHE_HOME": str(self.home / "cache"),
                       "HELM_CONFIG_HOME": str(self.home / "config"), "HELM_DATA_HOME": str(self.home / "data"),
                       "KUBECONFIG": str(self.home / "no-kubeconfig")}
        return subprocess.run([str(self.binary), *args], capture_output=True, text=True, timeout=120,
                              env=environment)

    def template(self, *args: str, namespace: str = "tock") -> str:
        result = self.run("template", RELEASE, str(CHART), "--namespace", namespace, *args)
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(built_helm(), tmp_path_factory.mktemp("helm-home"))


def server_version(kube_namespace) -> str:
    """The session's API server's version (gitVersion), for the chart's Capabilities.KubeVersion."""
    result = subprocess.run([KUBECTL, "--kubeconfig", str(kube_namespace.kubeconfig), "version", "-o", "json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["serverVersion"]["gitVersion"]


def environment_names(rendered: dict, container: dict) -> list[str]:
    """Every variable a container gets: its own `env` and the keys of the ConfigMaps and Secrets of
    its `envFrom` (looked up in the same rendering)."""
    names = {variable["name"] for variable in container.get("env", [])}
    for source in container.get("envFrom", []):
        kind, reference = ("ConfigMap", source["configMapRef"]) if "configMapRef" in source \
            else ("Secret", source["secretRef"])
        item = rendered[(kind, reference["name"])]
        names |= set(item.get("data", {})) | set(item.get("stringData", {}))
    return sorted(names)


def containers(rendered: dict, name: str) -> list[dict]:
    spec = pod_spec(rendered, name)
    return spec.get("initContainers", []) + spec["containers"]


def deployments(rendered: dict) -> set[str]:
    return {name for kind, name in rendered if kind == "Deployment"}


# -- the chart as helm sees it ------------------------------------------------------------------


@pytest.mark.parametrize("values", [(), ("--set", "kafka.inCluster.enabled=true"), OVERRIDES],
                         ids=["defaults", "in-cluster-kafka", "overrides"])
def test_helm_lint_accepts_the_chart(helm, values):
    result = helm.run("lint", "--strict", str(CHART), *values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(("override", "message"), [
    (("--set", "scheduler.replicas=many"), "at '/scheduler/replicas': got string, want integer"),
    (("--set", "worker.replicas=-1"), "at '/worker/replicas': minimum: got -1, want 0"),
    (("--set", "image.pullPolicy=Sometimes"),
     "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"),
    (("--set-string", "settings.TOCK_NO_SUCH_SETTING=1"),
     "at '/settings': additional properties 'TOCK_NO_SUCH_SETTING' not allowed"),
    (("--set-string", "settings.TOCK_KAFKA_BOOTSTRAP=kafka:9092"),  # set through kafka.bootstrapServers
     "at '/settings': additional properties 'TOCK_KAFKA_BOOTSTRAP' not allowed"),
    (("--set", "kafka.bootstrapServers=kafka"), "at '/kafka/bootstrapServers': '"),
    (("--set", "schedulr.replicas=3"), "additional properties 'schedulr' not allowed"),
], ids=["replicas-many", "replicas-negative", "pull-policy", "unknown-setting", "managed-setting",
        "bootstrap-without-port", "misspelt-key"])
def test_a_bad_value_is_refused_by_the_schema_with_a_clear_message(helm, override, message):
    for command in (("template", RELEASE), ("lint",)):
        result = helm.run(*command, str(CHART), *override)
        assert result.returncode != 0, f"helm {command[0]} accepted {override}"
        assert "values don't meet the specifications of the schema" in result.stdout + result.stderr
        assert message in result.stdout + result.stderr


def test_values_overrides_show_up_in_the_rendering(helm):
    rendered = objects(helm.template(*OVERRIDES))
    assert rendered[("Deployment", "tock-scheduler")]["spec"]["replicas"] == 3
    assert containers(rendered, "tock-worker")[0]["args"] == ["worker", "--concurrency", "4",
                                                              "--queues", "default,heavy"]
    images = {container["image"] for name in DEPLOYMENTS for container in containers(rendered, name)}
    assert images == {"registry.example.com/tock:0.1.0"}
    settings = rendered[("ConfigMap", "tock-settings")]["data"]
    assert settings["TOCK_KUBE_IMAGE"] == "registry.example.com/tock:0.1.0"
    assert settings["TOCK_KAFKA_BOOTSTRAP"] == "kafka-0.data:9092,kafka-1.data:9092"
    assert settings["TOCK_PARTITIONS"] == "24"
    # The chart-wide nodeSelector, except where a component has its own.
    assert pod_spec(rendered, "tock-api")["nodeSelector"] == {"pool": "tock"}
    assert pod_spec(rendered, "tock-monitor")["nodeSelector"] == {"pool": "monitoring"}
    # An existing Secret: none rendered, every reader points at it.
    assert not any(kind == "Secret" for kind, _ in rendered)
    assert {"secretRef": {"name": "tock-prod"}} in containers(rendered, "tock-api")[0]["envFrom"]


def test_in_cluster_kafka_is_tocks_bootstrap_and_keeps_the_log(helm):
    rendered = objects(helm.template("--set", "kafka.inCluster.enabled=true", namespace="data"))
    broker = rendered[("StatefulSet", "tock-kafka")]
    assert broker["spec"]["serviceName"] == "tock-kafka" and broker["spec"]["replicas"] == 1
    assert rendered[("Service", "tock-kafka")]["spec"]["clusterIP"] == "None"
    container = broker["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith("apache/kafka:")
    environment = {variable["name"]: variable["value"] for variable in container["env"]}
    assert environment["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert environment["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://tock-kafka.data.svc:9092"
    assert environment["KAFKA_LOG_RETENTION_HOURS"] == "-1"
    assert environment["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert rendered[("ConfigMap", "tock-settings")]["data"]["TOCK_KAFKA_BOOTSTRAP"] == "tock-kafka.data.svc:9092"
    assert not any(kind == "StatefulSet" for kind, _ in objects(helm.template()))


def test_the_notes_say_how_to_reach_the_api_and_warn_about_placeholders(helm):
    result = helm.run("install", RELEASE, str(CHART), "--namespace", "tock", "--dry-run=client")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "port-forward service/tock-api 8080:80" in notes and "WARNING" in notes
    result = helm.run("install", RELEASE, str(CHART), "--namespace", "tock", "--dry-run=client",
                      "--set", "secrets.existingSecret=tock-prod")
    assert result.returncode == 0 and "WARNING" not in result.stdout.split("NOTES:", 1)[1]


# -- the real API server --------------------------------------------------------------------------


@pytest.mark.parametrize("values", [(), ("--set", "kafka.inCluster.enabled=true"), OVERRIDES],
                         ids=["defaults", "in-cluster-kafka", "overrides"])
def test_the_real_api_server_accepts_the_rendering(helm, kube_namespace, values):
    manifests = helm.template("--kube-version", server_version(kube_namespace), *values,
                              namespace=kube_namespace.namespace)
    result = server_dry_run(manifests, kube_namespace)
    assert result.returncode == 0, result.stderr
    for name in DEPLOYMENTS:
        assert f"deployment.apps/{name} created (server dry run)" in result.stdout
    expected = ["service/tock-api", "configmap/tock-settings", "configmap/tock-kubeconfig",
                "serviceaccount/tock-scheduler", "role.rbac.authorization.k8s.io/tock-scheduler",
                "rolebinding.rbac.authorization.k8s.io/tock-scheduler"]
    expected += ["statefulset.apps/tock-kafka", "service/tock-kafka"] if "kafka.inCluster.enabled=true" in values \
        else []
    expected += [] if values == OVERRIDES else ["secret/tock-secrets"]
    for kind_and_name in expected:
        assert f"{kind_and_name} created (server dry run)" in result.stdout


def test_the_api_server_keeps_the_overridden_replicas(helm, kube_namespace):
    manifests = helm.template(*OVERRIDES, "--show-only", "templates/scheduler.yaml",
                              namespace=kube_namespace.namespace)
    result = subprocess.run([KUBECTL, "--kubeconfig", str(kube_namespace.kubeconfig), "apply", "--dry-run=server",
                             "-n", kube_namespace.namespace, "-o", "json", "-f", "-"],
                            input=manifests, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    scheduler = json.loads(result.stdout)
    assert scheduler["kind"] == "Deployment" and scheduler["spec"]["replicas"] == 3
    assert scheduler["metadata"]["namespace"] == kube_namespace.namespace


# -- the chart and the Kustomize base agree -------------------------------------------------------


def test_chart_and_kustomize_base_run_the_same_containers_with_the_same_environment(helm):
    # The base's image is tock:latest; the chart's tag follows its appVersion unless told.
    chart = objects(helm.template("--set", "image.tag=latest"))
    base = objects(render_kustomize("base", None, Path()))
    assert deployments(chart) == deployments(base) == set(DEPLOYMENTS)
    for name in DEPLOYMENTS:
        chart_containers, base_containers = containers(chart, name), containers(base, name)
        assert [item["name"] for item in chart_containers] == [item["name"] for item in base_containers], name
        for ours, theirs in zip(chart_containers, base_containers, strict=True):
            where = f"{name}/{ours['name']}"
            assert environment_names(chart, ours) == environment_names(base, theirs), where
            for field in ("image", "args", "ports", "resources", "livenessProbe", "readinessProbe"):
                assert ours.get(field) == theirs.get(field), f"{where}: {field}"
            assert [mount["mountPath"] for mount in ours["volumeMounts"]] == \
                   [mount["mountPath"] for mount in theirs["volumeMounts"]], where
        for field in ("serviceAccountName", "terminationGracePeriodSeconds", "automountServiceAccountToken"):
            assert pod_spec(chart, name).get(field) == pod_spec(base, name).get(field), f"{name}: {field}"
        assert chart[("Deployment", name)]["spec"].get("replicas") == base[("Deployment", name)]["spec"]["replicas"]
    assert chart[("ConfigMap", "tock-settings")]["data"] == base[("ConfigMap", "tock-settings")]["data"]
    assert chart[("Secret", "tock-secrets")]["stringData"] == base[("Secret", "tock-secrets")]["stringData"]
    assert chart[("Role", "tock-scheduler")]["rules"] == base[("Role", "tock-scheduler")]["rules"]


def test_the_chart_can_set_every_tock_setting_and_no_other(helm):
    """Each TOCK_* setting is either written by the chart from its values, or a secret, or may be
    given under `settings` (the schema's list); the schema names no setting Tock doesn't read."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    settable = set(schema["properties"]["settings"]["properties"])
    secret_extra = set(schema["properties"]["secrets"]["properties"]["extra"]["properties"])
    rendered = objects(helm.template())
    written = set(rendered[("ConfigMap", "tock-settings")]["data"]) - settable
    written |= {variable["name"] for container in containers(rendered, "tock-scheduler")
                for variable in container.get("env", [])}
    assert sorted(settable - known_variables()) == [], "the schema lists settings Tock does not read"
    assert sorted(secret_extra - SECRET_SETTINGS) == []
    missing = known_variables() - settable - written - SECRET_SETTINGS
    assert sorted(missing) == [], "settings Tock reads that the chart cannot set: add them to " \
                                  "values.schema.json's settings (or derive them from a value)"
    assert sorted(set(rendered[("Secret", "tock-secrets")]["stringData"]) - SECRET_SETTINGS) == []
