"""What the UI shows of a DAG and its tasks (issue 25): Airflow's description, doc_md, owner_links and
dag_display_name on DAG and @dag; owner, doc_md and doc on every task; depends_on_past and the email
arguments taken only where Airflow would do nothing Tock lacks. Accepted values reach the definition the
DAG processor publishes (and its fingerprint), refused ones name the argument, and the dag row, the API's
model and the pages show them (escaped)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.queries import _decoded
from projections.view import fold
from schemas import DagDefinition, DagParsed, TaskDefinition
from services.api import models
from services.api.core import dag_list
from services.api.ui.web import templates
from tests.unit.projection_logs import LogBuilder
from tock import (
    DAG,
    BaseOperator,
    BashOperator,
    DagDefinitionError,
    EmptyOperator,
    PythonOperator,
    TaskGroup,
    dag,
    fingerprint,
    load_dags,
    task,
)

# Airflow's tutorial (docs/apache-airflow/tutorial/fundamentals): the default_args nearly every DAG copies.
TUTORIAL_DEFAULT_ARGS = {"owner": "airflow", "depends_on_past": False, "email": ["airflow@example.com"],
                         "email_on_failure": False, "email_on_retry": False, "retries": 1,
                         "retry_delay": timedelta(minutes=5)}
START = datetime(2021, 1, 1)
SET_AFTER = "#### set after the task is made, as Airflow's tutorial does"


class Greet(BaseOperator):
    def execute(self, context):
        return "hi"


def _definition(made: DAG) -> DagDefinition:
    return made.to_definition("/dags/x.py")


def _task(made: DAG, task_id: str) -> TaskDefinition:
    return next(item for item in _definition(made).tasks if item.task_id == task_id)


# --- accepted values reach the definition ----------------------------------------------------------------

def test_the_dags_description_docs_owner_links_and_display_name_reach_its_definition():
    with DAG("tutorial", schedule="@daily", start_date=START, description="A simple tutorial DAG",
             doc_md="# Tutorial\nIt *prints* the date.", owner_links={"ann": "https://example.com/ann",
                                                                     "ops": "mailto:ops@example.com"},
             dag_display_name="Tutorial (daily)") as made:
        EmptyOperator(task_id="start")
    definition = _definition(made)
    assert (definition.description, definition.doc_md, definition.dag_display_name) == (
        "A simple tutorial DAG", "# Tutorial\nIt *prints* the date.", "Tutorial (daily)")
    assert definition.owner_links == {"ann": "https://example.com/ann", "ops": "mailto:ops@example.com"}


def test_without_them_the_display_name_is_the_dag_id_and_the_rest_is_empty():
    with DAG("plain") as made:
        EmptyOperator(task_id="start")
    definition = _definition(made)
    assert (definition.description, definition.doc_md, definition.owner_links, definition.dag_display_name) == (
        None, None, {}, "plain")
    assert _task(made, "start").owner == "airflow"  # Airflow's default owner


def test_the_tutorials_default_args_are_taken_by_dag_and_by_the_decorator():
    with DAG("tutorial", default_args=TUTORIAL_DEFAULT_ARGS, schedule="@daily", start_date=START) as made:
        BashOperator(task_id="print_date", bash_command="date")

    @dag(default_args=TUTORIAL_DEFAULT_ARGS, schedule="@daily", start_date=START)
    def decorated():
        BashOperator(task_id="print_date", bash_command="date")

    for built in (made, decorated()):
        printed = _task(built, "print_date")
        assert (printed.owner, printed.retries, printed.retry_delay) == ("airflow", 1, 300.0)


def test_a_tasks_owner_comes_from_its_argument_its_groups_default_args_or_the_dags():
    with DAG("owned", default_args={"owner": "data"}) as made:
        BashOperator(task_id="bash", bash_command="true", owner="ann")
        PythonOperator(task_id="python", python_callable=print)
        with TaskGroup("g", default_args={"owner": "ops"}):
            EmptyOperator(task_id="empty")
            Greet(task_id="greet", owner="bob")

        @task(owner="cat")
        def flow():
            return 1

        flow()
    owners = {item.task_id: item.owner for item in _definition(made).tasks}
    assert owners == {"bash": "ann", "python": "data", "g.empty": "ops", "g.greet": "bob", "flow": "cat"}


def test_task_docs_come_from_arguments_from_setting_them_afterwards_and_from_a_task_functions_docstring():
    with DAG("documented") as made:
        given = BashOperator(task_id="given", bash_command="true", doc_md="**bold**", doc="plain")
        later = EmptyOperator(task_id="later")
        later.doc_md = SET_AFTER

        @task
        def described():
            """What it does."""

        @task(doc="its own")
        def overridden():
            """Not this."""

        described()
        overridden()
    assert (given.doc_md, given.doc, later.doc_md) == ("**bold**", "plain", SET_AFTER)
    docs = {item.task_id: (item.doc_md, item.doc) for item in _definition(made).tasks}
    assert docs == {"given": ("**bold**", "plain"), "later": (SET_AFTER, None),
                    "described": ("What it does.", None), "overridden": (None, "its own")}


def test_the_decorated_functions_docstring_is_the_dags_docs_unless_doc_md_is_given():
    @dag
    def documented():
        """The pipeline's docs."""

    @dag(doc_md="given")
    def both():
        """Not these."""

    assert (_definition(documented()).doc_md, _definition(both()).doc_md) == ("The pipeline's docs.", "given")


def test_doc_md_set_on_the_dag_afterwards_reaches_the_definition():
    with DAG("later") as made:
        made.doc_md = "module docs"  # the tutorial's ``dag.doc_md = __doc__``
    assert _definition(made).doc_md == "module docs"


def test_a_doc_md_ending_in_md_is_the_text_of_that_file_beside_the_dag_file(tmp_path):
    (tmp_path / "README.md").write_text("# From the file\n")
    (tmp_path / "etl.py").write_text(
        "from tock import DAG, EmptyOperator\n"
        "with DAG('from_file', doc_md='README.md'):\n    EmptyOperator(task_id='a')\n"
        "with DAG('no_file', doc_md='missing.md'):\n    EmptyOperator(task_id='a')\n")
    made = {item.dag_id: item for item in load_dags(tmp_path / "etl.py")}
    assert made["from_file"].to_definition(str(tmp_path / "etl.py")).doc_md == "# From the file\n"
    assert made["no_file"].to_definition(str(tmp_path / "etl.py")).doc_md == "missing.md"  # Airflow's rule


def test_an_email_is_taken_where_airflow_would_send_no_mail():
    with DAG("quiet") as made:
        EmptyOperator(task_id="off", email="a@example.com", email_on_failure=False, email_on_retry=False)
        EmptyOperator(task_id="empty_list", email=[])
        EmptyOperator(task_id="blank", email="")
        EmptyOperator(task_id="none", email=None, email_on_failure=True)
        EmptyOperator(task_id="past", depends_on_past=False)
    assert len(_definition(made).tasks) == 5


def test_the_fingerprint_changes_with_what_the_ui_shows():
    def printed(**shown) -> str:
        owner = shown.pop("owner", "airflow")
        with DAG("etl", **shown) as made:
            EmptyOperator(task_id="a", owner=owner)
        return fingerprint(_definition(made))

    base = printed()
    changed = [printed(description="d"), printed(doc_md="docs"), printed(owner_links={"x": "https://x.org"}),
               printed(dag_display_name="ETL"), printed(owner="ann")]
    assert base == printed() and len({base, *changed}) == 6


# --- refusals name the argument --------------------------------------------------------------------------

@pytest.mark.parametrize(("arguments", "problem"), [
    ({"description": 5}, "description must be a string or None, got 5"),
    ({"doc_md": ["x"]}, "doc_md must be a string or None, got ['x']"),
    ({"dag_display_name": 3}, "dag_display_name must be a string or None, got 3"),
    ({"owner_links": ["https://x.org"]}, "owner_links must be a dict of owner name -> link"),
    ({"owner_links": ""}, "owner_links must be a dict of owner name -> link, got ''"),
    ({"owner_links": {"ann": "javascript:alert(1)"}}, "owner_links['ann']: 'javascript:alert(1)' is not an http(s)"),
    ({"owner_links": {"ann": "example.com/ann"}}, "owner_links['ann']: 'example.com/ann' is not an http(s)"),
    ({"owner_links": {"ann": "mailto:"}}, "owner_links['ann']: 'mailto:' is not an http(s) or mailto link"),
    ({"owner_links": {"ann": 7}}, "owner_links['ann']: 7 is not an http(s) or mailto link"),
    ({"owner_links": {"": "https://x.org"}}, "owner_links: the owner '' must be a name"),
    ({"default_args": {"depends_on_past": True}}, "default_args: depends_on_past=True is not offered by Tock yet"),
    ({"default_args": {"email": "a@example.com"}},
     "default_args: email='a@example.com' with email_on_failure=True and email_on_retry=True: Airflow would mail"),
    ({"default_args": {"owner": 5}}, "default_args: owner must be a non-empty string, got 5"),
])
def test_a_bad_dag_argument_is_a_parse_error_naming_it(arguments, problem):
    with pytest.raises(DagDefinitionError) as raised:
        DAG("bad", **arguments)
    assert "DAG 'bad'" in str(raised.value) and problem in str(raised.value)


def test_the_decorator_refuses_them_the_same_way():
    @dag(owner_links={"ann": "ftp://example.com"})
    def linked():
        pass

    with pytest.raises(DagDefinitionError, match=r"owner_links\['ann'\]: 'ftp://example.com' is not an http"):
        linked()


@pytest.mark.parametrize(("options", "problem"), [
    ({"owner": ""}, "owner must be a non-empty string, got ''"),
    ({"owner": ["ann"]}, "owner must be a non-empty string, got ['ann']"),
    ({"doc_md": 1}, "doc_md must be a string or None, got 1"),
    ({"doc": b"x"}, "doc must be a string or None, got b'x'"),
    ({"depends_on_past": True}, "depends_on_past=True is not offered by Tock yet"),
    ({"depends_on_past": "no"}, "depends_on_past must be True or False, got 'no'"),
    ({"email_on_failure": "yes"}, "email_on_failure must be True or False, got 'yes'"),
    ({"email_on_retry": 0}, "email_on_retry must be True or False, got 0"),
    ({"email": 5}, "email must be an address, a list of addresses or None, got 5"),
    ({"email": ["a@example.com", 5]}, "email must be an address, a list of addresses or None"),
    ({"email": "a@example.com"}, "email='a@example.com' with email_on_failure=True and email_on_retry=True"),
    ({"email": ["a@example.com"], "email_on_failure": False},
     "email=['a@example.com'] with email_on_retry=True: Airflow would mail these addresses"),
    ({"email": ["a@example.com"], "email_on_retry": False}, "on_failure_callback"),
])
@pytest.mark.parametrize("make", ["bash", "empty", "python", "operator", "task"])
def test_a_bad_task_argument_is_a_parse_error_naming_it_whatever_makes_the_task(make, options, problem):
    def build() -> None:
        if make == "bash":
            BashOperator(task_id="t", bash_command="true", **options)
        elif make == "empty":
            EmptyOperator(task_id="t", **options)
        elif make == "python":
            PythonOperator(task_id="t", python_callable=print, **options)
        elif make == "operator":
            Greet(task_id="t", **options)
        else:
            task(task_id="t", **options)(lambda: None)()

    with pytest.raises(DagDefinitionError) as raised, DAG("bad"):
        build()
    assert "task 't'" in str(raised.value) and problem in str(raised.value)


def test_a_task_groups_default_args_are_checked_on_each_task_they_fill():
    with pytest.raises(DagDefinitionError, match=r"task 'g.t': depends_on_past=True is not offered"), DAG("bad"):
        with TaskGroup("g", default_args={"depends_on_past": True}):
            EmptyOperator(task_id="t")


def test_a_task_may_turn_the_mail_off_that_default_args_would_leave_on_only_for_itself():
    with DAG("mixed", default_args={"email": "a@example.com", "email_on_failure": False,
                                    "email_on_retry": False}):
        EmptyOperator(task_id="quiet")
        with pytest.raises(DagDefinitionError, match="task 'loud': email='a@example.com' with email_on_retry=True"):
            EmptyOperator(task_id="loud", email_on_retry=True)


def test_docs_set_afterwards_are_checked_then():
    with DAG("bad") as made:
        made_task = EmptyOperator(task_id="t")
        with pytest.raises(DagDefinitionError, match="task 't': doc_md must be a string or None, got 3"):
            made_task.doc_md = 3
        made.description = ["not", "text"]
    with pytest.raises(DagDefinitionError, match="description must be a string or None"):
        _definition(made)
    assert made_task.doc_md is None  # the refused value was not kept


def test_an_unknown_argument_is_still_refused():
    with pytest.raises(DagDefinitionError, match="default_args has 'wait_for_downstream', which is not a task"):
        DAG("bad", default_args={"wait_for_downstream": True})
    with pytest.raises(TypeError, match="wait_for_downstream"), DAG("bad"):
        EmptyOperator(task_id="t", wait_for_downstream=True)


# --- owner_links: a property -----------------------------------------------------------------------------

HOSTS = st.from_regex(r"[a-z0-9]{1,12}(\.[a-z]{2,6}){0,2}", fullmatch=True)
GOOD_LINKS = st.one_of(
    st.builds("{}://{}/{}".format, st.sampled_from(["http", "https", "HTTPS"]), HOSTS,
              st.from_regex(r"[a-z0-9_/-]{0,20}", fullmatch=True)),
    st.builds("mailto:{}@{}".format, st.from_regex(r"[a-z0-9.]{1,12}", fullmatch=True), HOSTS))
BAD_LINKS = st.one_of(
    st.builds("{}:{}".format, st.sampled_from(["javascript", "data", "file", "ftp"]), st.text(max_size=20)),
    st.from_regex(r"[a-z0-9 ./]{0,20}", fullmatch=True),  # no scheme
    st.sampled_from(["http://", "https:///path", "mailto:", "//example.com"]),
    st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))
OWNERS = st.from_regex(r"[a-z][a-z0-9 _-]{0,10}", fullmatch=True)


@given(good=st.dictionaries(OWNERS, GOOD_LINKS, max_size=4), bad=st.dictionaries(OWNERS, BAD_LINKS, max_size=3))
def test_owner_links_are_taken_exactly_when_every_link_is_http_or_mailto_and_each_bad_one_is_named(good, bad):
    links = {**good, **bad}
    wrong = [owner for owner in links if owner in bad]
    if not wrong:
        assert DAG("linked", owner_links=links).owner_links == links
        return
    with pytest.raises(DagDefinitionError) as raised:
        DAG("linked", owner_links=links)
    assert all(f"owner_links[{owner!r}]" in str(raised.value) for owner in wrong)
    assert not any(f"owner_links[{owner!r}]" in str(raised.value) for owner in links if owner not in wrong)


# --- the dag row, the API's model and the pages ----------------------------------------------------------

def _row(definition: DagDefinition) -> dict:
    builder = LogBuilder()
    builder.add(DagParsed(dag_id=definition.dag_id, file_path="/dags/x.py", fingerprint="fp",
                          definition=definition, at=1.0))
    return fold(builder.records).rows["dag"][(definition.dag_id,)]


def _shown_definition() -> DagDefinition:
    with DAG("etl", description="Loads <b>sales</b>", doc_md="# ETL\n<script>alert(1)</script>",
             owner_links={"ann": "https://example.com/ann"}, dag_display_name="Sales ETL",
             default_args={"owner": "data"}) as made:
        EmptyOperator(task_id="a", owner="ann")
        EmptyOperator(task_id="b", doc_md="b's docs")
        EmptyOperator(task_id="c", owner="ann")
    return _definition(made)


def test_the_dag_row_holds_what_the_ui_shows_and_the_apis_model_returns_it():
    row = _row(_shown_definition())
    assert (row["description"], row["dag_display_name"], row["owners"], row["doc_md"]) == (
        "Loads <b>sales</b>", "Sales ETL", "ann, data", "# ETL\n<script>alert(1)</script>")
    dag_model = models.Dag(**_decoded(row))
    assert (dag_model.owners, dag_model.owner_links) == ("ann, data", {"ann": "https://example.com/ann"})
    tasks = {item["task_id"]: item for item in dag_model.tasks}
    assert (tasks["a"]["owner"], tasks["b"]["doc_md"], "doc_md" in tasks["a"]) == ("ann", "b's docs", False)


def test_a_definition_from_before_v22_shows_its_dag_id_and_airflows_default_owner():
    row = _row(DagDefinition(dag_id="old", file_path="/dags/x.py", tasks=[TaskDefinition(task_id="a", kind="empty")]))
    assert (row["dag_display_name"], row["owners"], row["description"], row["doc_md"]) == ("old", "airflow", None, None)


def test_owner_list_links_only_http_and_mailto_links():
    row = {"owners": "ann, bob, eve", "owner_links": {"ann": "https://x.org/ann", "eve": "javascript:alert(1)"}}
    assert dag_list.owner_list(row) == [{"name": "ann", "link": "https://x.org/ann"}, {"name": "bob", "link": ""},
                                        {"name": "eve", "link": ""}]
    assert dag_list.owner_list({"owners": ""}) == []


def test_the_dag_list_and_header_show_them_escaped_and_the_docs_as_preformatted_text():
    row = {**_decoded(_row(_shown_definition())), "dots": [], "next_run": None}
    listed = templates.env.get_template("_dags.html").render(dags=[row], total=1)
    assert '>Sales ETL</a> <code class="dag-id">etl</code>' in listed
    assert '<div class="description">Loads &lt;b&gt;sales&lt;/b&gt;</div>' in listed
    assert '<td class="owners"><a class="owner" href="https://example.com/ann">ann</a>, data</td>' in listed
    header = templates.env.get_template("_dag_header.html").render(dag=row, tab="grid")
    assert '<pre class="doc-md"># ETL\n&lt;script&gt;alert(1)&lt;/script&gt;</pre>' in header
    assert "<script>" not in header and "<details class=\"dag-doc\" open>" in header
    plain = templates.env.get_template("_dag_header.html").render(dag=_decoded(_row(DagDefinition(
        dag_id="plain", file_path="/dags/x.py"))), tab="runs")
    assert "<h1>plain</h1>" in plain and "dag-doc" not in plain and "dag-id" not in plain


def test_the_dag_list_finds_a_dag_by_its_display_name():
    row = {"dag_id": "etl", "dag_display_name": "Sales ETL", "is_paused": False}
    assert dag_list.matches(row, dag_list.dag_filter(search="sales"))
    assert not dag_list.matches(row, dag_list.dag_filter(search="orders"))
