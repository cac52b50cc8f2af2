// Live updates for an org's page: the org's WebSocket says "something changed"; the table is refetched
// (debounced, so a burst of events costs one request). Reconnects with backoff; no third-party code.
(function () {
  "use strict";
  const live = document.getElementById("live");
  if (!live) return;
  const status = document.getElementById("live-status");
  const tableUrl = live.dataset.tableUrl;
  const wsUrl = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + live.dataset.wsPath;
  const DEBOUNCE_MS = 750;
  const MAX_BACKOFF_MS = 30000;
  let timer = null;
  let backoff = 1000;
  let pinger = null;

  function say(text) { if (status) status.textContent = text; }

  async function refresh() {
    timer = null;
    try {
      const response = await fetch(tableUrl + location.search, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } });
      if (response.ok) live.innerHTML = await response.text();
    } catch (error) {
      say("Could not refresh; retrying on the next update.");
    }
  }

  function soon() { if (timer === null) timer = setTimeout(refresh, DEBOUNCE_MS); }

  function connect() {
    const socket = new WebSocket(wsUrl);
    socket.onopen = function () {
      backoff = 1000;
      say("Live: updates appear as they happen.");
      soon();
      pinger = setInterval(function () { socket.send(JSON.stringify({ type: "ping" })); }, 60000);
    };
    socket.onmessage = function (event) {
      const message = JSON.parse(event.data);
      if (message.type === "event") soon();
    };
    socket.onclose = function (event) {
      clearInterval(pinger);
      if (event.code === 4403) { say("Live updates are not available; reload the page."); return; }
      if (event.code === 4401) { say("You have logged out; log in again for live updates."); return; }
      say("Reconnecting…");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    };
  }

  connect();
})();
