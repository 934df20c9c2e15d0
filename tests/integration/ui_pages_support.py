"""What web UI page tests (and the UI benchmark) share: projection rows folded from events, users, logging in.

Rows are written the projector's way (events given log positions, folded and committed by
``commit_batch``), without a broker in between: the pages only read the tables.
"""

from __future__ import annotations

import re

from projections.writer import commit_batch
from schemas import DagDefinition, DagParsed, TaskDefinition, UserCreated
from services.api import accounts
from tests.unit.projection_logs import LogBuilder

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
PASSWORD = "correct horse battery"


def fold_into_tables(engine, events: list, builder: LogBuilder | None = None) -> None:
    """Fold ``events`` into the projection tables in one batch, as the projector would. Pass the same
    ``builder`` to fold several batches of one log (a fresh one starts at offset 0 again, and the
    writer skips records below the offsets it has stored)."""
    builder = builder or LogBuilder()
    first = len(builder.records)
    for event in events:
        builder.add(event)

    def refuse(record, reason):
        raise AssertionError(f"unexpected dead letter {record}: {reason}")

    commit_batch(engine, builder.records[first:], {}, {}, refuse)


def dag_parsed(dag_id: str, upstream: dict[str, list[str]], at: float, **definition) -> DagParsed:
    """DagParsed of a DAG whose tasks (bash ``true``) have these upstream tasks."""
    path = definition.pop("file_path", f"/dags/{dag_id}.py")
    tasks = [TaskDefinition(task_id=task_id, kind="bash", command="true", upstream=ups)
             for task_id, ups in upstream.items()]
    return DagParsed(dag_id=dag_id, file_path=path, fingerprint=f"fp-{dag_id}-{at}",
                     definition=DagDefinition(dag_id=dag_id, file_path=path, tasks=tasks, **definition), at=at)


def user_created(username: str, role: str, at: float, password: str = PASSWORD) -> UserCreated:
    return UserCreated(username=username, role=role, password_hash=accounts.hash_password(password),
                       created_by="tests", at=at)


def csrf_in(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def log_in(client, username: str, password: str = PASSWORD) -> None:
    """Log in through the login form (its CSRF token included); the client keeps the session cookie."""
    form = client.get("/login")
    answer = client.post("/login", data={"username": username, "password": password, "csrf": csrf_in(form.text),
                                         "next": "/"}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/", answer.text
