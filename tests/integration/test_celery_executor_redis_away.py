"""The Celery executor's calls while its Redis is away: a probe answers "cannot tell" and a kill "not
taken", and neither raises, whether Redis was never there or went away after the executor had connected
(a restart). The chaos soak once ended a scheduler with the second: a probe's control broadcast, on a
connection made before Redis restarted, raised redis's ConnectionError, which kombu did not wrap and
the executor did not expect."""

from __future__ import annotations

import time

import pytest

from infra.executors.celery import PROBE_TTL, CeleryExecutor
from infra.executors.requests import TryRequest
from tests.scenarios.celery_support import PrivateRedis
from tests.scenarios.scheduler_support import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def redis(tmp_path):
    private = PrivateRedis(tmp_path / "redis")
    private.start()
    yield private
    if private.running():
        private.stop()


def executor_on(make_settings, url: str) -> CeleryExecutor:
    return CeleryExecutor(make_settings(celery_broker_url=url, executors="local,celery"))


def test_calls_while_redis_was_never_there_cannot_tell_and_do_not_raise(make_settings):
    executor = executor_on(make_settings, f"redis://127.0.0.1:{free_port()}/0")
    try:
        assert executor.is_alive("tock-some-try") is None
        assert executor.kill("tock-some-try") is False
        assert executor.launch_many([(TryRequest("d", "r", "t", 1, "/dags/d.py"), "default")]) == []
    finally:
        executor.close()


def test_calls_after_redis_went_away_cannot_tell_and_do_not_raise(make_settings, redis):
    executor = executor_on(make_settings, redis.url)
    try:
        assert executor.is_alive("tock-some-try") is None  # connected: no worker runs it
        assert executor.kill("tock-some-try") is True
        redis.stop()
        time.sleep(PROBE_TTL)  # the probe's answer is reused for PROBE_TTL: the next one asks again
        assert executor.is_alive("tock-some-try") is None
        assert executor.kill("tock-some-try") is False
    finally:
        executor.close()
