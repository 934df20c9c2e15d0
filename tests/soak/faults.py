"""The fault injector: each kind of Tock process in turn (a seeded shuffle per round), kill -9'd
(and restarted) or frozen (SIGSTOP, SIGCONT a few seconds later); after every round one backing
service (broker, PostgreSQL, Redis, kube-apiserver, in turn) is taken down and brought back.

The pauses here are the scenario's rhythm (how long a freeze or an outage lasts, how often a fault
comes), drawn from the seeded generator; nothing waits on a state by sleeping.
"""
from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tests.soak.backing import Backing
from tests.soak.fleet import KINDS, Fleet

FREEZE_SECONDS = (2.0, 8.0)  # below the heartbeat timeout (20 s): a frozen runner must not die of it
OUTAGE_SECONDS = (1.0, 5.0)
PAUSE_SECONDS = (2.0, 6.0)  # between two faults
# A round is every process kind once with this many backing restarts among them, so even a
# three-minute soak restarts each of the four backing services about once.
BACKING_PER_ROUND = 2
RUNNER_WAIT_SECONDS = 20.0  # how long a runner's turn waits for a runner holding a try


@dataclass(frozen=True)
class Fault:
    kind: str
    action: str  # "kill", "freeze" or "restart" (a backing service)
    target: str
    at: float
    seconds: float = 0.0  # how long it was frozen or down

    def __str__(self) -> str:
        length = f" for {self.seconds:.1f} s" if self.seconds else ""
        return f"{time.strftime('%H:%M:%S', time.localtime(self.at))} {self.action} {self.target}{length}"


@dataclass
class FaultInjector:
    fleet: Fleet
    backing: Backing
    rng: random.Random
    say: Callable[[str], None] = print
    done: list[Fault] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # kinds that had no live target on their turn

    def turns(self) -> Iterator[str]:
        """Every process kind once per round, in a seeded order, with BACKING_PER_ROUND backing
        services (in turn) at seeded places among them."""
        backing = list(Backing.KINDS)
        self.rng.shuffle(backing)
        restarts = 0
        while True:
            kinds = list(KINDS)
            self.rng.shuffle(kinds)
            for _restart in range(BACKING_PER_ROUND):
                kinds.insert(self.rng.randrange(1, len(kinds) + 1), backing[restarts % len(backing)])
                restarts += 1
            yield from kinds

    def run_until(self, deadline: float) -> None:
        """Inject faults until ``deadline`` (time.monotonic()); restarts whatever ended on its own."""
        turns = self.turns()
        while time.monotonic() < deadline:
            for name in self.fleet.revive():
                self.say(f"soak: {name} had ended on its own (exit {self.fleet.exits[-1].code}); restarted")
            fault = self.inject(next(turns))
            if fault is not None:
                self.done.append(fault)
                self.say(f"soak: fault {fault}")
            time.sleep(min(self.rng.uniform(*PAUSE_SECONDS), max(0.0, deadline - time.monotonic())))

    def inject(self, kind: str) -> Fault | None:
        if kind in Backing.KINDS:
            return self._restart_backing(kind)
        targets = self._targets(kind)
        if not targets:
            self.skipped[kind] += 1
            return None
        target = self.rng.choice(targets)
        at = time.time()
        if self.rng.random() < 0.5:
            self.fleet.kill(target)
            return Fault(kind, "kill", target, at)
        seconds = self.rng.uniform(*FREEZE_SECONDS)
        pids = self.fleet.freeze(target)
        try:
            time.sleep(seconds)
        finally:
            self.fleet.thaw(pids)
        return Fault(kind, "freeze", target, at, seconds)

    def _targets(self, kind: str) -> list[str]:
        """Live targets of the kind; a runner is waited for (a try between two tasks holds none)."""
        if kind != "runner":
            return self.fleet.targets(kind)
        deadline = time.monotonic() + RUNNER_WAIT_SECONDS
        while not (found := self.fleet.targets(kind)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found

    def _restart_backing(self, kind: str) -> Fault:
        seconds, at = self.rng.uniform(*OUTAGE_SECONDS), time.time()
        self.backing.stop(kind)
        try:
            time.sleep(seconds)
        finally:
            self.backing.start(kind)
        return Fault(kind, "restart", kind, at, time.time() - at)

    def by_kind(self) -> dict[str, Counter]:
        """Faults injected per kind, per action."""
        counts: dict[str, Counter] = {}
        for fault in self.done:
            counts.setdefault(fault.kind, Counter())[fault.action] += 1
        return counts
