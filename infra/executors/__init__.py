"""Executors: where a queued try runs. Only the local one exists so far."""

from infra.executors.local import LocalExecutor, is_alive, process_start_time

__all__ = ["LocalExecutor", "is_alive", "process_start_time"]
