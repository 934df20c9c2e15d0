"""The standalone admin: made once (UserCreated in tock.users, password file 0600), found again after."""

from __future__ import annotations

from infra.log import replay
from schemas import USERS, UserCreated
from services.api import accounts, standalone_admin
from tests.scenarios.scheduler_support import create_topics


def test_the_first_start_creates_the_admin_and_later_starts_only_point_at_its_file(make_settings):
    settings = make_settings()
    create_topics(settings)
    first = standalone_admin.ensure_admin(settings)
    again = standalone_admin.ensure_admin(settings)
    assert first.new_password and again.new_password is None
    assert first.password_file == again.password_file == settings.home / "standalone_admin_password.txt"
    assert first.password_file.read_text().strip() == first.new_password
    assert first.password_file.stat().st_mode & 0o777 == 0o600
    events = [record.event for record in replay(settings, USERS)]
    created = [event for event in events if isinstance(event, UserCreated)]
    assert [(event.username, event.role) for event in created] == [("admin", "admin")]
    assert accounts.password_matches(created[0].password_hash, first.new_password)
    assert first.new_password in standalone_admin.banner(settings, first)
    assert first.new_password not in standalone_admin.banner(settings, again)
    assert str(first.password_file) in standalone_admin.banner(settings, again)
