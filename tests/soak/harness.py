"""The soak from start to report: private backing services, every Tock service, the load and the
fault injector for the set time; then the drain (load stopped, every fault undone, one last run of
each DAG, every run ended, with a deadline), the services stopped, and the checks over the log and
the marker files."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.log import replay
from schemas import DAGS, EVENTS, HEARTBEATS, DagParsed, TaskHeartbeat
from tests.scenarios.scheduler_support import wait_until, wait_until_published
from tests.soak import checks, outcomes, tallies
from tests.soak.backing import HEARTBEAT_TIMEOUT, Backing, tock
from tests.soak.dags import read_markers, write_dags
from tests.soak.evidence import write_evidence
from tests.soak.faults import LONG_FREEZE, Fault, FaultInjector
from tests.soak.fleet import Fleet
from tests.soak.load import Load, Recorder

DRAIN_SECONDS = 300.0
PROJECTOR_SECONDS = 120.0
OF_NOTE = {"TaskDeclaredDead", "TaskRetryScheduled", "TaskAdopted", "DeadlineMissed", "DagRunReopened", "TaskFailed",
           "PodFinished", "TaskKilled", "CommandRejected", "DagRunFinished"}


@dataclass
class SoakResult:
    minutes: float
    seed: int
    root: Path
    faults: dict = field(default_factory=dict)  # kind -> Counter of actions
    done: list[Fault] = field(default_factory=list)  # every fault, in order
    skipped: dict = field(default_factory=dict)
    runs: int = 0
    tries: int = 0
    markers: int = 0
    load: dict = field(default_factory=dict)
    exits: list[checks.Exit] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)  # trigger request ids the CLI confirmed
    counts: dict[str, int] = field(default_factory=dict)  # events of note in the log, by type
    rows: list[dict] = field(default_factory=list)  # the runs table after the drain
    frozen_runners: dict[str, int] = field(default_factory=dict)  # checks.frozen_runners
    takeovers: dict[str, int] = field(default_factory=dict)  # checks.takeovers
    notes: list[str] = field(default_factory=list)
    violations: list[checks.Violation] = field(default_factory=list)

    def report(self) -> str:
        """The summary: minutes, faults by kind and action, runs, tries, violations by check, self-exits."""
        return "\n".join([*self._head(), *self._faults(), *self._body(), *self._exits(), *self._violations()])

    def _head(self) -> list[str]:
        return [f"soak: {self.minutes:.1f} minutes of faults, seed {self.seed} (SOAK_SEED={self.seed} repeats the "
                f"choices), files under {self.root}"]

    def _faults(self) -> list[str]:
        actions = sum((Counter(counts) for counts in self.faults.values()), Counter())
        lines = [f"faults injected: {sum(actions.values())} (" + _counted(actions) + ")"]
        lines += [f"  {kind}: {_counted(counts)}" for kind, counts in sorted(self.faults.items())]
        if self.skipped:
            lines.append(f"  turns without a live target: {_counted(self.skipped)}")
        if self.frozen_runners:
            tally = Counter(self.frozen_runners)
            lines.append(f"  runners frozen past the heartbeat timeout held {tally['tries']} tries: "
                         f"{tally['declared dead']} declared dead, {tally['ended otherwise']} ended otherwise, "
                         f"{tally['not ended']} not ended; {tally['late outcomes']} late outcomes after a death "
                         "(recorded, must not count)")
        if self.takeovers:
            tally = Counter(self.takeovers)
            lines.append(f"  schedulers frozen past the session timeout while owning partitions: {tally['frozen']}, "
                         f"taken over by the other during the freeze: {tally['taken over']}")
        return lines

    def _body(self) -> list[str]:
        return [f"runs: {self.runs}, tries: {self.tries}, user-code starts (markers): {self.markers}",
                "in the log: " + _counted(self.counts),
                "load: " + _counted(self.load),
                *[f"note: {note}" for note in self.notes]]

    def _exits(self) -> list[str]:
        by_kind = Counter(exit.kind for exit in self.exits)
        lines = ["self-exits: " + (", ".join(f"{kind} ×{count}" for kind, count in sorted(by_kind.items()))
                                   or "none")]
        lines += [f"  ended on its own: {exit.kind} {exit.name} (exit {exit.code}) at "
                  f"{time.strftime('%H:%M:%S', time.localtime(exit.at))}" for exit in self.exits]
        return lines

    def _violations(self) -> list[str]:
        by_check = Counter(violation.check for violation in self.violations)
        lines = [f"violations: {len(self.violations)}" + (f" ({_counted(by_check)})" if by_check else "")]
        return lines + [f"  {violation}" for violation in self.violations]


def _counted(counts) -> str:
    """"a 2, b 1" of a mapping of counts, by name."""
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "none"


def run_soak(minutes: float, seed: int, root: Path, say: Callable[[str], None] = print) -> SoakResult:
    """Run the whole soak under ``root``; never raises for a violation (they are in the result)."""
    root.mkdir(parents=True, exist_ok=True)
    say(f"soak: seed {seed}, {minutes:g} minutes, under {root}")
    result = SoakResult(minutes, seed, root)
    backing = Backing(root)
    settings = backing.settings
    recorder: Recorder | None = None
    fleet: Fleet | None = None
    try:
        backing.start_all()
        dag_ids = write_dags(settings.resolved_dags_folder, root / "marks")
        recorder = Recorder(settings)
        recorder.start()
        fleet = Fleet(settings, root, recorder.busy_runners)
        fleet.start_all()
        for dag_id in dag_ids:
            wait_until_published(settings, dag_id, timeout=120)
        say("soak: every service is up and every DAG published; load and faults start")
        _soak(settings, backing, fleet, recorder, dag_ids, result, seed, minutes, say)
    finally:
        if fleet is not None:
            fleet.close()
        if recorder is not None:
            recorder.stop()
    try:
        _check(settings, recorder, result, say)
    finally:
        result.notes += backing.stop_all()
    return result


def _soak(settings, backing: Backing, fleet: Fleet, recorder: Recorder, dag_ids: list[str], result: SoakResult,
          seed: int, minutes: float, say: Callable[[str], None]) -> None:
    load = Load(settings, recorder, dag_ids, random.Random(seed + 1))
    injector = FaultInjector(fleet, backing, random.Random(seed), say)
    load.start()
    try:
        injector.run_until(time.monotonic() + minutes * 60)
    finally:
        fleet.thaw_all()
        load.stop()
        result.faults, result.skipped, result.done = injector.by_kind(), dict(injector.skipped), list(injector.done)
    fleet.revive()
    say("soak: faults stopped; last runs triggered, draining")
    load.final_triggers()
    result.load = dict(load.outcomes)
    started = time.monotonic()
    drained = _drain(recorder, load.acknowledged, fleet)
    say(f"soak: drained in {time.monotonic() - started:.0f} s" if drained else "soak: did not drain")
    if not drained:
        result.notes.append(f"the load did not drain within {DRAIN_SECONDS:g} s (see the run violations)")
    result.rows = _caught_up_rows(settings, recorder, fleet)
    result.exits = list(fleet.exits)
    if recorder.errors:
        result.notes.append(f"the recorder met {len(recorder.errors)} read error(s), first: {recorder.errors[0]}")
    result.acknowledged = set(load.acknowledged)


def _drain(recorder: Recorder, acknowledged: set[str], fleet: Fleet) -> bool:
    """Wait until every triggered run ended (the services still running, restarted if one ends)."""
    def drained() -> bool:
        fleet.revive()
        events = recorder.events()
        return not checks.runs_not_ended(events) and not checks.triggers_lost(acknowledged, events)

    try:
        wait_until(drained, DRAIN_SECONDS, "every triggered run to end", interval=2.0)
    except AssertionError:
        return False
    return True


def _caught_up_rows(settings, recorder: Recorder, fleet: Fleet) -> list[dict]:
    """The runs table (`tock runs list --json`) once it shows every run the log ended, or as it
    stands after PROJECTOR_SECONDS (the check then names what it lacks)."""
    rows: list[dict] = []

    def caught_up() -> bool:
        fleet.revive()
        listed = tock(settings, "runs", "list", "--json", "--limit", "100000", timeout=60)
        if listed.returncode == 0:
            rows[:] = json.loads(listed.stdout)
        return listed.returncode == 0 and not checks.projections_behind(recorder.events(), rows)

    try:
        wait_until(caught_up, PROJECTOR_SECONDS, "the projector to catch up", interval=3.0)
    except AssertionError:
        pass
    return rows


def _check(settings, recorder: Recorder | None, result: SoakResult, say: Callable[[str], None]) -> None:
    """Every check over the log (read again from the start), the heartbeats the recorder caught and
    the markers; the projections verified by `tock projections rebuild --verify`."""
    say("soak: services stopped; checking")
    verify = tock(settings, "projections", "rebuild", "--verify", timeout=600)
    events = [record.event for record in replay(settings, EVENTS, client_id="soak-check") if record.event is not None]
    caught = recorder.heartbeat_records() if recorder else []
    beats = {(record.partition, record.offset): record.event
             for record in [*caught, *replay(settings, HEARTBEATS, client_id="soak-check")]
             if isinstance(record.event, TaskHeartbeat)}
    markers = read_markers(result.root / "marks")
    upstream = _upstream(settings)
    result.runs, result.tries = checks.runs_and_tries(events)
    result.markers = len(markers)
    result.notes.append("projections: " + (verify.stdout.strip().splitlines() or ["(no output)"])[-1])
    result.counts = dict(Counter(type(event).__name__ for event in events if type(event).__name__ in OF_NOTE))
    result.frozen_runners = dict(tallies.frozen_runners(events, _runner_freezes(result.done)))
    result.takeovers = dict(tallies.takeovers(recorder.scheduler_heartbeats() if recorder else [],
                                             [(fault.target, fault.at, fault.until) for fault in result.done
                                              if fault.kind == "scheduler" and fault.action == LONG_FREEZE]))
    result.violations = [
        *checks.runs_not_ended(events),
        *checks.triggers_lost(result.acknowledged, events),
        *checks.tries_run_twice(markers),
        *checks.deaths_while_heartbeating(events, beats.values(), HEARTBEAT_TIMEOUT),
        *outcomes.launched_but_never_queued(events),
        *outcomes.successes_that_did_not_count(events, upstream),
        *outcomes.late_successes_in_tables(events, _instances_of_late_runs(settings, events)),
        *checks.projections_disagree(verify.returncode, verify.stdout + verify.stderr),
        *checks.projections_behind(events, result.rows),
        *checks.deadlines_missed_twice(events),
        *checks.ended_on_their_own(result.exits),
    ]
    evidence = write_evidence(settings, result.root, result.violations)
    if evidence is not None:
        result.notes.append(f"the history of each run named in a violation (aborted records marked): {evidence}")


def _upstream(settings) -> dict[str, dict[str, list[str]]]:
    """Each DAG's tasks and what each waits for, from its latest DagParsed in tock.dags."""
    latest = {record.event.dag_id: record.event for record in replay(settings, DAGS, client_id="soak-check")
              if isinstance(record.event, DagParsed)}
    return {dag_id: {task.task_id: list(task.upstream) for task in parsed.definition.tasks}
            for dag_id, parsed in latest.items()}


def _runner_freezes(done: list[Fault]) -> list[tuple[int, float, float]]:
    return [(int(fault.target.rsplit(":", 1)[1]), fault.at, fault.until) for fault in done
            if fault.kind == "runner" and fault.action == LONG_FREEZE]


def _instances_of_late_runs(settings, events: list[object]) -> list[dict]:
    """The task instance rows (`tock tasks list --json`) of every run where a try reported after its
    outcome that counts (few runs: the tables are read only where a late success could show)."""
    rows: list[dict] = []
    for dag_id, run_id in sorted({(event.dag_id, event.run_id) for event in outcomes.late_outcomes(events)}):
        listed = tock(settings, "tasks", "list", dag_id, run_id, "--json", timeout=60)
        if listed.returncode == 0:
            rows += [{"dag_id": dag_id, "run_id": run_id, **row} for row in json.loads(listed.stdout)]
    return rows
