"""The emitter's settings, resolved once from Tock's settings (the TOCK_LINEAGE_* block of infra/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infra.settings import Settings
from services.lineage.core import LineageConfig


class LineageSettingsError(ValueError):
    """The TOCK_LINEAGE_* settings do not make a usable emitter; the message says which and why."""


@dataclass(frozen=True)
class LineageSettings:
    transport: str  # "kafka", "file" or "http"
    config: LineageConfig
    topic: str  # the Kafka transport's topic, named as it is
    file: Path  # the file transport's file
    url: str | None  # the HTTP transport's base URL
    http_endpoint: str
    http_timeout: float
    session_timeout: float
    home: Path

    @classmethod
    def of(cls, settings: Settings) -> LineageSettings:
        if settings.lineage_transport == "http" and not settings.lineage_url:
            raise LineageSettingsError("TOCK_LINEAGE_TRANSPORT=http needs TOCK_LINEAGE_URL (the OpenLineage "
                                       "endpoint's base URL, e.g. http://127.0.0.1:5000)")
        return cls(settings.lineage_transport, LineageConfig(settings.lineage_namespace),
                   settings.lineage_topic or f"{settings.topic_prefix}tock.lineage",
                   settings.lineage_file or settings.home / "lineage" / "openlineage.jsonl", settings.lineage_url,
                   settings.lineage_http_endpoint, settings.lineage_http_timeout, settings.lineage_session_timeout,
                   settings.home)
