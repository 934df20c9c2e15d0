"""The shipped Grafana dashboard and Prometheus scrape example name only metrics the code defines,
and scrape the ports standalone serves them on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine

from infra.settings import load_settings
from projections.metrics import ProjectorMetrics
from services.api.metrics import ApiMetrics
from services.dag_processor.metrics import DagProcessorMetrics
from services.scheduler.metrics import SchedulerMetrics
from tock_cli.standalone import SERVICES, metrics_ports

MONITORING = Path(__file__).resolve().parents[2] / "infra" / "deploy" / "monitoring"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def defined_series() -> set[str]:
    """Every series name the services' registries can expose (families with their type's suffixes)."""
    registries = [SchedulerMetrics().registry, DagProcessorMetrics().registry, ProjectorMetrics().registry,
                  ApiMetrics(create_engine("sqlite://")).registry]  # in memory: no table, no offsets
    return {family.name + suffix for registry in registries for family in registry.collect()
            for suffix in SUFFIXES[family.type]}


def dashboard_panels() -> list[dict]:
    return json.loads((MONITORING / "grafana-dashboard.json").read_text())["panels"]


def test_the_dashboard_is_grafana_json_with_unique_ids():
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 30
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["type"] == "row" or panel["targets"], panel["title"]


@pytest.mark.parametrize("panel", [panel for panel in dashboard_panels() if panel["type"] != "row"],
                         ids=lambda panel: panel["title"])
def test_every_dashboard_expression_names_a_defined_metric(panel):
    defined = defined_series()
    for target in panel["targets"]:
        named = set(re.findall(r"\btock_[a-z_]+", target["expr"]))
        assert named, target["expr"]
        assert named <= defined, f"{panel['title']}: {sorted(named - defined)} are not defined"


def test_the_dashboard_covers_every_service():
    named = {name for panel in dashboard_panels() if panel["type"] != "row" for target in panel["targets"]
             for name in re.findall(r"\btock_[a-z_]+", target["expr"])}
    for prefix in ("tock_scheduler_", "tock_runner_", "tock_dag_processor_", "tock_projector_", "tock_api_"):
        assert any(name.startswith(prefix) for name in named), prefix


def test_the_scrape_example_targets_the_ports_standalone_serves():
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    ports = metrics_ports(load_settings({}), list(SERVICES))
    for service, port in ports.items():
        assert jobs[f"tock-{service}"]["static_configs"][0]["targets"] == [f"127.0.0.1:{port}"]
