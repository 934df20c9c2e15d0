"""masked_output: a try's output through a real pipe, masked into its log file, by a thread or (for a
bash task, which execs) by a forked reader."""

from __future__ import annotations

import os
import subprocess
import sys

from tock.secrets.masking import Masker, masked_output

SECRET = "hunter2-secret"


def masker_of(*secrets: object) -> Masker:
    masker = Masker()
    for secret in secrets:
        masker.add(secret)
    return masker


def _log(tmp_path):
    path = tmp_path / "try.log"
    return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def test_masked_output_writes_what_comes_through_the_pipe_masked_to_the_log(tmp_path):
    path, log_fd = _log(tmp_path)
    masker = masker_of(SECRET)
    write_fd, finish = masked_output(log_fd, masker)
    for piece in (b"the pass is hun", b"ter2-sec", b"ret!\nno newline at the end"):
        os.write(write_fd, piece)
    finish()
    os.close(log_fd)
    assert path.read_bytes() == b"the pass is ***!\nno newline at the end"


def test_masked_output_survives_an_exec_of_the_writer(tmp_path):
    """A bash task: the process execs, its reader (a forked process) goes on masking until bash ends."""
    path, log_fd = _log(tmp_path)
    script = f"""
import os, sys
sys.path.insert(0, {os.getcwd()!r})
from tock.secrets.masking import Masker, masked_output
masker = Masker(); masker.add({SECRET!r})
log_fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
write_fd, _finish = masked_output(log_fd, masker, survive_exec=True)
os.dup2(write_fd, 1); os.dup2(write_fd, 2); os.close(write_fd)
os.execv("/bin/bash", ["bash", "-c", "printf 'echo {SECRET[:4]}'; sleep 0.2; printf '{SECRET[4:]} done\\\\n' >&2"])
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    os.close(log_fd)
    for _ in range(100):  # the reader ends just after bash: at the pipe's end
        if path.read_bytes().endswith(b"\n"):
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert path.read_bytes() == b"echo *** done\n"


def test_the_child_recipe_masks_what_user_code_prints_of_its_secrets(tmp_path):
    """What the runner's child does: build and install the chain from its environment before clearing it,
    route fds 1 and 2 through masked_output, run user code, finish, and report the accesses."""
    path = tmp_path / "try.log"
    path.touch()
    script = f"""
import json, os, sys
from infra.secrets import secrets_backends
from infra.settings import load_settings
from tock import Connection, Variable
from tock.secrets import SecretsChain, accesses, install, masker, masked_output
install(SecretsChain(secrets_backends(load_settings({{"TOCK_HOME": {str(tmp_path)!r}}}), os.environ)))
report = os.dup(1)
os.environ.clear()
log_fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
write_fd, finish = masked_output(log_fd, masker())
os.dup2(write_fd, 1); os.dup2(write_fd, 2); os.close(write_fd)
sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
print("password:", Connection.get("db").password, "key:", Variable.get("api_key"), "region:", Variable.get("region"))
print("environment has", sorted(name for name in os.environ if name.startswith("TOCK_")), file=sys.stderr)
sys.stdout.flush(); sys.stderr.flush()
finish()
os.write(report, json.dumps(accesses()).encode())
"""
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": os.getcwd(), "TOCK_VAR_API_KEY": "key-5678-abcd",
               "TOCK_VAR_REGION": "eu-west-1", "TOCK_CONN_DB": "postgres://etl:db-pass-1234@db/dw"}
    done = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert path.read_text() == "password: *** key: *** region: eu-west-1\nenvironment has []\n"
    assert [tuple(access) for access in __import__("json").loads(done.stdout)] == [
        ("connection", "db", "env"), ("variable", "api_key", "env"), ("variable", "region", "env")]


def test_a_reader_process_masks_secrets_registered_after_it_started_and_outlives_a_killed_writer(tmp_path):
    path = tmp_path / "try.log"
    path.touch()
    script = f"""
import os, signal, sys
from tock.secrets.masking import Masker, masked_output
masker = Masker()
log_fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
write_fd, finish = masked_output(log_fd, masker, survive_exec=True)
os.dup2(write_fd, 1); os.close(write_fd)
sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
print("before: late-secret-1")
masker.add("late-secret-1")
for index in range(200):
    print(f"after {{index}}: late-secret-1 and late-", end="")
    print("secret-1")
os.kill(os.getpid(), signal.SIGKILL)  # a crash: finish() never runs
"""
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.getcwd()},
                          timeout=60)
    assert done.returncode == -9
    # What was written before the secret was registered may be masked too (the reader had not read it yet).
    expected = "".join(f"after {index}: *** and ***\n" for index in range(200))
    for _ in range(100):  # the reader ends at the pipe's end, just after the writer
        if path.read_text().endswith(expected):
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert path.read_text() in (f"before: late-secret-1\n{expected}", f"before: ***\n{expected}")
