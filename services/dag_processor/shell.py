"""The DAG processor's shell: scan, ask the core, fork / kill / reap children, write events.

Every state change goes through ``_emit``: append the event, apply it with the core's
``evolve``, then act on it. The wait set polled for child results is built from
``state.children`` on every turn, and the handle of a child that left the table is
released (killed if alive, reaped, descriptors closed) right after its end event is
applied. So no code path can read or poll a handle of a child that is gone.
"""

from __future__ import annotations

import itertools
import logging
import os
import select
import socket
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial

from infra.settings import Settings
from schemas import DAGS, DagFileRemoved, DagParsed, DagParseFailed, DagRemoved, ProcessorKilled
from services.dag_processor import core
from services.dag_processor.children import ChildHandle, fork_parser
from services.dag_processor.metrics import DagProcessorMetrics
from services.dag_processor.parsing import parse_dag_file
from services.dag_processor.scanning import DagFolderScanner
from services.dag_processor.warm_up import warm_up_parser

log = logging.getLogger("tock.dag_processor")

# Called with the processor ids whose descriptors are ready, before any is read. A seam
# for tests that need something to happen exactly there (e.g. a timeout kill).
BeforeCollect = Callable[["DagProcessor", list[str]], None]


class DagProcessor:
    """Parses the DAGs folder continuously; ``run()`` until ``stop()``, then shuts down."""

    def __init__(self, settings: Settings, event_log, *, state: core.ProcessorState | None = None,
                 clock: Callable[[], float] = time.time, before_collect: BeforeCollect | None = None,
                 fork: Callable[[], int] = os.fork, metrics: DagProcessorMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or DagProcessorMetrics()
        self.state = state or core.ProcessorState()
        self.config = processor_config(settings)
        self._log = event_log
        self._clock = clock
        self._before_collect = before_collect
        self._fork = fork  # a seam for tests of a failing fork
        self._scanner = DagFolderScanner(settings.resolved_dags_folder)
        self._files: dict[str, str] = {}
        self._next_scan = 0.0
        self._handles: dict[str, ChildHandle] = {}
        self._ids = (f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}-{n}" for n in itertools.count())
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        self._stopping = False

    # ------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Serve until ``stop()``; then kill and reap the children and flush the log."""
        log.info("DAG processor watching %s (parallelism %d, timeout %gs, re-parse every %gs, unchanged files "
                 "every %d intervals)", self._scanner.folder, self.config.parallelism, self.config.timeout,
                 self.config.reparse_interval, self.config.forced_reparse_every)
        try:
            warm_up_parser()  # before the first fork: every child inherits what it builds
        except Exception:  # only makes children cheaper: never a reason not to serve
            log.warning("warming up the parser failed; each parse child builds its caches itself", exc_info=True)
        try:
            while not self._stopping:
                self.step()
        finally:
            self.shutdown()

    def stop(self) -> None:
        """Ask ``run()`` to finish. Safe from a signal handler or another thread."""
        self._stopping = True
        try:
            os.write(self._wake_write, b"x")
        except OSError:  # wake pipe full or closed: the loop wakes anyway
            pass

    def shutdown(self) -> None:
        """Kill the children still running (ProcessorKilled reason=shutdown) and flush."""
        for event in core.decide_shutdown(self.state, self._clock()):
            self._emit(event)
        self._log.flush()
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)
        self._wake_read = self._wake_write = -1
        log.info("DAG processor stopped")

    # ------------------------------------------------------------ one turn

    def step(self) -> None:
        """One turn: scan when due, act on the core's decisions, wait for children."""
        now = self._clock()
        if now >= self._next_scan:
            self._files = self._scanner.scan()
            self._next_scan = now + self.settings.dag_scan_interval
        for decision in core.decide(self.state, now, self._files, self.config):
            if isinstance(decision, core.StartParse):
                self._start(decision)
            else:
                self._emit(decision)
        self._wait(self._wait_seconds(now))
        self._serve_deliveries()

    def enforce_deadlines(self) -> None:
        """Kill every child past its deadline now (the timeout part of ``step``)."""
        now = self._clock()
        for child in core.overdue(self.state, now):
            for event in core.timed_out(child, now):
                self._emit(event)

    def _wait_seconds(self, now: float) -> float:
        deadlines = [child.deadline for child in self.state.children.values()]
        return max(0.0, min([self._next_scan, *deadlines]) - now)

    def _start(self, start: core.StartParse) -> None:
        folder = str(self._scanner.folder)
        try:
            handle = fork_parser(partial(parse_dag_file, start.file_path, folder), partial(_prepare_child, folder),
                                 fork=self._fork)
        except OSError as error:  # out of processes or memory: try again on a later turn
            log.error("cannot fork a parser for %s: %s", start.file_path, error)
            return
        processor_id = next(self._ids)
        self._handles[processor_id] = handle
        self._emit(core.processor_started(start, processor_id, handle.pid, self._clock(), self.config))

    # ------------------------------------------------------------ children

    def _wait(self, timeout: float) -> None:
        poller, owners = select.poll(), {}
        poller.register(self._wake_read, select.POLLIN)
        for processor_id in self.state.children:  # the wait set is the fold of our events
            for fd in self._handles[processor_id].watched_fds():
                poller.register(fd, select.POLLIN)
                owners[fd] = processor_id
        ready = [fd for fd, _ in poller.poll(timeout * 1000)]
        if self._before_collect is not None:
            self._before_collect(self, sorted({owners[fd] for fd in ready if fd in owners}))
        for fd in ready:
            if fd == self._wake_read:
                self._drain_wake()
            elif owners[fd] in self.state.children:  # it may have ended since it was ready
                self._collect(owners[fd], fd)

    def _collect(self, processor_id: str, fd: int) -> None:
        handle = self._handles[processor_id]
        handle.on_ready(fd)
        if handle.exited:
            events = core.decide_exit(self.state, processor_id, handle.exit_code, handle.result(), self._clock(),
                                      self.config)
            for event in events:
                self._emit(event)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    # ------------------------------------------------------------ events

    def _emit(self, event) -> None:
        """Write the event, apply it to our state, then do what it says."""
        self._log.append(event)
        self.state = core.evolve(self.state, event)
        self._release_ended()
        self.metrics.emitted(event, len(self.state.children))
        if isinstance(event, DagRemoved):
            self._log.tombstone(DAGS, event.dag_id)
        _log_event(event)

    def _release_ended(self) -> None:
        # Handles follow the table: a child that left it is killed if alive, reaped and closed.
        for processor_id in [pid for pid in self._handles if pid not in self.state.children]:
            self._handles.pop(processor_id).release()

    def _serve_deliveries(self) -> None:
        # Delivery reports pile up in the producer until served; serve them each turn.
        producer = getattr(self._log, "producer", None)
        if producer is not None:
            producer.poll(0)


def processor_config(settings: Settings) -> core.ProcessorConfig:
    return core.ProcessorConfig(parallelism=settings.parse_parallelism, timeout=settings.parse_timeout,
                                reparse_interval=settings.dag_reparse_interval,
                                retry_backoff=settings.parse_retry_backoff, executors=settings.available_executors,
                                forced_reparse_every=settings.dag_forced_reparse_every)


def _prepare_child(dags_folder: str) -> None:
    """In the child, before parsing: DAG files may import helper modules beside them.

    No bytecode is written for them: a ``.pyc`` is trusted while the source's size and
    mtime (in whole seconds) match, so one written by a parse could hide an edit made
    within the same second that kept the size."""
    sys.path.insert(0, dags_folder)
    sys.dont_write_bytecode = True


def _log_event(event) -> None:
    match event:
        case DagParsed():
            log.info("DAG %s parsed from %s", event.dag_id, event.file_path)
        case DagParseFailed():
            log.warning("cannot parse %s: %s", event.file_path, event.error)
        case DagRemoved():
            log.info("DAG %s removed (was in %s)", event.dag_id, event.file_path)
        case DagFileRemoved():
            log.info("DAG file %s removed", event.file_path)
        case ProcessorKilled():
            log.debug("parser %s for %s ended: %s", event.processor_id, event.file_path, event.reason)
        case _:
            log.debug("%s", event)
