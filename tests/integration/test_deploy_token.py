"""The deploy files cannot put the placeholder admin token in service (issue 20, item 14): rendered with
`kubectl kustomize` (no API server needed), the API's settings of the base and of the production overlay
make `tock api` refuse to start until the Secret holds a real token."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import load_settings
from services.api.app import UnsafeSettings, refuse_unsafe_settings
from tests.integration.test_deploy_manifests import objects, render

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("variant", ["base", "overlays/production"])
def test_the_rendered_settings_refuse_the_placeholder_token(variant):
    rendered = objects(render(variant, None, Path()))
    environ = {**rendered[("ConfigMap", "tock-settings")]["data"],
               **rendered[("Secret", "tock-secrets")].get("stringData", {})}
    with pytest.raises(UnsafeSettings, match="placeholder"):
        refuse_unsafe_settings(load_settings(environ))
    real = {**environ, "TOCK_API_TOKEN": "x" * 43}
    refuse_unsafe_settings(load_settings(real))
