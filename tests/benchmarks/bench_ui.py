"""Web UI: the grid of a DAG with 100 runs x 200 tasks (20,000 task instances) in a fresh PostgreSQL schema.

Run: .venv/bin/python -m tests.benchmarks.bench_ui

(a) Server: ``GET /dags/{id}`` through the real app (TestClient, a session logged in through the
login form): the default grid (latest 25 runs) and the whole grid (``?runs=100``, 20,000 cells),
plus the live fragment the page polls every second and the other pages; median of several.
(b) Browser: Debian's chromium (headless, 1280x800, through chromedriver) against the same app
served by uvicorn: Navigation Timing from navigation start to the ``load`` event, median of several.
Rows are folded from events by the projector's own writer (no broker in between).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from fastapi.testclient import TestClient

from projections.db import create_tables, open_engine
from schemas import DagRunCreated, DagRunFinished, TaskQueued, TaskStarted, TaskSucceeded
from services.api.app import create_app
from tests.benchmarks.bench_projections import postgres_schema
from tests.benchmarks.common import bench_settings, figure, spread
from tests.integration.ui_pages_support import PASSWORD, dag_parsed, fold_into_tables, log_in, user_created
from tests.unit.projection_logs import LogBuilder

DAG_ID, RUNS, TASKS, WIDTH = "bench_ui", 100, 200, 10  # 20 layers of 10 tasks
AT = 1_700_000_000.0
SERVER_REPEATS, BROWSER_REPEATS = 7, 5
GOAL = "< 1 s"


def _tasks() -> dict[str, list[str]]:
    """200 tasks in layers of 10, each after two tasks of the layer before."""
    names = [f"task_{index:03d}" for index in range(TASKS)]
    return {name: ([] if index < WIDTH else [names[index - WIDTH], names[index - WIDTH + 1 - (index % 2) * 2]])
            for index, name in enumerate(names)}


def _run_events(run: int) -> list:
    run_id, at = f"scheduled__{run:03d}", AT + run * 3600
    events: list = [DagRunCreated(dag_id=DAG_ID, run_id=run_id, logical_date=at, run_type="scheduled",
                                  dag_fingerprint="fp", scheduler_id="s1", at=at)]
    for index, task_id in enumerate(_tasks()):
        ids = {"dag_id": DAG_ID, "run_id": run_id, "task_id": task_id, "try_number": 1}
        events += [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s1", at=at + index),
                   TaskStarted(**ids, runner_id="r", hostname="h", pid=1, at=at + index + 0.5)]
        if run < RUNS - 1:
            events.append(TaskSucceeded(**ids, runner_id="r", at=at + index + 1))
    if run < RUNS - 1:
        events.append(DagRunFinished(dag_id=DAG_ID, run_id=run_id, state="success", at=at + 3000))
    return events


def build(engine) -> float:
    """The DAG, its 100 runs x 200 tasks (the newest still running) and a viewer; returns seconds taken."""
    started, log = time.perf_counter(), LogBuilder()
    fold_into_tables(engine, [dag_parsed(DAG_ID, _tasks(), AT, schedule="@hourly", start_date=AT),
                              user_created("bench", "viewer", AT)], log)
    for first in range(0, RUNS, 10):  # batches of 10 runs, as a projector's batches would be
        fold_into_tables(engine, [event for run in range(first, first + 10) for event in _run_events(run)], log)
    return time.perf_counter() - started


def _timed(client: TestClient, path: str) -> tuple[list[float], int]:
    client.get(path)  # warm-up: templates compiled, connections pooled
    seconds, size = [], 0
    for _ in range(SERVER_REPEATS):
        started = time.perf_counter()
        response = client.get(path)
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text[:300]
        size = len(response.content)
    return seconds, size


def _cells(client: TestClient, path: str) -> int:
    response = client.get(path)
    return (response.json()["html"] if path.startswith("/ui/") else response.text).count('<a class="cell ')


def server(client: TestClient) -> None:
    log_in(client, "bench")
    for label, path in [("GET /dags/{id} (latest 25 runs x 200 tasks)", f"/dags/{DAG_ID}"),
                        ("GET /dags/{id}?runs=100 (100 runs x 200 tasks)", f"/dags/{DAG_ID}?runs=100"),
                        ("live grid JSON, 100 runs x 200 tasks", f"/ui/live/dags/{DAG_ID}/grid?runs=100"),
                        ("GET /dags/{id}/graph (200 tasks)", f"/dags/{DAG_ID}/graph"),
                        ("GET /dags/{id}/runs (50 of 100 runs)", f"/dags/{DAG_ID}/runs"),
                        ("GET / (DAG list)", "/")]:
        seconds, size = _timed(client, path)
        if "runs=100" in path:
            assert _cells(client, path) == RUNS * TASKS, "the grid is not 100 x 200: were the rows folded?"
        figure(f"server, {label}, median", statistics.median(seconds), "s", GOAL if "dags/{id}" in label else "")
        print(f"      {spread(seconds)} s; {size / 1024:,.0f} KiB of HTML", flush=True)


def _serve(app) -> tuple[str, object]:
    import uvicorn

    from tests.scenarios.scheduler_support import free_port

    port = free_port()
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=uvicorn_server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not uvicorn_server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start within 30 s")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", uvicorn_server


NAVIGATION = """const entry = performance.getEntriesByType('navigation')[0];
return {response: entry.responseEnd, dom: entry.domContentLoadedEventEnd, load: entry.loadEventEnd,
        cells: document.querySelectorAll('a.cell').length};"""


SPENT = ("LayoutDuration", "RecalcStyleDuration", "ScriptDuration", "TaskDuration")


def _spent(driver) -> dict[str, float]:
    """chromium's seconds of layout, style, script and all tasks in the current document so far (DevTools
    Performance metrics; they start again with each navigation)."""
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return {metric["name"]: metric["value"] for metric in metrics if metric["name"] in SPENT}


def _load_times(driver, url: str) -> list[dict]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_cdp_cmd("Performance.enable", {})
    timings = []
    for _ in range(BROWSER_REPEATS + 1):  # the first load warms chromium's caches: not counted
        driver.get(url)
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(
            "const e = performance.getEntriesByType('navigation')[0]; return e && e.loadEventEnd > 0"))
        timings.append({**driver.execute_script(NAVIGATION), **_spent(driver)})
    return timings[1:]


def browser(app) -> None:
    """Navigation start to the load event in headless chromium, for both grids."""
    from selenium.webdriver.common.by import By

    from tests.scenarios.web_ui_support import browser as chromium

    base, uvicorn_server = _serve(app)
    driver = chromium()
    try:
        driver.get(base + "/login")
        driver.find_element(By.ID, "username").send_keys("bench")
        driver.find_element(By.ID, "password").send_keys(PASSWORD)
        driver.find_element(By.ID, "login").click()
        for label, path in [("latest 25 runs x 200 tasks", f"/dags/{DAG_ID}"),
                            ("100 runs x 200 tasks", f"/dags/{DAG_ID}?runs=100")]:
            timings = _load_times(driver, base + path)
            loads = [timing["load"] / 1000 for timing in timings]
            figure(f"chromium, grid {label}, navigation start -> load, median", statistics.median(loads), "s",
                   GOAL)
            assert timings[-1]["cells"] == (RUNS if "runs=100" in path else 25) * TASKS, timings[-1]
            print(f"      {spread(loads)} s; response end {statistics.median(t['response'] for t in timings):.0f} ms,"
                  f" DOMContentLoaded {statistics.median(t['dom'] for t in timings):.0f} ms;"
                  f" {timings[-1]['cells']:,} cells", flush=True)
            print("      chromium's busy time per load (median): " + ", ".join(
                f"{name.removesuffix('Duration').lower()} {statistics.median(t.get(name, 0.0) for t in timings):.3f} s"
                for name in SPENT), flush=True)
    finally:
        driver.quit()
        uvicorn_server.should_exit = True


def main() -> None:
    with tempfile.TemporaryDirectory() as directory, postgres_schema() as url:
        settings = bench_settings(Path(directory), db_url=url)
        engine = open_engine(settings)
        create_tables(engine)
        figure(f"(folding {RUNS} runs x {TASKS} tasks into the tables)", build(engine), "s")
        with TestClient(create_app(settings)) as client:
            server(client)
        browser(create_app(settings))  # its own app: uvicorn runs its lifespan
        engine.dispose()


if __name__ == "__main__":
    main()
