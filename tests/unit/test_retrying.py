"""The retry loop of the callback callers: a call ends at its first success or final failure, or
after its last attempt, with the count of attempts and what the last one said."""

from __future__ import annotations

import pytest

from infra.retrying import CallOutcome, RetryPool, Verdict

RETRY, SUCCEEDED, FAILED = Verdict.RETRY, Verdict.SUCCEEDED, Verdict.FAILED


def outcome(verdicts: list[Verdict], attempts: int = 3) -> tuple[CallOutcome, list[str]]:
    """The outcome of one call whose attempts say ``verdicts`` in turn; the targets attempted."""
    said, attempted = iter(verdicts), []

    def attempt(target: str, payload: dict) -> tuple[Verdict, str]:
        attempted.append(target)
        verdict = next(said)
        return verdict, f"{verdict.value} #{len(attempted)}"

    pool = RetryPool(attempt, attempts=attempts, backoff=0.001, workers=1, name="test")
    try:
        return pool.submit("target", {"dag_id": "d"}).result(10), attempted
    finally:
        pool.close()


@pytest.mark.parametrize("verdicts, expected", [
    ([SUCCEEDED], CallOutcome(True, 1, "succeeded #1")),
    ([RETRY, SUCCEEDED], CallOutcome(True, 2, "succeeded #2")),
    ([RETRY, FAILED], CallOutcome(False, 2, "failed #2")),
    ([FAILED], CallOutcome(False, 1, "failed #1")),
    ([RETRY, RETRY, RETRY], CallOutcome(False, 3, "retry #3")),
])
def test_a_call_ends_at_its_first_final_verdict_or_its_last_attempt(verdicts, expected):
    result, attempted = outcome(verdicts)
    assert result == expected and attempted == ["target"] * expected.attempts


def test_a_call_needs_an_attempt():
    with pytest.raises(ValueError, match="at least one attempt"):
        RetryPool(lambda target, payload: (SUCCEEDED, ""), attempts=0, backoff=0, workers=1, name="test")
