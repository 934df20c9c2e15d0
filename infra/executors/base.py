"""The executor port: what the scheduler asks of every executor (local, Celery, Kubernetes).

Celery's result backends are the model (its ``backends/base.py``): a small contract that each
technology fills in the same way, so the scheduler's core never learns which one it talks to.
:class:`Executor` is the contract every adapter keeps; the optional abilities are protocols of
their own (:class:`Killing`, :class:`Watching`), found once, when the scheduler's Launcher is
built (services/scheduler/launching.py), never asked of an executor on every turn.

What an executor launches is one try message per try (infra/executors/messages.py); the runner
it starts is the same code under every executor (services/runner) and claims its try through
the log (services/runner/core/claim.py). The executor of a try is what its TaskQueued says and
its handle what its TaskLaunched says: nothing an executor reports later changes either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from infra.executors.requests import TryRequest
from schemas import PodFinished, PodStarted

TryKey = tuple[str, str, str, int]  # (dag_id, run_id, task_id, try_number)


@dataclass(frozen=True, slots=True)
class LaunchRefused:
    """The executor's technology refused this try for good (the API server answered 422 for an invalid
    pod, 403 for a quota): launched again, it would be refused again. The scheduler fails the try with
    ``reason`` (the technology's own words) and its retries apply (services/scheduler/launching.py)."""

    reason: str


LaunchResult: TypeAlias = str | LaunchRefused | None
"""What ``launch_many`` says of one try: its handle, a refusal, or None (not launched this turn: it
stays queued and is launched again later under the same handle, so a launch that did happen counts)."""


@runtime_checkable
class Executor(Protocol):
    """Launches tries and gives a second opinion on whether one still runs.

    - Launch after commit: ``launch_many`` is called only for tries whose TaskQueued is
      committed, and the handles it returns are committed in TaskLaunched afterwards
      (services/scheduler/launching.py).
    - Idempotent per try key: launching the same try again starts it at most once (the same
      Celery task id, the same pod name, and in every case the runner's claim through the log,
      services/runner/core/claim.py).
    - Probe is a second opinion: ``is_alive`` answers True, False or None (cannot tell); None
      never kills a try. A try's death is decided by its heartbeats in the log
      (services/scheduler/core/liveness.py); the probe only speeds an adoption after a takeover.
    """

    name: str

    def launch_many(self, requests: list[tuple[TryRequest, str]]) -> Sequence[LaunchResult]:
        """Launch the tries ``(request, queue)``; one result per try, in order: its handle, a refusal,
        or None (not launched now). A shorter answer: the tries past its end stay queued for a later
        turn. One try refused never keeps the others from being launched and recorded. A
        RuntimeError: none was launched."""
        ...

    def is_alive(self, handle: str) -> bool | None:
        """Whether the try this handle names still runs: True, False, or None (cannot tell)."""
        ...

    def close(self) -> None:
        """Let go of the executor's connections and helpers; tries already launched keep running."""
        ...


@runtime_checkable
class Killing(Protocol):
    """An executor that can stop a try itself (Celery's revoke, a pod's delete).

    The kill is confirmed through the log, never by the return value: the runner obeys the
    TaskKillRequested (or TaskDeclaredDead) it reads and reports the try's end; ``kill`` makes that
    happen where the runner cannot read the log (a partitioned host, a frozen runner). It may wait
    on the network, so the scheduler calls it off its main thread (services/scheduler/launching.py);
    a kill that fails answers False (it is asked again later), it never raises."""

    def kill(self, handle: str, at_once: bool = False) -> bool:
        """Ask for the try this handle names to be stopped (after its TaskKillRequested or
        TaskDeclaredDead committed). ``at_once``: the try was declared dead, so no grace for its
        runner to report (nothing it says counts any more). True: stopped, going, or gone already;
        False: ask again later."""
        ...


class WatchedPod(Protocol):
    """What a watching executor says of a finished launch it still keeps."""

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> str: ...

    @property
    def key(self) -> TryKey: ...


@runtime_checkable
class Watching(Protocol):
    """An executor that watches what it launched (Kubernetes: the owned partitions' pods).

    Its reports (PodStarted, PodFinished) are written to the log by the scheduler, once per pod
    (services/scheduler/core/pods.py). They may speed a verdict but never overturn a live
    heartbeat (services/scheduler/core/liveness.py): a pod that ended without its runner's
    outcome fails its try at once, because the runner was the pod's process and has ended too;
    a pod seen running never keeps a silent try alive past its heartbeat deadline."""

    def watch(self, partitions: list[int]) -> None:
        """Follow the launches of these partitions (those the scheduler owns now), and only them."""
        ...

    def observations(self) -> list[PodStarted | PodFinished]:
        """What was seen since the last call (repeats are possible: the scheduler writes each once)."""
        ...

    def finished_pods(self) -> Sequence[WatchedPod]:
        """The finished launches still kept (to be deleted once their try's outcome is folded)."""
        ...

    def delete_finished(self, names: list[str]) -> None:
        """Delete these finished launches (a failed delete is tried again on a later call)."""
        ...
