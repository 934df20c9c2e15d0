"""What an executor launches: one try, as plain data (the executor port's only payload)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class TryRequest:
    """One try to run: what the executor passes to ``tock run-task``."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    dag_file: str
    execution_timeout: float | None = None
    queued_at: float = 0.0  # the ``at`` of the try's TaskQueued: where its claim starts reading (0: unknown)
    pod_override: str | None = None  # the task's pod_override, JSON (the Kubernetes executor applies it)
    map_index: int = -1  # which instance of a mapped task (-1: not mapped)
    # The offset of the try's TaskQueued in its partition of tock.events (-1: unknown): its claim reads
    # from exactly there, and decodes no other try's TaskQueued on the way.
    queued_offset: int = -1

    @property
    def instance(self) -> str:
        """The task instance: its task id, and ``task|N`` for instance N of a mapped task (as the
        scheduler keys it: "|" is in no task id)."""
        return self.task_id if self.map_index < 0 else f"{self.task_id}|{self.map_index}"

    @property
    def key(self) -> tuple[str, str, str, int]:
        """(dag_id, run_id, instance, try_number): the try, as the claim knows it."""
        return (self.dag_id, self.run_id, self.instance, self.try_number)

    def as_dict(self) -> dict:
        return asdict(self)
