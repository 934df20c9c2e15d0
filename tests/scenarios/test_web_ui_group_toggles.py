"""Task groups in a real browser (Debian's chromium): clicking a group's row in the grid hides and shows its
rows in the page, and the choice outlives a reload; clicking a group's frame in the graph collapses it to one
box, swapped in place, and clicking that box expands it again. `tock api` runs as a process over tables
folded from a run with nested groups (tests/integration/control_flow_support.py)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from projections.db import create_tables, open_engine
from schemas import DagRunCreated
from tests.integration.control_flow_support import shop_run
from tests.integration.ui_pages_support import PASSWORD, fold_into_tables, user_created
from tests.scenarios.scheduler_support import Processes
from tests.scenarios.web_ui_support import browser, click, free_port, log_in, screenshots_folder, wait, wait_for_http
from tests.unit.projection_logs import LogBuilder

pytestmark = pytest.mark.scenario


@pytest.fixture
def system(make_settings, tmp_path):
    """The API's address, and a function folding more events into its tables (as the projector would)."""
    settings = make_settings(db_url=f"sqlite:///{tmp_path / 'projections.db'}", api_port=free_port(),
                             api_secret_key="k" * 40)
    engine, builder = open_engine(settings), LogBuilder()
    create_tables(engine)
    fold_into_tables(engine, [*shop_run(), user_created("vic", "viewer", 1.0)], builder)
    processes = Processes(settings, tmp_path / "logs")
    try:
        processes.start("api", name="api")
        address = f"http://127.0.0.1:{settings.api_port}"
        wait_for_http(address + "/health")
        yield address, lambda events: fold_into_tables(engine, events, builder)
    finally:
        processes.close()
        engine.dispose()


def _shown_tasks(driver) -> set[str]:
    return {cell.get_attribute("data-task") for cell in driver.find_elements(By.CSS_SELECTOR, "table.grid a.cell")
            if cell.is_displayed()}


def test_clicking_a_task_group_collapses_and_expands_it(system, request):
    base, fold = system
    shots = screenshots_folder(request.node.name)
    driver = browser()
    try:
        log_in(driver, base, "vic", PASSWORD)
        wait(driver, lambda: driver.current_url == base + "/", 30, "the DAG list after logging in")
        driver.get(base + "/dags/shop")
        wait(driver, lambda: {"crm.fetch", "crm.clean.dedupe"} <= _shown_tasks(driver), 30, "the crm group's rows")
        click(driver, 'button.group-toggle[data-group="crm"]', "the crm group's row")
        wait(driver, lambda: not {"crm.fetch", "crm.clean.dedupe"} & _shown_tasks(driver), 10, "crm collapsed")
        toggle = driver.find_element(By.CSS_SELECTOR, 'button.group-toggle[data-group="crm"]')
        assert toggle.get_attribute("aria-expanded") == "false" and "weigh" in _shown_tasks(driver)
        assert driver.find_element(By.CSS_SELECTOR, 'span.cell[data-group="crm"]').get_attribute("data-state") == (
            "failed")  # the collapsed group still shows its tasks' state
        driver.save_screenshot(str(shots / "grid-collapsed.png"))
        fold([DagRunCreated(dag_id="shop", run_id="r2", logical_date=2.0, run_type="manual",
                            dag_fingerprint="fp-shop", scheduler_id="s1", at=2.0)])
        wait(driver, lambda: len(driver.find_elements(By.CSS_SELECTOR, 'span.cell[data-group="crm"]')) == 2, 15,
             "the live update's second run")
        assert "crm.fetch" not in _shown_tasks(driver)  # still collapsed after the swap
        driver.refresh()
        wait(driver, lambda: "weigh" in _shown_tasks(driver) and "crm.fetch" not in _shown_tasks(driver), 10,
             "crm still collapsed after a reload")
        click(driver, 'button.group-toggle[data-group="crm"]', "the crm group's row again")
        wait(driver, lambda: {"crm.fetch", "crm.clean.dedupe"} <= _shown_tasks(driver), 10, "crm expanded")
        driver.get(base + "/dags/shop/runs/r1/tasks/parcel")
        wait(driver, lambda: "not chosen by branch pick" in driver.find_element(By.ID, "why").text, 10, "why")
        driver.save_screenshot(str(shots / "task.png"))
        _the_graph(driver, base, shots)
    finally:
        driver.quit()


def _the_graph(driver, base: str, shots) -> None:
    driver.get(base + "/dags/shop/graph")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, 'g.group-frame[data-group="crm"]'), 30, "crm's frame")
    driver.save_screenshot(str(shots / "graph.png"))
    page = driver.execute_script("return window.performance.timeOrigin")
    click(driver, 'a.group-toggle[data-group="crm"] rect.head', "crm's frame header")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, 'a.group-node[data-group="crm"]'), 10,
         "crm drawn as one box")
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-task="crm.fetch"]')
    assert driver.current_url.endswith("/dags/shop/graph?collapsed=crm")
    driver.save_screenshot(str(shots / "graph-collapsed.png"))
    click(driver, 'a.group-node[data-group="crm"] rect', "crm's box")
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, '[data-task="crm.fetch"]'), 10, "crm expanded again")
    assert driver.execute_script("return window.performance.timeOrigin") == page, "the page was reloaded"
    assert driver.current_url.endswith("/dags/shop/graph")
