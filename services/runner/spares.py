"""Warm runners ("spares"), and the line protocol of the processes that keep them (launcher.py,
file_launchers.py).

A spare is a child forked in advance into its own session, whose Kafka producer and claim reader are
already connected; a launch hands it up to TRIES_PER_RUNNER tries of one batch through its pipe (so a
burst of tries pays a runner process, its Kafka connections and its claim's read per few tries, not per
try; each try's user code still runs in a child of its own). Requests are try messages
(infra/executors/messages.py), one per line; each is answered ``<pid> <start time>``, in order.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import sys
from collections.abc import Callable, Iterable, Iterator

from infra.executors.messages import TryMessage
from infra.group_watcher import die_with_parent
from infra.procfs import process_start_time
from infra.settings import Settings

TRIES_PER_RUNNER = 8


class Spares:
    """Warm runners waiting for a try: pid -> write end of the pipe the try comes through.

    ``detached``: each runner leads its own session and outlives this process (the local
    executor's launcher). Otherwise it stays in this process's group and is told SIGTERM when
    this process dies (a Celery pool process: a revoke that terminates it, or its loss, ends
    the try reported; a kill of the worker's whole group takes the runner too).
    ``private``: the descriptors of this process a runner must not keep, asked at each fork (the pipes to its
    file launchers, or a file launcher's own requests' pipes): a runner holding a write end would keep the
    process at its other end from ever seeing EOF."""

    def __init__(self, settings: Settings, count: int, detached: bool = True,
                 private: Callable[[], Iterable[int]] = tuple) -> None:
        self.settings = settings
        self.count = count
        self.detached = detached
        self.private = private
        self.ready: list[tuple[int, int]] = []

    def fill(self) -> None:
        while len(self.ready) < self.count:
            self.ready.append(self._fork())

    def hand_over(self, request_lines: list[str]) -> list[int]:
        """Give the tries to warm runners (new ones if none is ready); returns each try's runner pid."""
        pids = []
        for share in _shares(request_lines, TRIES_PER_RUNNER):
            pid, pipe = self.ready.pop(0) if self.ready else self._fork()
            os.write(pipe, "".join(share).encode())
            os.close(pipe)
            pids += [pid] * len(share)
        return pids

    def pipes(self) -> list[int]:
        """The write ends this process holds (a process forked from it closes them, or a spare never sees
        EOF when this process goes)."""
        return [pipe for _pid, pipe in self.ready]

    def _fork(self) -> tuple[int, int]:
        read_end, write_end = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            gc.freeze()  # the launcher's heap is not the spare's to collect (as a try's child's, supervise.py)
            os.close(write_end)
            for descriptor in [*self.pipes(), *self.private()]:  # else a spare never sees EOF when we go
                os.close(descriptor)
            _spare(self.settings, read_end, None if self.detached else parent)
        os.close(read_end)
        return pid, write_end


def _shares(lines: list[str], most: int) -> list[list[str]]:
    """The lines, in order, in as few even shares as hold at most ``most`` each (10 by 8: 5 and 5)."""
    count = -(-len(lines) // most)
    if not count:
        return []
    bounds = [len(lines) * index // count for index in range(count + 1)]
    return [lines[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]


def _spare(settings: Settings, read_end: int, attached_to: int | None) -> None:
    """A warm runner: connect to Kafka, wait for its tries, run them, exit. Never returns.
    ``attached_to``: the process it dies with (SIGTERM: its tries end reported), else detached."""
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        if attached_to is None:
            os.setsid()
        else:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the worker's terminal is the worker's
            die_with_parent(signal.SIGTERM, attached_to)
        detach_stdio(settings)
        from services.runner import RunnerClients, run_tries

        clients = RunnerClients.connect(settings)  # producer and claim reader, connected while we wait
        clients.warm()
        messages = [TryMessage.from_json(line) for line in _read_all(read_end).splitlines() if line]
        if not messages:  # the launcher went away before giving us a try
            clients.close()
            code = 0
            return
        codes = run_tries(settings, [(message.request, message.queue) for message in messages],
                          executor=messages[0].executor, clients=clients)
        code = max(codes.values())
    except BaseException:  # noqa: BLE001 - the runner's own failure is logged, then it exits
        logging.getLogger("tock.runner").exception("runner crashed")
    finally:
        os._exit(code)


def _read_all(descriptor: int) -> str:
    chunks = []
    while chunk := os.read(descriptor, 65536):
        chunks.append(chunk)
    os.close(descriptor)
    return b"".join(chunks).decode()


def detach_stdio(settings: Settings) -> None:
    """Away from the launcher's pipes: stdin from /dev/null, output to one file of runner logs under TOCK_HOME."""
    (settings.home / "logs").mkdir(parents=True, exist_ok=True)
    output = os.open(settings.home / "logs" / "runners.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    for descriptor in {devnull, output} - {0, 1, 2}:
        os.close(descriptor)
    logging.basicConfig(level=settings.log_level, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")


def request_batches(descriptor: int, timeout: float | None = None) -> Iterator[list[str]]:
    """Lists of request lines, each list holding every complete line available at that moment; an empty
    list when ``timeout`` seconds pass without one. Ends when the writer closes its end."""
    pending = b""
    while True:
        if timeout is not None and not select.select([descriptor], [], [], timeout)[0]:
            yield []
            continue
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if lines:
            yield [line.decode() + "\n" for line in lines]


def answer(descriptor: int, pids: list[int]) -> None:
    """Answer a batch: ``<pid> <start time>`` per request, in order."""
    started = {pid: process_start_time(pid) or 0 for pid in set(pids)}
    data = memoryview("".join(f"{pid} {started[pid]}\n" for pid in pids).encode())
    while data:
        data = data[os.write(descriptor, data):]
