// Live updates: every second, fetch the page's fragment as JSON and swap it in when it changed.
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  let version = null;
  const rendered = live.innerHTML;  // what the server put in the page
  async function poll() {
    try {
      const response = await fetch(live.dataset.live, {credentials: "same-origin", headers: {Accept: "application/json"}});
      if (response.status === 401 || response.redirected) { window.location = "/login?next=" + encodeURIComponent(location.pathname); return; }
      if (response.ok) {
        const body = await response.json();
        // The first answer is swapped in too unless it is what the page already shows: the state
        // may have changed between the page's render and now.
        if (body.version !== version) {
          if (version !== null || body.html !== rendered) live.innerHTML = body.html;
          version = body.version;
        }
      }
    } catch (error) { /* the API restarting: try again next second */ }
    setTimeout(poll, 1000);
  }
  poll();
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
    const response = await fetch(log.dataset.follow + "?try=" + tryNumber, {credentials: "same-origin"});
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
