"""The SecretAccessed events of a try, from the accesses its child recorded (``tock.secrets.accesses()``:
``(kind, name, backend)``), for the runner to append with the try's outcome. Names, never values."""

from __future__ import annotations

from collections.abc import Iterable

from schemas import SecretAccessed


def secret_accessed_events(dag_id: str, run_id: str, task_id: str, try_number: int,
                           accessed: Iterable[tuple[str, str, str]], *, at: float,
                           map_index: int = -1) -> list[SecretAccessed]:
    """One SecretAccessed per distinct (kind, name, backend), in the order first seen: a variable read in
    a loop is one event, not thousands."""
    seen = dict.fromkeys(tuple(access) for access in accessed)
    return [SecretAccessed(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number,
                           map_index=map_index, kind=kind, name=name, backend=backend, at=at)
            for kind, name, backend in seen]
