"""What the agent does next, from its fold: bind, start, signal, report, finalize, forget."""

from __future__ import annotations

from dataclasses import dataclass

from services.node_agent.core.model import OWN, PENDING, AgentState, Container, PodView

OOM_KILLED = "OOMKilled"
UNKNOWN = "ContainerStatusUnknown"


@dataclass(frozen=True)
class Outcome:
    """How a container ended, as a pod status says it."""

    phase: str  # Succeeded | Failed
    reason: str  # Completed | Error | OOMKilled | ContainerStatusUnknown
    exit_code: int


@dataclass(frozen=True)
class BindPod:
    pod: PodView


@dataclass(frozen=True)
class StartContainer:
    pod: PodView


@dataclass(frozen=True)
class ReportRunning:
    pod: PodView
    container: Container


@dataclass(frozen=True)
class ReportFinal:
    pod: PodView
    container: Container | None  # None: the agent has no record of it (lost while it was away)
    outcome: Outcome


@dataclass(frozen=True)
class SignalContainer:
    name: str
    signal: str  # TERM | KILL
    reason: str | None = None


@dataclass(frozen=True)
class FinalizePod:
    """Delete the pod for good (grace 0): its container is over and its end reported."""

    pod: PodView


@dataclass(frozen=True)
class ForgetContainer:
    name: str


Action = BindPod | StartContainer | ReportRunning | ReportFinal | SignalContainer | FinalizePod | ForgetContainer


@dataclass(frozen=True)
class Policy:
    node: str
    grace_cap_seconds: float = 30.0


def outcome_of(container: Container) -> Outcome:
    """The pod-status view of an exited container."""
    if container.kill_reason == OOM_KILLED:
        return Outcome("Failed", OOM_KILLED, 137)
    if container.exit_code is None:
        return Outcome("Failed", UNKNOWN, 137)
    if container.exit_code == 0:
        return Outcome("Succeeded", "Completed", 0)
    return Outcome("Failed", "Error", container.exit_code)


def bindable(pod: PodView, node: str) -> bool:
    """A pending, unbound pod this node may take (its hostname selector, if any, names it)."""
    return (not pod.node_name and not pod.deleting and not pod.terminal
            and pod.pinned_host in (None, node))


def decide(state: AgentState, policy: Policy, now: float) -> list[Action]:
    """Every action due now, binds first."""
    binds: list[Action] = [BindPod(pod) for pod in state.streams[PENDING].values()
             if bindable(pod, policy.node) and pod.uid not in state.bind_tried]
    if OWN not in state.listed:  # a container found after a restart is not an orphan before the list says so
        return binds
    names = sorted(set(state.containers) | set(state.streams[OWN]))
    return binds + [action for name in names for action in _decide_pod(state, name, policy, now)]


def _decide_pod(state: AgentState, name: str, policy: Policy, now: float) -> list[Action]:
    pod, container = state.own(name), state.containers.get(name)
    if pod is not None and pod.node_name != policy.node:
        pod = None
    if container is None:
        return _without_container(pod) if pod is not None else []
    if pod is None or pod.uid != container.uid:
        return _orphan(name, container)
    if container.exited:
        return _after_exit(pod, container)
    return _while_running(pod, container, policy, now)


def _orphan(name: str, container: Container) -> list[Action]:
    """The pod is gone (or replaced by a namesake): kill what is left, then forget it."""
    if not container.exited:
        return [] if container.kill_sent else [SignalContainer(name, "KILL")]
    return [ForgetContainer(name)]


def _without_container(pod: PodView) -> list[Action]:
    if pod.terminal:
        return []
    if pod.deleting:
        return [FinalizePod(pod)]
    if pod.phase == "Pending":
        return [StartContainer(pod)]
    # It runs according to the API but this agent has no trace of it: lost while it was away.
    return [ReportFinal(pod, None, Outcome("Failed", UNKNOWN, 137))]


def _after_exit(pod: PodView, container: Container) -> list[Action]:
    if not container.running_reported and not pod.terminal and not pod.deleting:
        return [ReportRunning(pod, container)]  # even a brief container was Running once: say so first
    if not container.final_reported and not pod.terminal:
        return [ReportFinal(pod, container, outcome_of(container))]
    return [FinalizePod(pod)] if pod.deleting else []


def _while_running(pod: PodView, container: Container, policy: Policy, now: float) -> list[Action]:
    if container.kill_sent:
        return []
    if pod.container.memory_limit is not None and container.rss > pod.container.memory_limit:
        return [SignalContainer(pod.name, "KILL", OOM_KILLED)]
    if pod.deleting:
        return _stopping(pod, container, policy, now)
    return [] if container.running_reported else [ReportRunning(pod, container)]


def _stopping(pod: PodView, container: Container, policy: Policy, now: float) -> list[Action]:
    if container.term_sent_at is None:
        return [SignalContainer(pod.name, "TERM")]
    if now - container.term_sent_at >= min(pod.grace_seconds, policy.grace_cap_seconds):
        return [SignalContainer(pod.name, "KILL")]
    return []
