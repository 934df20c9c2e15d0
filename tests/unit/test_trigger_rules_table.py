"""Every trigger rule against representative upstream states: given the upstream tasks' events, when
the owner decides, then the judged task is queued (run), skipped, given up (upstream_failed), or left
waiting (no event).

The expected outcomes are Airflow 3's trigger-rule semantics (its trigger-rule dependency and the
"Trigger Rules" section of its DAG docs), written here as a table and not read from the code under
test. Two upstream states are "not done": running (queued and started) and none (waiting on a
running task of its own). A rule that can already tell it will never run decides at once (a skip or
an upstream failure), without waiting for the other upstreams.
"""

from __future__ import annotations

import pytest

from schemas import TaskQueued, TaskSkipped, TaskUpstreamFailed
from schemas.dags import TRIGGER_RULES
from services.scheduler.core import decide
from tests.unit.control_flow_fixtures import dag, ended, of_task, running, skipped, task, upstream_failed
from tests.unit.scheduler_fixtures import POLICY, created, state_of

RUN, WAIT, SKIP, GIVE_UP = "run", "wait", "skip", "upstream_failed"
S, F, K, UF, R, N = "success", "failed", "skipped", "upstream_failed", "running", "none"

# (upstream states, expected, why in words) per rule. "setup:<state>" is a setup task upstream.
TABLE: dict[str, list[tuple[tuple[str, ...], str, str]]] = {
    "all_success": [
        ((S, S), RUN, "every upstream succeeded"),
        ((S, R), WAIT, "one upstream still running"),
        ((S, N), WAIT, "one upstream not started"),
        ((S, F), GIVE_UP, "a failed upstream gives it up at once"),
        ((S, UF), GIVE_UP, "an upstream_failed upstream gives it up at once"),
        ((F, R), GIVE_UP, "a failure decides without waiting for the running one"),
        ((S, K), SKIP, "a skipped upstream skips it"),
        ((K, R), SKIP, "a skip decides without waiting for the running one"),
        ((K, K), SKIP, "every upstream skipped"),
        ((K, F), GIVE_UP, "a failure wins over a skip"),
        ((UF, K), GIVE_UP, "an upstream failure wins over a skip"),
        ((R, R), WAIT, "nothing ended yet"),
    ],
    "all_failed": [
        ((F, F), RUN, "every upstream failed"),
        ((F, UF), RUN, "upstream_failed counts as failed"),
        ((UF, UF), RUN, "every upstream upstream_failed"),
        ((F, R), WAIT, "one upstream still running"),
        ((F, N), WAIT, "one upstream not started"),
        ((S, F), SKIP, "a success means not all failed"),
        ((S, R), SKIP, "a success decides without waiting"),
        ((K, F), SKIP, "a skip means not all failed"),
        ((K, K), SKIP, "every upstream skipped"),
        ((R, R), WAIT, "nothing ended yet"),
    ],
    "all_done": [
        ((S, S), RUN, "all ended"),
        ((S, F), RUN, "a failure is done too"),
        ((S, UF), RUN, "upstream_failed is done too"),
        ((S, K), RUN, "a skip is done too"),
        ((K, K), RUN, "all skipped is all done: it is never skipped"),
        ((F, F), RUN, "all failed is all done"),
        ((UF, K), RUN, "upstream_failed and skipped are done"),
        ((S, R), WAIT, "one upstream still running"),
        ((F, N), WAIT, "one upstream not started"),
        ((K, R), WAIT, "a skip does not decide it early"),
    ],
    "all_done_setup_success": [
        ((S, F), RUN, "like all_done without setups upstream"),
        ((K, K), RUN, "without setups upstream all skipped still runs"),
        ((S, R), WAIT, "one upstream still running"),
        (("setup:success", F), RUN, "its setup succeeded and all ended: runs even after failed work"),
        (("setup:success", K), RUN, "its setup succeeded and the work was skipped"),
        (("setup:success", UF), RUN, "its setup succeeded and the work gave up"),
        (("setup:success", R), WAIT, "work still running"),
        (("setup:running", S), WAIT, "its setup still running"),
        (("setup:failed", UF), GIVE_UP, "its only setup failed: no setup succeeded"),
        (("setup:upstream_failed", UF), GIVE_UP, "its only setup gave up: no setup succeeded"),
        (("setup:skipped", K), SKIP, "every setup skipped"),
        (("setup:skipped", S), SKIP, "every setup skipped, even if the work succeeded"),
        (("setup:success", "setup:failed", S), RUN, "one of its setups succeeded is enough"),
        (("setup:skipped", "setup:failed", S), GIVE_UP, "no setup succeeded and not all were skipped"),
    ],
    "all_done_min_one_success": [
        ((S, S), RUN, "all ended, one succeeded"),
        ((S, F), RUN, "all ended with a failure, one succeeded"),
        ((S, UF), RUN, "all ended with an upstream failure, one succeeded"),
        ((F, F), GIVE_UP, "all ended and none succeeded"),
        ((F, UF), GIVE_UP, "all ended and none succeeded (upstream_failed)"),
        # Airflow 3.1's implementation skips as soon as one upstream is skipped (its docs say
        # "non-skipped upstreams are done"; apache/airflow#59925): the implementation is the behaviour.
        ((S, K), SKIP, "a skipped upstream skips it as Airflow 3.1 implements it"),
        ((K, R), SKIP, "a skip decides without waiting"),
        ((S, R), WAIT, "one upstream still running"),
        ((F, N), WAIT, "one upstream not started, none succeeded yet"),
    ],
    "all_skipped": [
        ((K, K), RUN, "every upstream skipped"),
        ((K, R), WAIT, "one upstream still running"),
        ((K, N), WAIT, "one upstream not started"),
        ((S, K), SKIP, "a success means not all skipped"),
        ((F, K), SKIP, "a failure means not all skipped"),
        ((UF, K), SKIP, "an upstream failure means not all skipped"),
        ((S, R), SKIP, "a success decides without waiting"),
        ((R, R), WAIT, "nothing ended yet"),
    ],
    "one_success": [
        ((S, R), RUN, "fires as soon as one succeeded while another runs"),
        ((S, N), RUN, "fires as soon as one succeeded while another has not started"),
        ((S, F), RUN, "one success is enough despite a failure"),
        ((S, K), RUN, "one success is enough despite a skip"),
        ((F, R), WAIT, "no success yet, one still running"),
        ((K, R), WAIT, "no success yet, a skip does not decide early"),
        ((F, F), GIVE_UP, "all ended and none succeeded"),
        ((K, F), GIVE_UP, "all ended, none succeeded, not all skipped"),
        ((UF, K), GIVE_UP, "all ended, none succeeded, not all skipped (upstream_failed)"),
        ((K, K), SKIP, "all ended and every one skipped"),
    ],
    "one_failed": [
        ((F, R), RUN, "fires as soon as one failed while another runs"),
        ((UF, N), RUN, "upstream_failed counts as a failure"),
        ((S, F), RUN, "one failure is enough"),
        ((S, R), WAIT, "no failure yet, one still running"),
        ((S, S), SKIP, "all ended and none failed"),
        ((S, K), SKIP, "all ended with a skip and none failed"),
        ((K, K), SKIP, "all skipped: none failed"),
        ((R, R), WAIT, "nothing ended yet"),
    ],
    "one_done": [
        ((S, R), RUN, "fires as soon as one succeeded"),
        ((F, N), RUN, "fires as soon as one failed"),
        ((K, R), WAIT, "a skip is not done for one_done"),
        ((UF, R), WAIT, "an upstream failure is not done for one_done"),
        ((K, K), SKIP, "all ended, none succeeded or failed"),
        ((UF, K), SKIP, "all ended with only upstream_failed and skipped"),
        ((K, F), RUN, "one failed among skips"),
        ((R, R), WAIT, "nothing ended yet"),
    ],
    "none_failed": [
        ((S, S), RUN, "all succeeded"),
        ((S, K), RUN, "succeeded or skipped: none failed"),
        ((K, K), RUN, "all skipped is none failed: it runs"),
        ((S, F), GIVE_UP, "a failed upstream"),
        ((S, UF), GIVE_UP, "an upstream_failed upstream"),
        ((F, R), GIVE_UP, "a failure decides without waiting"),
        ((S, R), WAIT, "one upstream still running"),
        ((K, N), WAIT, "one upstream not started"),
    ],
    "none_failed_min_one_success": [
        ((S, K), RUN, "the join after a branch: one path succeeded, the other skipped"),
        ((S, S), RUN, "all succeeded"),
        ((K, K), SKIP, "every upstream skipped: no success"),
        ((K, K, K), SKIP, "every one of three upstreams skipped"),
        ((S, F), GIVE_UP, "a failed upstream"),
        ((UF, K), GIVE_UP, "an upstream_failed upstream"),
        ((F, R), GIVE_UP, "a failure decides without waiting"),
        ((K, R), WAIT, "one skipped, one still running"),
        ((S, N), WAIT, "one upstream not started"),
    ],
    "none_skipped": [
        ((S, S), RUN, "all ended, none skipped"),
        ((S, F), RUN, "a failure is not a skip"),
        ((UF, F), RUN, "upstream failures are not skips"),
        ((S, K), SKIP, "a skipped upstream"),
        ((K, R), SKIP, "a skip decides without waiting"),
        ((S, R), WAIT, "one upstream still running"),
        ((F, N), WAIT, "one upstream not started"),
    ],
    "always": [
        ((S, S), RUN, "always runs"),
        ((F, UF), RUN, "runs after failures"),
        ((K, K), RUN, "runs after skips"),
        ((R, R), RUN, "runs without waiting for anything"),
        ((N, F), RUN, "runs while an upstream has not started"),
    ],
}


def _given(states: tuple[str, ...], rule: str) -> tuple[list, dict[str, str]]:
    """The events that put upstreams u0, u1, ... in ``states``, the judged task t downstream of them
    with ``rule``; and the upstream states a skip or upstream failure must name."""
    tasks, events, named = [], [], {}
    for index, entry in enumerate(states):
        is_setup, state = entry.startswith("setup:"), entry.removeprefix("setup:")
        up = f"u{index}"
        tasks.append(task(up, *(["gate"] if state == N else []), is_setup=is_setup))
        events += {S: lambda up=up: ended(up, "success"), F: lambda up=up: ended(up, "failed"),
                   K: lambda up=up: [skipped(up)], UF: lambda up=up: [upstream_failed(up)],
                   R: lambda up=up: running(up), N: lambda: []}[state]()
        named[up] = state
    if N in named.values():
        tasks.append(task("gate"))
        events += running("gate")
    tasks.append(task("t", *named, rule=rule))
    return [dag(*tasks), created(), *events], named


def _outcome(decided: list) -> str:
    if not decided:
        return WAIT
    [event] = decided
    return {TaskQueued: RUN, TaskSkipped: SKIP, TaskUpstreamFailed: GIVE_UP}[type(event)]


CASES = [pytest.param(rule, states, expected, id=f"{rule}: {'+'.join(states)} -> {expected} ({why})")
         for rule, rows in TABLE.items() for states, expected, why in rows]


@pytest.mark.parametrize(("rule", "states", "expected"), CASES)
def test_a_trigger_rule_decides_as_airflows_does(rule, states, expected):
    given, named = _given(states, rule)
    decided = of_task(decide(state_of(*given), now=7.0, policy=POLICY), "t")
    assert _outcome(decided) == expected
    if expected in (SKIP, GIVE_UP):
        [event] = decided
        assert event.trigger_rule == rule, "a skip or upstream failure names the rule that decided it"
        assert event.upstream_states == named, "... and the upstream states it read"
        assert event.reason.startswith(f"trigger rule {rule}: ")


def test_the_table_covers_every_rule_with_each_outcome_it_can_reach():
    assert set(TABLE) == set(TRIGGER_RULES)
    for rule, rows in TABLE.items():
        outcomes = {expected for _states, expected, _why in rows}
        assert RUN in outcomes, rule
        assert rule == "always" or WAIT in outcomes or SKIP in outcomes, rule


@pytest.mark.parametrize("rule", TRIGGER_RULES)
def test_a_task_without_upstream_runs_whatever_its_rule(rule):
    given = [dag(task("t", rule=rule)), created()]
    assert _outcome(of_task(decide(state_of(*given), now=7.0, policy=POLICY), "t")) == RUN
