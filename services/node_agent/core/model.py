"""What the agent knows: pods as the API server shows them, and its own containers.

Both are plain frozen values; :mod:`.evolve` folds events into :class:`AgentState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

OWN, PENDING = "own", "pending"  # the two pod streams: bound to this node, not bound yet
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class ContainerSpec:
    """The first container of a pod (the only one the agent runs)."""

    name: str
    image: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    memory_limit: int | None = None  # bytes


@dataclass(frozen=True)
class PodView:
    """The fields of a pod the agent acts on."""

    name: str
    uid: str
    node_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    grace_seconds: int = 30
    pinned_host: str | None = None  # spec.nodeSelector["kubernetes.io/hostname"]
    container: ContainerSpec = ContainerSpec("main", "", ())
    start_time: str | None = None  # status.startTime, kept across status patches

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


@dataclass(frozen=True)
class Container:
    """A pod's process tree as this agent started (or found) it."""

    uid: str
    pid: int
    started_at: str
    exit_code: int | None = None
    exited: bool = False
    kill_reason: str | None = None  # "OOMKilled" once the agent killed it for memory
    rss: int = 0
    term_sent_at: float | None = None
    kill_sent: bool = False
    running_reported: bool = False
    final_reported: bool = False


@dataclass(frozen=True)
class AgentState:
    """Pods per stream (name → view), the agent's containers, and the pods it tried to bind."""

    streams: Mapping[str, Mapping[str, PodView]] = field(
        default_factory=lambda: MappingProxyType({OWN: MappingProxyType({}), PENDING: MappingProxyType({})}))
    containers: Mapping[str, Container] = field(default_factory=lambda: MappingProxyType({}))
    bind_tried: frozenset[str] = frozenset()  # pod uids
    listed: frozenset[str] = frozenset()  # streams listed at least once: until then, no verdict on their pods

    def own(self, name: str) -> PodView | None:
        return self.streams[OWN].get(name)
