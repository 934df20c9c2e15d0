"""The decider's walk of a run, made cheaper for wide runs (issue 26), decides exactly as before.

``decide`` now leaves each try it would queue a Candidate, built into its TaskQueued only if the
limits admit it (limits.admit); judges the tasks of one rule and one upstream list once per walk
(trigger_rules.judged_alike); and holds a DAG already at its max_active_tasks without sorting. The
reference is the decider as it was (tests/unit/scheduler_reference_decide.py, every TaskQueued built
and every task judged on its own): random histories are decided by both, turn by turn, and their
decisions must be the same events in the same order.
"""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    ClearTask,
    DagDefinition,
    DagParsed,
    MapDefinition,
    MapInput,
    MarkTask,
    PauseDag,
    TaskDefinition,
    TaskFailed,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TriggerDagRun,
)
from schemas.dags import TRIGGER_RULES
from services.scheduler.core import SchedulerState, decide, evolve, fold
from services.scheduler.core.limits import admit
from services.scheduler.core.model import ACTIVE, RUNNING, DagEntry, DagRun
from services.scheduler.core.queuing import Candidate, Queuing
from services.scheduler.core.trigger_rules import judge, judged_alike
from tests.unit import scheduler_reference_decide as reference
from tests.unit.control_flow_fixtures import task
from tests.unit.scheduler_fixtures import POLICY, RUN, created, parsed, queued, started, succeeded

ROLES = ("plain", "plain", "plain", "empty", "branch", "branch", "short_circuit", "setup", "teardown", "mapped")
ENDS = ("success", "success", "success", "success", "failed", "skipped", "running")


@st.composite
def wide_dags(draw):
    """A DAG of a few roots and many tasks sharing upstream lists (fan-outs), with every kind of rule,
    choice, setup, teardown and mapped task, small limits and mixed priorities."""
    roots = [f"r{index}" for index in range(draw(st.integers(1, 3)))]
    shared = [[root] for root in roots] + [sorted(roots[:2])]
    tasks = [task(root, kind="bash", priority_weight=draw(st.integers(1, 3))) for root in roots]
    for index in range(draw(st.integers(1, 14))):
        task_id, role = f"t{index:02d}", draw(st.sampled_from(ROLES))
        earlier = [item.task_id for item in tasks]
        fan_out = draw(st.integers(0, 2))  # most tasks share an upstream list with others
        ups = draw(st.sampled_from(shared)) if fan_out == 0 else [draw(st.sampled_from(earlier[:5]))] \
            if fan_out == 1 else draw(st.lists(st.sampled_from(earlier), unique=True, min_size=1, max_size=3))
        tasks.append(task(task_id, *ups, **_options(draw, role, earlier, ups)))
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", tasks=tasks,
                               max_active_tasks=draw(st.integers(1, 6)))
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0)


def _options(draw, role: str, earlier: list[str], ups: list[str]) -> dict:
    setups = [up for up in earlier if up.startswith("r") and up not in ups]
    rule = draw(st.sampled_from(TRIGGER_RULES)) if draw(st.booleans()) else "all_success"  # siblings alike
    options = {
        "kind": "empty" if role == "empty" else "bash", "rule": rule,
        "retries": draw(st.integers(0, 1)), "retry_delay": 0.0, "is_setup": role == "setup",
        "is_teardown": role == "teardown", "chooses": role if role in ("branch", "short_circuit") else "",
        "setups": setups[:1] if draw(st.integers(0, 4)) == 0 else [],
        "priority_weight": draw(st.integers(1, 3)),
        "max_active_tis_per_dagrun": draw(st.sampled_from([None, None, None, 1, 2])),
    }
    if role == "mapped":
        options["mapped"] = MapDefinition(inputs=[MapInput(name="x", literal_json=json.dumps(
            list(range(draw(st.integers(0, 5))))))])
    return options


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide_dags(), st.data())
def test_random_histories_are_decided_as_the_full_walk_decided_them(dag, data):
    state = fold(SchedulerState(), [dag] + [TriggerDagRun(dag_id="etl", request_id=f"t{index}", at=0.0)
                                            for index in range(data.draw(st.integers(1, 3)))])
    now = 1.0
    for _turn in range(40):
        touched = data.draw(st.sampled_from([None, "all", "one"]))
        keys = None if touched is None else sorted(state.runs)[:1] if touched == "one" else sorted(state.runs)
        expected = reference.decide(state, now, POLICY, keys)
        decisions = decide(state, now, POLICY, keys)
        assert decisions == expected
        for event in decisions + _world(data, state, decisions, now):
            evolve(state, event)
        now += 1.0
        if not state.runs:
            break


def _world(data, state: SchedulerState, decisions: list, now: float) -> list:
    """What the runners and users write after a turn: each queued try started, and maybe ended (a
    branch following some of its downstream), and now and then a clear, mark or pause."""
    written: list = []
    for event in decisions:
        if isinstance(event, TaskQueued):
            written += _ran(data, state, event, now)
    for (_dag, run_id), run in sorted(state.runs.items()):
        for instance in run.tasks.values():
            if instance.state == RUNNING and data.draw(st.booleans()):  # a try left running ends later
                written.append(TaskSucceeded(dag_id="etl", run_id=run_id, task_id=instance.task_id,
                                             map_index=instance.map_index, try_number=instance.try_number,
                                             runner_id="r", at=now))
    choice = data.draw(st.integers(0, 12))
    instances = sorted((run_id, key) for (_dag, run_id), run in state.runs.items() for key in run.tasks)
    if choice < 3 and instances:
        run_id, key = data.draw(st.sampled_from(instances))
        task_id, _, index = key.partition("|")
        fields = {"dag_id": "etl", "run_id": run_id, "task_id": task_id, "request_id": f"c{now}", "at": now}
        if index:
            fields["map_index"] = int(index)
        written.append([ClearTask(**fields, downstream=data.draw(st.booleans())),
                        MarkTask(**fields, state="success"), MarkTask(**fields, state="failed")][choice])
    elif choice == 3:
        written.append(PauseDag(dag_id="etl", paused="etl" not in state.paused, at=now))
    return written


def _ran(data, state: SchedulerState, queued_try: TaskQueued, now: float) -> list:
    ids = {"dag_id": queued_try.dag_id, "run_id": queued_try.run_id, "task_id": queued_try.task_id,
           "map_index": queued_try.map_index, "try_number": queued_try.try_number, "runner_id": "r"}
    end = data.draw(st.sampled_from(ENDS))
    began = [TaskStarted(**ids, hostname="h", pid=1, at=now)]
    if end == "running":
        return began
    if end == "failed":
        return [*began, TaskFailed(**ids, error="boom", at=now)]
    if end == "skipped":
        return [*began, TaskTrySkipped(**ids, reason="skip", at=now)]
    definition = state.dags["etl"].tasks[queued_try.task_id]
    downstream = [other.task_id for other in state.dags["etl"].definition.tasks
                  if queued_try.task_id in other.upstream]
    follow = data.draw(st.lists(st.sampled_from(downstream), unique=True)) if definition.chooses and downstream \
        else None
    return [*began, TaskSucceeded(**ids, follow=follow, at=now)]


# -- given events, expect events ----------------------------------------------------------------

FAN = {"root": [], **{f"leaf{index}": ["root"] for index in range(6)}}


def _fan_state(max_active_tasks: int) -> SchedulerState:
    dag = parsed(edges=FAN)
    dag = replace(dag, definition=replace(dag.definition, max_active_tasks=max_active_tasks))
    return fold(SchedulerState(), [dag, created(), queued("root"), started("root"), succeeded("root")])


def test_a_fan_out_queues_its_leaves_in_order_as_far_as_its_limit_lets_it():
    state = _fan_state(max_active_tasks=2)
    decisions = decide(state, 10.0, POLICY)
    assert decisions == reference.decide(state, 10.0, POLICY)
    assert [(type(event).__name__, event.task_id) for event in decisions] == [("TaskQueued", "leaf0"),
                                                                              ("TaskQueued", "leaf1")]


def test_a_dag_at_its_limit_queues_nothing_more():
    state = fold(_fan_state(max_active_tasks=2), [queued("leaf0"), queued("leaf1")])
    assert decide(state, 10.0, POLICY) == reference.decide(state, 10.0, POLICY) == []


def test_a_try_ending_in_a_full_dag_lets_the_next_leaf_in():
    state = fold(_fan_state(max_active_tasks=2), [queued("leaf0"), queued("leaf1"), started("leaf0"),
                                                  succeeded("leaf0")])
    decisions = decide(state, 10.0, POLICY, touched={("etl", RUN)})
    assert [(type(event).__name__, event.task_id) for event in decisions] == [("TaskQueued", "leaf2")]
    assert decisions == reference.decide(state, 10.0, POLICY, touched={("etl", RUN)})


def test_admit_holds_every_candidate_of_a_full_dag_and_keeps_the_rest_in_order():
    state = fold(_fan_state(max_active_tasks=1), [queued("leaf0")])
    queuing = Queuing(state.runs["etl", RUN], state.dags["etl"], POLICY.scheduler_id)
    leaves = [Candidate(queuing, state.runs["etl", RUN].instance(f"leaf{index}"), state.dags["etl"].tasks[
        f"leaf{index}"], 10.0) for index in (1, 2)]
    other = succeeded("leaf5")
    assert admit(state, [leaves[0], other, leaves[1]]) == [other]


def test_a_candidate_builds_the_task_queued_the_walk_built_before():
    state = _fan_state(max_active_tasks=16)
    run, dag = state.runs["etl", RUN], state.dags["etl"]
    candidate = Candidate(Queuing(run, dag, POLICY.scheduler_id), run.instance("leaf3"), dag.tasks["leaf3"], 10.0)
    assert (candidate.dag_id, candidate.run_id, candidate.task_id) == ("etl", RUN, "leaf3")
    assert candidate.built() == Queuing(run, dag, POLICY.scheduler_id).queued(run.instance("leaf3"),
                                                                             dag.tasks["leaf3"], 10.0)


def _judged(dag: DagEntry, run: DagRun, view: dict[str, str]) -> tuple[dict, dict]:
    verdicts: dict = {}
    shared = {task_id: judged_alike(task_id, dag, run, view, {}, verdicts) for task_id in dag.order
              if task_id not in view}
    alone = {task_id: judge(task_id, dag, run, view, {}) for task_id in dag.order if task_id not in view}
    return shared, alone


def test_tasks_of_one_rule_and_upstream_list_are_judged_once_and_alike():
    state = _fan_state(max_active_tasks=16)
    shared, alone = _judged(state.dags["etl"], state.runs["etl", RUN], {"root": "success"})
    assert shared == alone and len({id(verdict) for verdict in shared.values()}) == 1


def test_a_branch_is_judged_per_task_since_it_names_the_tasks_it_followed():
    dag_parsed = DagParsed(dag_id="etl", file_path="/dags/etl.py", fingerprint="fp", at=0.0, definition=DagDefinition(
        dag_id="etl", file_path="/dags/etl.py",
        tasks=[TaskDefinition(task_id="pick", kind="bash", chooses="branch"),
               *[TaskDefinition(task_id=f"leaf{index}", kind="bash", upstream=["pick"]) for index in range(3)]]))
    state = fold(SchedulerState(), [dag_parsed, created(), queued("pick"), started("pick"),
                                    replace(succeeded("pick"), follow=["leaf1"])])
    shared, alone = _judged(state.dags["etl"], state.runs["etl", RUN], {"pick": "success"})
    assert shared == alone
    assert [shared[f"leaf{index}"].outcome for index in range(3)] == ["skip", "run", "skip"]


def test_a_wide_walk_still_finishes_its_run_once_every_leaf_has_ended():
    state = _fan_state(max_active_tasks=16)
    for event in decide(state, 10.0, POLICY):
        evolve(state, event)
    fold(state, [event for index in range(6) for event in (started(f"leaf{index}"), succeeded(f"leaf{index}"))])
    assert not any(instance.state in ACTIVE for instance in state.runs["etl", RUN].tasks.values())
    decisions = decide(state, 20.0, POLICY)
    assert decisions == reference.decide(state, 20.0, POLICY)
    assert [type(event).__name__ for event in decisions] == ["DagRunFinished"]


# -- deciding together (segments.py, together.py) -------------------------------------------------

def _wide(leaves: list[TaskDefinition], max_active_tasks: int) -> SchedulerState:
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", max_active_tasks=max_active_tasks,
                               tasks=[TaskDefinition(task_id="root", kind="bash"), *leaves])
    return fold(SchedulerState(), [DagParsed(dag_id="etl", file_path="/dags/etl.py", fingerprint="fp",
                                             definition=definition, at=0.0),
                                   created(), queued("root"), started("root"), succeeded("root")])


def test_a_fan_out_is_one_segment_and_its_room_goes_to_the_highest_priorities_in_walk_order():
    leaves = [TaskDefinition(task_id=f"leaf{index:03d}", kind="bash", upstream=["root"], weight_rule="absolute",
                             priority_weight=5 if index in (7, 300, 42) else 1) for index in range(500)]
    state = _wide(leaves, max_active_tasks=4)
    assert [segment.size for segment in state.dags["etl"].segments.values()] == [500]
    decisions = decide(state, 10.0, POLICY)
    assert decisions == reference.decide(state, 10.0, POLICY)
    assert [event.task_id for event in decisions] == ["leaf000", "leaf007", "leaf042", "leaf300"]


def test_the_instances_of_a_wide_mapped_task_are_queued_in_map_index_order_as_far_as_the_room_goes():
    inputs = [MapInput(name="x", literal_json=json.dumps(list(range(300))))]
    state = _wide([TaskDefinition(task_id="leaf", kind="bash", upstream=["root"],
                                  mapped=MapDefinition(inputs=inputs, max_map_length=300))], max_active_tasks=3)
    for event in decide(state, 10.0, POLICY):  # the expansion, and its first three instances
        evolve(state, event)
    ids = {"dag_id": "etl", "run_id": RUN, "task_id": "leaf", "map_index": 1, "try_number": 1, "runner_id": "r"}
    fold(state, [TaskStarted(**ids, hostname="h", pid=10, at=11.0), TaskSucceeded(**ids, at=11.0)])
    decisions = decide(state, 12.0, POLICY, touched={("etl", RUN)})
    assert decisions == reference.decide(state, 12.0, POLICY, touched={("etl", RUN)})
    assert [(type(event).__name__, event.map_index) for event in decisions] == [("TaskQueued", 3)]
