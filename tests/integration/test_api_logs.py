"""Task logs through the API: a try with nothing in tock.logs falls back to this host's file; a try's
shipped lines followed over real HTTP until the try ends (the runner side: test_task_logs_shipped.py)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import uvicorn

from infra.log import KafkaEventLog
from schemas import DagRunCreated, TaskLogShipped, TaskQueued, TaskStarted, TaskSucceeded
from services.api.app import create_app
from services.api.task_logs import log_file
from tests.integration.api_support import ADMIN, ADMIN_TOKEN
from tests.integration.projection_db import (  # noqa: F401
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.integration.test_api import RUN, client  # noqa: F401 - fixture
from tests.unit.projection_logs import dag_parsed

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
IDS = {"dag_id": "etl", "run_id": "scheduled__2024-01-01T00:00:00+00:00", "task_id": "load", "try_number": 1}
LOGS = "/api/v1/dags/etl/runs/{run_id}/tasks/load/logs"


def _log_of(client, run_id: str, task_id: str, try_number: int):
    path = log_file(client.app.state.settings.home, "etl", run_id, task_id, try_number)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_a_try_with_nothing_in_tock_logs_falls_back_to_this_host_s_file(client):
    _log_of(client, "manual__1", "transform", 1).write_text("try one failed\n")
    _log_of(client, "manual__1", "transform", 2).write_text("try two\nsucceeded\n")
    latest = client.get(f"{RUN}/tasks/transform/logs")
    assert (latest.status_code, latest.text) == (200, "try two\nsucceeded\n")
    assert latest.headers["content-type"].startswith("text/plain")
    assert client.get(f"{RUN}/tasks/transform/logs", params={"try": 1}).text == "try one failed\n"
    # an ended try whose file is complete: following returns it and ends at once
    assert client.get(f"{RUN}/tasks/transform/logs", params={"try": 2, "follow": True}).text == "try two\nsucceeded\n"


@pytest.mark.parametrize(("path", "params"), [
    ("/api/v1/dags/nope/runs/manual__1/tasks/load/logs", {}),
    ("/api/v1/dags/etl/runs/nope/tasks/load/logs", {}),
    (f"{RUN}/tasks/nope/logs", {}),
    (f"{RUN}/tasks/load/logs", {}),  # it ran, but nothing of it is in tock.logs nor on this host
    (f"{RUN}/tasks/load/logs", {"try": 7}),
])
def test_unknown_instances_and_missing_logs_are_404(client, path, params):
    assert client.get(path, params=params).status_code == 404


def test_a_bad_try_is_422(client):
    assert client.get(f"{RUN}/tasks/load/logs", params={"try": 0}).status_code == 422


class Server:
    """The API served by uvicorn in a thread, on a free port."""

    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=30, what="uvicorn to start")
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def ship(settings, offset: int, text: str) -> int:
    """A runner on another host ships ``text`` of the try from ``offset``; returns the next offset."""
    with KafkaEventLog(settings) as logs:
        logs.append(TaskLogShipped(**IDS, runner_id="w", offset=offset, text=text, at=time.time()))
    return offset + len(text.encode())


def _running_try_with_log(make_settings, projection_settings, first_line: str):
    """A running try of "load" in the log, which shipped ``first_line``: (settings, next offset)."""
    created = DagRunCreated(dag_id="etl", run_id=IDS["run_id"], logical_date=AT, run_type="scheduled",
                            dag_fingerprint="f", scheduler_id="s1", at=AT)
    produce(projection_settings, [dag_parsed("etl", AT, tasks=("extract", "load")), created,
                                  TaskQueued(**IDS, executor="local", queue="default", scheduler_id="s1", at=AT + 1),
                                  TaskStarted(**IDS, runner_id="w", hostname="h", pid=1, at=AT + 2)])
    settings = make_settings(db_url=projection_settings.db_url, api_token=ADMIN_TOKEN)
    return settings, ship(settings, 0, first_line)


def test_following_a_growing_log_streams_it_until_the_try_ends(make_settings, projection_settings, engine):
    settings, offset = _running_try_with_log(make_settings, projection_settings, "line 1\n")
    with ProjectorThread(projection_settings), Server(create_app(settings)) as base:
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector")
        received: list[bytes] = []
        url = base + LOGS.format(run_id=IDS["run_id"])
        with httpx.stream("GET", url, params={"follow": "true"}, headers=ADMIN, timeout=30) as response:
            chunks = response.iter_bytes()
            received.append(next(chunks))
            assert received == [b"line 1\n"]  # streamed before the try wrote more
            offset = ship(settings, offset, "line 2\n")
            _wait_for_more(chunks, received, b"line 1\nline 2\n")
            ship(settings, offset, "line 3 (last)\n")
            started = time.monotonic()
            # the runner died before its final record: the follow ends once the table shows the try ended
            produce(projection_settings, [TaskSucceeded(**IDS, runner_id="w", at=AT + 9)])
            received.extend(chunks)
        assert b"".join(received) == b"line 1\nline 2\nline 3 (last)\n"
        assert time.monotonic() - started < 20


def _wait_for_more(chunks, received: list[bytes], expected: bytes) -> None:
    while b"".join(received) != expected:
        received.append(next(chunks))


def test_a_client_that_disconnects_stops_the_follow(make_settings, projection_settings, engine):
    settings, _offset = _running_try_with_log(make_settings, projection_settings, "running\n")
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector")
    server = Server(create_app(settings))
    with server as base:
        with httpx.stream("GET", base + LOGS.format(run_id=IDS["run_id"]), params={"follow": "true"},
                          headers=ADMIN, timeout=30) as response:
            assert next(response.iter_bytes()) == b"running\n"
        time.sleep(1.5)  # the follower sees the disconnect within a poll
        stopping = time.monotonic()
    # uvicorn waits for responses in flight when it stops: a follower still going would hold it up
    assert not server.thread.is_alive() and time.monotonic() - stopping < 10
