"""What API tests share: the admin token (TOCK_API_TOKEN) they run with."""

from __future__ import annotations

ADMIN_TOKEN = "test-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
