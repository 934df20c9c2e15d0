"""Executors: where a queued try runs. Adapters receive what they launch as plain data (TryRequest)."""

from infra.executors.local import LocalExecutor, is_alive, process_start_time

__all__ = ["LocalExecutor", "is_alive", "process_start_time"]
