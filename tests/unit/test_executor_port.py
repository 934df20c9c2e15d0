"""The executor port (infra/executors/base.py): which adapter has which optional ability, found once
when the scheduler's Launcher is built, and the local executor told, not naming, what it starts."""

from __future__ import annotations

import pytest

from infra.executors import Killing, LocalExecutor, Watching, build_executors
from infra.executors.celery import CeleryExecutor
from infra.executors.kubernetes import KubernetesExecutor
from infra.settings import Settings
from services.runner import local_launcher_command
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
    executors = build_executors(SETTINGS, local_launcher=local_launcher_command())
    try:
        launcher = Launcher(executors, SETTINGS.executor_parallelism, "s1")
        assert sorted(executors) == ["celery", "local"]
        assert launcher.killers == {"celery": executors["celery"]} and launcher.watchers == []
    finally:
        for executor in executors.values():
            executor.close()


def test_the_local_executor_is_told_the_command_that_starts_its_launcher():
    with pytest.raises(ValueError, match="command that starts its launcher"):
        LocalExecutor(SETTINGS, [])
    assert local_launcher_command()[1:] == ["-m", "services.runner.launcher"]
