"""Dynamic task mapping in the scheduler core (services/scheduler/core/mapping.py): given these events,
the owner expands a mapped task once (TaskMapExpanded), queues its instances with their elements,
skips an empty expansion, fails an unmappable or too long one, and its downstream counts every
instance. Replay and takeover read the expansion from the log."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from schemas import (
    ClearTask,
    CommandRejected,
    DagDefinition,
    DagParsed,
    DagRunFinished,
    KillTask,
    MapDefinition,
    MapInput,
    MapSource,
    MarkTask,
    TaskCleared,
    TaskDefinition,
    TaskFailed,
    TaskKillRequested,
    TaskMapExpanded,
    TaskMapFailed,
    TaskQueued,
    TaskRemoved,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskUpstreamFailed,
)
from services.scheduler.core import Policy, SchedulerState, decide, evolve, fold
from services.scheduler.core.mapping import product_indexes
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import POLICY, RUN, created

Outcome = Callable[[TaskQueued], tuple[str, Any]]  # a queued try -> ("success", its value) or ("failed", None)


def literal(name: str, value: Any) -> MapInput:
    return MapInput(name=name, literal_json=json.dumps(value))


def over(name: str, task_id: str, key: str = "return_value") -> MapInput:
    return MapInput(name=name, task_id=task_id, key=key)


def task(task_id: str, *upstream: str, mapped: MapDefinition | None = None, **options: Any) -> TaskDefinition:
    return TaskDefinition(task_id=task_id, kind="python", upstream=list(upstream), mapped=mapped, **options)


def dag(*tasks: TaskDefinition) -> DagParsed:
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", tasks=list(tasks))
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint="fp", definition=definition, at=0.0)


def element(queued: TaskQueued) -> dict[str, Any]:
    return json.loads(queued.map_element_json)


class Drive:
    """A run driven as the owner and the runners would: each decision folded and logged; each queued
    try ended as ``outcome`` says (default: success, returning its element's "x" or None)."""

    def __init__(self, *tasks: TaskDefinition, outcome: Outcome | None = None, policy: Policy = POLICY) -> None:
        self.state, self.log, self.now, self.policy = SchedulerState(), [], 10.0, policy
        self.outcome = outcome or (lambda queued: ("success", element(queued).get("x") if queued.map_element_json
                                                   else None))
        self.append(dag(*tasks), created())

    def append(self, *events: Any) -> None:
        for event in events:
            self.log.append(event)
            evolve(self.state, event)

    def step(self) -> list:
        self.now += 1.0
        decisions = decide(self.state, self.now, self.policy)
        self.append(*decisions)
        for event in decisions:
            if isinstance(event, TaskQueued):
                self.append(*self.ended(event))
        return decisions

    def ended(self, queued: TaskQueued) -> list:
        ids = {"dag_id": "etl", "run_id": RUN, "task_id": queued.task_id, "map_index": queued.map_index,
               "try_number": queued.try_number, "runner_id": "r"}
        started = TaskStarted(**ids, hostname="h", pid=1, at=self.now + 0.1)
        kind, value = self.outcome(queued)
        if kind == "running":  # it runs on: no outcome yet
            return [started]
        if kind == "failed":
            return [started, TaskFailed(**ids, error="boom", at=self.now + 0.5)]
        values = "" if value is None else json.dumps({"return_value": value})
        return [started, TaskSucceeded(**ids, values_json=values, at=self.now + 0.5)]

    def to_the_end(self) -> Drive:
        for _ in range(30):
            decisions = self.step()
            if not decisions or any(isinstance(event, DagRunFinished) for event in decisions):
                break
        return self

    def of(self, kind: type) -> list:
        return [event for event in self.log if isinstance(event, kind)]

    def finished(self) -> str:
        return self.state.finished[("etl", RUN)].finished_state


def numbers(value: Any) -> Outcome:
    """``numbers`` returns ``value``; a mapped instance returns its x; the rest return None."""
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return "success", value
        return "success", element(queued).get("x") if queued.map_element_json else None
    return outcome


EXPAND_X = MapDefinition(inputs=[over("x", "numbers")])


def test_a_literal_expands_once_into_instances_that_queue_with_their_elements():
    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2, 3])])))
    decisions = drive.step()
    assert decisions[0] == TaskMapExpanded(dag_id="etl", run_id=RUN, task_id="add", count=3,
                                           sources=[MapSource(name="x", length=3)], scheduler_id=POLICY.scheduler_id,
                                           at=11.0)
    queued = [event for event in decisions if isinstance(event, TaskQueued)]
    assert [(event.map_index, element(event)) for event in queued] == [(0, {"x": 1}), (1, {"x": 2}), (2, {"x": 3})]
    drive.to_the_end()
    assert len(drive.of(TaskMapExpanded)) == 1 and drive.finished() == "success"


def test_over_an_upstream_value_it_names_the_try_it_read():
    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), outcome=numbers([10, 20])).to_the_end()
    [expanded] = drive.of(TaskMapExpanded)
    assert expanded.count == 2 and expanded.sources == [MapSource(name="x", length=2, task_id="numbers", try_number=1)]
    mapped = [event for event in drive.of(TaskQueued) if event.task_id == "add"]
    assert [element(event) for event in mapped] == [{"x": 10}, {"x": 20}]
    assert all(event.inputs == [] for event in mapped)  # its element is its own: not the whole list again
    assert drive.finished() == "success"


def test_two_arguments_expand_to_their_product_in_declaration_order():
    mapped = MapDefinition(inputs=[literal("x", [1, 2]), literal("y", ["a", "b", "c"])])
    drive = Drive(task("add", mapped=mapped)).to_the_end()
    elements = [element(event) for event in drive.of(TaskQueued)]
    assert elements == [{"x": x, "y": y} for x in (1, 2) for y in "abc"]
    assert drive.of(TaskMapExpanded)[0].sources == [MapSource(name="x", length=2), MapSource(name="y", length=3)]


def test_a_dict_maps_as_its_pairs_and_expand_kwargs_as_its_dicts():
    pairs = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", {"a": 1, "b": 2})]))).to_the_end()
    assert element(pairs.of(TaskQueued)[1]) == {"x": {"__tock__": "tuple", "value": ["b", 2]}}
    kwargs = MapDefinition(kind="expand_kwargs", inputs=[literal("", [{"x": 1}, {"x": 2, "y": 3}])])
    drive = Drive(task("add", mapped=kwargs)).to_the_end()
    assert [element(event) for event in drive.of(TaskQueued)] == [{"x": 1}, {"x": 2, "y": 3}]


def test_an_empty_expansion_skips_the_task_and_its_downstream_as_airflow():
    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), task("total", "add"),
                  outcome=numbers([])).to_the_end()
    assert drive.of(TaskMapExpanded)[0].count == 0
    skips = {event.task_id: event.reason for event in drive.of(TaskSkipped)}
    assert skips["add"] == "mapped task add expanded to no instances: x is empty"
    assert "total" in skips and drive.finished() == "success"


@pytest.mark.parametrize(("value", "words"), [
    (5, "argument x (the value 'return_value' of numbers) is a int, not a list or dict"),
    ("abc", "is a str, not a list or dict"),
    (None, "is a None, not a list or dict"),
    ({"__tock__": "set", "value": [1]}, "is a set, not a list or dict"),
    ([1, 2, 3], "it would expand to 3 instances (3), more than its max_map_length 2"),
])
def test_an_unmappable_or_too_long_value_fails_the_task_naming_it(value, words):
    mapped = MapDefinition(inputs=[over("x", "numbers")], max_map_length=2)
    drive = Drive(task("numbers"), task("add", "numbers", mapped=mapped), task("total", "add"),
                  outcome=numbers(value)).to_the_end()
    [failure] = drive.of(TaskMapFailed)
    assert words in failure.reason and not [event for event in drive.of(TaskQueued) if event.task_id == "add"]
    assert [event.task_id for event in drive.of(TaskUpstreamFailed)] == ["total"]
    assert drive.finished() == "failed"


def test_the_downstream_reads_every_instance_in_map_index_order():
    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), task("total", "add"),
                  outcome=numbers([3, 1, 2])).to_the_end()
    [total] = [event for event in drive.of(TaskQueued) if event.task_id == "total"]
    assert [(item.task_id, item.map_index, json.loads(item.values_json)) for item in total.inputs] == [
        ("add", 0, {"return_value": 3}), ("add", 1, {"return_value": 1}), ("add", 2, {"return_value": 2})]


def test_one_failed_instance_gives_up_the_downstream_naming_that_instance():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        return ("failed", None) if queued.map_index == 1 else ("success", None)

    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2, 3])])), task("total", "add"),
                  outcome=outcome).to_the_end()
    [gave_up] = drive.of(TaskUpstreamFailed)
    assert gave_up.upstream_states == {"add[0]": "success", "add[1]": "failed", "add[2]": "success"}
    assert "add[1]" in gave_up.reason and drive.finished() == "failed"
    assert not drive.of(TaskRemoved)  # an instance (keyed add|1) is not taken for a task gone from the DAG


def test_an_instance_retries_alone_with_its_own_element():
    tries: dict[int, int] = {}

    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        tries[queued.map_index] = queued.try_number
        return ("failed", None) if (queued.map_index, queued.try_number) == (1, 1) else ("success", None)

    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2])]), retries=1, retry_delay=0.0),
                  outcome=outcome).to_the_end()
    again = [event for event in drive.of(TaskQueued) if event.try_number == 2]
    assert [(event.map_index, element(event)) for event in again] == [(1, {"x": 2})]
    assert drive.finished() == "success"


def test_product_indexes_vary_the_last_input_fastest():
    assert [product_indexes(index, [2, 3]) for index in range(6)] == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]


# -- replay and takeover -------------------------------------------------------------------------

def _mid_expansion() -> Drive:
    """Expanded and queued, one instance ended: the rest still running."""
    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), task("total", "add"),
                  outcome=numbers([1, 2, 3]))
    drive.step()  # numbers
    drive.now += 1.0
    decisions = decide(drive.state, drive.now, drive.policy)
    drive.append(*decisions)
    first = next(event for event in decisions if isinstance(event, TaskQueued))
    drive.append(*drive.ended(first))
    return drive


def test_replay_folds_to_the_live_state():
    drive = _mid_expansion()
    assert fold(SchedulerState(), drive.log) == drive.state


def test_a_takeover_mid_expansion_expands_nothing_again_and_decides_as_the_live_owner():
    drive = _mid_expansion()
    rebuilt = fold(SchedulerState(), drive.log)
    other = Policy(scheduler_id="sched-b", heartbeat_timeout=30.0)
    live, taken = decide(copy.deepcopy(drive.state), drive.now + 1, other), decide(rebuilt, drive.now + 1, other)
    assert live == taken
    assert not [event for event in taken if isinstance(event, TaskMapExpanded | TaskQueued)]


def test_a_snapshot_keeps_the_expansion_and_the_instances():
    state = _mid_expansion().state
    assert decode_snapshot(encode_snapshot(Snapshot(0, state, {}))).state == state


# -- commands of one map index ------------------------------------------------------------------

def _finished_mapped() -> Drive:
    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2, 3])])), task("total", "add"))
    return drive.to_the_end()


def test_clearing_one_map_index_reruns_that_instance_alone_with_its_element():
    drive = _finished_mapped()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="add", map_index=1, request_id="c1", at=50.0))
    drive.now = 50.0
    drive.to_the_end()
    assert [(event.task_id, event.map_index) for event in drive.of(TaskCleared)] == [("add", 1)]
    again = [event for event in drive.of(TaskQueued) if event.try_number == 2]
    assert [(event.map_index, element(event)) for event in again] == [(1, {"x": 2})]
    assert len(drive.of(TaskMapExpanded)) == 1 and drive.finished() == "success"


def test_clearing_a_mapped_task_clears_every_instance_and_expands_it_again():
    drive = _finished_mapped()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="add", request_id="c2", at=50.0))
    drive.now = 50.0
    drive.to_the_end()
    assert sorted(event.map_index for event in drive.of(TaskCleared)) == [-1, 0, 1, 2]  # -1: the whole, last
    assert drive.of(TaskCleared)[-1].map_index == -1 and len(drive.of(TaskMapExpanded)) == 2
    assert drive.finished() == "success"


def test_marking_one_map_index_changes_that_instance_only():
    drive = _finished_mapped()
    drive.append(MarkTask(dag_id="etl", run_id=RUN, task_id="add", map_index=2, state="failed", request_id="m1",
                          at=50.0))
    run = drive.state.runs[("etl", RUN)]
    assert [run.tasks[f"add|{index}"].state for index in range(3)] == ["success", "success", "failed"]


def test_killing_one_map_index_stops_that_instance_only():
    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2, 3])])),
                  outcome=lambda queued: ("success", None))
    drive.now += 1.0
    drive.append(*decide(drive.state, drive.now, drive.policy))  # queued, not started
    drive.append(KillTask(dag_id="etl", run_id=RUN, task_id="add", map_index=2, request_id="k1", at=20.0))
    kills = [event for event in decide(drive.state, 21.0, drive.policy) if isinstance(event, TaskKillRequested)]
    assert [(event.task_id, event.map_index) for event in kills] == [("add", 2)]


@pytest.mark.parametrize(("task_id", "map_index", "words"), [
    ("add", 3, "mapped task add has no map index 3 in run manual__r1 (it has 3)"),
    ("total", 0, "task total is not mapped: it has no map index 0"),
])
def test_a_command_naming_a_map_index_that_is_not_there_is_rejected(task_id, map_index, words):
    drive = _finished_mapped()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id=task_id, map_index=map_index, request_id="bad",
                           at=50.0))
    [rejected] = [event for event in decide(drive.state, 51.0, drive.policy) if isinstance(event, CommandRejected)]
    assert rejected.reason == words


# -- cost ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("upstream", [False, True])
def test_an_instances_queued_try_does_not_grow_with_the_expansion(upstream):
    """A 10,000-way expansion costs each try its element, as a 10,000-task fan-out's tries cost theirs:
    the encoded TaskQueued of an instance is as large for 10,000 instances as for 10."""
    from schemas import encode

    def first_queued_size(count: int) -> int:
        values = list(range(count))
        if upstream:
            mapped = MapDefinition(inputs=[over("x", "numbers")], max_map_length=count)
            drive = Drive(task("numbers"), task("add", "numbers", mapped=mapped), outcome=numbers(values))
            drive.step()
        else:
            drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", values)], max_map_length=count)))
        decisions = decide(drive.state, drive.now + 1, drive.policy)
        first = next(event for event in decisions if isinstance(event, TaskQueued) and event.task_id == "add")
        return len(encode(first))

    assert first_queued_size(10_000) == first_queued_size(10)


def test_clearing_the_upstream_and_downstream_expands_the_mapped_task_again_from_its_new_value():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return "success", [1, 2, 3] if queued.try_number == 1 else [5, 6]
        return "success", element(queued).get("x") if queued.map_element_json else None

    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), task("total", "add"),
                  outcome=outcome).to_the_end()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="numbers", downstream=True, request_id="c3", at=50.0))
    drive.now = 50.0
    drive.to_the_end()
    assert [event.count for event in drive.of(TaskMapExpanded)] == [3, 2]
    again = [event for event in drive.of(TaskQueued) if event.task_id == "add" and event.at > 50.0]
    assert [(event.map_index, event.try_number, element(event)) for event in again] == [(0, 2, {"x": 5}),
                                                                                         (1, 2, {"x": 6})]
    [total] = [event for event in drive.of(TaskQueued) if event.task_id == "total" and event.at > 50.0]
    assert [json.loads(item.values_json) for item in total.inputs] == [{"return_value": 5}, {"return_value": 6}]
    # instance 2 of the first expansion is gone: removed (Airflow's), not left cleared
    assert [(event.task_id, event.map_index) for event in drive.of(TaskRemoved)] == [("add", 2)]
    assert "expanded again to 2 instances" in drive.of(TaskRemoved)[0].reason
    assert drive.state.finished[("etl", RUN)].tasks["add|2"].state == "removed"
    assert drive.finished() == "success"
    assert fold(SchedulerState(), drive.log) == drive.state  # replay = live, the second expansion included


def test_clearing_an_empty_expansion_expands_it_again():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return "success", [] if queued.try_number == 1 else [7]
        return "success", None

    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), outcome=outcome).to_the_end()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="numbers", downstream=True, request_id="c4", at=50.0))
    drive.now = 50.0
    drive.to_the_end()
    assert [event.count for event in drive.of(TaskMapExpanded)] == [0, 1] and drive.finished() == "success"


def test_a_mapped_task_cleared_while_its_instances_run_stops_them_before_forgetting_its_expansion():
    drive = Drive(task("add", mapped=MapDefinition(inputs=[literal("x", [1, 2])])))
    drive.now += 1.0
    drive.append(*decide(drive.state, drive.now, drive.policy))  # queued, not started
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="add", request_id="c5", at=20.0))
    decisions = decide(drive.state, 21.0, drive.policy)
    assert [(type(event).__name__, event.map_index) for event in decisions] == [("TaskKillRequested", 0),
                                                                                ("TaskKillRequested", 1)]


def test_an_instance_rerun_after_its_upstream_alone_gave_a_shorter_value_is_given_up_saying_why():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return "success", [1, 2, 3] if queued.try_number == 1 else [5]
        return "success", element(queued).get("x") if queued.map_element_json else None

    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X), outcome=outcome).to_the_end()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="numbers", request_id="c6", at=50.0))
    drive.now = 50.0
    drive.to_the_end()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="add", map_index=2, request_id="c7", at=80.0))
    drive.now = 80.0
    drive.to_the_end()
    assert not [event for event in drive.of(TaskQueued) if event.task_id == "add" and event.at > 80.0]
    [given_up] = drive.of(TaskUpstreamFailed)
    assert (given_up.task_id, given_up.map_index, given_up.upstream_states) == ("add", 2, {"numbers": "success"})
    assert "expanded to 3 instances" in given_up.reason and "now gives 1" in given_up.reason
    assert drive.finished() == "failed"
    assert fold(SchedulerState(), drive.log) == drive.state


def test_an_instance_retry_whose_upstream_ran_again_and_failed_is_given_up_not_raised():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return ("success", [1, 2]) if queued.try_number == 1 else ("failed", None)
        if queued.try_number == 1 and element(queued)["x"] == 2:
            return "failed", None
        return "success", element(queued)["x"]

    drive = Drive(task("numbers"), task("add", "numbers", mapped=EXPAND_X, retries=1, trigger_rule="all_done"),
                  outcome=outcome)
    for _ in range(3):
        drive.step()
    drive.append(ClearTask(dag_id="etl", run_id=RUN, task_id="numbers", request_id="c8", at=drive.now))
    drive.to_the_end()  # numbers' second try fails while add[1] waits for its retry
    drive.now = 400.0
    drive.to_the_end()
    [given_up] = drive.of(TaskUpstreamFailed)
    assert given_up.map_index == 1 and "cannot be read again" in given_up.reason
    assert drive.finished() == "failed"


# -- zip -------------------------------------------------------------------------------------------

def zipped(name: str, *task_ids: str, fill: Any = None, filled: bool = False) -> MapInput:
    return MapInput(name=name, zip_task_ids=list(task_ids), zip_keys=["return_value"] * len(task_ids),
                    zip_fill_json=json.dumps(fill) if filled else "")


def values(by_task: dict[str, Any]) -> Outcome:
    """Each task in ``by_task`` returns its value there; a mapped instance returns its element."""
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id in by_task:
            return "success", by_task[queued.task_id]
        return "success", element(queued) if queued.map_element_json else None
    return outcome


ZIP_TASKS = (task("letters"), task("numbers"))


@pytest.mark.parametrize(("filled", "expected"), [
    (False, [["a", 1], ["b", 2]]),  # as long as the shortest
    (True, [["a", 1], ["b", 2], ["c", 0]]),  # with a fill value: as long as the longest
])
def test_zipped_values_expand_to_one_instance_per_tuple(filled, expected):
    mapped = MapDefinition(inputs=[zipped("pair", "letters", "numbers", fill=0, filled=filled)])
    drive = Drive(*ZIP_TASKS, task("show", "letters", "numbers", mapped=mapped),
                  outcome=values({"letters": ["a", "b", "c"], "numbers": [1, 2]})).to_the_end()
    [expanded] = drive.of(TaskMapExpanded)
    assert expanded.count == len(expected)
    assert expanded.sources == [MapSource(name="pair", length=3, task_id="letters", try_number=1),
                                MapSource(name="pair", length=2, task_id="numbers", try_number=1)]
    shown = [element(event)["pair"] for event in drive.of(TaskQueued) if event.task_id == "show"]
    assert shown == [{"__tock__": "tuple", "value": row} for row in expected]
    assert drive.finished() == "success"


def test_a_zip_with_an_empty_value_skips_the_task_naming_its_argument():
    mapped = MapDefinition(inputs=[zipped("pair", "letters", "numbers")])
    drive = Drive(*ZIP_TASKS, task("show", "letters", "numbers", mapped=mapped),
                  outcome=values({"letters": ["a"], "numbers": []})).to_the_end()
    [skipped] = [event for event in drive.of(TaskSkipped) if event.task_id == "show"]
    assert "pair is empty" in skipped.reason and drive.finished() == "success"


def test_a_zip_over_a_value_that_is_not_a_list_fails_the_task_naming_the_task():
    mapped = MapDefinition(inputs=[zipped("pair", "letters", "numbers")])
    drive = Drive(*ZIP_TASKS, task("show", "letters", "numbers", mapped=mapped),
                  outcome=values({"letters": ["a"], "numbers": 5})).to_the_end()
    [failed] = drive.of(TaskMapFailed)
    assert "numbers" in failed.reason and "int, not a list or dict" in failed.reason
    assert drive.finished() == "failed"


# -- mapped task groups ------------------------------------------------------------------------------

GROUP_X = MapDefinition(inputs=[over("x", "numbers")], group="g")


def in_group(by_index: Callable[[str, int], tuple[str, Any]]) -> Outcome:
    """``numbers`` returns [1, 2, 3]; instance N of a group task ends as ``by_index(task_id, N)`` says."""
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        if queued.task_id == "numbers":
            return "success", [1, 2, 3]
        if queued.map_index >= 0:
            return by_index(queued.task_id, queued.map_index)
        return "success", None
    return outcome


def group_drive(outcome: Outcome) -> Drive:
    return Drive(task("numbers"), task("first", "numbers", mapped=GROUP_X),
                 task("second", "numbers", "first", mapped=GROUP_X), task("after", "second"), outcome=outcome)


def test_a_mapped_groups_second_task_runs_instance_n_after_the_firsts_n_reading_its_value():
    # first[2] runs on: second[0] and second[1] run anyway, second[2] waits for it
    drive = group_drive(in_group(lambda task_id, index: ("running", None) if (task_id, index) == ("first", 2)
                                 else ("success", index * 10)))
    drive.to_the_end()
    assert [(event.task_id, event.count) for event in drive.of(TaskMapExpanded)] == [("first", 3), ("second", 3)]
    seconds = [event for event in drive.of(TaskQueued) if event.task_id == "second"]
    assert [event.map_index for event in seconds] == [0, 1]
    assert [[(item.task_id, item.map_index) for item in event.inputs] for event in seconds] == [
        [("first", 0)], [("first", 1)]]
    assert [json.loads(event.inputs[0].values_json) for event in seconds] == [{"return_value": 0},
                                                                              {"return_value": 10}]
    assert ("etl", RUN) not in drive.state.finished


def test_a_failed_instance_in_a_mapped_group_gives_up_only_its_own_index():
    drive = group_drive(in_group(lambda task_id, index: ("failed", None) if (task_id, index) == ("first", 1)
                                 else ("success", index)))
    drive.to_the_end()
    [given_up] = [event for event in drive.of(TaskUpstreamFailed) if event.task_id == "second"]
    assert given_up.map_index == 1 and given_up.upstream_states == {"numbers": "success", "first[1]": "failed"}
    assert sorted(event.map_index for event in drive.of(TaskQueued) if event.task_id == "second") == [0, 2]
    after = [event for event in drive.of(TaskUpstreamFailed) if event.task_id == "after"]
    assert len(after) == 1 and after[0].upstream_states["second[1]"] == "upstream_failed"
    assert drive.finished() == "failed"


def test_a_mapped_group_over_an_empty_value_skips_every_task_in_it():
    def outcome(queued: TaskQueued) -> tuple[str, Any]:
        return ("success", []) if queued.task_id == "numbers" else ("success", None)

    drive = group_drive(outcome).to_the_end()
    skipped = {event.task_id for event in drive.of(TaskSkipped)}
    assert {"first", "second", "after"} <= skipped and drive.finished() == "success"


def test_a_replay_of_a_mapped_group_run_folds_to_the_live_state():
    drive = group_drive(in_group(lambda task_id, index: ("success", index))).to_the_end()
    replayed = SchedulerState()
    for event in drive.log:
        evolve(replayed, event)
    assert replayed == drive.state and drive.finished() == "success"
