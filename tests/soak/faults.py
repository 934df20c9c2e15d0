"""The fault injector: each kind of Tock process in turn (a seeded shuffle per round), kill -9'd
(and restarted), frozen briefly or frozen past its limit; after every round one backing service
(broker, PostgreSQL, Redis, kube-apiserver, in turn) is taken down and brought back.

Each kind has a limit a freeze is measured against: a runner's (and a Celery worker's, a node
agent's, and the other single services') is the task heartbeat timeout, a scheduler's and the
monitor's their group session timeout. A "freeze" stays under it (a frozen runner must not be
declared dead, a frozen scheduler keeps its partitions); a "long freeze" goes past it (the
runner's try is declared dead and, once thawed, the runner must not run user code again nor
report an outcome that counts; the scheduler is fenced and the other one takes over). Each kind
draws its actions from a seeded deck holding each action once, so every kind sees every action
within three of its turns; in its first deck the long freeze comes within the first two, so even
a three-minute soak (two or three turns per kind) freezes most kinds past their limit.

A freeze thaws on a timer while the faults go on, so a long freeze overlaps other faults instead
of stopping them; at the end the injector waits for the freezes still running to end. One
exception: a broker restart waits for the long freeze of a runner (or of a Celery worker, whose
runners freeze with it) to end. A broker outage is no evidence of death, so while the broker is
away the try of a runner frozen past the timeout is rightly not declared dead, and the freeze
would not test what it is meant to test.

The pauses here are the scenario's rhythm (how long a freeze or an outage lasts, how often a fault
comes), drawn from the seeded generator; nothing waits on a state by sleeping.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tests.soak.backing import HEARTBEAT_TIMEOUT, SESSION_TIMEOUT, Backing
from tests.soak.fleet import KINDS, Fleet

KILL, FREEZE, LONG_FREEZE, RESTART = "kill", "freeze", "long freeze", "restart"
ACTIONS = (KILL, FREEZE, LONG_FREEZE)
# Under the session timeout less two group heartbeats (services/scheduler/clients.py): the
# coordinator never misses one, so a briefly frozen scheduler or monitor keeps its partitions.
GROUP_HEARTBEAT = SESSION_TIMEOUT / 5
SESSION_KINDS = ("scheduler", "monitor")
SHORT_SECONDS = {kind: (1.0, SESSION_TIMEOUT - 2 * GROUP_HEARTBEAT - 0.5) for kind in SESSION_KINDS}
LONG_SECONDS = {kind: (2 * SESSION_TIMEOUT, HEARTBEAT_TIMEOUT + 10.0) for kind in SESSION_KINDS}
FREEZE_SECONDS = (2.0, 8.0)  # other kinds: well under the heartbeat timeout (20 s)
LONG_FREEZE_SECONDS = (HEARTBEAT_TIMEOUT + 5.0, HEARTBEAT_TIMEOUT + 15.0)  # past it, by more than a poll
OUTAGE_SECONDS = (1.0, 5.0)
PAUSE_SECONDS = (2.0, 6.0)  # between two faults
# A round is every process kind once with this many backing restarts among them, so even a
# three-minute soak restarts each of the four backing services about once.
BACKING_PER_ROUND = 2
RUNNER_WAIT_SECONDS = 20.0  # how long a runner's turn waits for a runner holding a try
RUNNER_KINDS = ("runner", "celery-worker")  # whose long freeze should end in a try declared dead


def freeze_seconds(kind: str, action: str) -> tuple[float, float]:
    """How long a freeze of this kind lasts: under its limit for FREEZE, past it for LONG_FREEZE."""
    if action == LONG_FREEZE:
        return LONG_SECONDS.get(kind, LONG_FREEZE_SECONDS)
    return SHORT_SECONDS.get(kind, FREEZE_SECONDS)


@dataclass(frozen=True)
class Fault:
    kind: str
    action: str  # KILL, FREEZE, LONG_FREEZE or RESTART (a backing service)
    target: str
    at: float
    seconds: float = 0.0  # how long it was (to be) frozen or down
    detail: str = ""  # e.g. "with its user code" for a runner frozen as a paused host would be

    @property
    def until(self) -> float:
        return self.at + self.seconds

    def __str__(self) -> str:
        length = f" for {self.seconds:.1f} s" if self.seconds else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{time.strftime('%H:%M:%S', time.localtime(self.at))} {self.action} {self.target}{length}{detail}"


@dataclass
class FaultInjector:
    fleet: Fleet
    backing: Backing
    rng: random.Random
    say: Callable[[str], None] = print
    done: list[Fault] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # kinds that had no live target on their turn
    decks: dict[str, list[str]] = field(default_factory=dict)  # per kind: the actions still to draw
    thaws: list[threading.Timer] = field(default_factory=list)
    runners_frozen_until: float = 0.0  # time.time() when the last long freeze of a runner ends

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
        """Inject faults until ``deadline`` (time.monotonic()); restarts whatever ended on its own;
        then waits for the freezes still running to end."""
        turns = self.turns()
        try:
            while time.monotonic() < deadline:
                for name in self.fleet.revive():
                    self.say(f"soak: {name} had ended on its own (exit {self.fleet.exits[-1].code}); restarted")
                fault = self.inject(next(turns))
                if fault is not None:
                    self.done.append(fault)
                    self.say(f"soak: fault {fault}")
                time.sleep(min(self.rng.uniform(*PAUSE_SECONDS), max(0.0, deadline - time.monotonic())))
        finally:
            self.finish()

    def finish(self) -> None:
        """Let every freeze run its course, then make sure nothing is left frozen."""
        for timer in self.thaws:
            timer.join()
        self.thaws.clear()
        self.fleet.thaw_all()

    def next_action(self, kind: str) -> str:
        first = kind not in self.decks
        deck = self.decks.setdefault(kind, [])
        if not deck:
            deck += ACTIONS
            self.rng.shuffle(deck)
            if first and deck.index(LONG_FREEZE) == 0:  # drawn from the end: last is never the first two
                deck[0], deck[1] = deck[1], deck[0]
        return deck.pop()

    def inject(self, kind: str) -> Fault | None:
        if kind in Backing.KINDS:
            return self._restart_backing(kind)
        targets = self._targets(kind)
        if not targets:
            self.skipped[kind] += 1
            return None
        target, action = self.rng.choice(targets), self.next_action(kind)
        at = time.time()
        if action == KILL:
            self.fleet.kill(target)
            return Fault(kind, KILL, target, at)
        seconds = self.rng.uniform(*freeze_seconds(kind, action))
        # A runner frozen long is frozen alone or with its user code (a hung runner, a paused host).
        with_children = kind == "runner" and action == LONG_FREEZE and self.rng.random() < 0.5
        pids = self.fleet.freeze(target, with_children=with_children)
        if kind in RUNNER_KINDS and action == LONG_FREEZE:
            self.runners_frozen_until = max(self.runners_frozen_until, at + seconds)
        timer = threading.Timer(seconds, self.fleet.thaw, args=(pids,))
        timer.daemon = True
        timer.start()
        self.thaws = [*[thaw for thaw in self.thaws if thaw.is_alive()], timer]
        return Fault(kind, action, target, at, seconds, "with its user code" if with_children else "")

    def _targets(self, kind: str) -> list[str]:
        """Live targets of the kind; a runner is waited for (a try between two tasks holds none)."""
        if kind != "runner":
            return self.fleet.targets(kind)
        deadline = time.monotonic() + RUNNER_WAIT_SECONDS
        while not (found := self.fleet.targets(kind)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found

    def backing_wait(self, kind: str, now: float) -> float:
        """Seconds a backing restart waits first: the broker's, until no runner is frozen long."""
        return max(0.0, self.runners_frozen_until - now) if kind == "broker" else 0.0

    def _restart_backing(self, kind: str) -> Fault:
        if (wait := self.backing_wait(kind, time.time())) > 0:
            self.say(f"soak: the {kind} restart waits {wait:.1f} s for a runner's long freeze to end")
            time.sleep(wait)
        seconds, at = self.rng.uniform(*OUTAGE_SECONDS), time.time()
        self.backing.stop(kind)
        try:
            time.sleep(seconds)
        finally:
            self.backing.start(kind)
        return Fault(kind, RESTART, kind, at, time.time() - at)

    def by_kind(self) -> dict[str, Counter]:
        """Faults injected per kind, per action."""
        counts: dict[str, Counter] = {}
        for fault in self.done:
            counts.setdefault(fault.kind, Counter())[fault.action] += 1
        return counts
