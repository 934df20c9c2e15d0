"""Read model ``backfill``: each backfill, by (dag_id, backfill_id = its RequestBackfill's request id).

``requested`` when the request is in the log, ``running`` once the scheduler planned its
logical dates (``BackfillPlanned``), then ``success`` / ``failed`` / ``cancelled``
(``BackfillFinished``), or ``rejected`` (``CommandRejected`` of its request). How many of
its runs exist and have ended is read from ``dag_run`` (``queries.backfill_progress``).
"""

from __future__ import annotations

from projections.records import Key, Record, Row, as_json
from schemas import BackfillFinished, BackfillPlanned, CancelBackfill, CommandRejected, RequestBackfill

TABLE = "backfill"
_EVENTS = (RequestBackfill, BackfillPlanned, BackfillFinished, CancelBackfill, CommandRejected)


def empty(dag_id: str, backfill_id: str) -> Row:
    return {"dag_id": dag_id, "backfill_id": backfill_id, "state": None, "start_date": None, "end_date": None,
            "reprocess_failed": None, "conf_json": "{}", "requested_by": None, "requested_at": None,
            "logical_dates_json": "[]", "planned": None, "planned_at": None, "cancel_requested_at": None,
            "finished_at": None, "reason": None}


def key_of(record: Record) -> Key | None:
    event = record.event
    if isinstance(event, RequestBackfill):
        return (event.dag_id, event.request_id)
    if isinstance(event, CommandRejected):
        return (event.dag_id, event.request_id)
    if isinstance(event, _EVENTS):
        return (event.dag_id, event.backfill_id)
    return None


def evolve(row: Row | None, record: Record) -> Row | None:
    match record.event:
        case RequestBackfill() as event:
            return row if row is not None else _requested(event)
        case CommandRejected() as event:
            if row is None or event.command != "RequestBackfill":
                return row  # another command's answer, or a request we never saw
            return {**row, "state": "rejected", "reason": event.reason, "finished_at": event.at}
        case _ if row is None:
            return None  # planning, cancelling or finishing a backfill whose request is not in the log
        case BackfillPlanned() as event:
            return {**row, "state": "running" if row["state"] == "requested" else row["state"],
                    "logical_dates_json": as_json(sorted(event.logical_dates)),
                    "planned": len(event.logical_dates), "planned_at": event.at}
        case CancelBackfill() as event:
            return {**row, "cancel_requested_at": row["cancel_requested_at"] or event.at}
        case BackfillFinished() as event:
            return {**row, "state": event.state, "finished_at": event.at}
    raise TypeError(f"backfill read model cannot apply {type(record.event).__name__}")


def _requested(event: RequestBackfill) -> Row:
    return {**empty(event.dag_id, event.request_id), "state": "requested", "start_date": event.start_date,
            "end_date": event.end_date, "reprocess_failed": event.reprocess_failed, "conf_json": event.conf_json,
            "requested_by": event.requested_by, "requested_at": event.at}
