"""The node agent's pure core: quantities, the fold of its pods, what it decides, status bodies."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.node_agent.core import events as ev
from services.node_agent.core.decide import (
    BindPod,
    FinalizePod,
    ForgetContainer,
    Outcome,
    Policy,
    ReportFinal,
    ReportRunning,
    SignalContainer,
    StartContainer,
    bindable,
    decide,
    outcome_of,
)
from services.node_agent.core.evolve import evolve, fold
from services.node_agent.core.model import OWN, PENDING, AgentState, Container, ContainerSpec, PodView
from services.node_agent.core.quantity import QuantityError, memory_bytes, parse_quantity
from services.node_agent.core.status import final_status, lease_body, running_status

NODE = "n1"
POLICY = Policy(NODE, grace_cap_seconds=10)
LISTED = fold(AgentState(), [ev.StreamListed(OWN, ()), ev.StreamListed(PENDING, ())])


def pod(name="p", uid="u1", **changes) -> PodView:
    return replace(PodView(name=name, uid=uid, node_name=NODE, container=ContainerSpec("main", "img", ("true",))),
                   **changes)


def container(uid="u1", **changes) -> Container:
    return replace(Container(uid=uid, pid=100, started_at="2026-01-01T00:00:00Z"), **changes)


def with_pod(view: PodView, running: Container | None = None, state: AgentState = LISTED) -> AgentState:
    events = [ev.PodObserved(OWN, view)] + ([ev.ContainerStarted(view.name, running)] if running else [])
    return fold(state, events)


@pytest.mark.parametrize("text, value", [
    ("64Mi", 64 * 2**20), ("1G", 10**9), ("1Gi", 2**30), ("1.5Gi", 3 * 2**29), ("128974848", 128974848),
    ("129e6", 129 * 10**6), ("123Ki", 123 * 1024), ("1k", 1000), ("0.5", 1), ("1E", 10**18), ("2Ei", 2 * 2**60),
])
def test_memory_quantities_in_bytes(text, value):
    assert memory_bytes(text) == value


def test_milli_quantities_are_exact():
    assert parse_quantity("500m") == Decimal("0.5")


@pytest.mark.parametrize("text", ["", "Mi", "64MiB", "64 Mi", "1.2.3", "12x", "--1"])
def test_what_is_not_a_quantity_is_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("changes, outcome", [
    ({"exit_code": 0}, Outcome("Succeeded", "Completed", 0)),
    ({"exit_code": 3}, Outcome("Failed", "Error", 3)),
    ({"exit_code": 143}, Outcome("Failed", "Error", 143)),
    ({"exit_code": 137, "kill_reason": "OOMKilled"}, Outcome("Failed", "OOMKilled", 137)),
    ({"exit_code": 0, "kill_reason": "OOMKilled"}, Outcome("Failed", "OOMKilled", 137)),
    ({"exit_code": None}, Outcome("Failed", "ContainerStatusUnknown", 137)),
])
def test_how_an_exit_becomes_a_pod_outcome(changes, outcome):
    assert outcome_of(container(exited=True, **changes)) == outcome


@pytest.mark.parametrize("changes, ok", [
    ({}, True), ({"pinned_host": NODE}, True), ({"pinned_host": "n2"}, False), ({"node_name": "n2"}, False),
    ({"deleting": True}, False), ({"phase": "Failed"}, False),
])
def test_which_pending_pods_this_node_binds(changes, ok):
    assert bindable(pod(**({"node_name": ""} | changes)), NODE) is ok


def test_a_pending_pod_is_bound_once_per_uid():
    state = fold(LISTED, [ev.PodObserved(PENDING, pod(node_name=""))])
    assert decide(state, POLICY, 0) == [BindPod(pod(node_name=""))]
    assert decide(evolve(state, ev.BindAttempted("u1")), POLICY, 0) == []


def test_bind_attempts_are_forgotten_once_their_pod_is_no_longer_pending():
    state = fold(LISTED, [ev.PodObserved(PENDING, pod(node_name="")), ev.BindAttempted("u1"),
                          ev.PodObserved(PENDING, pod(name="q", uid="u2", node_name="")), ev.BindAttempted("u2")])
    assert evolve(state, ev.PodVanished(PENDING, "p")).bind_tried == {"u2"}
    assert evolve(state, ev.StreamListed(PENDING, ())).bind_tried == frozenset()


def test_a_pod_bound_here_starts_then_is_reported_running():
    state = with_pod(pod())
    assert decide(state, POLICY, 0) == [StartContainer(pod())]
    state = evolve(state, ev.ContainerStarted("p", container()))
    assert decide(state, POLICY, 0) == [ReportRunning(pod(), container())]
    assert decide(evolve(state, ev.RunningReported("p")), POLICY, 0) == []


def test_an_exit_is_reported_once_after_running():
    state = fold(with_pod(pod(), container()), [ev.ContainerExited("p", 0)])
    assert [type(action) for action in decide(state, POLICY, 0)] == [ReportRunning]
    state = evolve(state, ev.RunningReported("p"))
    assert decide(state, POLICY, 0) == [ReportFinal(pod(), state.containers["p"], Outcome("Succeeded", "Completed", 0))]
    assert decide(evolve(state, ev.FinalReported("p")), POLICY, 0) == []


def test_over_the_memory_limit_the_group_is_killed_once():
    limited = pod(container=ContainerSpec("main", "img", ("hog",), memory_limit=64 * 2**20))
    state = fold(with_pod(limited, container(running_reported=True)), [ev.MemorySampled("p", 64 * 2**20)])
    assert decide(state, POLICY, 0) == []
    state = evolve(state, ev.MemorySampled("p", 64 * 2**20 + 1))
    assert decide(state, POLICY, 0) == [SignalContainer("p", "KILL", "OOMKilled")]
    state = fold(state, [ev.SignalSent("p", "KILL", 1.0, "OOMKilled")])
    assert decide(state, POLICY, 0) == []
    state = fold(state, [ev.ContainerExited("p", 137)])
    assert decide(state, POLICY, 0)[0].outcome == Outcome("Failed", "OOMKilled", 137)


def test_a_deleted_pod_gets_sigterm_then_sigkill_after_its_grace_capped():
    state = with_pod(pod(deleting=True, grace_seconds=60), container(running_reported=True))
    assert decide(state, POLICY, 5.0) == [SignalContainer("p", "TERM")]
    state = evolve(state, ev.SignalSent("p", "TERM", 5.0))
    assert decide(state, POLICY, 14.9) == []
    assert decide(state, POLICY, 15.0) == [SignalContainer("p", "KILL")]


def test_a_deleted_pod_that_ended_is_reported_then_deleted_for_good():
    state = with_pod(pod(deleting=True), container(running_reported=True, exited=True, exit_code=143))
    assert [type(action) for action in decide(state, POLICY, 0)] == [ReportFinal]
    assert decide(evolve(state, ev.FinalReported("p")), POLICY, 0) == [FinalizePod(pod(deleting=True))]


def test_a_deleted_pod_never_started_is_deleted_for_good():
    assert decide(with_pod(pod(deleting=True)), POLICY, 0) == [FinalizePod(pod(deleting=True))]


def test_a_pod_running_without_a_trace_here_is_reported_unknown_not_started_again():
    (action,) = decide(with_pod(pod(phase="Running")), POLICY, 0)
    assert action == ReportFinal(pod(phase="Running"), None, Outcome("Failed", "ContainerStatusUnknown", 137))


def test_a_container_whose_pod_is_gone_is_killed_then_forgotten():
    state = fold(LISTED, [ev.ContainerStarted("p", container())])
    assert decide(state, POLICY, 0) == [SignalContainer("p", "KILL")]
    state = fold(state, [ev.SignalSent("p", "KILL", 0), ev.ContainerExited("p", 137)])
    assert decide(state, POLICY, 0) == [ForgetContainer("p")]


def test_no_verdict_on_found_containers_before_the_own_stream_listed():
    state = fold(AgentState(), [ev.ContainerStarted("p", container())])
    assert decide(state, POLICY, 0) == []


def test_a_namesake_pod_waits_for_the_old_container_to_go():
    state = with_pod(pod(uid="u2"), container(uid="u1", exited=True, exit_code=0))
    assert decide(state, POLICY, 0) == [ForgetContainer("p")]
    assert decide(evolve(state, ev.ContainerForgotten("p")), POLICY, 0) == [StartContainer(pod(uid="u2"))]


def test_a_relist_drops_pods_deleted_meanwhile():
    state = with_pod(pod(name="a"))
    state = evolve(state, ev.StreamListed(OWN, (pod(name="b"),)))
    assert set(state.streams[OWN]) == {"b"}


def test_an_unknown_event_is_an_error():
    with pytest.raises(TypeError, match="cannot fold"):
        evolve(AgentState(), object())


EVENTS = st.lists(st.one_of(
    st.builds(ev.PodObserved, st.sampled_from([OWN, PENDING]),
              st.builds(pod, name=st.sampled_from("abc"), phase=st.sampled_from(["Pending", "Running", "Failed"]))),
    st.builds(ev.PodVanished, st.sampled_from([OWN, PENDING]), st.sampled_from("abc")),
    st.builds(ev.ContainerStarted, st.sampled_from("abc"), st.builds(container)),
    st.builds(ev.ContainerExited, st.sampled_from("abc"), st.one_of(st.none(), st.integers(0, 255))),
    st.builds(ev.MemorySampled, st.sampled_from("abc"), st.integers(0, 2**30)),
    st.builds(ev.SignalSent, st.sampled_from("abc"), st.sampled_from(["TERM", "KILL"]), st.floats(0, 100)),
    st.builds(ev.RunningReported, st.sampled_from("abc")),
    st.builds(ev.ContainerForgotten, st.sampled_from("abc")),
), max_size=30)


@given(EVENTS, st.integers(0, 30))
def test_folding_in_pieces_equals_folding_at_once(events, cut):
    assert fold(fold(LISTED, events[:cut]), events[cut:]) == fold(LISTED, events)


@given(EVENTS)
def test_decide_never_acts_twice_on_one_pod_in_a_tick(events):
    actions = decide(fold(LISTED, events), POLICY, 50.0)
    names = [getattr(action, "name", None) or action.pod.name for action in actions if not isinstance(action, BindPod)]
    assert len(names) == len(set(names))


def test_the_running_status_names_the_start_and_addresses():
    body = running_status(pod(), container(), "2026-01-01T00:00:01Z")["status"]
    assert body["phase"] == "Running" and body["podIP"] == "127.0.0.1" == body["podIPs"][0]["ip"]
    assert body["containerStatuses"][0]["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert body["containerStatuses"][0]["ready"] is True


def test_the_final_status_clears_the_running_state():
    body = final_status(pod(), container(), Outcome("Failed", "OOMKilled", 137), "2026-01-01T00:00:09Z")["status"]
    state = body["containerStatuses"][0]["state"]
    assert body["phase"] == "Failed" and state["running"] is None
    assert state["terminated"] == {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-01-01T00:00:00Z",
                                   "finishedAt": "2026-01-01T00:00:09Z"}


def test_the_lease_names_its_holder():
    assert lease_body(NODE, 40, "t")["spec"] == {"holderIdentity": NODE, "leaseDurationSeconds": 40, "renewTime": "t"}
