"""Properties of the scheduler core's control flow over random small DAGs (issue 23).

Hypothesis draws a DAG of at most 8 tasks (edges only from earlier to later tasks, so it is acyclic)
with random trigger rules, empty tasks, branches, short circuits, setups and teardowns, and random
try outcomes (success, failure, skip; a retry for some). Driving decide/evolve to quiescence must:

- end the run, with every task in a final state: no task waits forever once its upstreams ended;
- write every skip and upstream failure with why: the rule (or the choosing task) and the states read;
- run a task exactly when the final states let it run (for tasks outside a setup's scope and with no
  choosing task upstream, whose outcome depends on timing, in Airflow too);
- end the run failed exactly when one of its effective leaves (Airflow's: teardowns left out unless
  on_failure_fail_dagrun) failed or gave up;
- be the same state live and replayed: the fold of the whole log equals the live fold, and each
  decision taken from a replay of the log so far equals the live one.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import TaskEmptySucceeded, TaskQueued, TaskSkipped, TaskUpstreamFailed
from schemas.dags import TRIGGER_RULES
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.model import ENDED
from services.scheduler.core.trigger_rules import GIVE_UP, RUN, SKIP, judge
from tests.unit.control_flow_fixtures import Drive, dag, task
from tests.unit.scheduler_fixtures import POLICY

ROLES = ("plain", "plain", "plain", "empty", "branch", "short_circuit", "setup", "teardown")
OUTCOMES = st.sampled_from(["success", "success", "failed", "skipped"])


@st.composite
def flows(draw):
    """(DagParsed, outcomes per task: one per try, follows of the choosing tasks)."""
    count = draw(st.integers(1, 8))
    ids = [f"t{index}" for index in range(count)]
    tasks, upstream, roles = [], {}, {}
    for index, task_id in enumerate(ids):
        upstream[task_id] = draw(st.lists(st.sampled_from(ids[:index]), unique=True, max_size=3)) if index else []
        roles[task_id] = draw(st.sampled_from(ROLES))
    above = _transitive(ids, upstream)
    outcomes, follows = {}, {}
    for task_id in ids:
        role, retries = roles[task_id], draw(st.integers(0, 1))
        within = [up for up in sorted(above[task_id]) if roles[up] == "setup" and up not in upstream[task_id]]
        options = {
            "kind": "empty" if role == "empty" else "bash",
            "rule": "all_done_setup_success" if role == "teardown" else draw(st.sampled_from(TRIGGER_RULES)),
            "retries": retries, "retry_delay": 0.0, "is_setup": role == "setup", "is_teardown": role == "teardown",
            "on_failure_fail_dagrun": role == "teardown" and draw(st.booleans()),
            "setups": within if role != "teardown" and draw(st.booleans()) else [],
            "chooses": role if role in ("branch", "short_circuit") else "",
            "ignore_downstream_trigger_rules": draw(st.booleans()),
        }
        tasks.append(task(task_id, *upstream[task_id], **options))
        outcomes[task_id] = draw(st.lists(OUTCOMES, min_size=retries + 1, max_size=retries + 1))
        downstream = [down for down in ids if task_id in upstream[down]]
        if role == "branch":
            follows[task_id] = draw(st.lists(st.sampled_from(downstream), unique=True)) if downstream else []
        elif role == "short_circuit":
            follows[task_id] = draw(st.sampled_from([None, []]))
    return dag(*tasks), outcomes, {key: value for key, value in follows.items() if value is not None}


def _transitive(ids: list[str], upstream: dict[str, list[str]]) -> dict[str, set[str]]:
    above: dict[str, set[str]] = {}
    for task_id in ids:  # every upstream comes earlier in ids
        above[task_id] = set(upstream[task_id]).union(*(above[up] for up in upstream[task_id]))
    return above


def _drive(definition, outcomes, follows) -> Drive:
    """To quiescence; each decision is checked against the one a replay of the log so far takes."""
    drive = Drive(definition, outcomes=outcomes, follows=follows)
    for _ in range(80):
        replayed = fold(SchedulerState(), drive.log)
        assert replayed == drive.state, "the live fold differs from a replay of the same log"
        assert decide(replayed, drive.now + 1.0, POLICY) == decide(drive.state, drive.now + 1.0, POLICY)
        if not drive.step():
            break
    return drive


def _effective_leaves(definition) -> set[str]:
    """Airflow's tasks that decide a run's state: nothing downstream but teardowns that may fail without
    failing the run, and not such a teardown itself (a DAG of only those: its tasks without downstream)."""
    tasks = {item.task_id: item for item in definition.definition.tasks}
    downstream = {task_id: [down for down, item in tasks.items() if task_id in item.upstream] for task_id in tasks}

    def ignorable(task_id: str) -> bool:
        return tasks[task_id].is_teardown and not tasks[task_id].on_failure_fail_dagrun

    leaves = {task_id for task_id in tasks if not ignorable(task_id) and all(map(ignorable, downstream[task_id]))}
    return leaves or {task_id for task_id in tasks if not downstream[task_id]}


def _outcome_written(drive: Drive) -> dict[str, str]:
    """Task id -> what the owner decided for it: run (a try or an empty success), skip or upstream_failed."""
    kinds = {TaskQueued: RUN, TaskEmptySucceeded: RUN, TaskSkipped: SKIP, TaskUpstreamFailed: GIVE_UP}
    written: dict[str, str] = {}
    for event in drive.log:
        if type(event) in kinds:
            written.setdefault(event.task_id, kinds[type(event)])
    return written


def _ends_everything(drive: Drive) -> None:
    states = drive.states()
    assert all(state in ENDED for state in states.values()), f"tasks left waiting: {states}"
    assert drive.finished() in ("success", "failed"), "every task ended but the run did not"


def _says_why(drive: Drive) -> None:
    for event in drive.log:
        if isinstance(event, TaskSkipped | TaskUpstreamFailed):
            chosen_by = event.chosen_by if isinstance(event, TaskSkipped) else ""
            assert event.upstream_states and event.reason, f"{event.task_id}: no upstream states or reason"
            if chosen_by:
                assert event.upstream_states == {chosen_by: "success"}
            else:
                assert event.trigger_rule in (*TRIGGER_RULES, "setup"), f"{event.task_id}: no rule named"


def _nothing_premature(drive: Drive) -> None:
    """Each task ran exactly when the final states let it run, for the tasks whose outcome does not
    depend on timing: not held by setups, and with no choosing task upstream (a one_success task may
    run before a branch upstream of it chose against it, in Airflow too). Which of skip and
    upstream_failed may depend on timing: all_success skips at once on a skipped upstream, though
    another upstream may fail later (as Airflow's does)."""
    entry, run, final = drive.state.dags["etl"], drive.run, drive.states()
    for task_id, written in _outcome_written(drive).items():
        task_def = entry.tasks[task_id]
        chooser_above = task_id in entry.short_circuits or any(entry.tasks[up].chooses for up in task_def.upstream)
        if not task_def.setups and not chooser_above:
            would = judge(task_id, entry, run, final).outcome
            assert (would == RUN) == (written == RUN), f"{task_id} decided {written}, the final states: {would}"


def _run_state_by_effective_leaves(drive: Drive) -> None:
    states = drive.states()
    failed = any(states[leaf] in ("failed", "upstream_failed") for leaf in _effective_leaves(drive.definition))
    assert drive.finished() == ("failed" if failed else "success")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flows(), st.integers(0, 400))
def test_random_flows_end_say_why_run_only_what_they_should_and_replay_the_same(flow, cut):
    drive = _drive(*flow)  # checks live = replay, and replayed decisions = live ones, at each step
    _ends_everything(drive)
    _says_why(drive)
    _nothing_premature(drive)
    _run_state_by_effective_leaves(drive)
    cut %= len(drive.log) + 1
    assert fold(fold(SchedulerState(), drive.log[:cut]), drive.log[cut:]) == drive.state, "fold in two pieces"
