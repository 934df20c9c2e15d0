"""A pod the real API server refuses (issue 20, defect 10): its try fails with the API server's
reason, its retries apply, and the rest of its launch batch is launched and recorded."""

from __future__ import annotations

import pytest

from schemas import TaskFailed, TaskLaunched, TaskSucceeded
from tests.scenarios.kube_support import Agents, kube_settings, pods
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger, wait_until

pytestmark = pytest.mark.scenario

REFUSED = '''
from tock import DAG, BashTask

with DAG("refused", retries=1, retry_delay=0) as dag:
    BashTask("a_bad", "echo never", executor="kubernetes",
             pod_override={"resources": {"limits": {"memory": "lots"}}})
    BashTask("a_invalid", "echo never", executor="kubernetes",
             pod_override={"resources": {"limits": {"memory": "-1Gi"}}})
    for index in range(3):
        BashTask(f"b_good_{index}", "echo fine", executor="kubernetes")
'''


def test_a_refused_pod_fails_its_try_with_the_api_server_s_reason_and_never_blocks_its_batch(
        make_settings, kube_namespace, redis_url, tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    create_topics(settings)
    path = tmp_path / "refused.py"
    path.write_text(REFUSED)
    agents = Agents(settings, tmp_path / "nodes")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        agents.start("node-a")
        publish_dags(settings, path)
        processes.scheduler("only")
        run_id = trigger(settings, "refused")
        finished = tail.run_finished(run_id, 120)
        wait_until(lambda: not pods(settings), 60, "the finished pods to be deleted")
    finally:
        processes.close()
        agents.close()
        tail.close()
    assert finished.state == "failed"
    # The API server's own answers: 400 for a body it cannot decode, 422 for an invalid pod.
    for task_id, words in (("a_bad", ("400", "quantities must match")), ("a_invalid", ("422", "Invalid value"))):
        failures = tail.of_type(TaskFailed, run_id=run_id, task_id=task_id)
        assert [failure.try_number for failure in failures] == [1, 2]  # refused, retried, refused again
        for failure in failures:
            assert "refused pod" in failure.error and all(word in failure.error for word in words), failure.error
        assert tail.of_type(TaskLaunched, run_id=run_id, task_id=task_id) == []
    launched = {event.task_id for event in tail.of_type(TaskLaunched, run_id=run_id)}
    assert launched == {f"b_good_{index}" for index in range(3)}
    assert {event.task_id for event in tail.of_type(TaskSucceeded, run_id=run_id)} == launched
