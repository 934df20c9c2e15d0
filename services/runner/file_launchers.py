"""Launchers of one DAG file each: tries of a file launched from again and again start with it imported.

The warm launcher (launcher.py) routes each batch by DAG file. The second time a file is launched
from within IDLE_SECONDS, it forks a launcher for that file, which imports it (preloaded.py) and keeps
warm runners of its own (spares.py), forked after the import: their tries' children find their task
in the DAGs already loaded. Until that launcher says it is ready, and whenever it cannot serve, the
file's tries go to the warm launcher's own runners, which import the file in each try as before; so a
file launcher only ever saves work, and what goes wrong with one costs nothing but that saving:

- the file's import fails, exits, leaves a thread running or takes longer than TOCK_DAG_PARSE_TIMEOUT
  there: that version of the file is not preloaded again (its tries import it and fail, or not, as before);
- the file, or a module its import loaded from outside the interpreter's installation, changed since:
  the launcher is retired before it gets a try (checked for each batch: the files' stat, their bytes
  when it changed) and the next
  batch of the file starts a new one;
- it dies, or does not answer a batch within ANSWER_SECONDS: it is killed and the tries it did not
  answer go to the warm launcher's runners (a try it had handed over already is run once all the same:
  the first TaskStarted wins the claim, the other runner reads that and runs nothing);
- it serves no try for IDLE_SECONDS, or more files want one than TOCK_PRELOADED_DAG_FILES allows: the
  least recently used is retired (closing its pipe ends it; its warm runners see EOF and exit);
- it imported the file more than TOCK_DAG_REPARSE_INTERVAL ago: a successor imports it again and replaces it
  once ready, so what the import reads besides the file and its modules (a config file, a variable, the
  time) reaches the tries at least that often, as it reaches the DAG processor's parses.

A file launcher dies with the warm launcher (its tries, detached, run on); its protocol is the warm
launcher's (spares.py) over two pipes, after one first line saying how the import went.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from infra.executors.messages import TryMessage
from infra.group_watcher import die_with_parent
from infra.settings import Settings
from services.runner.preloaded import Preloaded, preload
from services.runner.spares import Spares, answer, detach_stdio, request_batches

log = logging.getLogger("tock.launcher")

IDLE_SECONDS = 300.0   # a file launcher with no try for this long is retired; a file seen twice within it gets one
ANSWER_SECONDS = 30.0  # a file launcher that has not answered a batch within this is given up

Direct = Callable[[list[str]], list[int]]  # hands lines to the warm launcher's own runners: their pids


@dataclass
class FileLauncher:
    """The warm launcher's end of one file launcher."""

    path: str
    pid: int
    requests: int  # write end: try messages
    answers: int   # read end: the first line, then one answer per try message
    started: float  # time.monotonic()
    used: float
    preloaded: Preloaded | None = None  # None until it says its import went well
    pending: bytes = b""
    ended: bool = False  # it said its import failed, or its answers pipe closed

    def current(self, now: float | None = None) -> bool:
        """Whether the file (and what its import loaded) is as the launcher imported it."""
        assert self.preloaded is not None
        return self.preloaded.unchanged(now)

    def lines(self, count: int, deadline: float) -> list[str]:
        """Up to ``count`` whole lines from its answers, waiting until ``deadline`` at most; fewer if it
        ended or the deadline passed."""
        found: list[str] = []
        while len(found) < count:
            if b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                found.append(line.decode())
                continue
            wait = max(0.0, deadline - time.monotonic())
            if self.ended or not select.select([self.answers], [], [], wait)[0]:
                break
            chunk = os.read(self.answers, 65536)
            self.pending += chunk
            self.ended = not chunk
        return found


@dataclass
class FileLaunchers:
    """The file launchers of the warm launcher, by DAG file path."""

    settings: Settings
    spares: Spares  # the warm launcher's own (a file launcher forked from it closes their pipes)
    launchers: dict[str, FileLauncher] = field(default_factory=dict)  # the one serving each file, or starting
    successors: dict[str, FileLauncher] = field(default_factory=dict)  # each starting to replace a stale one
    seen: dict[str, float] = field(default_factory=dict)  # path -> when it was last launched from directly
    refused: dict[str, Preloaded] = field(default_factory=dict)  # path -> the file as it was when its preload failed

    def launch(self, lines: list[str], direct: Direct) -> list[int]:
        """Hand each line to a runner: through its file's launcher when one is ready and current, else
        ``direct``; each line's runner pid, in order."""
        by_file: dict[str, list[int]] = {}
        for index, line in enumerate(lines):
            by_file.setdefault(os.path.abspath(TryMessage.from_json(line).request.dag_file), []).append(index)
        pids = [0] * len(lines)
        for path, indexes in by_file.items():
            for index, pid in zip(indexes, self._launch_file(path, [lines[index] for index in indexes], direct),
                                  strict=True):
                pids[index] = pid
        return pids

    def tend(self) -> None:
        """Take the ready answers of starting launchers (a successor ready replaces the one it succeeds);
        give up those too slow, dead or idle."""
        now = time.monotonic()
        for launcher in list(self.launchers.values()):
            if launcher.preloaded is None:
                self._starting(launcher, now)
            elif launcher.ended or now - launcher.used > IDLE_SECONDS:
                self._retire(launcher)
        for successor in list(self.successors.values()):
            self._starting(successor, now)
            if successor.preloaded is not None:
                if (stale := self.launchers.get(successor.path)) is not None:
                    self._retire(stale)
                del self.successors[successor.path]
                successor.used = now
                self.launchers[successor.path] = successor
        for path in [path for path, when in self.seen.items() if now - when > IDLE_SECONDS]:
            del self.seen[path]

    def close(self) -> None:
        for launcher in [*self.launchers.values(), *self.successors.values()]:
            self._retire(launcher)

    def descriptors(self) -> list[int]:
        """This process's ends of the pipes to its file launchers: a process forked from it must close them (a
        retired file launcher ends when its requests' pipe has no writer left)."""
        return [end for launcher in [*self.launchers.values(), *self.successors.values()]
                for end in (launcher.requests, launcher.answers)]

    def _launch_file(self, path: str, lines: list[str], direct: Direct) -> list[int]:
        self.tend()
        launcher = self.launchers.get(path)
        if launcher is not None and launcher.preloaded is not None and not self._fresh(launcher):
            launcher = None
        if launcher is None or launcher.preloaded is None:
            self._consider(path)
            return direct(lines)
        launcher.used = time.monotonic()
        try:
            data = memoryview("".join(lines).encode())
            while data:  # all of it: it reads as we write
                data = data[os.write(launcher.requests, data):]
        except OSError:  # it died
            launcher.ended = True
        answered = [int(line.split()[0]) for line in launcher.lines(len(lines), time.monotonic() + ANSWER_SECONDS)]
        if len(answered) < len(lines):
            log.warning("the launcher of %s answered %d of %d tries: giving it up, the rest start as any other",
                        path, len(answered), len(lines))
            self._retire(launcher)
            answered += direct(lines[len(answered):])
        return answered

    def _fresh(self, launcher: FileLauncher) -> bool:
        """Whether ``launcher`` may serve: retired if its file changed; past TOCK_DAG_REPARSE_INTERVAL since
        its import a successor imports the file again (what the import read besides the file and its modules,
        a config file, a variable, reaches the tries at least that often), and it serves until that one is
        ready, or is retired if the file cannot be imported there any more."""
        path = launcher.path
        if not launcher.current():
            log.info("%s changed since its launcher imported it: retiring that launcher", path)
            self._retire(launcher)
            return False
        if time.monotonic() - launcher.started <= self.settings.dag_reparse_interval or path in self.successors:
            return True
        if self._refused(path):
            self._retire(launcher)
            return False
        self.successors[path] = self._start(path, time.monotonic())
        return True

    def _consider(self, path: str) -> None:
        """A file launched from directly: start its launcher if it was launched from recently before."""
        now, keep = time.monotonic(), self.settings.preloaded_dag_files
        if path in self.launchers or keep == 0 or self._refused(path):
            return
        if path not in self.seen:
            self.seen[path] = now
            return
        while len(self.launchers) >= keep:
            self._retire(min(self.launchers.values(), key=lambda launcher: launcher.used))
        self.launchers[path] = self._start(path, now)

    def _start(self, path: str, now: float) -> FileLauncher:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            for descriptor in [requests_write, answers_read, *self.spares.pipes(), *self.descriptors()]:
                os.close(descriptor)
            _serve_file(self.settings, path, requests_read, answers_write, parent)
        os.close(requests_read)
        os.close(answers_write)
        log.info("preloading %s for its tries (launcher %d)", path, pid)
        return FileLauncher(path, pid, requests_write, answers_read, now, now)

    def _starting(self, launcher: FileLauncher, now: float) -> None:
        """Read its first line if it came: ready (the files it loaded, their digest) or failed."""
        first = launcher.lines(1, deadline=0.0)
        if first:
            said = json.loads(first[0])
            if "digest" in said:
                launcher.preloaded = Preloaded(tuple(said["files"]), said["digest"])
                log.info("%s preloaded (launcher %d, %.2f s)", launcher.path, launcher.pid, now - launcher.started)
                return
            log.warning("%s not preloaded: its import failed there (%s); its tries import it themselves",
                        launcher.path, said.get("failed"))
        elif launcher.ended:
            log.warning("%s not preloaded: its launcher died importing it", launcher.path)
        elif now - launcher.started > self.settings.parse_timeout:
            log.warning("%s not preloaded: its import took over %.0f s", launcher.path, self.settings.parse_timeout)
        else:
            return
        self.refused[launcher.path] = Preloaded.now([launcher.path])
        self._retire(launcher)

    def _refused(self, path: str) -> bool:
        """Whether the file's preload failed and its bytes are the same since (read only if its stat changed)."""
        refusal = self.refused.get(path)
        return refusal is not None and refusal.unchanged()

    def _retire(self, launcher: FileLauncher) -> None:
        """End it: close its pipes (a live one ends when its requests end) and kill it unless it served."""
        for launchers in (self.launchers, self.successors):
            if launchers.get(launcher.path) is launcher:
                del launchers[launcher.path]
        for descriptor in (launcher.requests, launcher.answers):
            with contextlib.suppress(OSError):
                os.close(descriptor)
        if launcher.preloaded is None or launcher.ended:
            with contextlib.suppress(OSError):
                os.kill(launcher.pid, signal.SIGKILL)


def _serve_file(settings: Settings, path: str, requests: int, answers: int, parent: int) -> None:
    """The file launcher: import the file, say how it went, then serve batches as the warm launcher does.
    Never returns."""
    code = 1
    try:
        die_with_parent(signal.SIGTERM, parent)
        detach_stdio(settings)  # what the file prints at import goes to the runners' log, not into a pipe
        loaded = _import(settings, path)
        if isinstance(loaded, str):
            _say(answers, {"failed": loaded[:500]})
            code = 0
            return
        _say(answers, {"files": list(loaded.files), "digest": loaded.digest})
        gc.freeze()  # the file's DAGs stay as long as this process: out of its collections
        spares = Spares(settings, min(settings.warm_runners, settings.parallelism), private=lambda: (requests, answers))
        spares.fill()
        for lines in request_batches(requests):
            answer(answers, spares.hand_over(lines))
            spares.fill()
        code = 0
    except BaseException:  # noqa: BLE001 - the launcher's own failure is logged, then it exits
        logging.getLogger("tock.launcher").exception("the launcher of %s failed", path)
    finally:
        os._exit(code)


def _import(settings: Settings, path: str) -> Preloaded | str:
    """The file preloaded here, or why not: its import raised, or left threads running (a Kafka client, a
    pool), and a process with threads does not fork its tries (a fork copies a lock another thread held)."""
    threads = _threads()
    try:
        loaded = preload(settings, path)
    except BaseException as error:  # noqa: BLE001 - the file's failure is said, then this ends
        return f"{type(error).__name__}: {error}"
    started = _threads() - threads
    return loaded if started <= 0 else f"its import left {started} thread(s) running, and tries fork from here"


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _say(descriptor: int, message: dict[str, object]) -> None:
    os.write(descriptor, (json.dumps(message) + "\n").encode())
