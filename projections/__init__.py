"""SQL read models of the log: pure folds per table, the writer, the projector, rebuild.

Each read model is one module with ``key_of(record)`` (which row an event touches, or
None; whether it names a row depends on the event's type alone, tombstones aside) and a
pure ``evolve(row, record) -> row | None`` (None deletes the row);
``task_event`` is append-only and has ``rows_for(record)``; ``asset`` keeps two tables
whose rows one event changes together (``slots_of`` / ``evolve_rows``). ``projections.view``
folds records into a :class:`~projections.view.View`; ``projections.writer`` is the only
module that writes SQL.
"""
