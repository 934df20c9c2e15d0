"""Who runs a try: the first TaskStarted of the try in log order wins.

Every runner launched for a try appends its TaskStarted, then reads the try's partition
of tock.events; the partition orders every TaskStarted of the try the same way for every
reader, on every host, so exactly one runner sees itself first and runs the user code.
Pure: the reading is the shell's (services/runner/claim_reader.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from schemas import TaskStarted

TryKey = tuple[str, str, str, int]  # (dag_id, run_id, task_id, try_number)


@dataclass(frozen=True, slots=True)
class Claims:
    """How the claims of a runner's tries stand."""

    won: frozenset[TryKey] = frozenset()
    lost: Mapping[TryKey, str] = field(default_factory=dict)  # try -> the winner's runner id
    pending: frozenset[TryKey] = frozenset()  # neither our TaskStarted nor another's read yet

    @property
    def decided(self) -> bool:
        return not self.pending


def try_key(event: TaskStarted) -> TryKey:
    return (event.dag_id, event.run_id, event.task_id, event.try_number)


def first_starters(started_in_log_order: Iterable[TaskStarted], keys: Iterable[TryKey]) -> dict[TryKey, str]:
    """The runner id of the first TaskStarted of each of these tries that the log holds."""
    wanted, first = set(keys), {}
    for event in started_in_log_order:
        key = try_key(event)
        if key in wanted and key not in first:
            first[key] = event.runner_id
    return first


def winners(started_in_log_order: Iterable[TaskStarted], own: Mapping[TryKey, str]) -> Claims:
    """Decide each of our tries (try -> our runner id) from the TaskStarted read so far, in log order.

    A try is won when its first TaskStarted is ours, lost when it is another runner's (even
    before ours is read: nothing can come before the first), pending when none is read yet.
    """
    first = first_starters(started_in_log_order, own)
    won = frozenset(key for key, runner_id in first.items() if runner_id == own[key])
    lost = {key: runner_id for key, runner_id in first.items() if runner_id != own[key]}
    return Claims(won, lost, frozenset(own.keys() - first.keys()))
