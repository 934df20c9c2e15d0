"""The Kubernetes executor's pods, built and read as plain data: names derived from the try key
(valid DNS-1123, at most 63 characters, unique per try), labels by partition, the runner's
command and settings, pod_override applied; and what a pod's status says to the scheduler."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client as kube

from infra.executors.kube_watch import PodView, observation, pod_view
from infra.executors.kubernetes import PARTITION, pod_manifest, pod_name
from infra.executors.requests import TryRequest
from infra.log import partition_for
from infra.settings import Settings
from schemas import PodFinished, PodStarted

DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
SETTINGS = Settings(kafka_bootstrap="kafka:9092", topic_prefix="t1.", partitions=12)
ids = st.text(min_size=1, max_size=250)


@given(ids, ids, ids, st.integers(min_value=1, max_value=10**6))
def test_pod_names_are_valid_short_and_differ_per_try(dag_id, run_id, task_id, try_number):
    request = TryRequest(dag_id, run_id, task_id, try_number, "/dags/x.py")
    name = pod_name("t1.", request)
    assert DNS_1123.match(name) and len(name) <= 63
    assert name != pod_name("t1.", TryRequest(dag_id, run_id, task_id, try_number + 1, "/dags/x.py"))
    assert name != pod_name("t1.", TryRequest(dag_id, run_id + "x", task_id, try_number, "/dags/x.py"))
    assert name != pod_name("t2.", request)


def test_a_name_is_readable_when_the_ids_allow():
    name = pod_name("", TryRequest("etl", "manual__1", "load_Orders", 2, "/dags/x.py"))
    assert name.startswith("tock-etl-load-orders-2-")


@given(ids, ids)
def test_labels_are_valid_label_values(dag_id, task_id):
    manifest = pod_manifest(SETTINGS, TryRequest(dag_id, "r", task_id, 1, "/dags/x.py"), "default", {})
    assert all(LABEL.match(value) and len(value) <= 63 for value in manifest["metadata"]["labels"].values())
    assert manifest["metadata"]["labels"][PARTITION] == str(partition_for(dag_id, 12))
    assert manifest["metadata"]["annotations"]["tock.dev/dag-id"] == dag_id


def test_the_pod_runs_the_try_with_the_runners_settings_and_the_override():
    request = TryRequest("etl", "r1", "load", 3, "/dags/etl.py", 600.0, 1700000000.5)
    override = {"image": "etl:2", "resources": {"limits": {"memory": "64Mi"}}, "env": {"REGION": "eu"}}
    manifest = pod_manifest(SETTINGS, request, "gpu", override)
    [container] = manifest["spec"]["containers"]
    assert container["command"] == ["tock", "run-task", "etl", "r1", "load", "3", "--dag-file", "/dags/etl.py",
                                    "--executor", "kubernetes", "--queue", "gpu", "--queued-at", "1700000000.5",
                                    "--execution-timeout", "600.0"]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert (env["TOCK_KAFKA_BOOTSTRAP"], env["TOCK_TOPIC_PREFIX"], env["TOCK_PARTITIONS"], env["REGION"]) == (
        "kafka:9092", "t1.", "12", "eu")
    assert (container["image"], container["resources"]) == ("etl:2", {"limits": {"memory": "64Mi"}})
    assert manifest["spec"]["restartPolicy"] == "Never"


def pod(phase: str, terminated: kube.V1ContainerStateTerminated | None = None, node: str = "n1") -> kube.V1Pod:
    state = kube.V1ContainerState(terminated=terminated)
    return kube.V1Pod(
        metadata=kube.V1ObjectMeta(name="tock-a-1-x", uid="u1", annotations={
            "tock.dev/dag-id": "etl", "tock.dev/run-id": "r1", "tock.dev/task-id": "a", "tock.dev/try-number": "1"}),
        spec=kube.V1PodSpec(containers=[], node_name=node),
        status=kube.V1PodStatus(phase=phase, container_statuses=[kube.V1ContainerStatus(
            name="try", image="i", image_id="", ready=False, restart_count=0, state=state)]))


def test_an_oom_killed_pod_is_seen_finished_with_its_reason_and_code():
    view = pod_view(pod("Failed", kube.V1ContainerStateTerminated(exit_code=137, reason="OOMKilled")))
    assert view == PodView("tock-a-1-x", "u1", ("etl", "r1", "a", 1), "Failed", "n1", "OOMKilled", 137)
    seen = observation(view)
    assert isinstance(seen, PodFinished) and (seen.reason, seen.exit_code, seen.node) == ("OOMKilled", 137, "n1")


def test_a_running_pod_is_seen_started_a_pending_one_not_yet_and_a_deleted_one_ended():
    assert isinstance(observation(pod_view(pod("Running"))), PodStarted)
    assert observation(pod_view(pod("Pending", node=""))) is None
    deleted = observation(pod_view(pod("Running")), deleted=True)
    assert isinstance(deleted, PodFinished) and (deleted.phase, deleted.reason) == ("Failed", "PodDeleted")


def test_a_pod_without_tocks_annotations_is_not_ours():
    foreign = kube.V1Pod(metadata=kube.V1ObjectMeta(name="x", uid="u", annotations={}),
                         spec=kube.V1PodSpec(containers=[]), status=kube.V1PodStatus(phase="Running"))
    assert pod_view(foreign) is None
