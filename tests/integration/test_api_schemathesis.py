"""Property-based requests generated from the API's OpenAPI document: no 500, whatever the input.

Schemathesis' pytest plugin does not load under pytest 9 here, so the test draws one case
per operation of the document with Hypothesis directly (bounded by max_examples).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from tests.integration.projection_db import db_url, engine, projection_settings  # noqa: F401 - fixtures
from tests.integration.test_api import AUTH, client  # noqa: F401 - fixture

pytestmark = pytest.mark.integration

REQUEST_TIMEOUT = 120  # seconds


_LOADED: dict[int, tuple[object, list]] = {}


def _operations(app) -> list:
    """The document's operations and their strategies, built once per app (not once per example), the
    document loaded with a generous timeout: on a loaded CI machine one load took over schemathesis'
    default 10 s."""
    if id(app) not in _LOADED or _LOADED[id(app)][0] is not app:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=AUTH,  # the document needs a login
                                                timeout=REQUEST_TIMEOUT)
        operations = [result.ok() for result in schema.get_all_operations()]
        _LOADED[id(app)] = (app, [(operation, operation.as_strategy()) for operation in operations])
    return _LOADED[id(app)][1]


# No shrinking: a failing request is reported as it was drawn. Shrinking replays dozens of requests per
# step, and on a loaded machine it once ran past the test's timeout, which then hid the failure itself.
@hypothesis_settings(max_examples=6, deadline=None, derandomize=False,
                     phases=[Phase.explicit, Phase.reuse, Phase.generate],
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_request_makes_the_api_fail(client, data):
    operations = _operations(client.app)
    assert len(operations) >= 15
    for operation, strategy in operations:
        case = data.draw(strategy, label=operation.label)
        # A generous read timeout: on a loaded CI machine (three pytest processes on two cores) one
        # request once took over schemathesis' default 10 s; the check is for 5xx, not for speed.
        case.call_and_validate(headers=AUTH, checks=[not_a_server_error], timeout=REQUEST_TIMEOUT)
