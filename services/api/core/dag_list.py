"""The DAG list's rules (pure): filtering by id, tag, last run state and paused; the next scheduled run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from schemas import schedule as cron

Row = dict[str, Any]
NEVER_RAN = "none"  # the "last run" filter's value for a DAG without runs
OWNER_SEPARATOR = ", "  # the dag row's owners, as Airflow's Owner column joins them
LINKED = ("http://", "https://", "mailto:")  # the only owner links a page makes (the SDK refuses others)
LAST_STATES = ("running", "success", "failed", NEVER_RAN)
PAUSED_CHOICES = ("all", "active", "paused")


@dataclass(frozen=True)
class DagFilter:
    """What the list's GET form asks for; empty values filter nothing."""

    search: str = ""
    tag: str = ""
    last: str = ""
    paused: str = "all"

    def query(self) -> str:
        """The filter as a query string (without "?"), only the fields that filter something."""
        return urlencode({name: value for name, value in asdict(self).items() if value and value != "all"})


def dag_filter(search: str = "", tag: str = "", last: str = "", paused: str = "all") -> DagFilter:
    """A filter from the form's values; values it does not know filter nothing."""
    return DagFilter(search=search.strip(), tag=tag.strip(), last=last if last in LAST_STATES else "",
                     paused=paused if paused in PAUSED_CHOICES else "all")


def last_state(dag: Row) -> str:
    """The state of the DAG's newest run (``dots`` are oldest first), or ``none``."""
    return dag["dots"][-1]["state"] if dag.get("dots") else NEVER_RAN


def matches(dag: Row, wanted: DagFilter) -> bool:
    if wanted.search and not _named(dag, wanted.search.lower()):
        return False
    if wanted.tag and wanted.tag not in (dag.get("tags") or []):
        return False
    if wanted.last and last_state(dag) != wanted.last:
        return False
    if wanted.paused != "all" and bool(dag["is_paused"]) != (wanted.paused == "paused"):
        return False
    return True


def _named(dag: Row, search: str) -> bool:
    """Whether the DAG's id or display name contains ``search`` (lower case)."""
    return search in dag["dag_id"].lower() or search in (dag.get("dag_display_name") or "").lower()


def owner_list(dag: Row) -> list[dict[str, str]]:
    """The DAG's owners as a page shows them: each name, and its link ("" none) when ``owner_links`` gives
    an http(s) or mailto one."""
    links = dag.get("owner_links") or {}
    names = [name for name in (dag.get("owners") or "").split(OWNER_SEPARATOR) if name]
    return [{"name": name, "link": _link(links.get(name))} for name in names]


def _link(link: Any) -> str:
    return link if isinstance(link, str) and link.lower().startswith(LINKED) else ""


def filtered(dags: list[Row], wanted: DagFilter) -> list[Row]:
    return [dag for dag in dags if matches(dag, wanted)]


def all_tags(dags: list[Row]) -> list[str]:
    return sorted({tag for dag in dags for tag in dag.get("tags") or []})


def next_run(dag: Row, latest_scheduled: float | None, now: float) -> float | None:
    """The logical date of the DAG's next scheduled run, as the scheduler decides it (runs.first_due):
    the fire time (in the DAG's time zone) after its latest scheduled run, not before its start date
    nor after its end date. Without catch-up an overdue DAG gets the latest fire time now. None
    without a schedule, once ``@once`` has run, or when its time zone is unknown here."""
    schedule = dag.get("schedule")
    start_value = dag.get("start_date") if dag.get("start_date") is not None else dag.get("parsed_at")
    start = float(start_value) if start_value is not None else None
    if not schedule or start is None or not dag.get("is_active"):
        return None
    if schedule == cron.ONCE:
        return start if latest_scheduled is None else None
    try:
        return _next_fire(dag, schedule, start, latest_scheduled, now)
    except ValueError:  # a time zone this host's zoneinfo does not know (the scheduler quarantines it)
        return None


def _next_fire(dag: Row, schedule: str, start: float, latest_scheduled: float | None, now: float) -> float | None:
    zone, end = dag.get("timezone") or cron.UTC_NAME, dag.get("end_date")
    fire = cron.next_fire(schedule, latest_scheduled if latest_scheduled is not None else start - 1e-3, zone)
    if fire is None or (end is not None and fire > end):  # no fire time left (in the calendar, before the end)
        return None
    due = max(start, fire)
    if due <= now and not dag.get("catchup"):
        return cron.latest_fire(schedule, now if end is None else min(now, end), zone)
    return due
