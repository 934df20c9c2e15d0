"""The chaos soak (issue 20): a steady load of DAGs on every executor while a seeded fault injector
kills (kill -9) or freezes (SIGSTOP, under and past its limit) each kind of Tock process in turn
and restarts the broker, PostgreSQL, Redis and the kube-apiserver; then checks over the log and the
user code's marker files (tests/soak/checks.py). ``python -m tests.soak`` runs it for SOAK_MINUTES;
the scenario tests/scenarios/test_soak.py runs a short one in `make test`."""
