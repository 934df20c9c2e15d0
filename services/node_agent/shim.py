"""The container shim: the first process of a pod, in its own session; runs the command and
writes its exit status to a file, so an agent restarted after a clean stop learns how a pod
it did not start ended (what containerd-shim does for a real kubelet).

``python -I -S .../services/node_agent/shim.py EXIT_FILE -- COMMAND [ARGS...]`` (standard library only)

It ignores SIGTERM/SIGINT/SIGHUP sent to the group (the command gets them, with default
handling) and dies only by SIGKILL, which also leaves no exit file: "status unknown".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path


def _ignore(_signum, _frame) -> None:
    # A Python handler, not SIG_IGN: exec resets it to the default in the command.
    pass


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def write_exit(path: Path, code: int) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"exit_code": code}))
    os.replace(partial, path)


def main(argv: list[str]) -> int:
    exit_file, command = Path(argv[0]), argv[2:]
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    try:
        child = subprocess.Popen(command)
    except (OSError, ValueError, IndexError) as error:  # not found, not executable, empty
        print(f"tock node-agent: cannot run {command!r}: {error}", file=sys.stderr, flush=True)
        code = 126 if isinstance(error, PermissionError) else 127
    else:
        code = exit_code_of(child.wait())
    write_exit(exit_file, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
