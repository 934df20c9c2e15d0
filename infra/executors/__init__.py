"""Executors: where a queued try runs. Adapters receive what they launch as plain data (TryRequest)."""

from __future__ import annotations

from infra.executors.local import LocalExecutor, is_alive
from infra.settings import Settings

__all__ = ["LocalExecutor", "build_executors", "is_alive"]


def build_executors(settings: Settings) -> dict:
    """The executors this installation runs (TOCK_EXECUTORS), by name."""
    executors: dict = {"local": LocalExecutor(settings)}
    if "celery" in settings.available_executors:
        from infra.executors.celery import CeleryExecutor  # Celery is imported only where it is used

        executors["celery"] = CeleryExecutor(settings)
    if "kubernetes" in settings.available_executors:
        from infra.executors.kubernetes import KubernetesExecutor  # the client is imported only where used

        executors["kubernetes"] = KubernetesExecutor(settings)
    return executors
