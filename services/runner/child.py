"""The supervised child: loads the DAG file and runs the task's user code, output to the try's log.

It leads its own process group, which the runner's group watcher kills should the runner
die (infra/group_watcher.py), and starts user code with default signal dispositions and an
empty signal mask, whoever started Tock, and with the environment the allow-list passes
(infra/task_environment.py: ``TOCK_TASK_ENV_ALLOW``, never a TOCK_* setting) and its try's
context (``TOCKRUN_*``). It runs the user code with the try's recorded context (task_code.py) and
reports through a pipe, as JSON: the values the try passes on and its rendered fields when it ends
(with what a branch or short circuit follows, or why a try that raised the skip exception skipped: it
exits 0, a skip is no failure), or an exception, and then exits 1; any other way it ends (a segfault,
os._exit, a signal, a bash command's status) the supervisor reads from its exit status. The report is bounded: the error
(``Type: message``) to its first ERROR_LIMIT characters, and the traceback to TRACEBACK_LIMIT (each
line to ERROR_LIMIT, then its middle cut out), each with a note saying so when cut; the try's log
keeps both whole. The supervisor reads the pipe while the child runs (supervise.py), so a report
larger than the pipe's buffer never blocks the child.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import jinja2.ext  # noqa: F401 - warm: the extension each try's Jinja environment loads

# Warm: what every try's child imports on its way to the user code is imported here, in the runner, so each
# child inherits it (the warm launcher imports this module before it forks): the secrets chain's store
# (cryptography), the Jinja extension above, the context's accessors. Imported in each child they cost a
# no-op try ~7 ms of CPU; tests/unit/test_runner_warm_child.py checks that a child imports nothing more.
import infra.secrets.store  # noqa: F401 - warm
import tock.inlet_events  # noqa: F401 - warm
import tock.kafka_output  # noqa: F401 - warm
from infra.executors.requests import TryRequest
from infra.task_environment import TaskEnvironment
from schemas import TaskQueued
from services.runner.core.claim import TryKey
from services.runner.preloaded import dags_of
from services.runner.task_code import TryProgress, TryResult, run_task_code
from tock.exceptions import retryable
from tock.secrets import SecretsBackend, SecretsChain, accesses, install, masked_output, masker

ERROR_LIMIT = 2_000       # characters of a failed try's error (TaskFailed.error), note included
TRACEBACK_LIMIT = 32_000  # characters of its traceback (TaskFailed.traceback), note included
# What CPython ignores at its own start (a write to a closed pipe raises BrokenPipeError): a Python
# task starts as in a fresh interpreter, a bash task with every signal at its default.
PYTHON_IGNORES = frozenset({signal.SIGPIPE, signal.SIGXFSZ})


SecretsFactory = Callable[[Mapping[str, str], str], Sequence[SecretsBackend]]  # (environment, writer) -> chain


@dataclass(frozen=True, slots=True)
class ChildSetup:
    """What a child starts from besides its try: the environment user code may inherit, the limit of the
    values a try passes on, each try's TaskQueued (its recorded context) when the claim read it, and
    how to build its secrets chain (None: no backend, every lookup misses)."""

    environment: TaskEnvironment
    xcom_max_bytes: int = 1 << 20
    queued: Mapping[TryKey, TaskQueued] = field(default_factory=dict)
    secrets: SecretsFactory | None = None


def run_child(request: TryRequest, log_path: str, report_fd: int, setup: ChildSetup) -> NoReturn:
    """Runs in the forked child; never returns. It reports the try's values (and rendered fields) when
    the user code succeeds, the exception when it raises; a bash command's status is its exit status.
    Either way the report names the variables and connections the try read (never their values), and
    what it says, as what the try printed, has the secrets it read masked."""
    code, progress, finish = 1, TryProgress(), _no_output
    try:
        finish = _prepare(request, log_path, setup)
        task = _find_task(request)
        result = run_task_code(task, request.run_id, request.try_number, setup.queued.get(request.key),
                               setup.xcom_max_bytes, progress)
        code = _ended(result, report_fd, finish)
    except BaseException as error:  # noqa: BLE001 - every failure of user code is reported
        _report(report_fd, error, progress.rendered_json)
    finally:
        _flush()
        finish()
        os._exit(code)


def _no_output() -> None:
    """Before the try's output is set up there is nothing to finish."""


def _ended(result: TryResult, report_fd: int, finish: Callable[[], None]) -> int:
    """Report a try that ran to its end; the child's exit code (a bash command's, or 0)."""
    if result.signal:  # bash was killed: the child ends the same way, so the supervisor says which signal
        _write(report_fd, {"rendered": result.rendered_json, "accessed": accesses()})
        _flush()
        finish()
        signal.signal(result.signal, signal.SIG_DFL)
        os.kill(os.getpid(), result.signal)
    _write(report_fd, {"values": result.values_json, "rendered": result.rendered_json, "accessed": accesses(),
                       **_choice(result)})
    return result.exit_code


def _choice(result: TryResult) -> dict[str, object]:
    """The report's keys for how a try that ran to its end chose: ``follow`` (a branch's or short
    circuit's choice), ``skipped`` (the reason, bounded) for a try that raised the skip exception, or
    ``poked`` for a sensor's try whose condition was not met."""
    if result.skipped:
        print(f"the try ends skipped: {result.reason}", file=sys.stderr)  # to the try's log
        return {"skipped": cut_to_first(result.reason, ERROR_LIMIT)}
    if result.poked:
        print("the poke ends the try: its condition is not met", file=sys.stderr)
        return {"poked": {"reschedule_at": result.reschedule_at, "timed_out": result.timed_out}}
    chosen: dict[str, object] = {} if result.follow is None else {"follow": result.follow}
    if result.commands:
        chosen["commands"] = result.commands
    if result.output:
        chosen["output"] = result.output
    return {**chosen, "assets": result.asset_events_json} if result.asset_events_json else chosen


def _prepare(request: TryRequest, log_path: str, setup: ChildSetup) -> Callable[[], None]:
    """The child's process as user code starts in: signals, the secrets chain (built from the runner's
    environment before it is cleared), the environment the allow-list passes, stdin from /dev/null and
    the output to the try's log through the masker. Returns what flushes that output at the end."""
    # Before the DAG file is imported: it is user code too.
    default_signals(PYTHON_IGNORES)
    _empty_mask()
    if setup.secrets is not None:
        writer = f"{request.dag_id}/{request.run_id}/{request.task_id}/{request.try_number}"
        # What its file read at its import, when that was done before the fork (preloaded.py), is the try's too.
        install(SecretsChain(setup.secrets(dict(os.environ), writer), accessed=accesses()))
    allowed = setup.environment.for_try(os.environ, request)  # never Tock's settings (TOCK_*) or other secrets
    os.environ.clear()
    os.environ.update(allowed)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    output, finish = masked_output(log, masker())
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    # A crash's Python traceback goes to the log directly: the masking thread dies with the process
    # (a traceback names files, lines and functions, never values).
    faulthandler.enable(os.fdopen(log, "w", closefd=False))
    return finish


def default_signals(ignored: frozenset[int] = frozenset()) -> dict[int, object]:
    """Every signal to its default disposition (``ignored`` ignored), returning what each was (the file
    launcher puts them back after its import: preloaded.py). An empty signal mask follows separately
    (``_empty_mask``): user code inherits nothing of how whoever started Tock treated signals (a ``nohup``
    ignoring SIGHUP, a blocked signal), nor the runner's handlers."""
    was = {}
    for signum in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
        try:
            was[signum] = signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
        except (OSError, ValueError):  # one the C library keeps for itself
            pass
    return was


def _empty_mask() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _find_task(request: TryRequest):
    from tock import load_dags

    # Its file's launcher imported the file already (preloaded.py), else it is imported here.
    for dag in dags_of(request.dag_file) or load_dags(request.dag_file):
        if dag.dag_id == request.dag_id:
            if request.task_id not in dag.tasks:
                raise LookupError(f"DAG {request.dag_id!r} in {request.dag_file} has no task {request.task_id!r}")
            return dag.tasks[request.task_id]
    raise LookupError(f"{request.dag_file} does not define DAG {request.dag_id!r}")


def _report(report_fd: int, error: BaseException, rendered_json: str = "") -> None:
    hide = masker().mask  # the error and its traceback travel in TaskFailed: a secret they quote is masked
    text = _described(lambda: "".join(traceback.format_exception(error)), "(the traceback could not be formatted)")
    print(text, file=sys.stderr)
    message = _described(lambda: f"{type(error).__name__}: {error}", f"{type(error).__name__}: (unprintable)")
    _write(report_fd, {"error": cut_to_first(hide(message), ERROR_LIMIT), "traceback": _bounded_traceback(hide(text)),
                       "rendered": rendered_json, "accessed": accesses(), "retryable": retryable(error)})


def _write(report_fd: int, report: dict[str, object]) -> None:
    data = memoryview(json.dumps(report).encode())
    try:
        while data:  # all of it, however long: the supervisor reads as we write
            data = data[os.write(report_fd, data):]
    except OSError:  # the runner is gone
        pass


def _described(describe, fallback: str) -> str:
    """``describe()``, as text that encodes (no lone surrogates), or ``fallback`` if user code's
    ``__str__`` raises."""
    try:
        text = describe()
    except Exception:  # noqa: BLE001 - a broken __str__ of user code still ends the try reported
        text = fallback
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def cut_to_first(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start and a note, ``limit`` in all."""
    if len(text) <= limit:
        return text
    note = f" [cut to {limit} characters of {len(text)}; the try's log has it whole]"
    return text[:limit - len(note)] + note


def _bounded_traceback(text: str) -> str:
    """At most TRACEBACK_LIMIT characters: a huge message is cut on its line, so the frames above it
    stay; past the limit still, the middle goes (the first and the most recent frames stay)."""
    text = "".join(cut_to_first(line, ERROR_LIMIT) + "\n" for line in text.splitlines())
    if len(text) <= TRACEBACK_LIMIT:
        return text
    note = f"\n[... cut to {TRACEBACK_LIMIT} characters of {len(text)}; the try's log has it whole ...]\n"
    head = (TRACEBACK_LIMIT - len(note)) // 2
    return text[:head] + note + text[len(text) - (TRACEBACK_LIMIT - len(note) - head):]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
