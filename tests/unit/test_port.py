"""`tock port` (issue 25): each `from airflow... import` of a name Tock offers becomes Tock's, on the same
line, with Airflow 2's renamed names kept by an alias; everything else in the file is left as it is; the
names Tock does not offer are reported with their line and a hint; porting twice changes nothing; and a
ported file loads as Tock's DAGs."""

from __future__ import annotations

import json
import keyword
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tock
from tock import load_dags
from tock_cli import app
from tock_cli.porting import port_source

OFFERED = frozenset(tock.__all__)

AIRFLOW_3 = '''"""An Airflow 3 DAG file."""
from datetime import datetime

from airflow.sdk import DAG, task, Asset
from airflow.providers.standard.operators.bash import BashOperator as Bash
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.exceptions import AirflowSkipException

orders = Asset("s3://orders")

with DAG("ported", start_date=datetime(2026, 1, 1), schedule=None, tags=["from-airflow"]):
    @task(outlets=[orders])
    def land():
        return 3

    land() >> Bash(task_id="report", bash_command="echo {{ ds }}") >> EmptyOperator(task_id="done")
'''


def test_an_airflow_3_file_gets_tocks_imports_and_nothing_else_changes():
    ported = port_source(AIRFLOW_3, OFFERED)
    assert ported.missing == [] and ported.error == ""
    before, after = AIRFLOW_3.splitlines(), ported.source.splitlines()
    assert len(before) == len(after)
    assert [line for line in after if "import" in line and "datetime" not in line] == [
        "from tock import DAG, task, Asset", "from tock import BashOperator as Bash",
        "from tock import EmptyOperator", "from tock import AirflowSkipException"]
    assert [a for a, b in zip(before, after, strict=True) if a != b and "import" not in a] == []
    assert [(item.line, item.airflow, item.tock) for item in ported.mapped][:2] == [
        (4, "airflow.sdk.DAG", "tock.DAG"), (4, "airflow.sdk.task", "tock.task")]


def test_airflow_2_spellings_map_and_renamed_names_keep_theirs():
    source = ("from airflow.models.dag import DAG\nfrom airflow.operators.dummy import DummyOperator\n"
              "from airflow.datasets import Dataset, DatasetAlias as Alias\n"
              "from airflow.utils.trigger_rule import TriggerRule\nfrom airflow.utils.task_group import TaskGroup\n")
    assert port_source(source, OFFERED).source == (
        "from tock import DAG\nfrom tock import EmptyOperator as DummyOperator\n"
        "from tock import Asset as Dataset, AssetAlias as Alias\n"
        "from tock import TriggerRule\nfrom tock import TaskGroup\n")


def test_names_tock_does_not_offer_stay_airflows_and_are_reported_with_a_hint():
    source = ("import airflow\nfrom airflow.utils.dates import days_ago\n"
              "from airflow.sdk import DAG, NotAThing as Other\nfrom airflow.operators.python import *\n"
              "def f():\n    from airflow.models import DagBag\n")
    ported = port_source(source, OFFERED)
    assert ported.source.splitlines()[2] == "from tock import DAG; from airflow.sdk import NotAThing as Other"
    found = {(item.line, item.airflow): item.hint for item in ported.missing}
    assert set(found) == {(1, "airflow"), (2, "airflow.utils.dates.days_ago"), (3, "airflow.sdk.NotAThing"),
                          (4, "airflow.operators.python.*"), (6, "airflow.models.DagBag")}
    assert "datetime" in found[(2, "airflow.utils.dates.days_ago")] and "module import" in found[(1, "airflow")]
    assert "load_dags" in found[(6, "airflow.models.DagBag")]


def test_a_multi_line_import_becomes_one_line_and_every_later_line_keeps_its_number():
    source = "from airflow.sdk import (\n    DAG,  # the DAG\n    task,\n)\nx = 1\n"
    ported = port_source(source, OFFERED)
    assert ported.source.splitlines()[0] == "from tock import DAG, task"
    assert ported.source.splitlines()[4] == "x = 1"


def test_a_file_that_does_not_parse_is_left_as_it_is_and_reported():
    ported = port_source("from airflow.sdk import DAG\ndef broken(:\n", OFFERED)
    assert ported.source == "from airflow.sdk import DAG\ndef broken(:\n" and "line 2" in ported.error


NAMES = st.sampled_from(sorted(OFFERED) + ["Dataset", "DummyOperator", "days_ago", "NotAThing", "XCom"])
MODULES = st.sampled_from(["airflow", "airflow.sdk", "airflow.decorators", "airflow.operators.bash",
                           "airflow.providers.standard.sensors.filesystem", "airflow.models", "os.path", "tock"])
ALIAS = st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)))


@st.composite
def import_lines(draw) -> str:
    names = draw(st.lists(st.tuples(NAMES, ALIAS), min_size=1, max_size=4))
    listed = ", ".join(name if alias is None else f"{name} as {alias}" for name, alias in names)
    indent = draw(st.sampled_from(["", "    "]))
    statement = f"from {draw(MODULES)} import {listed}"
    return f"if True:\n{indent or '    '}{statement}" if indent else statement


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(import_lines(), st.sampled_from(["x = 1", "# a comment", "print('airflow')"])),
                max_size=8))
def test_any_file_of_imports_ports_to_valid_python_binding_the_same_names_and_ports_once(lines):
    source = "\n".join(lines) + "\n"
    ported = port_source(source, OFFERED)
    compile(ported.source, "<ported>", "exec")  # still Python
    assert len(ported.source.splitlines()) == len(source.splitlines())
    assert _bound_names(ported.source) == _bound_names(source)  # the file's code sees the same names
    assert port_source(ported.source, OFFERED).source == ported.source  # ported once
    assert not [item for item in ported.mapped if item.tock.removeprefix("tock.") not in OFFERED]


def _bound_names(source: str) -> list[str]:
    import ast

    return sorted(alias.asname or alias.name for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.ImportFrom) for alias in node.names)


def test_the_command_ports_a_folder_to_dest_copies_its_other_files_and_the_copy_loads(tmp_path: Path):
    src, dest = tmp_path / "airflow_dags", tmp_path / "tock_dags"
    (src / "sql").mkdir(parents=True)
    (src / "ported.py").write_text(AIRFLOW_3)
    (src / "sql" / "q.sql").write_text("select 1")
    result = CliRunner().invoke(app, ["port", str(src), str(dest)])
    assert result.exit_code == 0, result.output
    assert "ported.py:4: airflow.sdk.DAG -> tock.DAG" in result.output and "changed 1" in result.output
    assert (dest / "sql" / "q.sql").read_text() == "select 1" and (src / "ported.py").read_text() == AIRFLOW_3
    [dag] = load_dags(dest / "ported.py")
    assert (dag.dag_id, sorted(dag.tasks)) == ("ported", ["done", "land", "report"])
    again = CliRunner().invoke(app, ["port", str(dest)])  # in place, a second time: nothing to change
    assert again.exit_code == 0 and "changed 0" in again.output


def test_check_writes_nothing_and_a_missing_name_exits_1_with_json_for_tools(tmp_path: Path):
    (tmp_path / "old.py").write_text("from airflow.utils.dates import days_ago\nfrom airflow.sdk import DAG\n")
    result = CliRunner().invoke(app, ["port", "--check", "--json", str(tmp_path)])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert (report["mapped"], report["missing"], report["files"][0]["changed"]) == (1, 1, True)
    assert report["files"][0]["missing"][0]["airflow"] == "airflow.utils.dates.days_ago"
    assert (tmp_path / "old.py").read_text().startswith("from airflow.utils.dates")  # untouched


def test_a_dest_inside_the_folder_is_refused_saying_so(tmp_path: Path):
    result = CliRunner().invoke(app, ["port", str(tmp_path), str(tmp_path / "inside")])
    assert result.exit_code == 2 and "inside" in result.output


def test_the_readme_lists_the_names_tock_port_maps_as_the_code_has_them():
    from tock_cli.airflow_names import README_END, README_START, names_markdown

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start, end = readme.index(README_START), readme.index(README_END) + len(README_END)
    assert readme[start:end] == names_markdown(OFFERED), "run `python -m tock_cli.airflow_names` into the README"
