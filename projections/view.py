"""The fold of every read model: ``apply(view, record)`` over a :class:`View`.

A view holds the rows it has touched (by table and key; None = deleted), the history rows
appended, and the next offset of every partition it has folded. A record below that
offset was applied already and is skipped, so folding a log twice changes nothing.

Most read models change one row of their table per event (``key_of`` / ``evolve``). A joint
read model keeps several tables whose rows one event changes together (an asset event is a
row of ``asset_event`` and counts in its asset's row once, however often it is appended):
``slots_of(record)`` names every (table, key) the event touches, or None for an event it does
not fold, and ``evolve_rows(rows, record)`` turns those rows into their next values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from projections import (
    api_token,
    asset,
    backfill,
    command,
    dag,
    dag_run,
    executor_worker,
    import_error,
    parse_status,
    pool,
    scheduler,
    task_event,
    task_instance,
    user,
)
from projections.records import Key, Record, Row
from schemas import EVENT_TYPES

READ_MODELS = (dag, dag_run, task_instance, command, backfill, scheduler, executor_worker, parse_status,
               import_error, user, api_token, pool)
JOINT_MODELS = (asset,)
TABLE_NAMES = (*(model.TABLE for model in READ_MODELS), *(name for model in JOINT_MODELS for name in model.TABLES))
KNOWN_EVENTS = frozenset(EVENT_TYPES.values())


@dataclass
class View:
    """Rows by table and key (None = deleted), history rows, next offset per (topic, partition)."""

    rows: dict[str, dict[Key, Row | None]] = field(default_factory=lambda: {name: {} for name in TABLE_NAMES})
    history: list[Row] = field(default_factory=list)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


def touched_keys(records) -> dict[str, set[Key]]:
    """The rows each table needs loaded before ``records`` can be folded."""
    keys: dict[str, set[Key]] = {name: set() for name in TABLE_NAMES}
    for record in records:
        if record.event is None or type(record.event) in KNOWN_EVENTS:
            for model, key in _keys(record):
                keys[model.TABLE].add(key)
            for _model, slots in _joint_slots(record):
                for table, key in slots:
                    keys[table].add(key)
    return keys


def _keys(record) -> list:
    """(read model, key) of every row the record touches."""
    event = record.event
    models = READ_MODELS if event is None else _MODELS_OF_TYPE.get(type(event))
    if models is None:  # first of its type: the models whose key_of names a row for it
        models = _MODELS_OF_TYPE[type(event)] = tuple(m for m in READ_MODELS if m.key_of(record) is not None)
    return [(model, key) for model in models if (key := model.key_of(record)) is not None]


# Whether a read model's key_of names a row depends on the event's type alone (tombstones aside).
_MODELS_OF_TYPE: dict[type, tuple] = {}


def _joint_slots(record) -> list:
    """(joint read model, the (table, key) of every row it changes) for each joint model folding the record."""
    if record.event is None:
        return []
    models = _JOINT_OF_TYPE.get(type(record.event))
    if models is None:  # first of its type: the joint models that fold it (whether it names rows or not)
        models = _JOINT_OF_TYPE[type(record.event)] = tuple(m for m in JOINT_MODELS if m.slots_of(record) is not None)
    return [(model, model.slots_of(record)) for model in models]


_JOINT_OF_TYPE: dict[type, tuple] = {}


def apply(view: View, record: Record) -> View:
    """Fold one record into ``view`` (in place) unless it was folded already. Raises on an unknown event."""
    position = (record.topic, record.partition)
    if record.offset < view.offsets.get(position, 0):
        return view
    if record.event is not None and type(record.event) not in KNOWN_EVENTS:
        raise TypeError(f"not a Tock event: {type(record.event).__name__}")
    changes = [(model.TABLE, key, model.evolve(view.rows[model.TABLE].get(key), record))
               for model, key in _keys(record)]
    for model, slots in _joint_slots(record):
        before = {(table, key): view.rows[table].get(key) for table, key in slots}
        changes += [(table, key, row) for (table, key), row in model.evolve_rows(before, record).items()]
    for table, key, row in changes:  # all computed first: a failing model changes nothing
        view.rows[table][key] = row
    view.history.extend(task_event.rows_for(record))
    view.offsets[position] = record.offset + 1
    return view


def fold(records, view: View | None = None) -> View:
    """Fold records in order into a view (a new one by default)."""
    view = view or View()
    for record in records:
        apply(view, record)
    return view
