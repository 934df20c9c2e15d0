"""Task log lines shipped by runners (topic ``tock.logs``), readable from any host.

Records are keyed by the try (:func:`try_log_key`) and, like every Tock topic, land in
partition ``murmur2(dag_id) % N``, so a reader knows which partition holds a try's lines.
"""

from __future__ import annotations

from schemas.declare import LOGS, EventBase, event
from schemas.routing import BY_TRY, try_log_key

__all__ = ["TaskLogShipped", "try_log_key"]  # try_log_key: the rule BY_TRY keys a try's records by


@event(LOGS, route=BY_TRY, version=2)
class TaskLogShipped(EventBase):
    """A chunk of whole lines of a try's output, from byte ``offset`` of its log file.

    ``truncated``: the try's shipping budget is spent; ``text`` says how much was shipped and
    where the whole file is, and nothing more of the try is shipped. ``final``: the try's log
    ends here (its text may be empty). v2 added map_index (-1: not mapped); a mapped instance's
    records have their own key (schemas/routing.py try_log_key)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    runner_id: str
    offset: int
    text: str
    truncated: bool = False
    final: bool = False
    at: float
