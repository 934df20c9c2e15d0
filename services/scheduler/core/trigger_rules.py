"""What a task instance's upstream states decide: run it, wait, skip it, or give up on it.

Airflow's trigger rules as its trigger-rule dependency reads them (the names and the outcomes of
every rule, including that most rules decide a skip or an upstream failure as soon as one upstream
makes it certain). A task with no upstream always may run. Upstreams removed from the DAG files
count for nothing. Before the rule, two things may decide for it: a branch or short circuit upstream
that did not choose it (``chosen``), and the setups it runs within that are not its direct upstreams
(they must all succeed first, as Airflow's setup constraint says; its rule may still skip it or
give it up meanwhile, and the rule ``always`` is not held by them).

Pure: states in, a ``Verdict`` out; the caller writes the events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from schemas.dags import TRIGGER_RULES
from services.scheduler.core.model import (
    ENDED,
    FAILED,
    REMOVED,
    SKIPPED,
    SUCCESS,
    UPSTREAM_FAILED,
    Alike,
    DagEntry,
    DagRun,
)

RUN, WAIT, SKIP, GIVE_UP = "run", "wait", "skip", "upstream_failed"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the upstream states decide; for a skip or an upstream failure, why (``reason``), by which
    rule, the states read, and the branch or short circuit that chose (``chosen_by``)."""

    outcome: str
    reason: str = ""
    rule: str = ""
    states: Mapping[str, str] = field(default_factory=dict)
    chosen_by: str = ""


WAITING = Verdict(WAIT)
RUNNABLE = Verdict(RUN)


@dataclass(frozen=True, slots=True)
class Counts:
    """How many upstreams are in each state (the setups among them counted apart too)."""

    upstream: int
    success: int
    skipped: int
    failed: int
    upstream_failed: int
    done: int
    setups: int
    setup_success: int
    setup_skipped: int

    @staticmethod
    def of(states: Mapping[str, str], setups: frozenset[str]) -> Counts:
        values = list(states.values())
        setup_states = [state for task_id, state in states.items() if task_id in setups]
        return Counts(len(values), values.count(SUCCESS), values.count(SKIPPED), values.count(FAILED),
                      values.count(UPSTREAM_FAILED), sum(state in ENDED for state in values),
                      len(setup_states), setup_states.count(SUCCESS), setup_states.count(SKIPPED))


def judge(task_id: str, dag: DagEntry, run: DagRun, view: Mapping[str, str],
          mapped: Mapping[str, Mapping[str, str]] | None = None) -> Verdict:
    """The verdict on ``task_id`` in ``run``: ``view`` holds the states of the tasks decided before it
    in this walk (every upstream of it, the topological order sees to it); ``mapped`` the states of each
    expanded mapped task's instances (``task[i]`` -> state), each counted as an upstream (Airflow's).
    As Airflow's: the setups it runs within skip it or give it up first; while they have not all
    succeeded its own rule may still skip it or give it up, but not run it; the rule ``always`` is not
    held by them."""
    task = dag.tasks[task_id]
    chosen = _not_chosen(task_id, dag, run, view)
    if chosen is not None:
        return chosen
    held = RUNNABLE
    if task.setups and task.trigger_rule != "always":
        held = _setups_verdict({setup: view[setup] for setup in task.setups if setup in view})
        if held.outcome in (SKIP, GIVE_UP):
            return held
    states = _upstream_states(task.upstream, view, mapped or {})
    setups = frozenset(up for up in states if up in dag.tasks and dag.tasks[up].is_setup)
    verdict = by_rule(task.trigger_rule, states, setups) if states else RUNNABLE
    return held if verdict is RUNNABLE else verdict


def judged_alike(task_id: str, dag: DagEntry, run: DagRun, view: Mapping[str, str],
                 mapped: Mapping[str, Mapping[str, str]], verdicts: dict[Alike, Verdict | None]) -> Verdict:
    """``judge(task_id, dag, run, view, mapped)``, read from ``verdicts`` when a task of the same rule
    and upstreams was judged before in this walk (a fan-out's thousands of leaves are judged once). Only
    a task whose verdict depends on nothing but those is shared (``DagEntry.alike``: no setups, no short
    circuit above it), once no upstream chose (a branch's choice names its downstream) and every upstream
    is decided (the walk's states of those do not change after; tasks alike have the same upstreams, so
    this holds for each once it held for the first)."""
    key = dag.alike.get(task_id)
    if key is None:
        return judge(task_id, dag, run, view, mapped)
    if key not in verdicts:
        upstream = dag.tasks[task_id].upstream
        if any(up in dag.tasks and up not in view for up in upstream):
            return judge(task_id, dag, run, view, mapped)
        unchosen = all(_followed(run, up, view) is None for up in upstream)
        verdicts[key] = judge(task_id, dag, run, view, mapped) if unchosen else None
    shared = verdicts[key]
    return shared if shared is not None else judge(task_id, dag, run, view, mapped)


def _upstream_states(upstream: list[str], view: Mapping[str, str],
                     mapped: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    states: dict[str, str] = {}
    for up in upstream:
        if mapped.get(up):
            states.update(mapped[up])
        elif up in view and view[up] != REMOVED:
            states[up] = view[up]
    return states


def by_rule(rule: str, states: Mapping[str, str], setups: frozenset[str] = frozenset()) -> Verdict:
    """The verdict of ``rule`` on upstream ``states`` (task id -> state), ``setups`` the setup tasks among them."""
    counts = Counts.of(states, setups)
    outcome, why = _RULES[rule](counts)
    if why is None:
        return RUNNABLE if outcome == RUN else WAITING
    return Verdict(outcome, f"trigger rule {rule}: {why(states)}", rule, dict(states))


# -- choices and setups ------------------------------------------------------------------------

def _not_chosen(task_id: str, dag: DagEntry, run: DagRun, view: Mapping[str, str]) -> Verdict | None:
    """A skip because a branch or short circuit upstream chose against this task, else None. A short
    circuit never skips a teardown (Airflow's: its teardown is judged by its own rule)."""
    teardown = dag.tasks[task_id].is_teardown
    for up in dag.tasks[task_id].upstream:
        followed = _followed(run, up, view)
        if followed is None or task_id in followed or (teardown and dag.tasks[up].chooses == "short_circuit"):
            continue
        kind = dag.tasks[up].chooses.replace("_", " ")
        said = f"followed {', '.join(followed)}" if followed else "followed none of its downstream tasks"
        return Verdict(SKIP, f"{kind} {up} {said}", states={up: SUCCESS}, chosen_by=up)
    if teardown:
        return None
    for short_circuit in dag.short_circuits.get(task_id, ()):
        if _followed(run, short_circuit, view) == []:
            return Verdict(SKIP, f"short circuit {short_circuit} upstream was false: everything downstream of "
                                 "it is skipped", states={short_circuit: SUCCESS}, chosen_by=short_circuit)
    return None


def _followed(run: DagRun, task_id: str, view: Mapping[str, str]) -> list[str] | None:
    """What a succeeded choosing task chose (its try's ``follow``), None when it chose nothing."""
    instance = run.tasks.get(task_id)
    if view.get(task_id) != SUCCESS or instance is None or not instance.follow_json:
        return None
    chosen: list[str] = json.loads(instance.follow_json)
    return chosen


def _setups_verdict(states: Mapping[str, str]) -> Verdict:
    """The setups a task runs within, not its direct upstreams: one failed gives it up, one skipped
    skips it, and it waits for all of them to succeed."""
    failed = _named(states, FAILED, UPSTREAM_FAILED)
    if failed:
        return Verdict(GIVE_UP, f"its setup {failed} did not succeed", "setup", dict(states))
    skipped = _named(states, SKIPPED)
    if skipped:
        return Verdict(SKIP, f"its setup {skipped} was skipped", "setup", dict(states))
    return RUNNABLE if all(state == SUCCESS for state in states.values()) else WAITING


# -- the rules -----------------------------------------------------------------------------------

Why: TypeAlias = Callable[[Mapping[str, str]], str]
"""Says in words why a rule skipped or gave up, from the upstream states it read."""
Ruled: TypeAlias = tuple[str, Why | None]


def _named(states: Mapping[str, str], *wanted: str) -> str:
    return ", ".join(sorted(task_id for task_id, state in states.items() if state in wanted))


def _others(states: Mapping[str, str], *unwanted: str) -> str:
    return ", ".join(sorted(task_id for task_id, state in states.items() if state not in unwanted))


def _failed(states: Mapping[str, str]) -> str:
    return f"upstream {_named(states, FAILED, UPSTREAM_FAILED)} failed"


def _skipped(states: Mapping[str, str]) -> str:
    return f"upstream {_named(states, SKIPPED)} was skipped"


def _every_skipped(states: Mapping[str, str]) -> str:
    return f"every upstream was skipped ({_named(states, SKIPPED)})"


def _none_succeeded(states: Mapping[str, str]) -> str:
    return f"every upstream ended and none succeeded ({_others(states)})"


def _run_when(ready: bool) -> Ruled:
    return (RUN if ready else WAIT), None


def _all_success(c: Counts) -> Ruled:
    if c.failed or c.upstream_failed:
        return GIVE_UP, _failed
    if c.skipped:
        return SKIP, _skipped
    return _run_when(c.success == c.upstream)


def _all_failed(c: Counts) -> Ruled:
    if c.success or c.skipped:
        return SKIP, lambda states: f"upstream {_named(states, SUCCESS, SKIPPED)} did not fail"
    return _run_when(c.failed + c.upstream_failed == c.upstream)


def _all_done(c: Counts) -> Ruled:
    return _run_when(c.done == c.upstream)


def _all_done_setup_success(c: Counts) -> Ruled:
    done = c.done == c.upstream
    if done and c.setups and c.setup_skipped >= c.setups:
        return SKIP, lambda states: "every setup upstream was skipped"
    if done and c.setups and not c.setup_success:
        return GIVE_UP, lambda states: "no setup upstream succeeded"
    return _run_when(done)


def _all_done_min_one_success(c: Counts) -> Ruled:
    if c.skipped:
        return SKIP, _skipped
    if c.done == c.upstream and not c.success:
        return GIVE_UP, _none_succeeded
    return _run_when(c.done == c.upstream)


def _all_skipped(c: Counts) -> Ruled:
    if c.success or c.failed or c.upstream_failed:
        return SKIP, lambda states: f"upstream {_named(states, SUCCESS, FAILED, UPSTREAM_FAILED)} was not skipped"
    return _run_when(c.skipped == c.upstream)


def _as_soon_as(met: bool, c: Counts, otherwise: Ruled) -> Ruled:
    """The one_* rules: run as soon as one upstream meets the rule; once all ended and none did, ``otherwise``."""
    if met:
        return RUN, None
    return otherwise if c.done == c.upstream else (WAIT, None)


def _one_success(c: Counts) -> Ruled:
    none_did = (SKIP, _every_skipped) if c.done == c.skipped else (GIVE_UP, _none_succeeded)
    return _as_soon_as(c.success > 0, c, none_did)


def _one_failed(c: Counts) -> Ruled:
    return _as_soon_as(c.failed + c.upstream_failed > 0, c,
                       (SKIP, lambda states: "every upstream ended and none failed"))


def _one_done(c: Counts) -> Ruled:
    return _as_soon_as(c.success + c.failed > 0, c,
                       (SKIP, lambda states: "every upstream ended and none succeeded or failed"))


def _none_failed(c: Counts) -> Ruled:
    if c.failed or c.upstream_failed:
        return GIVE_UP, _failed
    return _run_when(c.success + c.skipped == c.upstream)


def _none_failed_min_one_success(c: Counts) -> Ruled:
    if c.failed or c.upstream_failed:
        return GIVE_UP, _failed
    if c.skipped == c.upstream:
        return SKIP, _every_skipped
    return _run_when(c.success + c.skipped == c.upstream)


def _none_skipped(c: Counts) -> Ruled:
    if c.skipped:
        return SKIP, _skipped
    return _run_when(c.done == c.upstream)


def _always(c: Counts) -> Ruled:
    return RUN, None


_RULES: dict[str, Callable[[Counts], Ruled]] = {
          "all_success": _all_success, "all_failed": _all_failed, "all_done": _all_done,
          "all_done_setup_success": _all_done_setup_success, "all_done_min_one_success": _all_done_min_one_success,
          "all_skipped": _all_skipped, "one_success": _one_success, "one_failed": _one_failed,
          "one_done": _one_done, "none_failed": _none_failed,
          "none_failed_min_one_success": _none_failed_min_one_success, "none_skipped": _none_skipped,
          "always": _always}
assert tuple(_RULES) == TRIGGER_RULES

