"""The web UI in a real browser (Debian's chromium): log in, see the DAGs, trigger example_etl and watch
its grid turn green without reloading; a viewer cannot trigger; anonymous users get 401 or the login page.
Real processes: DAG processor, scheduler, projector and `tock api`; accounts made with `tock users`."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.scenarios.scheduler_support import REPO, Processes, create_topics, environment
from tests.scenarios.web_ui_support import (
    PASSWORD_LINE,
    browser,
    click,
    free_port,
    log_in,
    screenshots_folder,
    wait,
    wait_for_http,
)

pytestmark = pytest.mark.scenario
EXAMPLES = REPO / "examples" / "dags"
ETL_TASKS = 6


@pytest.fixture
def settings(make_settings):
    settings = make_settings(dags_folder=EXAMPLES, task_heartbeat_seconds=0.5, scheduler_session_timeout=6,
                             api_port=free_port(), api_secret_key="k" * 40)
    create_topics(settings)
    return settings


def create_user(settings, username: str, role: str) -> str:
    """`tock users create` with a generated password, which it prints once."""
    done = subprocess.run([sys.executable, "-m", "tock_cli", "users", "create", username, "--role", role],
                          env=environment(settings), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return PASSWORD_LINE.search(done.stdout).group(1)


@pytest.fixture
def system(settings, tmp_path):
    """The services as processes and the API's address; the users' passwords by name."""
    processes = Processes(settings, tmp_path / "logs")
    try:
        processes.start("projector", name="projector")
        processes.start("api", name="api")
        base = f"http://127.0.0.1:{settings.api_port}"
        wait_for_http(base + "/health")
        passwords = {name: create_user(settings, name, role) for name, role in (("ops", "operator"),
                                                                                 ("val", "viewer"))}
        yield processes, base, passwords
    finally:
        processes.close()


def test_an_operator_triggers_a_dag_and_watches_its_grid_turn_green(system, request):
    processes, base, passwords = system
    processes.start("dag-processor", name="dag-processor")
    processes.scheduler("s1")
    shots = screenshots_folder(request.node.name)
    driver = browser()
    try:
        wait(driver, lambda: _logged_in(driver, base, "ops", passwords["ops"]), 60, "the projector to fold the user")
        wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, 'tr[data-dag="example_etl"]'), 60,
             "example_etl in the DAG list (live, without reloading)")
        driver.save_screenshot(str(shots / "dags.png"))
        click(driver, 'a[href="/actions/trigger?dag_id=example_etl"]', "example_etl's Trigger link")
        driver.save_screenshot(str(shots / "confirm-trigger.png"))
        driver.find_element(By.ID, "confirm").click()
        wait(driver, lambda: driver.current_url.startswith(base + "/dags/example_etl"), 30,
             "the grid after the trigger (or the confirmation page's error)")
        page = driver.execute_script("return window.performance.timeOrigin")
        wait(driver, lambda: _green_cells(driver) == ETL_TASKS, 120, "every task of the run to succeed")
        assert driver.execute_script("return window.performance.timeOrigin") == page, "the page was reloaded"
        driver.save_screenshot(str(shots / "grid.png"))
        _the_other_pages(driver, base, shots)
        _trigger_with_params(driver, base, shots)
        driver.get(base + "/dags/example_etl")
        click(driver, 'a.cell[data-task="report"]', "report's cell")
        wait(driver, lambda: "TaskSucceeded" in driver.find_element(By.CLASS_NAME, "timeline").text, 30,
             "the task's timeline")
        wait(driver, lambda: "report for" in driver.find_element(By.ID, "log").text, 30, "the try's log")
        driver.save_screenshot(str(shots / "task.png"))
        _clear_a_failed_flaky_task(driver, base, shots)
    finally:
        driver.quit()


def _clear_a_failed_flaky_task(driver, base: str, shots) -> None:
    """example_flaky's run succeeds on flaky's second try; marked failed by hand, then cleared with its
    downstream task from the UI, flaky runs a third time and the open task page shows it live."""
    driver.get(base + "/actions/trigger?dag_id=example_flaky")
    driver.find_element(By.ID, "confirm").click()
    wait(driver, lambda: _green_cells(driver) == 2, 120, "example_flaky's run to succeed")
    cell = 'a.cell[data-task="flaky"]'
    wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, cell).text.strip() == "✓2", 10,
         "flaky's cell to show its success on the second try")
    click(driver, cell, "flaky's cell")
    task_page = driver.current_url
    _act(driver, "mark", lambda: Select(driver.find_element(By.NAME, "state")).select_by_visible_text("failed"))
    wait(driver, lambda: "✗ failed" in driver.find_element(By.ID, "try-state").text, 30, "flaky marked failed")
    driver.save_screenshot(str(shots / "task-failed.png"))
    _act(driver, "clear", lambda: driver.find_element(By.CSS_SELECTOR, 'input[name="downstream"]').click())
    assert driver.current_url.startswith(task_page)
    page = driver.execute_script("return window.performance.timeOrigin")
    wait(driver, lambda: _tries_succeeded(driver) == 3, 120, "flaky's third try to succeed, shown live")
    assert driver.execute_script("return window.performance.timeOrigin") == page, "the page was reloaded"
    wait(driver, lambda: "second try: succeeding" in driver.find_element(By.ID, "log").text, 30,
         "the third try's log, followed live")
    driver.save_screenshot(str(shots / "task-cleared.png"))
    driver.get(base + "/dags/example_flaky")
    wait(driver, lambda: _green_cells(driver) == 2, 60, "after, cleared downstream, to run again")


def _the_other_pages(driver, base: str, shots) -> None:
    """Graph, runs (with conf), DAG files and cluster pages of the system as it runs."""
    driver.get(base + "/dags/example_etl/graph")
    wait(driver, lambda: [node.get_attribute("data-state") for node in
                          driver.find_elements(By.CSS_SELECTOR, "svg.dag-graph .node")] == ["success"] * ETL_TASKS,
         10, "every task of the graph shown as succeeded")
    driver.save_screenshot(str(shots / "graph.png"))
    driver.get(base + "/dags/example_etl/runs")
    assert "manual" in driver.find_element(By.TAG_NAME, "main").text
    driver.save_screenshot(str(shots / "runs.png"))
    driver.get(base + "/dag-files")
    assert "etl_fan_out.py" in driver.find_element(By.TAG_NAME, "main").text
    driver.save_screenshot(str(shots / "dag-files.png"))
    driver.get(base + "/cluster")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, 'tr[data-scheduler="s1"]'), 30, "scheduler s1 listed")
    driver.save_screenshot(str(shots / "cluster.png"))


def _trigger_with_params(driver, base: str, shots) -> None:
    """example_params' trigger form has an input per param; a value its rule refuses comes back with
    the param and the rule, nothing typed lost; corrected, the run is triggered."""
    driver.get(base + "/actions/trigger?dag_id=example_params")
    count, who = driver.find_element(By.NAME, "param.count"), driver.find_element(By.NAME, "param.who")
    form = driver.find_element(By.CSS_SELECTOR, "form.confirm")
    assert count.get_attribute("value") == "3" and "How many" in form.text and "lines to print" in form.text
    Select(driver.find_element(By.NAME, "param.greeting")).select_by_visible_text("hola")
    count.clear()
    count.send_keys("eleven")
    who.clear()
    who.send_keys("ada")
    driver.find_element(By.NAME, "logical_date").send_keys("2024-01-31T06:00:00+00:00")
    driver.find_element(By.ID, "confirm").click()
    wait(driver, lambda: "is not of type 'integer'" in driver.page_source, 30, "the refusal naming the rule")
    assert "param 'count': 'eleven' is not of type 'integer'" in driver.find_element(By.CLASS_NAME, "error").text
    driver.save_screenshot(str(shots / "trigger-params-refused.png"))
    kept = {name: driver.find_element(By.NAME, name).get_attribute("value")
            for name in ("param.count", "param.who", "param.greeting", "logical_date")}
    assert kept == {"param.count": "eleven", "param.who": "ada", "param.greeting": '"hola"',
                    "logical_date": "2024-01-31T06:00:00+00:00"}
    driver.find_element(By.NAME, "param.count").clear()
    driver.find_element(By.NAME, "param.count").send_keys("4")
    driver.find_element(By.ID, "confirm").click()
    wait(driver, lambda: "TriggerDagRun sent to the log" in driver.page_source, 30, "the corrected trigger")


def _act(driver, action: str, choose) -> None:
    """Open the task page's action, make the choice on its confirmation form and confirm."""
    driver.find_element(By.CSS_SELECTOR, f'a.button[href^="/actions/{action}?"]').click()
    choose()
    driver.find_element(By.ID, "confirm").click()
    wait(driver, lambda: "sent to the log" in driver.page_source, 30, f"the {action} to be accepted")


def _tries_succeeded(driver) -> int:
    """The highest try the timeline shows a TaskSucceeded of."""
    tries = [int(item.get_attribute("data-try")) for item in
             driver.find_elements(By.CSS_SELECTOR, 'ol.timeline li[data-event="TaskSucceeded"]')
             if item.get_attribute("data-try")]
    return max(tries, default=0)


def test_a_viewer_cannot_trigger_and_anonymous_users_are_turned_away(system, settings, request):
    _processes, base, passwords = system
    assert httpx.get(base + "/api/v1/dags").status_code == 401
    shots = screenshots_folder(request.node.name)
    driver = browser()
    try:
        driver.get(base + "/dags/example_etl")
        assert driver.current_url.startswith(base + "/login") and driver.find_elements(By.ID, "password")
        driver.save_screenshot(str(shots / "login.png"))
        wait(driver, lambda: _logged_in(driver, base, "val", passwords["val"]), 60, "the projector to fold the user")
        _keyboard_reaches_the_dag_list(driver)
        driver.get(base + "/actions/trigger?dag_id=example_etl")
        driver.find_element(By.ID, "confirm").click()
        wait(driver, lambda: "needs the operator role" in driver.page_source, 30, "the viewer's refusal")
        driver.save_screenshot(str(shots / "viewer-refused.png"))
        cookies = {cookie["name"]: cookie["value"] for cookie in driver.get_cookies()}
        session = next(cookie for cookie in driver.get_cookies() if cookie["name"] == "tock_session")
        assert session["httpOnly"] and session["sameSite"] == "Strict"
    finally:
        driver.quit()
    no_csrf = httpx.post(base + "/logout", cookies=cookies, data={})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text


def test_wrong_passwords_are_rate_limited(system, settings):
    _processes, base, _passwords = system
    with httpx.Client(base_url=base) as client:
        form = client.get("/login").text
        csrf = form.split('name="csrf" value="')[1].split('"')[0]
        answers = [client.post("/login", data={"username": "ops", "password": "wrong", "csrf": csrf}).status_code
                   for _ in range(settings.api_login_attempts + 1)]
    assert answers[:-1] == [303] * settings.api_login_attempts and answers[-1] == 429


def _keyboard_reaches_the_dag_list(driver) -> None:
    """Tab first lands on the skip link (shown when focused); Enter moves focus past the header."""
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    skip = driver.switch_to.active_element
    assert skip.get_attribute("class") == "skip" and skip.is_displayed() and skip.rect["y"] >= 0
    skip.send_keys(Keys.ENTER)
    assert driver.current_url.endswith("#content")
    focused = driver.switch_to.active_element
    focused.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.tag_name in ("a", "input", "select", "button")


def _logged_in(driver, base: str, username: str, password: str) -> bool:
    """Logged in already (the page has the logout form), else log in and look again next time: the
    account may not be folded into the tables yet."""
    if driver.find_elements(By.CSS_SELECTOR, "form.logout"):
        return True
    log_in(driver, base, username, password)
    return False


def _green_cells(driver) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, "table.grid a.cell.success"))
