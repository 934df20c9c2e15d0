// Live updates: every second, fetch the page's fragment as JSON and swap it in when it changed.
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  let version = null;
  async function poll() {
    try {
      const response = await fetch(live.dataset.live, {credentials: "same-origin", headers: {Accept: "application/json"}});
      if (response.status === 401 || response.redirected) { window.location = "/login?next=" + encodeURIComponent(location.pathname); return; }
      if (response.ok) {
        const body = await response.json();
        if (body.version !== version) {
          if (version !== null) live.innerHTML = body.html;
          version = body.version;
        }
      }
    } catch (error) { /* the API restarting: try again next second */ }
    setTimeout(poll, 1000);
  }
  poll();
})();
