"""The fold of the agent's pods: one small handler per event type."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from types import MappingProxyType

from services.node_agent.core import events as ev
from services.node_agent.core.model import PENDING, AgentState, Container


def fold(state: AgentState, events: Iterable[ev.Event]) -> AgentState:
    """Apply events in order."""
    for event in events:
        state = evolve(state, event)
    return state


_HANDLERS: dict[type, object] = {}


def evolve(state: AgentState, event: ev.Event) -> AgentState:
    """The state after one event; an unknown event type is an error."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise TypeError(f"the node agent cannot fold {type(event).__name__}")
    return handler(state, event)


def _handles(event_type):
    def decorator(handler):
        _HANDLERS[event_type] = handler
        return handler
    return decorator


def _with_stream(state: AgentState, stream: str, pods: dict) -> AgentState:
    return replace(state, streams=MappingProxyType({**state.streams, stream: MappingProxyType(pods)}))


def _with_container(state: AgentState, name: str, container: Container | None) -> AgentState:
    containers = dict(state.containers)
    if container is None:
        containers.pop(name, None)
    else:
        containers[name] = container
    return replace(state, containers=MappingProxyType(containers))


def _update(state: AgentState, name: str, **changes) -> AgentState:
    container = state.containers.get(name)
    return state if container is None else _with_container(state, name, replace(container, **changes))


@_handles(ev.PodObserved)
def _observed(state: AgentState, event: ev.PodObserved) -> AgentState:
    return _with_stream(state, event.stream, {**state.streams[event.stream], event.pod.name: event.pod})


@_handles(ev.PodVanished)
def _vanished(state: AgentState, event: ev.PodVanished) -> AgentState:
    pods = dict(state.streams[event.stream])
    gone = pods.pop(event.name, None)
    state = _with_stream(state, event.stream, pods)
    return replace(state, bind_tried=state.bind_tried - {gone.uid}) if gone else state


@_handles(ev.StreamListed)
def _listed(state: AgentState, event: ev.StreamListed) -> AgentState:
    state = _with_stream(state, event.stream, {pod.name: pod for pod in event.pods})
    # Bind attempts are remembered while their pod is pending, no longer (kept small).
    tried = state.bind_tried & {pod.uid for pod in event.pods} if event.stream == PENDING else state.bind_tried
    return replace(state, listed=state.listed | {event.stream}, bind_tried=tried)


@_handles(ev.BindAttempted)
def _bind_attempted(state: AgentState, event: ev.BindAttempted) -> AgentState:
    return replace(state, bind_tried=state.bind_tried | {event.uid})


@_handles(ev.ContainerStarted)
def _started(state: AgentState, event: ev.ContainerStarted) -> AgentState:
    return _with_container(state, event.name, event.container)


@_handles(ev.ContainerExited)
def _exited(state: AgentState, event: ev.ContainerExited) -> AgentState:
    return _update(state, event.name, exited=True, exit_code=event.exit_code)


@_handles(ev.MemorySampled)
def _sampled(state: AgentState, event: ev.MemorySampled) -> AgentState:
    return _update(state, event.name, rss=event.rss)


@_handles(ev.SignalSent)
def _signalled(state: AgentState, event: ev.SignalSent) -> AgentState:
    container = state.containers.get(event.name)
    if container is None:
        return state
    if event.signal == "TERM":
        return _update(state, event.name, term_sent_at=container.term_sent_at or event.at)
    return _update(state, event.name, kill_sent=True, kill_reason=container.kill_reason or event.reason)


@_handles(ev.RunningReported)
def _running_reported(state: AgentState, event: ev.RunningReported) -> AgentState:
    return _update(state, event.name, running_reported=True)


@_handles(ev.FinalReported)
def _final_reported(state: AgentState, event: ev.FinalReported) -> AgentState:
    return _update(state, event.name, final_reported=True)


@_handles(ev.ContainerForgotten)
def _forgotten(state: AgentState, event: ev.ContainerForgotten) -> AgentState:
    return _with_container(state, event.name, None)
