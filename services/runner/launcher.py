"""The warm launcher: a process that imported the runner once and keeps warm runners ready.

The local executor starts it and writes one try message (infra/executors/messages.py) per
line on its stdin; it answers each with ``<pid> <start time>`` on stdout. It hands each batch
to warm runners (spares.py), its own or, for a DAG file launched from again and again, those of a
launcher of that file, which has the file imported already (file_launchers.py), so a try does not
import it again. Tries outlive the launcher and the scheduler.
Started by the command ``services.runner.local_launcher_command()`` names (``python -m
services.runner.launcher``); the first line it reads is the settings as JSON.
"""

from __future__ import annotations

import gc
import json
import logging
import signal
import sys

from infra.pipes import read_line
from infra.settings import Settings
from services.runner.file_launchers import FileLaunchers
from services.runner.spares import Spares, answer, request_batches

TEND_SECONDS = 5.0  # how often, at least, the file launchers are looked after (started, idle, dead)


def main() -> None:
    settings = Settings(**json.loads(read_line(sys.stdin.fileno())))
    logging.basicConfig(level=settings.log_level, stream=sys.stderr,  # the scheduler's, which started it
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runners are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is the scheduler's to handle
    # Imported once here, inherited warm by every runner and its user-code child: importing
    # tock in each child cost more than all the rest of a no-op try.
    import services.runner  # noqa: F401
    import tock  # noqa: F401
    from services.runner.warm_up import warm_up_runner

    warm_up_runner(settings)  # the codec's caches and schema ids, built once here rather than in each runner
    # What is here now lives as long as this process: out of its collections, which would otherwise walk it
    # and, its pages being shared with the spares, copy them.
    gc.freeze()

    # A burst beyond the warm runners starts runners cold: fine, just slower.
    spares = Spares(settings, min(settings.warm_runners, settings.parallelism))
    files = FileLaunchers(settings, spares)
    spares.private = files.descriptors  # a runner forked here must not hold a file launcher's pipes
    spares.fill()
    try:
        for lines in request_batches(sys.stdin.fileno(), TEND_SECONDS):
            if lines:
                answer(sys.stdout.fileno(), files.launch(lines, spares.hand_over))
                spares.fill()  # after the answers: a burst of launches does not wait for new spares
            files.tend()
    finally:
        files.close()


if __name__ == "__main__":
    main()
