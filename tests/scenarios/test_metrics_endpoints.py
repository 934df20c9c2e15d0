"""Scenario: the scheduler, DAG processor and projector, run as processes with metrics ports, serve
Prometheus metrics that parse with the client's parser and tell the truth about a run: the
scheduler's running gauge is back to 0 once it ended, the projector's lag drains to 0."""

from __future__ import annotations

import textwrap

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    free_port,
    trigger,
    wait_until,
    wait_until_published,
)

pytestmark = pytest.mark.scenario

DAG_FILE = textwrap.dedent('''
    from tock import DAG, BashTask

    with DAG("metrics_probe", retries=0) as dag:
        BashTask("sleepy", "sleep 1.6") >> BashTask("done", "echo done")
''')


def scrape(port: int) -> dict[str, list]:
    """Family name -> samples of http://127.0.0.1:port/metrics; none while nothing listens there yet
    (a service still starting on a loaded machine: the waits below go on until their deadline)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.ConnectError:
        return {}
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(families: dict[str, list], sample: str, **labels: str) -> float | None:
    family = families.get(sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum"), [])
    return next((found.value for found in family
                 if found.name == sample and all(found.labels.get(key) == val for key, val in labels.items())), None)


@pytest.fixture
def settings(make_settings, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "metrics_probe.py").write_text(DAG_FILE)
    ports = [free_port()]
    ports += [free_port(*ports)]
    ports += [free_port(*ports)]
    settings = make_settings(dags_folder=dags, task_heartbeat_seconds=0.5, scheduler_session_timeout=6,
                             scheduler_metrics_port=ports[0], dag_processor_metrics_port=ports[1],
                             projector_metrics_port=ports[2])
    create_topics(settings)
    return settings


def test_every_service_serves_metrics_that_follow_a_run(settings, tmp_path):
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processes.start("dag-processor", name="dag-processor")
        processes.scheduler("s1")
        processes.start("projector", name="projector")
        wait_until_published(settings, "metrics_probe")
        run_id = trigger(settings, "metrics_probe")
        wait_until(lambda: value(scrape(settings.scheduler_metrics_port), "tock_scheduler_tries", executor="local",
                                 state="running") == 1, 30, "the scheduler's running gauge to show sleepy")
        finished = tail.run_finished(run_id, 60)
        assert finished.state == "success", processes.log_of("scheduler-s1")

        scheduler = wait_until(lambda: _idle(scrape(settings.scheduler_metrics_port)), 15,
                               "the scheduler's running gauge to return to 0")
        projector = wait_until(lambda: _drained(scrape(settings.projector_metrics_port)), 15,
                               "the projector's lag to drain")
        processor = scrape(settings.dag_processor_metrics_port)
    finally:
        processes.close()
        tail.close()

    assert value(scheduler, "tock_scheduler_partitions_owned") == settings.partitions
    assert value(scheduler, "tock_scheduler_tries", executor="local", state="queued") == 0
    assert value(scheduler, "tock_scheduler_decisions_total", event="TaskQueued") == 2
    assert value(scheduler, "tock_scheduler_decisions_total", event="DagRunFinished") == 1
    assert value(scheduler, "tock_scheduler_dead_tries_total") == 0
    assert value(scheduler, "tock_scheduler_commit_seconds_count") > 0
    assert value(scheduler, "tock_scheduler_takeover_seconds_count") >= 1
    assert value(scheduler, "tock_scheduler_replay_seconds_count") >= 1
    # sleepy heartbeats every 0.5 s for 1.6 s: its heartbeats are measured from the log
    assert value(scheduler, "tock_runner_heartbeat_delay_seconds_count") >= 1

    assert value(processor, "tock_dag_processor_parse_seconds_count") >= 1
    assert value(processor, "tock_dag_processor_dags_parsed_total") >= 1
    assert value(processor, "tock_dag_processor_parse_failures_total") == 0
    assert "tock_dag_processor_kills" in processor
    assert value(processor, "tock_dag_processor_last_parse_seconds",
                 file=str(settings.dags_folder / "metrics_probe.py")) > 0

    assert value(projector, "tock_projector_batch_records_count") > 0
    assert value(projector, "tock_projector_apply_seconds_count") > 0
    assert value(projector, "tock_projector_records_applied_total") > 0


def _idle(families: dict[str, list]) -> dict[str, list] | None:
    """The scrape once the run's end is counted and both tries gauges are back to 0 (they mirror the
    fold at most twice a second, so they may trail the decision counters by that much)."""
    tries = [value(families, "tock_scheduler_tries", executor="local", state=state) for state in ("queued", "running")]
    return families if tries == [0, 0] and value(families, "tock_scheduler_decisions_total",
                                                 event="DagRunFinished") else None


def _drained(families: dict[str, list]) -> dict[str, list] | None:
    return families if value(families, "tock_projector_lag_records", topic="events") == 0 else None
