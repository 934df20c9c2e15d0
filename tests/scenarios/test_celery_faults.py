"""Faults under the Celery executor: a worker killed whole (kill -9 of its process group) while it
runs tries, and Redis restarted or away for 30 s mid-run. Real workers, real Redis, real broker."""

from __future__ import annotations

import re

import pytest

from schemas import TaskDeclaredDead, TaskRetryScheduled, TaskStarted, TaskSucceeded
from tests.scenarios.celery_support import PrivateRedis, Workers, lines_of, pids_alive, settle_briefly
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger, wait_until

pytestmark = pytest.mark.scenario

SLEEPERS = '''
from tock import DAG, BashTask

with DAG("celery_sleepers", retries=1, retry_delay=0) as dag:
    for index in range({count}):
        BashTask(f"sleep_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER $$" >> {ran}; sleep {seconds}',
                 executor="celery")
'''

WAVES = '''
from tock import DAG, BashTask

with DAG("waves") as dag:
    first = [BashTask(f"first_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; sleep {seconds}',
                      executor="celery") for index in range(3)]
    second = [BashTask(f"second_{{index}}", 'echo "$TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}',
                       executor="celery") for index in range(3)]
    for task in first:
        task >> second
'''


def dag_file(tmp_path, source: str, **values):
    path = tmp_path / "dags" / "dag.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source.format(**values))
    return path


@pytest.fixture
def parts(tmp_path):
    """Closers registered by the test, run in reverse at its end."""
    closers = []
    yield closers
    for close in reversed(closers):
        close()


def start_system(settings, tmp_path, parts):
    workers, processes, tail = Workers(settings, tmp_path / "hosts"), Processes(settings, tmp_path / "logs"), \
        LogTail(settings)
    parts += [tail.close, workers.close, processes.close]
    return workers, processes, tail


def test_a_worker_killed_whole_loses_its_tries_to_the_deadline_and_they_run_again_elsewhere(
        make_settings, redis_url, tmp_path, parts):
    settings = make_settings(celery_broker_url=redis_url, task_heartbeat_seconds=0.5, task_heartbeat_timeout=8)
    create_topics(settings)
    workers, processes, tail = start_system(settings, tmp_path, parts)
    ran = tmp_path / "ran.txt"
    workers.start("host-a", concurrency=4)
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=3, ran=ran, seconds=30))
    processes.scheduler("s1")
    run_id = trigger(settings, "celery_sleepers")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 3, 60, "3 tries to start")
    wait_until(lambda: len(lines_of(ran)) >= 3, 30, "the user code of 3 tries to start")
    first_pids = [int(line.split()[2]) for line in lines_of(ran)]
    workers.start("host-b", concurrency=4)

    workers.kill_group("host-a")
    # The runners died with the worker; their group watchers kill what the user code started.
    wait_until(lambda: not pids_alive(first_pids), 10, "the first tries' user code to be killed")
    assert tail.run_finished(run_id, 120).state == "success"

    dead = tail.of_type(TaskDeclaredDead, run_id=run_id)
    assert sorted((event.task_id, event.try_number) for event in dead) == [(f"sleep_{index}", 1) for index in range(3)]
    retried = tail.of_type(TaskStarted, run_id=run_id)
    assert sorted((event.task_id, event.try_number, event.hostname) for event in retried
                  if event.try_number == 2) == [(f"sleep_{index}", 2, "host-b") for index in range(3)]
    assert {event.try_number for event in tail.of_type(TaskSucceeded, run_id=run_id)} == {2}
    assert sorted(line.rsplit(" ", 1)[0] for line in lines_of(ran)) == sorted(
        [f"sleep_{index} {number}" for index in range(3) for number in (1, 2)])
    assert not pids_alive(first_pids)


# The limits a Redis outage is about are Celery's, not the heartbeat's (heartbeats travel through
# Kafka): the clients' connect (2 s) and socket (5 s) timeouts, which the 30 s outage crosses many
# times over, and the visibility timeout, set to 10 s here so the outage crosses it too: the messages
# the workers hold unacknowledged through it are given out again once Redis is back, and the claim
# must refuse those second deliveries (each try's user code runs once).
VISIBILITY_TIMEOUT = 10.0


@pytest.mark.parametrize("outage", [0.0, 3 * VISIBILITY_TIMEOUT], ids=["restarted", "down_30s"])
def test_redis_restarted_or_away_mid_run_loses_nothing_and_runs_nothing_twice(
        make_settings, tmp_path, parts, outage):
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    parts.append(lambda: redis.stop() if redis.running() else None)
    settings = make_settings(celery_broker_url=redis.url, task_heartbeat_seconds=0.5, task_heartbeat_timeout=60,
                             celery_visibility_timeout=VISIBILITY_TIMEOUT)
    create_topics(settings)
    workers, processes, tail = start_system(settings, tmp_path, parts)
    ran = tmp_path / "ran.txt"
    # Two slots for three first-wave tries: one message waits in Redis through the restart.
    workers.start("host-a", concurrency=2)
    publish_dags(settings, dag_file(tmp_path, WAVES, ran=ran, seconds=6))
    processes.scheduler("s1")
    run_id = trigger(settings, "waves")
    tail.wait_for(lambda _events: len(tail.of_type(TaskStarted, run_id=run_id)) >= 2, 60, "2 tries to start")

    redis.stop()
    settle_briefly(outage)
    redis.start()
    assert tail.run_finished(run_id, 180).state == "success"

    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    assert tail.of_type(TaskRetryScheduled, run_id=run_id) == []
    expected = [f"{wave}_{index} 1" for wave in ("first", "second") for index in range(3)]
    assert sorted(lines_of(ran)) == sorted(expected)
    assert sorted((event.task_id, event.try_number) for event in tail.of_type(TaskSucceeded, run_id=run_id)) == \
        sorted((line.split()[0], 1) for line in expected)
    received = len(re.findall(r"tock\.run_try\[[^]]+\] received", workers.log_of("host-a")))
    if outage > VISIBILITY_TIMEOUT:
        assert received > len(expected), f"the outage crossed no visibility timeout ({received} deliveries)"


ONE_SLEEPER = '''
from tock import DAG, BashTask

with DAG("one_sleeper") as dag:
    BashTask("sleep", 'echo "$TOCKRUN_RUN_ID $TOCKRUN_TRY_NUMBER" >> {ran}; sleep {seconds}', executor="celery")
'''


def test_a_worker_holding_a_try_lives_through_a_redis_restart_and_runs_the_next_try(make_settings, tmp_path, parts):
    """Redis restarted while the worker holds one try and waits for more (a free slot: its BRPOP is
    under way): the same worker process reconnects and runs the next run's try (kombu's channel
    close used to raise an AttributeError there, and the worker exited: infra/executors/celery_redis.py)."""
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    parts.append(lambda: redis.stop() if redis.running() else None)
    settings = make_settings(celery_broker_url=redis.url, task_heartbeat_seconds=0.5, task_heartbeat_timeout=60)
    create_topics(settings)
    workers, processes, tail = start_system(settings, tmp_path, parts)
    ran = tmp_path / "ran.txt"
    worker = workers.start("host-a", concurrency=2)
    publish_dags(settings, dag_file(tmp_path, ONE_SLEEPER, ran=ran, seconds=6))
    processes.scheduler("s1")
    first = trigger(settings, "one_sleeper")
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=first), 60, "the first try to start")

    redis.stop()
    redis.start()
    wait_until(lambda: workers.log_of("host-a").count(" Connected to ") >= 2 or worker.poll() is not None, 60,
               "the worker to reconnect (or exit)")
    assert worker.poll() is None, f"the worker exited: {workers.log_of('host-a')[-3000:]}"
    assert tail.run_finished(first, 60).state == "success"

    second = trigger(settings, "one_sleeper")
    assert tail.run_finished(second, 60).state == "success"
    assert [event.hostname for event in tail.of_type(TaskStarted, run_id=second)] == ["host-a"]
    assert worker.poll() is None and "Unrecoverable error" not in workers.log_of("host-a")
    assert sorted(lines_of(ran)) == sorted([f"{first} 1", f"{second} 1"])


class RegistryGate:
    """An HTTP front to the session's schema registry that a test can close: while closed, it answers
    every request 503 (the registry's 'unavailable', which its clients retry until their timeout) and
    counts what it refused."""

    def __init__(self, upstream: str) -> None:
        import threading
        import urllib.error
        import urllib.request
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        gate, origin = self, "/".join(upstream.split("/")[:3])  # http://host:port: the paths come whole
        self.open, self.refused = True, []

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                if not gate.open:
                    gate.refused.append(f"{self.command} {self.path}")
                    self.send_error(503, "closed by the test")
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                request = urllib.request.Request(origin + self.path, data=body, method=self.command,
                                                 headers={key: value for key, value in self.headers.items()
                                                          if key.lower() in ("content-type", "accept")})
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, payload = answer.status, answer.read()
                except urllib.error.HTTPError as error:
                    status, payload = error.code, error.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = _forward

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = upstream.replace(upstream.split("/")[2], f"127.0.0.1:{self.server.server_port}", 1)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_registry_away_after_the_worker_started_costs_its_tries_nothing(
        make_settings, redis_url, schema_registry_url, tmp_path, parts):
    """The worker learns every writer id at its start and its runners are given them: with the registry
    then away far past TOCK_SCHEMA_REGISTRY_TIMEOUT, Celery tries still start, report and succeed, once.
    (Before, each pool process's runner registered its topics itself on its first write, and one that met
    the registry away died in the middle of its try.)"""
    gate = RegistryGate(schema_registry_url)
    parts.append(gate.close)
    settings = make_settings(celery_broker_url=redis_url, task_heartbeat_seconds=0.5, task_heartbeat_timeout=15)
    create_topics(settings)
    workers, processes, tail = start_system(settings, tmp_path, parts)
    ran = tmp_path / "ran.txt"
    workers.start("host-a", concurrency=2, schema_registry_url=gate.url, schema_registry_timeout=2)
    gate.open = False
    publish_dags(settings, dag_file(tmp_path, SLEEPERS, count=4, ran=ran, seconds=3))
    processes.scheduler("s1")
    run_id = trigger(settings, "celery_sleepers")
    assert tail.run_finished(run_id, 120).state == "success"
    assert sorted(line.split()[:2] for line in lines_of(ran)) == [[f"sleep_{index}", "1"] for index in range(4)]
    assert tail.of_type(TaskRetryScheduled, run_id=run_id) == []
    assert gate.refused == []
    assert "died during a try" not in workers.log_of("host-a")


def test_a_worker_that_cannot_reach_the_registry_at_its_start_exits_saying_so(
        make_settings, redis_url, schema_registry_url, tmp_path, parts):
    gate = RegistryGate(schema_registry_url)
    parts.append(gate.close)
    gate.open = False
    settings = make_settings(celery_broker_url=redis_url)
    create_topics(settings)
    workers = Workers(settings, tmp_path / "hosts")
    parts.append(workers.close)
    with pytest.raises(AssertionError, match="worker host-a exited"):
        workers.start("host-a", schema_registry_url=gate.url, schema_registry_timeout=2)
    assert workers.started["host-a"].wait(10) == 1
    assert re.search(r"worker tock@host-a cannot start: the schema registry at \S+ did not answer \w+ \S+ "
                     r"within 2 s", workers.log_of("host-a")), workers.log_of("host-a")[-2000:]
    assert gate.refused
