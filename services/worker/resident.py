"""The resident runner of a Celery pool process: forked once, connected once, serving try after try.

The pool process writes one try message (infra/executors/messages.py) per line on a pipe and
reads the try's exit code back on another. The runner is the pool process's child, in the
worker's process group: a kill of the worker's whole group takes it, and its tries' user code
dies with it (the group watcher, infra/group_watcher.py).
It is told SIGTERM when its pool process dies (a revoke that terminates the task, a lost pool
process): a try it is running then ends reported failed, and it exits.

One process per pool process, not per try: a try pays no process start, no Kafka connection and
no close (each cost the worker ~12 ms of CPU and ~50 ms of wall time per try on two cores).
It is a fresh interpreter (``python -m services.worker.resident``), not a fork of the pool
process, started with only the variables the tasks' allow-list passes and given its settings
without the credentials runners never use (infra/task_environment.py): the tries' user code runs
in forks of it and could read its memory and its initial environment (/proc).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys

from infra.executors.messages import TryMessage
from infra.group_watcher import die_with_parent
from infra.pipes import read_line
from infra.settings import Settings
from infra.task_environment import TaskEnvironment, runner_settings_json
from services.runner import FAILED, RunnerClients, serve_tries

log = logging.getLogger("tock.worker")


class ResidentRunner:
    """The pool process's side: started on first use and again if it died."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pid = 0
        self._owner = 0  # the pool process that forked it (pool processes are forked from the worker)
        self._requests = self._answers = -1

    def run(self, message: TryMessage) -> int:
        """Run one try; its exit code (0 ok, 1 failed, 3 another runner had it)."""
        if not self._alive():
            self._start()
        line = message.to_json() + "\n"
        try:
            os.write(self._requests, line.encode())
            answer = read_line(self._answers)
        except OSError:
            answer = ""
        if not answer:  # the runner died with the try: its deadline and the watcher take over
            log.error("the resident runner (pid %d) died during a try", self._pid)
            self._forget()
            return FAILED
        return int(answer)

    def _alive(self) -> bool:
        if self._owner != os.getpid() or not self._pid:
            return False
        try:
            ended = os.waitpid(self._pid, os.WNOHANG) != (0, 0)
        except ChildProcessError:  # reaped already
            ended = True
        if ended:
            self._forget()
        return not ended

    def _start(self) -> None:
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        parent = os.getpid()
        command = [sys.executable, "-m", "services.worker.resident", str(request_read), str(answer_write), str(parent)]
        environment = TaskEnvironment.of(self.settings).for_runner(os.environ)
        pid = os.fork()
        if pid == 0:
            _exec(command, environment, (request_read, answer_write), (request_write, answer_read))
        os.close(request_read)
        os.close(answer_write)
        self._pid, self._owner, self._requests, self._answers = pid, parent, request_write, answer_read
        os.write(request_write, (runner_settings_json(self.settings) + "\n").encode())  # its first line

    def _forget(self) -> None:
        for descriptor in (self._requests, self._answers):
            if descriptor >= 0 and self._owner == os.getpid():
                os.close(descriptor)
        try:
            if self._pid and self._owner == os.getpid():
                os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self._pid, self._requests, self._answers = 0, -1, -1


def _exec(command: list[str], environment: dict[str, str], kept: tuple[int, ...], dropped: tuple[int, ...]) -> None:
    """In the forked child: become the resident runner's fresh interpreter. Never returns."""
    try:
        for descriptor in dropped:
            os.close(descriptor)
        for descriptor in kept:
            os.set_inheritable(descriptor, True)
        os.execve(command[0], command, environment)
    finally:
        os._exit(1)


def main() -> None:
    """``python -m services.worker.resident REQUESTS ANSWERS PARENT``: the first request line is the settings."""
    requests, answers, parent = map(int, sys.argv[1:4])
    line = read_line(requests)
    if not line:  # the pool process went away before it gave us our settings
        return
    settings = Settings(**json.loads(line))
    logging.basicConfig(level=settings.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    _serve(settings, requests, answers, parent)


def _serve(settings: Settings, requests: int, answers: int, parent: int) -> None:
    """The runner process: connect, then run each request as it comes, answering its exit code.
    Never returns."""
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the worker's terminal is the worker's
        die_with_parent(signal.SIGTERM, parent)
        clients = RunnerClients.connect(settings)
        clients.warm()
        try:
            while line := read_line(requests):
                message = TryMessage.from_json(line)
                codes = serve_tries(settings, clients, [(message.request, message.queue)], executor=message.executor)
                os.write(answers, f"{max(codes.values())}\n".encode())
        finally:
            clients.close()
        code = 0
    except BrokenPipeError:  # the pool process went away after the try: nothing more to serve
        code = 0
    except BaseException:  # noqa: BLE001 - the runner's own failure is logged, then it exits
        log.exception("resident runner crashed")
    finally:
        os._exit(code)


if __name__ == "__main__":
    main()
