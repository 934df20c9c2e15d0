"""The soak's fault injector (tests/soak/faults.py): its limits and its choices, with stand-ins for
the fleet and the backing services (nothing is started or signalled here)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from tests.soak.backing import HEARTBEAT_TIMEOUT, SESSION_TIMEOUT
from tests.soak.faults import ACTIONS, FREEZE, KILL, LONG_FREEZE, FaultInjector, freeze_seconds
from tests.soak.fleet import KINDS


@dataclass
class FleetStandIn:
    """Targets by kind; records what was frozen (no process is signalled)."""

    frozen: list[str] = field(default_factory=list)

    def targets(self, kind: str) -> list[str]:
        return [f"{kind}-1"]

    def freeze(self, name: str, with_children: bool = False) -> list[int]:
        self.frozen.append(name)
        return []

    def thaw(self, pids: list[int]) -> None:
        pass

    def thaw_all(self) -> None:
        pass


@pytest.mark.parametrize("kind", KINDS)
def test_a_freeze_stays_under_its_kinds_limit_and_a_long_one_goes_past_it(kind):
    limit = SESSION_TIMEOUT if kind in ("scheduler", "monitor") else HEARTBEAT_TIMEOUT
    assert freeze_seconds(kind, FREEZE)[1] < limit < freeze_seconds(kind, LONG_FREEZE)[0]


@pytest.mark.parametrize("seed", range(50))
def test_every_kind_draws_each_action_once_per_deck_the_long_freeze_within_its_first_two(seed):
    injector = FaultInjector(FleetStandIn(), None, random.Random(seed))
    for kind in KINDS:
        drawn = [injector.next_action(kind) for _turn in range(6)]
        assert sorted(drawn[:3]) == sorted(drawn[3:]) == sorted(ACTIONS)
        assert LONG_FREEZE in drawn[:2]


def test_a_broker_restart_waits_for_a_runners_long_freeze_to_end():
    injector = FaultInjector(FleetStandIn(), None, random.Random(1))
    injector.decks = {"runner": [LONG_FREEZE], "node-agent": [LONG_FREEZE], "scheduler": [KILL]}
    fault = injector.inject("runner")
    try:
        assert fault is not None and fault.action == LONG_FREEZE
        assert injector.backing_wait("broker", fault.at) == pytest.approx(fault.seconds)
        assert injector.backing_wait("broker", fault.until + 1) == 0.0
        assert injector.backing_wait("redis", fault.at) == 0.0  # only the broker's outage hides a death
    finally:
        _cancel_thaws(injector)


def test_a_node_agents_long_freeze_holds_no_broker_restart_back():
    injector = FaultInjector(FleetStandIn(), None, random.Random(1))
    injector.decks = {"node-agent": [LONG_FREEZE]}
    fault = injector.inject("node-agent")
    try:
        assert fault is not None and injector.backing_wait("broker", fault.at) == 0.0
    finally:
        _cancel_thaws(injector)


def _cancel_thaws(injector: FaultInjector) -> None:
    """Nothing was frozen (stand-ins): drop the thaw timers rather than wait them out."""
    for timer in injector.thaws:
        timer.cancel()
