"""The runner's supervision of user code: every way a task can end becomes a clear outcome.

Real forked children (and the runner's group watcher), no broker: the heartbeat is a plain
callable here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.executors.requests import TryRequest
from infra.group_watcher import GroupWatcher, die_with_parent, enrolled_after
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from services.runner.child import ERROR_LIMIT, TRACEBACK_LIMIT, cut_to_first
from services.runner.supervise import KILL_CHECK_SECONDS, STOPPED, supervise, supervise_all

DAG_FILE = '''
import ctypes, os, sys, time
from tock import DAG, BashTask, task

with DAG("cases") as dag:
    @task
    def ok():
        print("hello from the task")

    @task
    def raises():
        raise ValueError("bad input")

    @task
    def exits():
        os._exit(7)

    @task
    def segfaults():
        ctypes.string_at(0)

    @task
    def sleeps():
        time.sleep(30)

    @task
    def beats():
        time.sleep(0.5)

    @task
    def naps():
        time.sleep(1.5)

    @task
    def terminates_itself():
        os.kill(os.getpid(), 15)

    @task
    def hangs_up_on_itself():
        os.kill(os.getpid(), 1)

    @task
    def where():
        print(os.getpid(), os.getppid(), os.getpgid(0))

    @task
    def raises_accents():
        raise ValueError("é" * 20000)

    @task
    def raises_emoji():
        raise ValueError("\N{GRINNING FACE}" * 50000)

    ok(); raises(); exits(); segfaults(); sleeps(); beats(); naps(); terminates_itself(); hangs_up_on_itself()
    where()
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    @task
    def raises_unprintable():
        raise Unprintable()

    @task
    def raises_a_lone_surrogate():
        raise ValueError("half \\ud800 a pair")

    @task
    def tells_its_signals():
        import signal
        ignored = sorted(signal.Signals(number).name for number in signal.valid_signals()
                         if signal.getsignal(number) == signal.SIG_IGN)
        blocked = sorted(signal.Signals(number).name for number in signal.pthread_sigmask(signal.SIG_BLOCK, []))
        print("ignored", *ignored, "blocked", *blocked)

    raises_accents(); raises_emoji(); raises_unprintable(); raises_a_lone_surrogate(); tells_its_signals()
    BashTask("bash_hangs_up_on_itself", "kill -HUP $$")
    BashTask("bash_env", "env")
    BashTask("bash_tells_its_signals", "grep -E '^Sig(Ign|Blk)' /proc/self/status")
    BashTask("bash_fails", "echo to-stderr >&2; exit 3")
    BashTask("bash_sleeps", "sleep 300 & sleep 300; wait")
'''


@pytest.fixture
def dag_file(tmp_path):
    path = tmp_path / "cases.py"
    path.write_text(DAG_FILE)
    return path


def run(tmp_path, dag_file, task_id, timeout=None, every=10.0):
    request = TryRequest("cases", "r1", task_id, 1, str(dag_file), timeout)
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    beats = []
    outcome = supervise(request, str(paths.log), every, lambda: beats.append(1))
    return outcome, paths.log.read_text(), len(beats)


@pytest.mark.parametrize(("task_id", "error"), [
    ("raises", "ValueError: bad input"),
    ("exits", "user code exited with code 7"),
    ("segfaults", "user code killed by signal SIGSEGV (11)"),
    ("bash_fails", "user code exited with code 3"),
    ("terminates_itself", "user code killed by signal SIGTERM (15)"),
    ("hangs_up_on_itself", "user code killed by signal SIGHUP (1)"),
    ("raises_unprintable", "Unprintable: (unprintable)"),
    ("raises_a_lone_surrogate", "ValueError: half \\ud800 a pair"),  # text any codec takes
])
def test_failures_are_reported_with_their_cause(tmp_path, dag_file, task_id, error):
    outcome, _log, _beats = run(tmp_path, dag_file, task_id)
    assert (outcome.succeeded, outcome.error) == (False, error)


@pytest.fixture
def started_from_a_nohup_shell():
    """The runner started as from ``nohup`` with a few signals blocked: its user code must not inherit it."""
    ignored = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGHUP, signal.SIGQUIT,
                                                                            signal.SIGUSR1)}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGALRM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for signum, previous in ignored.items():
            signal.signal(signum, previous)


@pytest.mark.parametrize("task_id", ["hangs_up_on_itself", "bash_hangs_up_on_itself"])
def test_user_code_takes_its_own_hang_up_whoever_started_the_runner(tmp_path, dag_file, task_id,
                                                                    started_from_a_nohup_shell):
    outcome, _log, _beats = run(tmp_path, dag_file, task_id)
    assert (outcome.succeeded, outcome.error) == (False, "user code killed by signal SIGHUP (1)")


def test_python_user_code_starts_with_the_signals_of_a_fresh_interpreter(tmp_path, dag_file,
                                                                         started_from_a_nohup_shell):
    outcome, log, _beats = run(tmp_path, dag_file, "tells_its_signals")
    # what CPython itself ignores at start-up (a write to a closed pipe raises BrokenPipeError), nothing else
    assert outcome.succeeded and log == "ignored SIGPIPE SIGXFSZ blocked\n"


def test_bash_user_code_starts_with_default_signals_and_an_empty_mask(tmp_path, dag_file,
                                                                      started_from_a_nohup_shell):
    outcome, log, _beats = run(tmp_path, dag_file, "bash_tells_its_signals")
    masks = dict(zip(log.split()[::2], (int(mask, 16) for mask in log.split()[1::2]), strict=True))
    # Signals 32 and 33 are glibc's own (not in valid_signals: no program sets them through libc),
    # and another test of the session may leave one ignored; every other signal must be at its default.
    settable = sum(1 << (signum - 1) for signum in signal.valid_signals())
    assert outcome.succeeded and set(masks) == {"SigBlk:", "SigIgn:"}
    assert (masks["SigBlk:"] & settable, masks["SigIgn:"] & settable) == (0, 0)


@pytest.fixture
def runner_holding_secrets(monkeypatch):
    for name, value in {"TOCK_API_TOKEN": "admin-secret", "TOCK_DB_URL": "postgresql://tock:pw@db/tock",
                        "CLOUD_SECRET_ACCESS_KEY": "cloud-secret", "LC_ALL": "C.UTF-8", "MY_SETTING": "mine"}.items():
        monkeypatch.setenv(name, value)


def environment_of(log: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)


def test_user_code_inherits_only_what_the_default_allow_list_passes(tmp_path, dag_file, runner_holding_secrets):
    outcome, log, _beats = run(tmp_path, dag_file, "bash_env")
    seen = environment_of(log)
    assert outcome.succeeded
    assert not {"TOCK_API_TOKEN", "TOCK_DB_URL", "CLOUD_SECRET_ACCESS_KEY", "MY_SETTING"} & set(seen)
    assert "secret" not in log and "pw@" not in log
    assert (seen["PATH"], seen["LC_ALL"]) == (os.environ["PATH"], "C.UTF-8")
    assert {name: value for name, value in seen.items() if name.startswith("TOCKRUN_")} == {
        "TOCKRUN_DAG_ID": "cases", "TOCKRUN_RUN_ID": "r1", "TOCKRUN_TASK_ID": "bash_env", "TOCKRUN_TRY_NUMBER": "1"}


def test_the_allow_list_is_the_runners_to_set_and_never_passes_tock_settings(tmp_path, dag_file,
                                                                             runner_holding_secrets):
    request = TryRequest("cases", "r1", "bash_env", 1, str(dag_file))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    outcome = supervise(request, str(paths.log), 10.0, lambda: None, TaskEnvironment.parse("MY_*, TOCK_*,*SECRET*"))
    seen = environment_of(paths.log.read_text())
    assert outcome.succeeded and set(seen) - {"PWD", "SHLVL", "_"} == {
        "MY_SETTING", "CLOUD_SECRET_ACCESS_KEY", "TOCKRUN_DAG_ID", "TOCKRUN_RUN_ID", "TOCKRUN_TASK_ID",
        "TOCKRUN_TRY_NUMBER"}  # bash sets PWD, SHLVL and _ itself


@pytest.mark.parametrize(("allowed", "name", "passes"), [
    ("PATH,LC_*", "PATH", True), ("PATH,LC_*", "LC_ALL", True), ("PATH,LC_*", "LANG", False),
    ("PATH", "path", False), ("*", "TOCK_API_TOKEN", False), ("TOCK_API_TOKEN", "TOCK_API_TOKEN", False),
    ("*", "TOCKRUN_TASK_ID", False),  # an inherited one is another try's: the runner sets this try's
    ("", "PATH", False),
])
def test_what_the_allow_list_passes(allowed, name, passes):
    assert TaskEnvironment.parse(allowed).passes(name) is passes


def test_the_default_allow_list_passes_the_usual_variables_and_no_secret_of_tock():
    default = TaskEnvironment.default()
    assert all(map(default.passes, ["PATH", "HOME", "LANG", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"]))
    assert not any(map(default.passes, ["TOCK_API_TOKEN", "TOCK_DB_URL", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"]))


def test_exception_comes_with_its_traceback_and_lands_in_the_log(tmp_path, dag_file):
    outcome, log, _beats = run(tmp_path, dag_file, "raises")
    assert "in raises" in outcome.traceback and "ValueError: bad input" in log


@pytest.mark.parametrize(("task_id", "letter", "count"), [("raises_accents", "é", 20000),
                                                         ("raises_emoji", "\N{GRINNING FACE}", 50000)])
def test_a_report_larger_than_a_pipe_ends_the_try_with_its_reason_cut_to_the_bound(tmp_path, dag_file, task_id,
                                                                                   letter, count):
    # The timeout only keeps a regression from hanging the suite: the try must end by itself, at once.
    outcome, log, _beats = run(tmp_path, dag_file, task_id, timeout=20)
    assert not outcome.succeeded and outcome.error.startswith("ValueError: " + letter * 100)
    assert len(outcome.error) <= ERROR_LIMIT and "cut" in outcome.error
    assert len(outcome.traceback) <= TRACEBACK_LIMIT and "in " + task_id in outcome.traceback
    assert log.count(letter) >= count  # the try's log keeps the whole message


# From 200 characters up: the note takes about 60 (the limits used are 2,000 and more); at 100 a
# text of 101 kept only 40 characters of its start, which Hypothesis found once.
@given(st.text(), st.integers(min_value=200, max_value=5000))
def test_a_cut_text_keeps_its_start_and_its_bound(text, limit):
    cut = cut_to_first(text, limit)
    assert cut == text if len(text) <= limit else (len(cut) == limit and cut.startswith(text[:limit // 2]))


def test_success_and_output_in_the_try_log(tmp_path, dag_file):
    outcome, log, _beats = run(tmp_path, dag_file, "ok")
    assert outcome.succeeded and log == "hello from the task\n"


def test_bash_output_goes_to_the_log(tmp_path, dag_file):
    _outcome, log, _beats = run(tmp_path, dag_file, "bash_fails")
    assert log == "to-stderr\n"


def test_execution_timeout_kills_the_task(tmp_path, dag_file):
    outcome, _log, _beats = run(tmp_path, dag_file, "sleeps", timeout=0.3)
    assert (outcome.succeeded, outcome.error) == (False, "execution timeout: still running after 0.3 s, killed")


def test_heartbeats_while_the_task_runs(tmp_path, dag_file):
    outcome, _log, beats = run(tmp_path, dag_file, "beats", every=0.1)
    assert outcome.succeeded and beats >= 3


def test_unknown_task_fails_clearly(tmp_path, dag_file):
    outcome, _log, _beats = run(tmp_path, dag_file, "nope")
    assert not outcome.succeeded and "has no task 'nope'" in outcome.error


def test_a_try_log_path_is_portable(tmp_path):
    paths = TryPaths(tmp_path, TryRequest("d", "scheduled__2026-01-01T00:00:00+00:00", "t", 2, "/x.py"))
    assert paths.log.name == "2.log" and ":" not in str(paths.folder)


def test_sigterm_to_the_runner_stops_the_user_code_and_reports_it(tmp_path, dag_file):
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    outcome, _log, _beats = run(tmp_path, dag_file, "sleeps")
    assert (outcome.succeeded, outcome.error) == (False, STOPPED)


def test_tries_supervised_together_each_end_their_own_way(tmp_path, dag_file):
    cases = {"ok": None, "exits": None, "sleeps": 0.5, "beats": None}
    requests = [TryRequest("cases", "r1", task_id, 1, str(dag_file), timeout) for task_id, timeout in cases.items()]
    tries = []
    for request in requests:
        paths = TryPaths(tmp_path / "home", request)
        paths.folder.mkdir(parents=True)
        tries.append((request, str(paths.log)))
    happened = []
    supervise_all(tries, 0.1, lambda running: happened.extend(("beat", request.task_id) for request in running),
                  lambda request, outcome: happened.append(("end", request.task_id, outcome)))
    outcomes = {entry[1]: (entry[2].succeeded, entry[2].error) for entry in happened if entry[0] == "end"}
    assert outcomes == {"ok": (True, ""), "exits": (False, "user code exited with code 7"), "beats": (True, ""),
                        "sleeps": (False, "execution timeout: still running after 0.5 s, killed")}
    assert happened.count(("beat", "beats")) >= 3
    for index, entry in enumerate(happened):
        if entry[0] == "end":
            assert ("beat", entry[1]) not in happened[index:]  # no heartbeat for a try after its end


def prepared(tmp_path, dag_file, task_ids) -> list[tuple[TryRequest, str]]:
    tries = []
    for task_id in task_ids:
        request = TryRequest("cases", "r1", task_id, 1, str(dag_file))
        paths = TryPaths(tmp_path / "home", request)
        paths.folder.mkdir(parents=True)
        tries.append((request, str(paths.log)))
    return tries


class KillRequestsOnceSleeping:
    """The seam the runner fills with its claim reader: asks to stop ``target`` once its bash has
    started its two sleeps (noting them and when it asked), nothing before."""

    def __init__(self, target: str, reason: str) -> None:
        self.target, self.reason = ("cases", "r1", target, 1), reason
        self.sleeps: list[psutil.Process] = []
        self.asked_at: float | None = None

    def __call__(self) -> dict:
        if self.asked_at is None:
            sleeps = [process for process in psutil.Process().children(recursive=True) if _name(process) == "sleep"]
            if len(sleeps) < 2:
                return {}
            self.sleeps, self.asked_at = sleeps, time.monotonic()
        return {self.target: self.reason}


def test_a_kill_request_kills_only_its_try_with_everything_it_started_and_the_try_ends_killed(tmp_path, dag_file):
    tries = prepared(tmp_path, dag_file, ["bash_sleeps", "naps"])
    kills, happened = KillRequestsOnceSleeping("bash_sleeps", "cleared"), []
    supervise_all(tries, 10.0, lambda _running: None,
                  lambda request, outcome: happened.append((request.task_id, outcome, time.monotonic())),
                  kill_requests=kills)
    assert [(task_id, outcome.succeeded, outcome.killed, outcome.error) for task_id, outcome, _at in happened] == [
        ("bash_sleeps", False, True, "cleared"), ("naps", True, False, "")]  # naps went on to its end
    killed_at = happened[0][2]
    # the heartbeat is 10 s away: the supervision woke up by itself to look for kill requests
    assert killed_at - kills.asked_at < KILL_CHECK_SECONDS + 0.5
    assert not [process for process in kills.sleeps if _alive(process)]  # its whole process group


def test_a_try_asked_to_stop_before_its_user_code_started_never_starts(tmp_path, dag_file):
    tries = prepared(tmp_path, dag_file, ["ok", "beats"])
    happened = []
    supervise_all(tries, 10.0, lambda _running: None,
                  lambda request, outcome: happened.append((request.task_id, outcome)),
                  kill_requests=lambda: {("cases", "r1", "ok", 1): "killed by an operator"})
    outcomes = {task_id: (outcome.succeeded, outcome.killed, outcome.error) for task_id, outcome in happened}
    assert outcomes == {"ok": (False, True, "killed by an operator"), "beats": (True, False, "")}
    assert not os.path.exists(tries[0][1])  # the child that writes the try's log was never forked


def test_a_kill_request_for_a_try_that_already_ended_changes_nothing(tmp_path, dag_file):
    tries = prepared(tmp_path, dag_file, ["ok", "beats"])
    happened = []
    late = lambda: {("cases", "r1", "ok", 1): "cleared"} if happened else {}  # noqa: E731 - once ok has ended
    supervise_all(tries, 10.0, lambda _running: None,
                  lambda request, outcome: happened.append((request.task_id, outcome)), kill_requests=late)
    assert [(task_id, outcome.succeeded, outcome.killed) for task_id, outcome in happened] == [
        ("ok", True, False), ("beats", True, False)]


def test_user_code_leads_a_process_group_of_its_own(tmp_path, dag_file):
    outcome, log, _beats = run(tmp_path, dag_file, "where")
    pid, parent, group = map(int, log.split())
    assert outcome.succeeded and pid == group and parent == os.getpid()


RUNNER_SCRIPT = """
import sys
from infra.executors.requests import TryRequest
from services.runner.child import ERROR_LIMIT, TRACEBACK_LIMIT, cut_to_first
from services.runner.supervise import supervise

request = TryRequest("cases", "r1", sys.argv[2], 1, sys.argv[1])
supervise(request, sys.argv[3], 10.0, lambda: None)
"""


def test_a_runner_killed_hard_takes_its_user_code_and_everything_it_started_with_it(tmp_path, dag_file):
    runner = subprocess.Popen([sys.executable, "-c", RUNNER_SCRIPT, str(dag_file), "bash_sleeps",
                               str(tmp_path / "try.log")])
    try:
        user_code = wait_for(lambda: _descendants_once_sleeping(runner.pid, 2), 10, "bash and its two sleeps")
        runner.kill()
        killed_at = time.monotonic()
        wait_for(lambda: not [process for process in user_code if _alive(process)], 1.0,
                 "the user code to die with its runner")
        assert time.monotonic() - killed_at < 1.0
    finally:
        runner.kill()
        runner.wait()
        for process in psutil.Process().children(recursive=True):
            process.kill()


def test_a_child_whose_parent_died_before_it_asked_for_the_signal_takes_the_signal_at_once():
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        if os.fork() == 0:
            while os.getppid() == first:  # until its parent is gone
                pass
            try:
                die_with_parent(signal.SIGTERM, first)
                os.write(write_end, b"survived")
            finally:
                os._exit(0)
        os._exit(0)
    os.close(write_end)
    os.waitpid(first, 0)
    assert os.read(read_end, 100) == b""  # closed by a death, not written by a survivor
    os.close(read_end)


def _descendants_once_sleeping(pid: int, sleeps: int):
    processes = psutil.Process(pid).children(recursive=True)
    return processes if sum(_name(process) == "sleep" for process in processes) >= sleeps else None


def _name(process) -> str:
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""


def _alive(process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.01)
    return found


@pytest.mark.parametrize(("lines", "enrolled"), [
    ([b"+10", b"+11"], {10, 11}),
    ([b"+10", b"-10"], set()),
    ([b"+10", b"-11"], {10}),
    ([b"-10", b"+10"], {10}),
])
def test_the_watcher_follows_enrolments_in_order(lines, enrolled):
    assert enrolled_after(lines, set()) == enrolled


def test_the_watcher_kills_the_groups_still_enrolled_when_the_runner_is_gone_and_only_those():
    watcher = GroupWatcher.start()
    enrolled, released = _enrolled_sleeper(watcher), _enrolled_sleeper(watcher)
    try:
        watcher.ended(released)
        watcher.close()  # end of file, as the runner's death would close it
        assert os.WTERMSIG(wait_for(lambda: os.waitpid(enrolled, os.WNOHANG)[1], 5, "the kill")) == signal.SIGKILL
        assert os.waitpid(released, os.WNOHANG) == (0, 0)
    finally:
        for pid in (enrolled, released):
            _kill_and_reap(pid)


def _enrolled_sleeper(watcher: GroupWatcher) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            watcher.enroll(parent)
            os.execv("/bin/sleep", ["sleep", "300"])
        finally:
            os._exit(1)
    # enrolled once it runs sleep (a runner only lets a try go once it was reaped: after its enrolment)
    wait_for(lambda: _name(psutil.Process(pid)) == "sleep", 5, "the sleeper to enrol")
    return pid


def _kill_and_reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def test_a_heartbeat_the_client_refuses_to_queue_does_not_end_the_runner(tmp_path, caplog):
    from confluent_kafka import KafkaError, KafkaException

    from infra.settings import load_settings
    from services.runner.runner import RunnerClients, _Runner

    class RefusingLog:  # the real client raised this for a topic it did not know (any more)
        def append(self, _event, **_options):
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))

    clients = RunnerClients(watcher=None, events=RefusingLog(), claims=None, logs=None)
    runner = _Runner(load_settings({"TOCK_HOME": str(tmp_path)}), clients, "local")
    request = TryRequest("etl", "r1", "t", 1, "/dags/etl.py")
    runner.requests[request.key], runner.runner_ids[request.key] = request, "me"
    runner._heartbeat([request.key])
    runner._heartbeat([request.key])
    assert [record.message for record in caplog.records if "not queued" in record.message][:1]
