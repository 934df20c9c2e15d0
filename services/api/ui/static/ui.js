// Live updates: every second, fetch the page's fragment as JSON and swap it in when it changed. A swap
// is announced ("tock:swapped") so what the page's script keeps (collapsed groups) is applied again;
// live.refresh() fetches at once (after the fragment's address changed).
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  let version = null;
  const rendered = live.innerHTML;  // what the server put in the page
  async function fetchFragment() {
    const address = live.dataset.live;
    const response = await fetch(address, {credentials: "same-origin", headers: {Accept: "application/json"}});
    if (response.status === 401 || response.redirected) { window.location = "/login?next=" + encodeURIComponent(location.pathname); return; }
    if (!response.ok || address !== live.dataset.live) return;  // an answer for the view before a toggle
    const body = await response.json();
    // The first answer is swapped in too unless it is what the page already shows: the state
    // may have changed between the page's render and now.
    if (body.version !== version) {
      if (version !== null || body.html !== rendered) {
        live.innerHTML = body.html;
        live.dispatchEvent(new CustomEvent("tock:swapped"));
      }
      version = body.version;
    }
  }
  async function poll() {
    try { await fetchFragment(); } catch (error) { /* the API restarting: try again next second */ }
    setTimeout(poll, 1000);
  }
  live.refresh = () => fetchFragment().catch(() => {});
  poll();
})();

// Task groups in the grid: a group's row hides or shows the rows under it right here, nothing fetched.
// Which groups are collapsed is kept per DAG in localStorage, and applied again after each live swap.
(function () {
  const grid = () => document.querySelector("table.grid[data-dag]");
  const key = (table) => "tock.grid.collapsed." + table.dataset.dag;
  function collapsedOf(table) {
    try { return new Set(JSON.parse(localStorage.getItem(key(table)) || "[]")); } catch (error) { return new Set(); }
  }
  function keep(table, collapsed) {
    try { localStorage.setItem(key(table), JSON.stringify([...collapsed])); } catch (error) { /* private mode */ }
  }
  function apply() {
    const table = grid();
    if (!table) return;
    const collapsed = collapsedOf(table);
    for (const row of table.querySelectorAll("tr[data-groups]")) {
      row.hidden = row.dataset.groups.split(" ").some((group) => collapsed.has(group));
    }
    for (const button of table.querySelectorAll("button.group-toggle")) {
      const open = !collapsed.has(button.dataset.group);
      button.setAttribute("aria-expanded", String(open));
      button.querySelector(".chevron").textContent = open ? "▾" : "▸";
    }
  }
  document.addEventListener("click", (event) => {
    const table = grid();
    const toggle = event.target.closest("table.grid button.group-toggle");
    const all = event.target.closest("button[data-groups-all]");
    if (!table || (!toggle && !all)) return;
    let collapsed = collapsedOf(table);
    if (toggle) {
      const group = toggle.dataset.group;
      if (collapsed.has(group)) collapsed.delete(group); else collapsed.add(group);
    } else {
      const groups = [...table.querySelectorAll("tr.group-row")].map((row) => row.dataset.group);
      collapsed = all.dataset.groupsAll === "collapse" ? new Set(groups) : new Set();
    }
    keep(table, collapsed);
    apply();
  });
  const live = document.getElementById("live");
  if (live) live.addEventListener("tock:swapped", apply);
  apply();
})();

// Task groups in the graph: a group's toggle is a link to the graph with that group collapsed or
// expanded (the server lays it out again); here the graph is swapped in place instead of the page
// reloaded, and the live updates follow the new view.
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  live.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-fragment]");
    if (!link || !live.refresh) return;
    event.preventDefault();
    live.dataset.live = link.dataset.fragment;
    history.replaceState(null, "", link.getAttribute("href"));
    live.refresh();
  });
})();

// A task's log, live: stream the latest try's log as the runner ships it (one streaming request,
// not a poll); when that try ends and a new one starts (a retry, a clear), follow the new one.
(function () {
  const log = document.getElementById("log");
  if (!log || !log.dataset.follow) return;
  const status = document.getElementById("log-status");
  const currentTry = () => (document.getElementById("try-state") || {dataset: {}}).dataset.try || "";
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  async function follow(tryNumber) {
    const join = log.dataset.follow.includes("?") ? "&" : "?";
    const response = await fetch(log.dataset.follow + join + "try=" + tryNumber, {credentials: "same-origin"});
    if (!response.ok || !response.body) return false;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let first = true;
    status.textContent = "Following try " + tryNumber + "…";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      if (first) { log.textContent = ""; first = false; }
      const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 20;
      log.textContent += decoder.decode(value, {stream: true});
      if (atBottom) log.scrollTop = log.scrollHeight;
    }
    status.textContent = "Try " + tryNumber + " has ended.";
    return true;
  }
  async function run() {
    let followed = "";
    for (;;) {
      const tryNumber = currentTry();
      if (tryNumber && tryNumber !== followed) {
        try { if (await follow(tryNumber)) followed = tryNumber; } catch (error) { /* retried below */ }
      }
      await sleep(1000);
    }
  }
  run();
})();
