"""Settings are read once from TOCK_* variables; unknown or invalid ones name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infra.settings import SettingsError, known_variables, load_settings


def test_defaults_without_variables():
    settings = load_settings({"PATH": "/bin", "HOME": "/root"})
    assert settings.partitions == 12
    assert settings.uses_local_broker
    assert settings.bootstrap == "127.0.0.1:9092"
    assert settings.api_host == "127.0.0.1"


def test_variables_are_typed_and_derived_values_follow_home():
    settings = load_settings({"TOCK_HOME": "/srv/tock", "TOCK_PARTITIONS": "6", "TOCK_PARSE_TIMEOUT": "2.5"})
    assert settings.partitions == 6 and settings.parse_timeout == 2.5
    assert settings.resolved_dags_folder == Path("/srv/tock/dags")
    assert settings.resolved_db_url == "sqlite:////srv/tock/tock.db"


def test_a_configured_cluster_replaces_the_local_broker():
    settings = load_settings({"TOCK_KAFKA_BOOTSTRAP": "kafka-1:9092,kafka-2:9092"})
    assert not settings.uses_local_broker and settings.bootstrap == "kafka-1:9092,kafka-2:9092"


def test_unknown_variable_is_named():
    with pytest.raises(SettingsError, match="unknown setting.*TOCK_PARTITONS"):
        load_settings({"TOCK_PARTITONS": "3"})


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TOCK_PARTITIONS", "many", "TOCK_PARTITIONS"),
        ("TOCK_PARTITIONS", "0", "TOCK_PARTITIONS"),
        ("TOCK_PARSE_TIMEOUT", "-1", "TOCK_PARSE_TIMEOUT"),
        ("TOCK_TOPIC_PREFIX", "a b", "TOCK_TOPIC_PREFIX"),
        ("TOCK_LOG_LEVEL", "LOUD", "TOCK_LOG_LEVEL"),
    ],
)
def test_invalid_values_name_the_variable(variable, value, message):
    with pytest.raises(SettingsError, match=message):
        load_settings({variable: value})


def test_settings_are_frozen():
    settings = load_settings({})
    with pytest.raises(ValidationError):
        settings.partitions = 3  # type: ignore[misc]


def test_every_field_has_a_variable():
    assert "TOCK_KAFKA_BOOTSTRAP" in known_variables() and "TOCK_DB_URL" in known_variables()


def test_an_empty_variable_means_unset():
    assert load_settings({"TOCK_KAFKA_BOOTSTRAP": ""}).uses_local_broker


def test_readme_documents_every_setting():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert sorted(name for name in known_variables() if f"`{name}`" not in readme) == []
