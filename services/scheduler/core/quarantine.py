"""One bad DAG never stops its partition: a fold or a decision that raises for DAG d quarantines d.

A quarantined DAG gets no new runs and no new tries; the rest of the partition goes on. The
quarantine is part of the state, so a replay reaches it again: folding the event that raised
raises again (``hold``), and a quarantine a decision found is in the log as DagQuarantined,
folded like any event. It holds until a definition with another fingerprint is parsed (the file
was fixed) or the DAG is deleted. ``decide_quarantines`` keeps tock.events saying so: one
DagQuarantined per quarantine, one DagQuarantineLifted when it ends (what the import errors
read model shows).
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, TypeVar

from schemas import DagParsed, DagQuarantined, DagQuarantineLifted
from services.scheduler.core.model import DagEntry, Quarantine, SchedulerState

MOST_REASON = 2_000  # characters of the error kept in the event


class OfDag(Protocol):
    @property
    def dag_id(self) -> str: ...


Decided = TypeVar("Decided", bound=OfDag)


def reason_of(error: BaseException, doing: str) -> str:
    """The error as text, naming what raised it (``doing``), bounded."""
    text = f"{doing} raised {type(error).__name__}: {error}"
    return text if len(text) <= MOST_REASON else text[:MOST_REASON - 1] + "…"


# -- folds -------------------------------------------------------------------------------------

def hold(state: SchedulerState, dag_id: str, error: Exception, event: OfDag) -> None:
    """Folding ``event`` of DAG ``dag_id`` raised ``error``: quarantine the DAG (a first reason stays)."""
    if dag_id in state.quarantined:
        return
    entry = _entry(state, dag_id)
    fingerprint, file_path = (event.fingerprint, event.file_path) if isinstance(event, DagParsed) else (
        (entry.fingerprint, entry.definition.file_path) if entry is not None else ("", ""))
    doing = f"folding {type(event).__name__}"
    state.quarantined[dag_id] = Quarantine(reason_of(error, doing), fingerprint, file_path)


def lift_on_parse(state: SchedulerState, event: DagParsed) -> None:
    """A definition with another fingerprint than the quarantined one: the file was fixed."""
    held = state.quarantined.get(event.dag_id)
    if held is not None and held.fingerprint != event.fingerprint:
        del state.quarantined[event.dag_id]


def lift_on_delete(state: SchedulerState, dag_id: str) -> None:
    state.quarantined.pop(dag_id, None)


def quarantined(state: SchedulerState, event: DagQuarantined) -> None:
    """Announced in the log; a quarantine a decision found holds from here (when it is of the
    definition folded now: one parsed since, with another fingerprint, has lifted it)."""
    said = state.announced[event.dag_id] = Quarantine(event.reason, event.fingerprint, event.file_path)
    entry = _entry(state, event.dag_id)
    if event.dag_id not in state.quarantined and event.fingerprint == (entry.fingerprint if entry else ""):
        state.quarantined[event.dag_id] = said


def lifted(state: SchedulerState, event: DagQuarantineLifted) -> None:
    said = state.announced.get(event.dag_id)
    if said is not None and said.fingerprint == event.fingerprint:
        del state.announced[event.dag_id]


# -- decisions ---------------------------------------------------------------------------------

def decide_quarantines(state: SchedulerState, now: float,
                       scheduler_id: str) -> list[DagQuarantined | DagQuarantineLifted]:
    """Make tock.events say what the state holds: each quarantine announced once, and each announced
    one that ended (or was replaced by the quarantine of another definition) lifted."""
    if not state.quarantined and not state.announced:
        return []
    events: list[DagQuarantined | DagQuarantineLifted] = [
        DagQuarantineLifted(dag_id=dag_id, file_path=said.file_path, fingerprint=said.fingerprint,
                            scheduler_id=scheduler_id, at=now)
        for dag_id, said in state.announced.items() if _fingerprint(state.quarantined.get(dag_id)) != said.fingerprint]
    events += [DagQuarantined(dag_id=dag_id, file_path=held.file_path, reason=held.reason, fingerprint=held.fingerprint,
                              scheduler_id=scheduler_id, at=now)
               for dag_id, held in state.quarantined.items()
               if _fingerprint(state.announced.get(dag_id)) != held.fingerprint]
    return events


class Guard:
    """Deciding one DAG at a time: ``with guard.of(dag_id):`` around what is decided for it. A
    quarantined DAG is skipped (``skips``); one whose decision raises is recorded, and ``kept``
    drops what was decided for it and decides DagQuarantined instead (folded, it quarantines the DAG)."""

    __slots__ = ("_dag_id", "_state", "failed")

    def __init__(self, state: SchedulerState) -> None:
        self._state = state
        self._dag_id = ""
        self.failed: dict[str, Exception] = {}

    def skips(self, dag_id: str) -> bool:
        return dag_id in self._state.quarantined or dag_id in self.failed

    def of(self, dag_id: str) -> Guard:
        self._dag_id = dag_id
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        if isinstance(error, Exception):
            self.failed.setdefault(self._dag_id, error)
            return True  # one DAG's poison stops that DAG only
        return False

    def kept(self, events: list[Decided], now: float, scheduler_id: str) -> list[Decided | DagQuarantined]:
        """``events`` without those of a DAG whose decision raised, and a DagQuarantined for each."""
        if not self.failed:
            return list(events)
        kept: list[Decided | DagQuarantined] = [event for event in events if event.dag_id not in self.failed]
        for dag_id, error in self.failed.items():
            entry = _entry(self._state, dag_id)
            kept.append(DagQuarantined(dag_id=dag_id, file_path=entry.definition.file_path if entry else "",
                                       reason=reason_of(error, "deciding"),
                                       fingerprint=entry.fingerprint if entry else "",
                                       scheduler_id=scheduler_id, at=now))
        return kept


def _fingerprint(said: Quarantine | None) -> str | None:
    return None if said is None else said.fingerprint


def _entry(state: SchedulerState, dag_id: str) -> DagEntry | None:
    """The DAG's definition folded now (its last one, if it was deleted)."""
    return state.dags.get(dag_id) or state.removed_dags.get(dag_id)
