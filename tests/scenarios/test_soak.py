"""The short chaos soak of `make test` (issue 20): SOAK_MINUTES (default 3) of steady load on every
executor while each kind of Tock process is killed, frozen briefly or frozen past its limit (the
heartbeat or session timeout) in turn and the broker, PostgreSQL, Redis and the kube-apiserver are
restarted, all of them private to this test; then every check of tests/soak/checks.py over the
log and the marker files. SOAK_SEED repeats a run's choices; the seed is printed (and named in the
failure). `make soak` runs the same for as long as asked."""

from __future__ import annotations

import os
import random

import pytest

from tests.soak.harness import DRAIN_SECONDS, run_soak

pytestmark = [pytest.mark.scenario, pytest.mark.apart]

MINUTES = float(os.environ.get("SOAK_MINUTES") or 3)


@pytest.mark.timeout(int(MINUTES * 60 + DRAIN_SECONDS + 900))
def test_a_short_chaos_soak_breaks_no_promise(tmp_path):
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(2**32))
    result = run_soak(MINUTES, seed, tmp_path / "soak", say=print)
    print(result.report())
    assert result.violations == [], result.report()
