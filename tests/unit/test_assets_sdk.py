"""Assets as DAG files write them (issue 24): ``Asset``'s name/uri rule, ``&`` / ``|`` and lists as schedules,
outlets in the task's definition, ``outlet_events`` extra and alias events in the success a try reports,
``triggering_asset_events`` in a consumer's context, and every mistake refused with a message."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock import DAG, Asset, AssetAlias, AssetAll, AssetAny, BashTask, DagDefinitionError, task
from tock.assets import TriggeringAssetEvents
from tock_cli.local_run import run_dag


def test_an_asset_given_one_of_name_and_uri_is_both_and_is_identified_by_them():
    assert (Asset("s3://x").name, Asset("s3://x").uri) == ("s3://x", "s3://x")
    assert (Asset(uri="u").name, Asset(name="n", uri="u").name) == ("u", "n")
    assert Asset("a") == Asset("a") and Asset("a") != Asset("b") and len({Asset("a"), Asset("a")}) == 1
    with pytest.raises(TypeError, match="needs a name or a uri"):
        Asset()


@pytest.mark.parametrize("given_args, words", [({"name": ""}, "non-empty"), ({"name": " x"}, "spaces"),
                                               ({"name": "x", "extra": [1]}, "must be a dict"),
                                               ({"name": "x", "extra": {"k": object()}}, "must be JSON"),
                                               ({"name": "x" * 1501}, "1500")])
def test_a_wrong_asset_is_refused_saying_what_is_wrong(given_args, words):
    with pytest.raises((TypeError, ValueError), match=words):
        Asset(**given_args)


def definition(schedule) -> dict:
    with DAG("consumer", schedule=schedule) as dag:
        BashTask("t", "true")
    made = dag.to_definition("/dags/c.py")
    return {"condition": json.loads(made.asset_condition_json or "null"), "schedule": made.schedule,
            "assets": [asset.uri for asset in made.schedule_assets]}


def test_a_schedule_of_assets_is_a_condition_a_list_meaning_all_of_them():
    a, b, c = Asset("a"), Asset("b"), Asset("c")
    assert definition([a, b]) == {"condition": {"all": [{"asset": "a"}, {"asset": "b"}]}, "schedule": None,
                                  "assets": ["a", "b"]}
    assert definition(a & (b | c) & a)["condition"] == {
        "all": [{"asset": "a"}, {"any": [{"asset": "b"}, {"asset": "c"}]}, {"asset": "a"}]}
    assert definition(a & (b | c) & a)["assets"] == ["a", "b", "c"]
    assert definition(AssetAny(a, b))["condition"] == {"any": [{"asset": "a"}, {"asset": "b"}]}
    assert definition([a])["condition"] == {"asset": "a"}
    assert isinstance(a & b, AssetAll) and isinstance(a | b, AssetAny)
    assert definition("@daily") == {"condition": None, "schedule": "@daily", "assets": []}


@pytest.mark.parametrize("schedule, words", [([Asset("a"), "b"], "list of assets"),
                                             (AssetAlias("x"), "AssetAlias is not offered"),
                                             (Asset("a") | AssetAlias("x"), "AssetAlias is not offered"),
                                             (3, "bad schedule")])
def test_a_wrong_asset_schedule_is_a_parse_error_naming_it(schedule, words):
    with pytest.raises(DagDefinitionError, match=words):
        DAG("consumer", schedule=schedule)
    with pytest.raises(TypeError, match="combines assets"):
        Asset("a") & "b"  # noqa: B018 - the operator is what is tested


def test_outlets_are_in_the_task_definition_and_wrong_ones_are_refused():
    with DAG("producer", schedule=None) as dag:
        BashTask("t", "true", outlets=[Asset("s3://a", extra={"owner": "me"}), AssetAlias("out")])
    (made,) = dag.to_definition("/dags/p.py").tasks
    assert [(asset.uri, json.loads(asset.extra_json)) for asset in made.outlets] == [("s3://a", {"owner": "me"})]
    assert made.outlet_aliases == ["out"]
    with pytest.raises((DagDefinitionError, ValueError), match="outlets must be"), DAG("p", schedule=None):
        BashTask("t", "true", outlets=["s3://a"])


def test_a_success_carries_its_outlets_events_with_the_extra_its_code_set_and_those_added_through_an_alias():
    lines: list[str] = []
    with DAG("producer", schedule=None) as dag:
        @task(outlets=[Asset("s3://a"), AssetAlias("out")])
        def make(outlet_events=None):
            outlet_events[Asset("s3://a")].extra["rows"] = 3
            outlet_events[AssetAlias("out")].add(Asset("s3://b"), extra={"via": "alias"})

        make()
    assert run_dag(dag, report=lines.append).state == "success"
    (shown,) = [line for line in lines if "asset events" in line]
    events = json.loads(shown.split(" · asset events ", 1)[1])
    assert [(item["uri"], item["extra"], item["alias"]) for item in events] == [
        ("s3://a", {"rows": 3}, ""), ("s3://b", {"via": "alias"}, "out")]


def test_naming_an_asset_the_task_does_not_update_fails_the_try_saying_which_it_does():
    with DAG("producer", schedule=None) as dag:
        @task(outlets=[Asset("s3://a")])
        def make(outlet_events=None):
            outlet_events[Asset("s3://other")].extra["x"] = 1

        make()
    lines: list[str] = []
    assert run_dag(dag, report=lines.append).state == "failed"
    assert any("not one of the task's outlets" in line and "s3://a" in line for line in lines)


def test_triggering_asset_events_are_found_by_asset_uri_or_name():
    events = TriggeringAssetEvents(json.dumps([
        {"uri": "s3://a", "name": "raw", "event_id": "e1", "extra_json": '{"n": 1}', "source_dag_id": "p",
         "source_run_id": "r", "source_task_id": "t", "source_map_index": -1, "source_alias": "", "timestamp": 5.0}]))
    (event,) = events[Asset(name="raw", uri="s3://a")]
    assert events["s3://a"] == events["raw"] == [event]
    assert (event.extra, event.source_dag_id, event.source_task_id, event.timestamp.timestamp()) == ({"n": 1}, "p",
                                                                                                      "t", 5.0)
    assert events["s3://b"] == [] and "s3://b" not in events
    assert dict(TriggeringAssetEvents("")) == {}


@given(st.one_of(st.text(max_size=12), st.none(), st.integers()), st.one_of(st.none(), st.dictionaries(
    st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=4)), max_size=3), st.integers()))
def test_any_asset_is_made_or_refused_with_an_error(name, extra):
    try:
        made = Asset(name, extra=extra)
    except (TypeError, ValueError):
        return
    assert made.uri == name and made.name == name and made.extra == (extra or {})
