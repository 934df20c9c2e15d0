"""What happened to the agent's pods: events it folds (past tense), from watches and its processes."""

from __future__ import annotations

from dataclasses import dataclass

from services.node_agent.core.model import Container, PodView


@dataclass(frozen=True)
class PodObserved:
    stream: str
    pod: PodView


@dataclass(frozen=True)
class PodVanished:
    stream: str
    name: str


@dataclass(frozen=True)
class StreamListed:
    """A (re)list: the stream holds exactly these pods now."""

    stream: str
    pods: tuple[PodView, ...]


@dataclass(frozen=True)
class BindAttempted:
    uid: str


@dataclass(frozen=True)
class ContainerStarted:
    """Started now, or found again after a restart (with what was known of it)."""

    name: str
    container: Container


@dataclass(frozen=True)
class ContainerExited:
    name: str
    exit_code: int | None  # None: it vanished without a recorded exit status


@dataclass(frozen=True)
class MemorySampled:
    name: str
    rss: int


@dataclass(frozen=True)
class SignalSent:
    name: str
    signal: str  # "TERM" or "KILL"
    at: float
    reason: str | None = None


@dataclass(frozen=True)
class RunningReported:
    name: str


@dataclass(frozen=True)
class FinalReported:
    name: str


@dataclass(frozen=True)
class ContainerForgotten:
    name: str


Event = (PodObserved | PodVanished | StreamListed | BindAttempted | ContainerStarted | ContainerExited
         | MemorySampled | SignalSent | RunningReported | FinalReported | ContainerForgotten)
