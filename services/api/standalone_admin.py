"""The admin account `tock standalone` makes on first start, like Airflow's standalone.

The first start generates a password, appends ``UserCreated(admin)`` to ``tock.users`` and keeps
the password in ``<home>/standalone_admin_password.txt`` (mode 0600), so it can be found again;
later starts only say where the file is. Delete the file to have the next start give the admin
a new password (a new ``UserCreated`` replaces the account, as ``tock users create --replace``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

from infra.log import KafkaEventLog
from infra.settings import Settings
from schemas import UserCreated
from services.api import accounts

USERNAME = "admin"
PASSWORD_FILE = "standalone_admin_password.txt"
ACK_TIMEOUT = 30.0


class AdminLogin(NamedTuple):
    username: str
    password_file: Path
    new_password: str | None  # set only on the start that created it


def password_file(settings: Settings) -> Path:
    return settings.home / PASSWORD_FILE


def ensure_admin(settings: Settings) -> AdminLogin:
    """The standalone admin: created (event appended, file written) unless its password file exists."""
    path = password_file(settings)
    if path.exists():
        return AdminLogin(USERNAME, path, None)
    password = accounts.new_password()
    event = UserCreated(username=USERNAME, role="admin", password_hash=accounts.hash_password(password),
                        created_by="standalone", at=time.time())
    with KafkaEventLog(settings, client_id="tock-standalone") as event_log:
        event_log.append(event)
        event_log.flush(ACK_TIMEOUT)  # raises DeliveryFailed: no file is written for an account not in the log
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(password + "\n")
    return AdminLogin(USERNAME, path, password)


def banner(settings: Settings, login: AdminLogin) -> str:
    """What standalone prints once everything has started."""
    address = f"http://{settings.api_host}:{settings.api_port}/"
    if login.new_password:
        secret = f"password: {login.new_password}  (shown once; kept in {login.password_file})"
    else:
        secret = f"password in {login.password_file}"
    return f"Tock web UI: {address}  user: {login.username}  {secret}"
