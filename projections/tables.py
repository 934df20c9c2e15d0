"""The SQL tables of the read models (SQLAlchemy Core), under an optional name suffix.

Rebuilds fill the same tables under a suffix (``task_instance__rebuild``) and swap them
in. Times are seconds since the epoch (floats), JSON columns are text. Primary keys are
named after their table so a renamed table's constraint can be renamed with it.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

OFFSETS = "projection_offset"
TASK_EVENT = "task_event"


def _strings(*names: str) -> list[Column]:
    return [Column(name, String) for name in names]


def _floats(*names: str) -> list[Column]:
    return [Column(name, Float) for name in names]


def _log_position() -> list[Column]:
    return [Column("created_partition", Integer), Column("created_offset", BigInteger)]


def _specs() -> dict[str, tuple[tuple[str, ...], list[Column]]]:
    """Table name -> (primary key columns, every column), built fresh for each MetaData."""
    return {
        "dag": (("dag_id",), [*_strings("dag_id", "file_path", "fingerprint", "schedule", "timezone"),
                              *_floats("start_date", "end_date", "deadline", "parsed_at", "removed_at", "paused_at"),
                              Column("catchup", Boolean), Column("max_active_runs", Integer),
                              Column("tags_json", Text), Column("tasks_json", Text), Column("params_json", Text),
                              Column("task_groups_json", Text),
                              Column("is_active", Boolean), Column("is_paused", Boolean),
                              # What the UI shows (projections/dag.py): owners are the tasks' (comma separated).
                              *_strings("dag_display_name", "owners"), Column("description", Text),
                              Column("doc_md", Text), Column("owner_links_json", Text)]),
        "dag_run": (("dag_id", "run_id"), [*_strings("dag_id", "run_id", "state", "run_type",
                                                      "dag_fingerprint", "scheduler_id"),
                                            Column("conf_json", Text), Column("reason", Text),
                                            *_floats("logical_date", "created_at", "end_date", "reopened_at",
                                                     "deadline_missed_at")]),
        "task_instance": (("dag_id", "run_id", "task_id", "map_index"),
                          [*_strings("dag_id", "run_id", "task_id", "state", "executor", "queue", "handle",
                                     "hostname", "runner_id", "scheduler_id", "marked_by", "kill_request_id",
                                     "trigger_rule", "chosen_by"),
                           Column("map_index", Integer), Column("map_count", Integer), Column("try_number", Integer),
                           Column("pid", Integer), Column("error", Text),
                           Column("reason", Text), Column("heartbeat_try", Integer), Column("kill_try", Integer),
                           Column("values_json", Text), Column("rendered_json", Text),
                           Column("upstream_states_json", Text), Column("follow_json", Text),
                           *_floats("queued_at", "start_date", "end_date", "retry_not_before", "updated_at",
                                    "last_heartbeat", "marked_at", "cleared_at", "kill_requested_at")]),
        TASK_EVENT: (("topic", "partition", "offset"),
                     [Column("topic", String), Column("partition", Integer), Column("offset", BigInteger),
                      *_strings("dag_id", "run_id", "task_id", "event_type"), Column("map_index", Integer),
                      Column("try_number", Integer),
                      Column("at", Float), Column("payload_json", Text)]),
        "command": (("dag_id", "request_id"), [*_strings("dag_id", "request_id", "command", "run_id", "task_id",
                                                          "requested_by", "status"),
                                                Column("appended", Integer), Column("reason", Text),
                                                Column("payload_json", Text), *_floats("at", "rejected_at")]),
        "backfill": (("dag_id", "backfill_id"), [*_strings("dag_id", "backfill_id", "state", "requested_by"),
                                                 Column("reprocess_failed", Boolean), Column("planned", Integer),
                                                 Column("conf_json", Text), Column("logical_dates_json", Text),
                                                 Column("reason", Text),
                                                 *_floats("start_date", "end_date", "requested_at", "planned_at",
                                                          "cancel_requested_at", "finished_at")]),
        "scheduler": (("scheduler_id",), [*_strings("scheduler_id", "hostname", "state"), Column("pid", Integer),
                                          Column("partitions_json", Text),
                                          *_floats("first_seen", "last_heartbeat", "stopped_at")]),
        "executor_worker": (("worker",), [*_strings("worker", "executor", "hostname"), Column("pid", Integer),
                                          Column("queues_json", Text), Column("concurrency", Integer),
                                          *_floats("first_seen", "last_heartbeat", "stopped_at")]),
        "parse_status": (("file_path",), [*_strings("file_path", "state", "processor_id", "file_hash"),
                                          Column("dag_ids_json", Text), Column("error", Text),
                                          *_floats("duration", "at")]),
        "import_error": (("file_path",), [*_strings("file_path", "processor_id", "file_hash"),
                                          Column("error", Text), Column("traceback", Text), Column("at", Float)]),
        # created_partition / created_offset: the log position of the UserCreated that began the account's
        # incarnation, and of a token's TokenCreated (same partition: both are keyed by the user name).
        "tock_user": (("username",), [*_strings("username", "role", "password_hash", "created_by"),
                                      *_floats("created_at", "updated_at"), *_log_position()]),
        "api_token": (("token_id",), [*_strings("token_id", "username", "token_hash", "description", "created_by",
                                                "revoked_by"), *_floats("created_at", "revoked_at"),
                                      *_log_position()]),
        "pool": (("pool",), [Column("pool", String), Column("slots", Integer), Column("description", Text),
                             *[Column(name, Integer) for name in ("occupied_slots", "granted_tries", "waiting_tries",
                                                                  "waiting_slots")],
                             Column("grants_json", Text), Column("asks_json", Text),
                             *_floats("updated_at", "deleted_at")]),
        # Assets (projections/asset.py): an asset's definitions by DAG (references_json), its registered
        # consumers and its events; each event once, with the runs that consumed it.
        "asset": (("uri",), [*_strings("uri", "name", "group"), Column("extra_json", Text),
                             Column("references_json", Text), Column("consuming_dags_json", Text),
                             Column("event_count", Integer), *_floats("last_event_at", "updated_at")]),
        "asset_event": (("uri", "event_id"),
                        [*_strings("uri", "event_id", "name", "group", "source_dag_id", "source_run_id",
                                   "source_task_id", "source_alias", "requested_by"),
                         Column("source_map_index", Integer), Column("extra_json", Text),
                         Column("consumed_by_json", Text), *_floats("timestamp", "recorded_at")]),
        OFFSETS: (("topic", "partition"), [Column("topic", String), Column("partition", Integer),
                                           Column("next_offset", BigInteger, nullable=False)]),
    }


# Secondary indexes of the live tables.
INDEXES = {"task_event": [("dag_id", "run_id", "task_id")], "dag_run": [("state",)],
           "task_instance": [("state",)], "command": [("request_id",)],
           "asset_event": [("uri", "timestamp"), ("timestamp",), ("event_id",)]}


class Tables:
    """Every projection table under one suffix ("" = the live tables)."""

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix
        self.metadata = MetaData()
        self.by_name: dict[str, Table] = {}
        for name, (primary_key, columns) in _specs().items():
            self.by_name[name] = Table(name + suffix, self.metadata, *columns,
                                       PrimaryKeyConstraint(*primary_key, name=f"pk_{name}{suffix}"))
            if not suffix:  # rebuilds fill tables without them and add them when swapping in
                for cols in INDEXES.get(name, []):
                    Index(f"ix_{name}_{'_'.join(cols)}", *(self.by_name[name].c[col] for col in cols))

    def __getitem__(self, name: str) -> Table:
        return self.by_name[name]

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    def indexes(self) -> list[Index]:
        """Secondary indexes (named for the live tables); attached only to live tables."""
        return [index for table in self.by_name.values() for index in table.indexes]

LIVE = Tables()
