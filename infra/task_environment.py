"""The environment a try's user code gets: an allow-list (``TOCK_TASK_ENV_ALLOW``), never Tock's own settings.

Whoever started Tock may hold its secrets in the environment (``TOCK_API_TOKEN``, ``TOCK_DB_URL``,
a cloud key); a ``BashTask("x", "env")`` would ship them to ``tock.logs``, readable by any viewer.
User code gets only the variables the allow-list names (``fnmatch`` patterns such as ``LC_*``),
never a ``TOCK_*`` one whatever the list says, and its try's context as ``TOCKRUN_*`` variables.
The runner reads its own settings once at its start (infra/settings.py), before any of this.

User code runs in a fork of its runner, so it could also read the runner's initial environment
(/proc/self/environ) and the runner's memory: a runner is therefore started with only the
allowed variables (:meth:`TaskEnvironment.for_runner`) and given its settings without the
credentials no runner uses (:func:`runner_settings_json`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from infra.executors.requests import TryRequest
from infra.registry import IDS_VARIABLE, exported_ids
from infra.settings import ENV_PREFIX, SECRET_ENV_PREFIXES, Settings

TRY_PREFIX = "TOCKRUN_"  # the try's context, set by the runner (not settings: TOCK_* names are settings)
# Settings no runner uses that may hold credentials: a process that forks user code never holds them.
RUNNER_SECRETS = frozenset({"api_token", "api_secret_key", "db_url", "celery_broker_url"})
# What starting a runner's interpreter needs beside the allow-list (a checkout run with PYTHONPATH).
RUNNER_NEEDS = ("PYTHONPATH",)


def runner_settings_json(settings: Settings) -> str:
    """``settings`` as JSON for a runner process, without :data:`RUNNER_SECRETS` (their defaults), with
    the schema ids this process knows (a runner then asks the registry nothing)."""
    ids = exported_ids(settings).get(IDS_VARIABLE)
    given = settings if ids is None else settings.model_copy(update={"schema_ids": ids})
    return given.model_dump_json(exclude=set(RUNNER_SECRETS))


@dataclass(frozen=True, slots=True)
class TaskEnvironment:
    """Which inherited variables user code may see: ``allowed`` holds fnmatch patterns of names."""

    allowed: tuple[str, ...]

    @classmethod
    def of(cls, settings: Settings) -> TaskEnvironment:
        return cls.parse(settings.task_env_allow)

    @classmethod
    def default(cls) -> TaskEnvironment:
        """The allow-list of the default settings."""
        return cls.parse(Settings.model_fields["task_env_allow"].default)

    @classmethod
    def parse(cls, text: str) -> TaskEnvironment:
        """From a comma-separated list (``PATH,LC_*``)."""
        return cls(tuple(pattern.strip() for pattern in text.split(",") if pattern.strip()))

    def passes(self, name: str) -> bool:
        """Whether user code may inherit the variable ``name``."""
        if name.startswith((ENV_PREFIX, TRY_PREFIX)):  # Tock's settings, or a context not of this try
            return False
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allowed)

    def inherited(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables of ``environ`` the allow-list passes."""
        return {name: value for name, value in environ.items() if self.passes(name)}

    def for_runner(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment to start a runner with: what passes, what its interpreter needs, and the
        variables and connections given as TOCK_VAR_* / TOCK_CONN_* (its child reads them into the
        secrets chain before it clears them from user code's environment)."""
        return (self.inherited(environ) | {name: environ[name] for name in RUNNER_NEEDS if name in environ}
                | {name: value for name, value in environ.items() if name.startswith(SECRET_ENV_PREFIXES)})

    def for_try(self, environ: Mapping[str, str], request: TryRequest) -> dict[str, str]:
        """The whole environment of ``request``'s user code: what passes of ``environ``, and the try's context."""
        return self.inherited(environ) | {
            f"{TRY_PREFIX}DAG_ID": request.dag_id, f"{TRY_PREFIX}RUN_ID": request.run_id,
            f"{TRY_PREFIX}TASK_ID": request.task_id, f"{TRY_PREFIX}TRY_NUMBER": str(request.try_number)}
