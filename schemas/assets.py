"""Assets (topic ``tock.events``): data-aware scheduling, Airflow's assets (formerly datasets), carried
across partitions by the owners of three sides (services/scheduler/core/assets.py).

An asset lives on one partition (``BY_ASSET``, key ``asset/<uri>``): its ledger keeps the DAGs that
consume it and the events not yet handed to them. Each hop is written by one owner, fenced by its
transaction, as a record on the side that receives it and a mark on the side that sends it, so a crash or
a takeover on any side folds the same records and neither drops nor repeats a hop:

- **the producer's DAG**: a try's success carries its asset events (``TaskSucceeded.asset_events_json``,
  one record: no success without its events, no event without its success). Its owner writes each as an
  ``AssetEventRecorded`` on the asset's partition, marked done by ``TaskAssetEventsRecorded``. An event
  appended through the API is an ``AssetEventRecorded`` too (its id the request id: a retry is applied once);
- **the asset**: its owner hands each event to every consumer (``AssetEventQueued`` on the consumer's
  partition), marked done by ``AssetEventForwarded``. The consumers register themselves
  (``AssetConsumerRegistered`` / ``AssetConsumerDropped``, marked by ``DagAssetsRegistered``);
- **the consumer's DAG**: its owner queues the events, and when its schedule's condition holds
  creates one run (``DagRunCreated``, run type "asset_triggered"), which names the events it consumed.

A DAG whose tasks read assets (their ``inlets``) registers as their reader the same way
(``AssetReaderRegistered`` / ``AssetReaderDropped``): the asset's owner hands it the latest events it
keeps (marked by ``AssetReaderCaughtUp``), then each new one (``InletEventDelivered``, which triggers
nothing); each try of such a task carries them in its ``TaskQueued`` (its context's ``inlet_events``).
"""

from __future__ import annotations

from dataclasses import field

from schemas.declare import EVENTS, EventBase, event
from schemas.routing import BY_ASSET, BY_DAG

ASSET_TRIGGERED = "asset_triggered"  # the run type of a run an asset condition created


@event(EVENTS, route=BY_ASSET)
class AssetEventRecorded(EventBase):
    """An update of the asset ``uri`` (named ``name``, in ``group``), with its ``extra`` (a JSON object).
    ``event_id`` is unique: ``<dag>|<run>|<task>|<map index>|<try>|<uri>`` for a try's, ``api/<request id>``
    for one appended through the API. ``source_*`` name the try that produced it (empty: none);
    ``source_alias``: the asset alias it was added through ("" none). ``timestamp``: when it happened."""

    uri: str
    name: str = ""
    group: str = "asset"
    extra_json: str = "{}"
    event_id: str
    source_dag_id: str = ""
    source_run_id: str = ""
    source_task_id: str = ""
    source_map_index: int = -1
    source_try_number: int = 0
    source_alias: str = ""
    requested_by: str = ""
    timestamp: float
    at: float


@event(EVENTS, route=BY_DAG)
class TaskAssetEventsRecorded(EventBase):
    """The producer's side of ``AssetEventRecorded``: the try's asset events (``event_ids``) are written on
    their assets' partitions; nothing of them is due."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int
    event_ids: list[str]
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetConsumerRegistered(EventBase):
    """The DAG ``dag_id`` is scheduled on the asset ``uri`` (or on a condition that names it): the asset's
    owner hands it the asset's events from now on. Written by the DAG's owner when its definition says so."""

    uri: str
    dag_id: str
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetConsumerDropped(EventBase):
    """The DAG ``dag_id`` no longer consumes the asset ``uri`` (its schedule changed, or it is gone)."""

    uri: str
    dag_id: str
    at: float


@event(EVENTS, route=BY_DAG, version=2)
class DagAssetsRegistered(EventBase):
    """The consumer's side of its registrations: the assets (``uris``) its owner registered it with as a
    consumer, and those (``inlet_uris``) it registered it with as a reader, so the next definition's are
    compared with these. v2 added inlet_uris (v1 records decode with none: no DAG read any then)."""

    dag_id: str
    uris: list[str]
    inlet_uris: list[str] = field(default_factory=list)
    at: float


@event(EVENTS, route=BY_DAG)
class AssetEventQueued(EventBase):
    """The asset's owner hands the event ``event_id`` of asset ``uri`` to the consumer ``dag_id``: it waits
    in the DAG's queue until a run consumes it (Airflow's asset_dag_run_queue, with the event itself)."""

    dag_id: str
    uri: str
    name: str = ""
    group: str = "asset"
    event_id: str
    extra_json: str = "{}"
    source_dag_id: str = ""
    source_run_id: str = ""
    source_task_id: str = ""
    source_map_index: int = -1
    source_alias: str = ""
    timestamp: float
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetReaderRegistered(EventBase):
    """A task of the DAG ``dag_id`` names the asset ``uri`` in its ``inlets``: the asset's owner hands it
    the asset's latest events it keeps (``INLET_EVENTS_KEPT``), then each new one, so its tries read them
    (``inlet_events``). Written by the DAG's owner when its definition says so."""

    uri: str
    dag_id: str
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetReaderDropped(EventBase):
    """No task of the DAG ``dag_id`` reads the asset ``uri`` any more (its definition changed, or it is gone)."""

    uri: str
    dag_id: str
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetReaderCaughtUp(EventBase):
    """The asset's side of a reader's registration: its latest events were handed to the reader ``dag_id``
    (``InletEventDelivered``); from now on it gets each new one only."""

    uri: str
    dag_id: str
    at: float


@event(EVENTS, route=BY_DAG)
class InletEventDelivered(EventBase):
    """The asset's owner hands the event ``event_id`` of asset ``uri`` to the reader ``dag_id``: the DAG's
    side keeps the latest ``INLET_EVENTS_KEPT`` of each asset it reads, for the tries it queues. Unlike an
    ``AssetEventQueued`` it triggers nothing."""

    dag_id: str
    uri: str
    name: str = ""
    group: str = "asset"
    event_id: str
    extra_json: str = "{}"
    source_dag_id: str = ""
    source_run_id: str = ""
    source_task_id: str = ""
    source_map_index: int = -1
    source_alias: str = ""
    timestamp: float
    at: float


@event(EVENTS, route=BY_ASSET)
class AssetEventForwarded(EventBase):
    """The asset's side of ``AssetEventQueued``: the event is handed to the consumers ``dag_ids`` (none:
    the asset had no consumer then); nothing of it is due."""

    uri: str
    event_id: str
    dag_ids: list[str]
    at: float


URI_MOST = 1500  # Airflow's limit on an asset's uri and name
EXTRA_MOST_BYTES = 64 * 1024  # an event's extra, encoded
INLET_EVENTS_KEPT = 20  # the latest events of an asset its readers' tries see (``inlet_events``)


def asset_problem(uri: str, extra_json: str = "{}") -> str:
    """What is wrong with an asset event's uri and extra, in words ("" nothing): the API refuses it before
    anything is appended."""
    if not isinstance(uri, str) or not uri.strip() or len(uri) > URI_MOST:
        return f"an asset's uri is 1 to {URI_MOST} characters, not blank, got {uri!r:.80}"
    if uri != uri.strip():
        return f"an asset's uri has no leading or trailing spaces, got {uri!r:.80}"
    if len(extra_json.encode()) > EXTRA_MOST_BYTES:
        return f"an asset event's extra is at most {EXTRA_MOST_BYTES} bytes as JSON"
    return ""
