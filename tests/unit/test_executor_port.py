"""The executor port (infra/executors/base.py): which adapter has which optional ability, found once
when the scheduler's Launcher is built."""

from __future__ import annotations

import pytest

from infra.executors import Killing, LocalExecutor, Watching, build_executors
from infra.executors.celery import CeleryExecutor
from infra.executors.kubernetes import KubernetesExecutor
from infra.settings import Settings
from services.scheduler.launching import Launcher

SETTINGS = Settings(kafka_bootstrap="kafka:9092", topic_prefix="port.", executors="local,celery")


@pytest.mark.parametrize("adapter, kills, watches", [
    (LocalExecutor, False, False),
    (CeleryExecutor, True, False),
    (KubernetesExecutor, True, True),
])
def test_each_adapter_has_the_abilities_it_declares(adapter, kills, watches):
    assert (issubclass(adapter, Killing), issubclass(adapter, Watching)) == (kills, watches)


def test_the_launcher_finds_the_abilities_once_when_it_is_built():
    executors = build_executors(SETTINGS)
    try:
        launcher = Launcher(executors, SETTINGS.executor_parallelism, "s1")
        assert sorted(executors) == ["celery", "local"]
        assert launcher.killers == {"celery": executors["celery"]} and launcher.watchers == []
    finally:
        for executor in executors.values():
            executor.close()

