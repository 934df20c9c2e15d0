"""A DAG whose tasks look for Tock's secrets wherever user code could find them: its environment,
its own and its runner's initial environment (/proc), and the settings objects in its memory."""

from __future__ import annotations

import uuid
from pathlib import Path

SNOOPS = '''
import gc, os
from tock import DAG, BashTask, task

OUT = OUT_FOLDER

with DAG("snoops") as dag:
    BashTask("bash_snoops", f"env > {OUT}/bash.txt; tr '\\\\0' '\\\\n' < /proc/$PPID/environ > {OUT}/bash_runner.txt",
             executor=EXECUTOR)

    @task(executor=EXECUTOR)
    def python_snoops():
        def read(path):
            with open(path) as found:
                return found.read()

        seen = [repr(dict(os.environ)), read("/proc/self/environ"), read(f"/proc/{os.getppid()}/environ"),
                repr([found.model_dump() for found in gc.get_objects() if type(found).__module__ == "infra.settings"])]
        with open(f"{OUT}/python.txt", "w") as out:
            out.write("\\n".join(seen))

    python_snoops()
'''


class Secrets:
    """Secrets as an installation holds them: in its settings and in its environment."""

    def __init__(self) -> None:
        self.api_token = f"admin-token-{uuid.uuid4().hex}"
        self.db_password = f"db-password-{uuid.uuid4().hex}"
        self.cloud_key = f"cloud-key-{uuid.uuid4().hex}"

    @property
    def settings(self) -> dict[str, str]:
        return {"api_token": self.api_token, "db_url": f"postgresql://tock:{self.db_password}@127.0.0.1/none"}

    @property
    def environment(self) -> dict[str, str]:
        """What the scheduler's (or worker's) environment holds beside its settings."""
        return {"CLOUD_SECRET_ACCESS_KEY": self.cloud_key}

    def values(self) -> list[str]:
        return [self.api_token, self.db_password, self.cloud_key]


def snooping_dag(folder: Path, out: Path, executor: str) -> Path:
    path = folder / "snoops.py"
    path.write_text(SNOOPS.replace("OUT_FOLDER", repr(str(out))).replace("EXECUTOR", repr(executor)))
    return path


def assert_nothing_found(out: Path, secrets: Secrets) -> None:
    """The tasks ran, saw their own context, and found none of the secrets."""
    seen = {name: (out / name).read_text() for name in ("bash.txt", "bash_runner.txt", "python.txt")}
    for name, text in seen.items():
        found = [secret for secret in secrets.values() if secret in text]
        assert not found, f"{name} holds {found}"
        assert "TOCK_API_TOKEN" not in text and "TOCK_DB_URL" not in text, name
    assert "TOCKRUN_TASK_ID=bash_snoops" in seen["bash.txt"].splitlines()
    assert any(line.startswith("PATH=") for line in seen["bash.txt"].splitlines())
