"""Executors: where a queued try runs. The port is base.py; each adapter receives what it launches as
one typed try message (messages.py) and imports nothing of services/."""

from __future__ import annotations

from collections.abc import Sequence

from infra.executors.base import Executor, Killing, Watching
from infra.executors.local import LocalExecutor, is_alive
from infra.settings import Settings

__all__ = ["Executor", "Killing", "LocalExecutor", "Watching", "build_executors", "is_alive"]


def build_executors(settings: Settings, local_launcher: Sequence[str]) -> dict[str, Executor]:
    """The executors this installation runs (TOCK_EXECUTORS), by name. ``local_launcher``: the command
    that starts the local executor's warm launcher (the composition, tock_cli, knows it)."""
    executors: dict[str, Executor] = {"local": LocalExecutor(settings, local_launcher)}
    if "celery" in settings.available_executors:
        from infra.executors.celery import CeleryExecutor  # Celery is imported only where it is used

        executors["celery"] = CeleryExecutor(settings)
    if "kubernetes" in settings.available_executors:
        from infra.executors.kubernetes import KubernetesExecutor  # the client is imported only where used

        executors["kubernetes"] = KubernetesExecutor(settings)
    return executors
