"""The DAG processor's pure core: given these events, when this happens, then these events."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    DagDefinition,
    DagFileProcessed,
    DagFileRemoved,
    DagParsed,
    DagParseFailed,
    DagRemoved,
    ProcessorFinished,
    ProcessorKilled,
    ProcessorStarted,
    TaskDefinition,
)
from services.dag_processor.core import (
    ParseResult,
    ProcessorConfig,
    ProcessorState,
    StartParse,
    decide,
    decide_exit,
    decide_shutdown,
    evolve,
    fold,
    processor_started,
    recovered_state,
)

CONFIG = ProcessorConfig(parallelism=2, timeout=10.0, reparse_interval=30.0, retry_backoff=5.0,
                         executors=("local",))
A, B, C = "/dags/a.py", "/dags/b.py", "/dags/c.py"


def started(path: str, processor_id: str = "p1", at: float = 0.0, file_hash: str = "h1") -> ProcessorStarted:
    return processor_started(StartParse(path, file_hash), processor_id, 100, at, CONFIG)


def parsed(dag_id: str, path: str = A, fingerprint: str = "f1") -> DagParsed:
    return DagParsed(dag_id=dag_id, file_path=path, fingerprint=fingerprint,
                     definition=DagDefinition(dag_id=dag_id, file_path=path), at=0.0)


def result(*dags: tuple[str, str], file_hash: str = "h1") -> ParseResult:
    return ParseResult(file_hash, dags=tuple((DagDefinition(dag_id=dag_id, file_path=A), print_)
                                              for dag_id, print_ in dags))


def kinds(events) -> list[str]:
    return [type(event).__name__ for event in events]


def processed(path: str, file_hash: str = "h1", dag_ids=("etl",), at: float = 0.0) -> DagFileProcessed:
    return DagFileProcessed(file_path=path, processor_id="p0", file_hash=file_hash, dag_ids=list(dag_ids),
                            duration=0.1, at=at)


def failed(path: str, file_hash: str = "h1", at: float = 0.0) -> DagParseFailed:
    return DagParseFailed(file_path=path, processor_id="p0", file_hash=file_hash, error="boom", at=at)


def parse(path: str, start: float, outcome) -> list:
    """One whole parse of ``path`` starting at ``start``: started, ended, its outcome."""
    processor_id = f"p-{path}-{start}"
    return [started(path, processor_id, at=start, file_hash=outcome.file_hash),
            ProcessorFinished(file_path=path, processor_id=processor_id, pid=100, exit_code=0, duration=0.1,
                              at=outcome.at),
            outcome]


def starts(state: ProcessorState, now: float, files: dict[str, str]) -> list[str]:
    return [decision.file_path for decision in decide(state, now, files, CONFIG) if isinstance(decision, StartParse)]


# ------------------------------------------------------------ starting parses


def test_new_and_changed_files_start_parses_up_to_the_parallelism():
    state = fold([DagFileProcessed(file_path=A, processor_id="p0", file_hash="old", dag_ids=[], duration=0, at=0)])
    decisions = decide(state, 1.0, {A: "new", B: "h", C: "h"}, CONFIG)
    assert decisions == [StartParse(A, "new"), StartParse(B, "h")]


def test_a_changed_file_is_parsed_at_once_even_in_its_failure_backoff():
    state = fold([failed(A, "h", at=0)])
    assert decide(state, 1.0, {A: "h"}, CONFIG) == []
    assert decide(state, 1.0, {A: "h2"}, CONFIG) == [StartParse(A, "h2")]


def test_a_file_being_parsed_is_not_started_twice_and_uses_a_slot():
    state = fold([started(A)])
    assert decide(state, 1.0, {A: "h2", B: "h", C: "h"}, CONFIG) == [StartParse(B, "h")]


# ------------------------------------------------------------ parsing again with unchanged bytes


def test_an_unchanged_file_is_parsed_again_after_the_reparse_interval():
    state = fold(parse(A, 0.0, processed(A, at=0.5)))
    assert starts(state, 30.49, {A: "h1"}) == []
    assert decide(state, 30.5, {A: "h1"}, CONFIG) == [StartParse(A, "h1")]


@pytest.mark.parametrize(("failures", "delay"), [(1, 5.0), (2, 10.0), (3, 20.0), (4, 30.0), (9, 30.0), (80, 30.0)])
def test_after_failures_in_a_row_an_unchanged_file_is_retried_with_backoff_up_to_the_interval(failures, delay):
    state = fold([event for n in range(failures) for event in parse(A, 100.0 * n, failed(A, at=100.0 * n + 1))])
    last = 100.0 * (failures - 1) + 1
    assert starts(state, last + delay - 0.01, {A: "h1"}) == []
    assert starts(state, last + delay, {A: "h1"}) == [A]


def test_a_clean_parse_ends_the_backoff():
    state = fold(parse(A, 0.0, failed(A, at=1.0)) + parse(A, 10.0, failed(A, at=11.0))
                 + parse(A, 30.0, processed(A, at=31.0)))
    assert starts(state, 31.0 + 29.9, {A: "h1"}) == []
    assert starts(state, 31.0 + 30.0, {A: "h1"}) == [A]


def test_a_transient_timeout_is_retried_after_the_backoff_with_the_same_bytes():
    killed, timeout = decide(fold([started(A, at=0.0)]), 10.0, {A: "h1"}, CONFIG)
    state = fold([killed, timeout], fold([started(A, at=0.0)]))
    assert (killed.reason, timeout.file_hash) == ("timeout", "h1")
    assert starts(state, 14.9, {A: "h1"}) == []
    assert starts(state, 15.0, {A: "h1"}) == [A]


def test_a_crashed_parse_is_retried_after_the_backoff():
    state = fold([started(A, at=0.0)])
    state = fold(decide_exit(state, "p1", -9, None, 2.0, CONFIG), state)
    assert starts(state, 6.9, {A: "h1"}) == []
    assert starts(state, 7.0, {A: "h1"}) == [A]


def test_changed_files_come_first_then_the_longest_due():
    state = fold(parse(A, 0.0, processed(A, at=0.0)) + parse(C, -10.0, processed(C, dag_ids=["c"], at=-10.0)))
    assert starts(state, 100.0, {A: "h1", B: "new", C: "h1"}) == [B, C]
    assert starts(state, 100.0, {A: "h1", C: "h1"}) == [C, A]


# ------------------------------------------------------------ helper modules

HELPER, OTHER_HELPER = "/dags/common.py", "/dags/lib/util.py"


def folder_after_first_parses() -> ProcessorState:
    """A and B define DAGs, two helpers define none; all parsed at 0-4."""
    return fold(parse(A, 0.0, processed(A, at=0.1)) + parse(B, 1.0, processed(B, dag_ids=["b"], at=1.1))
                + parse(HELPER, 2.0, processed(HELPER, dag_ids=[], at=2.1))
                + parse(OTHER_HELPER, 3.0, processed(OTHER_HELPER, dag_ids=[], at=3.1)))


SCAN = {A: "h1", B: "h1", HELPER: "h1", OTHER_HELPER: "h1"}


def test_new_helper_content_reparses_the_dag_files_of_the_folder_but_not_other_helpers():
    state = folder_after_first_parses()
    assert starts(state, 5.0, {**SCAN, HELPER: "h2"}) == [HELPER]  # the helper's own parse comes first
    state = fold(parse(HELPER, 5.0, processed(HELPER, "h2", dag_ids=[], at=5.1)), state)
    assert starts(state, 5.2, {**SCAN, HELPER: "h2"}) == [A, B]
    state = fold(parse(A, 5.2, processed(A, at=5.3)) + parse(B, 5.2, processed(B, dag_ids=["b"], at=5.3)), state)
    assert starts(state, 6.0, {**SCAN, HELPER: "h2"}) == []


def test_a_dag_file_that_started_after_the_helper_change_is_not_parsed_again():
    state = folder_after_first_parses()
    state = fold(parse(A, 4.5, processed(A, at=4.6)), state)  # began before the helper's parse below
    state = fold(parse(B, 5.5, processed(B, dag_ids=["b"], at=5.6)), state)  # began after it
    state = fold(parse(HELPER, 5.0, processed(HELPER, "h2", dag_ids=[], at=5.8)), state)
    assert starts(state, 6.0, {**SCAN, HELPER: "h2"}) == [A]


def test_a_changed_dag_file_reparses_only_itself():
    state = folder_after_first_parses()
    state = fold(parse(A, 5.0, processed(A, "h2", at=5.1)), state)
    assert starts(state, 6.0, {**SCAN, A: "h2"}) == []


def test_a_helper_that_breaks_and_is_fixed_reparses_the_dag_files_each_time():
    state = fold(parse(A, 0.0, processed(A, at=0.1)) + parse(HELPER, 1.0, processed(HELPER, dag_ids=[], at=1.1)))
    state = fold(parse(HELPER, 2.0, failed(HELPER, "broken", at=2.1)), state)
    assert starts(state, 2.2, {A: "h1", HELPER: "broken"}) == [A]  # to show the import error it causes
    state = fold(parse(A, 2.2, failed(A, at=2.3)), state)
    state = fold(parse(HELPER, 3.0, processed(HELPER, "fixed", dag_ids=[], at=3.1)), state)
    assert starts(state, 3.2, {A: "h1", HELPER: "fixed"}) == [A]  # before A's 5 s backoff


def test_a_module_that_failed_on_its_own_and_is_fixed_reparses_the_dag_files_it_broke():
    state = fold(parse(A, 0.0, failed(A, at=0.1)) + parse(HELPER, 1.0, failed(HELPER, at=1.1)))
    state = fold(parse(HELPER, 2.0, processed(HELPER, "h2", dag_ids=[], at=2.1)), state)
    assert starts(state, 2.2, {A: "h1", HELPER: "h2"}) == [A]  # before its 5 s backoff


def test_editing_a_file_that_never_parsed_cleanly_reparses_nothing_else():
    state = fold(parse(A, 0.0, processed(A, at=0.1)) + parse(C, 1.0, failed(C, at=1.1)))
    state = fold(parse(C, 2.0, failed(C, "h2", at=2.1)), state)
    assert starts(state, 2.2, {A: "h1", C: "h2"}) == []


def test_the_first_parse_of_a_new_helper_reparses_nothing():
    state = fold(parse(A, 0.0, processed(A, at=0.1)) + parse(HELPER, 1.0, processed(HELPER, dag_ids=[], at=1.1)))
    assert starts(state, 2.0, {A: "h1", HELPER: "h1"}) == []


def test_removing_a_helper_reparses_the_dag_files_removing_a_dag_file_does_not():
    state = folder_after_first_parses()
    without_helper = {path: digest for path, digest in SCAN.items() if path != HELPER}
    [removed] = decide(state, 5.0, without_helper, CONFIG)[:1]
    assert removed == DagFileRemoved(file_path=HELPER, at=5.0)
    assert starts(evolve(state, removed), 5.1, without_helper) == [A, B]
    dag_file_gone = fold([DagRemoved(dag_id="etl", file_path=A, at=5.0), DagFileRemoved(file_path=A, at=5.0)], state)
    assert starts(dag_file_gone, 5.1, {path: digest for path, digest in SCAN.items() if path != A}) == []


# ------------------------------------------------------------ children ending


def test_a_child_past_its_deadline_is_killed_with_one_failure_and_its_slot_reused():
    state = fold([started(A, at=0.0), started(B, "p2", at=5.0)])
    decisions = decide(state, 10.0, {A: "h1", B: "h1", C: "h"}, CONFIG)
    assert kinds(decisions) == ["ProcessorKilled", "DagParseFailed", "StartParse"]
    assert decisions[2] == StartParse(C, "h")  # A timed out on this content: not retried
    killed, failed = decisions[:2]
    assert (killed.reason, killed.processor_id, failed.file_hash) == ("timeout", "p1", "h1")
    assert "longer than 10 s" in failed.error
    assert set(evolve(state, killed).children) == {"p2"}


def test_a_killed_child_that_exits_late_produces_nothing():
    state = fold([started(A), ProcessorKilled(file_path=A, processor_id="p1", pid=100, reason="timeout", at=1)])
    assert decide_exit(state, "p1", 0, result(("etl", "f1")), 2.0, CONFIG) == []


def test_a_crashed_child_is_reported_died_with_the_signal_as_error():
    events = decide_exit(fold([started(A)]), "p1", -11, None, 1.0, CONFIG)
    assert kinds(events) == ["ProcessorKilled", "DagParseFailed"]
    assert events[0].reason == "died" and events[0].exit_code == -11
    assert "SIGSEGV" in events[1].error and events[1].file_hash == "h1"


def test_a_child_that_exits_without_a_result_is_reported_died_with_its_code():
    events = decide_exit(fold([started(A)]), "p1", 3, None, 1.0, CONFIG)
    assert events[0].reason == "died" and "exited with code 3" in events[1].error


def test_an_error_in_the_file_is_one_failure_after_a_normal_finish():
    error = ParseResult("h1", error="SyntaxError: bad", traceback="Traceback ...")
    events = decide_exit(fold([started(A)]), "p1", 0, error, 1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagParseFailed"]
    assert (events[1].error, events[1].traceback) == ("SyntaxError: bad", "Traceback ...")


def test_shutdown_kills_every_running_child():
    state = fold([started(A, "p1"), started(B, "p2")])
    killed = decide_shutdown(state, 5.0)
    assert {(event.processor_id, event.reason) for event in killed} == {("p1", "shutdown"), ("p2", "shutdown")}
    assert fold(killed, state).children == {}


# ------------------------------------------------------------ DAG definitions


def test_dag_parsed_only_when_the_fingerprint_changed():
    state = fold([parsed("same", fingerprint="f1"), parsed("other", fingerprint="f1"), started(A)])
    events = decide_exit(state, "p1", 0, result(("same", "f1"), ("other", "f2"), ("new", "f3")), 1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagFileProcessed", "DagParsed", "DagParsed"]
    assert [event.dag_id for event in events[2:]] == ["other", "new"]
    assert events[1].dag_ids == ["new", "other", "same"]


def test_a_dag_no_longer_in_its_file_is_removed():
    state = fold([parsed("kept"), parsed("dropped"), parsed("elsewhere", path=B), started(A)])
    events = decide_exit(state, "p1", 0, result(("kept", "f1")), 1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagFileProcessed", "DagRemoved"]
    assert events[2].dag_id == "dropped"


def test_a_deleted_file_removes_its_dags_but_waits_while_it_is_being_parsed():
    processed = DagFileProcessed(file_path=A, processor_id="p0", file_hash="h", dag_ids=["etl"], duration=0, at=0)
    state = fold([parsed("etl"), processed])
    assert kinds(decide(state, 1.0, {}, CONFIG)) == ["DagRemoved", "DagFileRemoved"]
    assert decide(evolve(state, started(A)), 1.0, {}, CONFIG) == []


def test_a_dag_id_owned_by_another_existing_file_is_a_failure():
    owner = DagFileProcessed(file_path=B, processor_id="p0", file_hash="h", dag_ids=["etl"], duration=0, at=0)
    state = fold([parsed("etl", path=B), owner, started(A)])
    events = decide_exit(state, "p1", 0, result(("etl", "f9")), 1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagParseFailed"]
    assert f"already defined in {B}" in events[1].error


def test_recovered_dags_are_not_republished_and_vanished_files_are_removed():
    state = recovered_state([("etl", parsed("etl")), ("gone", parsed("gone", path=C)), ("dead", None)])
    assert kinds(decide(state, 1.0, {A: "h1"}, CONFIG)) == ["DagRemoved", "DagFileRemoved", "StartParse"]
    events = decide_exit(evolve(state, started(A)), "p1", 0, result(("etl", "f1")), 1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagFileProcessed"]


def test_a_task_on_an_executor_this_installation_does_not_run_is_a_parse_error():
    definition = DagDefinition(dag_id="etl", file_path=A, tasks=[TaskDefinition(task_id="load", kind="bash"),
                                                              TaskDefinition(task_id="spark", kind="bash",
                                                                             executor="celery")])
    events = decide_exit(fold([parsed("etl"), started(A)]), "p1", 0, ParseResult("h1", dags=((definition, "f2"),)),
                         1.0, CONFIG)
    assert kinds(events) == ["ProcessorFinished", "DagParseFailed"]
    assert "task 'spark' of DAG 'etl' names executor 'celery'" in events[1].error
    assert "available: local" in events[1].error
    with_celery = dataclasses.replace(CONFIG, executors=("local", "celery"))
    events = decide_exit(fold([parsed("etl"), started(A)]), "p1", 0, ParseResult("h1", dags=((definition, "f2"),)),
                         1.0, with_celery)
    assert kinds(events) == ["ProcessorFinished", "DagFileProcessed", "DagParsed"]


def test_evolve_refuses_an_event_it_has_no_handler_for():
    with pytest.raises(TypeError, match="no handler for str"):
        evolve(ProcessorState(), "not an event")


# ------------------------------------------------------------ properties

PATHS = [A, B, C]
actions = st.lists(st.one_of(
    st.tuples(st.just("scan"), st.dictionaries(st.sampled_from(PATHS), st.sampled_from(["h1", "h2"]))),
    st.tuples(st.just("tick"), st.floats(min_value=0, max_value=15)),
    st.tuples(st.just("exit"), st.integers(0, 5), st.sampled_from([0, 0, 1, -9, -11])),
    st.tuples(st.just("late_exit"), st.integers(0, 50)),
), max_size=60)


class World:
    """Drives the core as the shell does, with simulated children, and records every event."""

    def __init__(self, config: ProcessorConfig = CONFIG) -> None:
        self.config = config
        self.state, self.events, self.now, self.files = ProcessorState(), [], 0.0, {}
        self.running: list[str] = []  # processor ids of children still alive in the "OS"
        self.started = 0

    def emit(self, event) -> None:
        self.events.append(event)
        self.state = evolve(self.state, event)
        if isinstance(event, ProcessorKilled) and event.processor_id in self.running:
            self.running.remove(event.processor_id)  # the shell kills it right after applying

    def act(self, action) -> None:
        match action:
            case ("scan", files):
                self.files = files
            case ("tick", seconds):
                self.now += seconds
                self.decide()
            case ("exit", index, code) if self.running:
                processor_id = self.running.pop(index % len(self.running))
                outcome = self.imported(result(("etl", "f1"))) if code == 0 else None
                for event in decide_exit(self.state, processor_id, code, outcome, self.now, self.config):
                    self.emit(event)
            case ("late_exit", number) if f"p{number}" not in self.running:  # killed or never started
                for event in decide_exit(self.state, f"p{number}", 0, self.imported(result(("etl", "f2"))),
                                         self.now, self.config):
                    self.emit(event)

    def imported(self, outcome: ParseResult) -> ParseResult:
        # With skipping on, each parse says it imported the other files of the folder as the scan saw them.
        if self.config.forced_reparse_every == 1:
            return outcome
        return dataclasses.replace(outcome, imports=tuple(sorted(self.files.items())))

    def decide(self) -> None:
        for decision in decide(self.state, self.now, self.files, self.config):
            if isinstance(decision, StartParse):
                processor_id = f"p{self.started}"
                self.started += 1
                self.running.append(processor_id)
                self.emit(processor_started(decision, processor_id, 1000 + self.started, self.now, self.config))
            else:
                self.emit(decision)


def played(program, config: ProcessorConfig = CONFIG) -> World:
    world = World(config)
    for action in program:
        world.act(action)
    return world


def ends_by_processor(events) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        if isinstance(event, ProcessorFinished | ProcessorKilled):
            counts[event.processor_id] = counts.get(event.processor_id, 0) + 1
    return counts


SKIPPING_WORLD = ProcessorConfig(parallelism=2, timeout=10.0, reparse_interval=30.0, retry_backoff=5.0,
                                 executors=("local",), forced_reparse_every=10)


@settings(max_examples=300, deadline=None)
@given(actions, st.sampled_from([CONFIG, SKIPPING_WORLD]))
def test_the_table_is_the_fold_of_the_emitted_events_and_holds_only_live_children(program, config):
    world = World(config)
    for action in program:
        world.act(action)
        assert world.state == fold(world.events)
        assert set(world.state.children) == set(world.running)
        assert len(world.state.children) <= CONFIG.parallelism
        ended = ends_by_processor(world.events)
        assert not set(ended) & set(world.state.children), "an ended child is still in the wait set"
        assert all(count == 1 for count in ended.values())


@settings(max_examples=300, deadline=None)
@given(actions, st.sampled_from([CONFIG, SKIPPING_WORLD]))
def test_every_started_child_ends_exactly_once_and_each_parse_has_one_outcome(program, config):
    world = played(program, config)
    for event in decide_shutdown(world.state, world.now):
        world.emit(event)
    starts = [event.processor_id for event in world.events if isinstance(event, ProcessorStarted)]
    assert ends_by_processor(world.events) == {processor_id: 1 for processor_id in starts}
    outcomes: dict[str, int] = {}
    for event in world.events:
        if isinstance(event, DagFileProcessed | DagParseFailed):
            outcomes[event.processor_id] = outcomes.get(event.processor_id, 0) + 1
    shut_down = {event.processor_id for event in world.events
                 if isinstance(event, ProcessorKilled) and event.reason == "shutdown"}
    assert outcomes == {processor_id: 1 for processor_id in starts if processor_id not in shut_down}


@settings(max_examples=200, deadline=None)
@given(actions, st.integers(0, 200), st.sampled_from([CONFIG, SKIPPING_WORLD]))
def test_folding_in_pieces_equals_folding_in_one_go(program, cut, config):
    world = played(program, config)
    cut = min(cut, len(world.events))
    assert fold(world.events[cut:], fold(world.events[:cut])) == fold(world.events)


def test_removal_events_round_trip_through_the_fold():
    state = fold([parsed("etl"), DagFileProcessed(file_path=A, processor_id="p", file_hash="h", dag_ids=["etl"],
                                                  duration=0, at=0)])
    state = fold([DagRemoved(dag_id="etl", file_path=A, at=1), DagFileRemoved(file_path=A, at=1)], state)
    assert state == ProcessorState()


# ------------------------------------------------------------ skipping files whose bytes and imports are unchanged

SKIPPING = dataclasses.replace(CONFIG, parallelism=10, forced_reparse_every=10)  # forced every 300 s
COMMON, PKG = "/dags/common.py", "/dags/pkg/mod.py"
WITH_IMPORTS = {A: "h1", COMMON: "c1", PKG: "m1"}


def processed_importing(path: str, imports: dict[str, str] | None, at: float, file_hash: str = "h1",
                        dag_ids=("etl",)) -> DagFileProcessed:
    return dataclasses.replace(processed(path, file_hash, dag_ids, at=at), imports=imports)


def folder_with(outcome_of_a: DagFileProcessed) -> ProcessorState:
    """The helper modules parsed on their own (they define no DAG), then A with ``outcome_of_a``."""
    return fold(parse(COMMON, 0.0, processed_importing(COMMON, {}, at=0.1, file_hash="c1", dag_ids=()))
                + parse(PKG, 0.0, processed_importing(PKG, {}, at=0.1, file_hash="m1", dag_ids=()))
                + parse(A, 0.2, outcome_of_a))


def parses_of_a(state: ProcessorState, now: float, files: dict[str, str]) -> bool:
    return A in [decision.file_path for decision in decide(state, now, files, SKIPPING)
                 if isinstance(decision, StartParse)]


@pytest.mark.parametrize(("now", "expected"), [
    (30.5, False), (60.5, False), (150.0, False), (300.49, False),  # every interval passes: unchanged, skipped
    (300.5, True),  # the 10th interval: parsed again whatever the hashes say (the clock, env, other files)
])
def test_a_file_whose_bytes_and_imports_are_unchanged_is_parsed_again_only_every_k_intervals(now, expected):
    state = folder_with(processed_importing(A, {COMMON: "c1", PKG: "m1"}, at=0.5))
    assert parses_of_a(state, now, WITH_IMPORTS) is expected


def test_a_file_that_imports_nothing_from_the_folder_is_skipped_as_well():
    state = fold(parse(A, 0.0, processed_importing(A, {}, at=0.5)))
    assert not parses_of_a(state, 30.5, {A: "h1"})
    assert parses_of_a(state, 300.5, {A: "h1"})


@pytest.mark.parametrize("changed", [{COMMON: "c2"}, {PKG: "m2"}])
def test_new_content_in_an_imported_module_parses_the_file_at_the_next_turn(changed):
    state = folder_with(processed_importing(A, {COMMON: "c1", PKG: "m1"}, at=0.5))
    assert parses_of_a(state, 1.0, {**WITH_IMPORTS, **changed})
    state = fold(parse(A, 1.0, processed_importing(A, {**WITH_IMPORTS, **changed}, at=1.1)), state)
    assert not parses_of_a(state, 31.5, {**WITH_IMPORTS, **changed})  # its new imports recorded: skipped again


def test_an_import_missing_from_the_scan_parses_the_file_every_interval():
    # Deleted, or where the scan does not look (a symlinked directory): the hashes cannot tell.
    state = folder_with(processed_importing(A, {COMMON: "c1", "/elsewhere/lib.py": "l1"}, at=0.5))
    assert not parses_of_a(state, 30.49, WITH_IMPORTS)
    assert parses_of_a(state, 30.5, WITH_IMPORTS)


def test_imports_not_recorded_parse_the_file_every_interval_as_before():
    # A DagFileProcessed v1, or a parse that imported too much to publish.
    state = fold(parse(A, 0.0, processed_importing(A, None, at=0.5)))
    assert parses_of_a(state, 30.5, {A: "h1"})


def test_a_failing_file_keeps_its_backoff_up_to_one_interval_whatever_it_imported():
    state = folder_with(processed_importing(A, {COMMON: "c1"}, at=0.5))
    state = fold(parse(A, 300.5, failed(A, at=301.0)), state)
    assert not parses_of_a(state, 305.99, WITH_IMPORTS)
    assert parses_of_a(state, 306.0, WITH_IMPORTS)
    state = fold(parse(A, 306.0, processed_importing(A, {COMMON: "c1"}, at=306.5)), state)
    assert not parses_of_a(state, 336.5, WITH_IMPORTS)  # clean again: skipped again


def test_changed_bytes_and_a_changed_helper_still_parse_a_skipped_file_at_once():
    state = folder_with(processed_importing(A, {}, at=0.5))  # imports no helper, as far as it recorded
    assert parses_of_a(state, 31.5, {**WITH_IMPORTS, A: "h2"})
    state = fold(parse(COMMON, 2.0, processed_importing(COMMON, {}, at=2.1, file_hash="c2", dag_ids=())), state)
    assert parses_of_a(state, 2.2, {**WITH_IMPORTS, COMMON: "c2"})  # the helper rule: the folder is parsed again


def test_the_imports_a_child_reports_are_in_its_file_processed_and_in_the_fold():
    state = fold([started(A)])
    report = dataclasses.replace(result(("etl", "f1")), imports=((COMMON, "c1"), (PKG, "m1")))
    events = decide_exit(state, "p1", 0, report, 1.0, SKIPPING)
    [file_processed] = [event for event in events if isinstance(event, DagFileProcessed)]
    assert file_processed.imports == {COMMON: "c1", PKG: "m1"}
    assert fold(events, state).files[A].imports == {COMMON: "c1", PKG: "m1"}


def test_a_failed_parse_keeps_the_imports_of_the_last_clean_one():
    state = fold(parse(A, 0.0, processed_importing(A, {COMMON: "c1"}, at=0.5)) + parse(A, 1.0, failed(A, at=1.1)))
    assert state.files[A].imports == {COMMON: "c1"} and state.files[A].failures == 1
