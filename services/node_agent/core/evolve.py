"""The fold of the agent's pods: one small handler per event type."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from types import MappingProxyType
from typing import Never, NoReturn

from services.node_agent.core import events as ev
from services.node_agent.core.model import PENDING, AgentState, Container, PodView


def fold(state: AgentState, events: Iterable[ev.Event]) -> AgentState:
    """Apply events in order."""
    for event in events:
        state = evolve(state, event)
    return state


def evolve(state: AgentState, event: ev.Event) -> AgentState:
    """The state after one event; an unknown event type is an error."""
    match event:
        case ev.PodObserved():
            return _observed(state, event)
        case ev.PodVanished():
            return _vanished(state, event)
        case ev.StreamListed():
            return _listed(state, event)
        case ev.BindAttempted():
            return replace(state, bind_tried=state.bind_tried | {event.uid})
        case ev.ContainerStarted():
            return _with_container(state, event.name, event.container)
        case ev.ContainerExited():
            return _update(state, event.name, lambda found: replace(found, exited=True, exit_code=event.exit_code))
        case ev.MemorySampled():
            return _update(state, event.name, lambda found: replace(found, rss=event.rss))
        case ev.SignalSent():
            return _update(state, event.name, lambda found: _signalled(found, event))
        case ev.RunningReported():
            return _update(state, event.name, lambda found: replace(found, running_reported=True))
        case ev.FinalReported():
            return _update(state, event.name, lambda found: replace(found, final_reported=True))
        case ev.ContainerForgotten():
            return _with_container(state, event.name, None)
        case _:
            _unknown(event)


def _unknown(event: Never) -> NoReturn:
    """Reached only by a value outside ev.Event (mypy checks every member is handled above)."""
    raise TypeError(f"the node agent cannot fold {type(event).__name__}")


def _with_stream(state: AgentState, stream: str, pods: dict[str, PodView]) -> AgentState:
    return replace(state, streams=MappingProxyType({**state.streams, stream: MappingProxyType(pods)}))


def _with_container(state: AgentState, name: str, container: Container | None) -> AgentState:
    containers = dict(state.containers)
    if container is None:
        containers.pop(name, None)
    else:
        containers[name] = container
    return replace(state, containers=MappingProxyType(containers))


def _update(state: AgentState, name: str, change: Callable[[Container], Container]) -> AgentState:
    """The state with container ``name`` changed; unchanged if the agent has no such container."""
    container = state.containers.get(name)
    return state if container is None else _with_container(state, name, change(container))


def _observed(state: AgentState, event: ev.PodObserved) -> AgentState:
    return _with_stream(state, event.stream, {**state.streams[event.stream], event.pod.name: event.pod})


def _vanished(state: AgentState, event: ev.PodVanished) -> AgentState:
    pods = dict(state.streams[event.stream])
    gone = pods.pop(event.name, None)
    state = _with_stream(state, event.stream, pods)
    return replace(state, bind_tried=state.bind_tried - {gone.uid}) if gone else state


def _listed(state: AgentState, event: ev.StreamListed) -> AgentState:
    state = _with_stream(state, event.stream, {pod.name: pod for pod in event.pods})
    # Bind attempts are remembered while their pod is pending, no longer (kept small).
    tried = state.bind_tried & {pod.uid for pod in event.pods} if event.stream == PENDING else state.bind_tried
    return replace(state, listed=state.listed | {event.stream}, bind_tried=tried)


def _signalled(container: Container, event: ev.SignalSent) -> Container:
    if event.signal == "TERM":
        return replace(container, term_sent_at=container.term_sent_at or event.at)
    return replace(container, kill_sent=True, kill_reason=container.kill_reason or event.reason)
