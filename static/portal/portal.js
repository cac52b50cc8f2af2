// Live updates for an org's page and a chart's page: the org's WebSocket says "something changed" (the
// org's charts, or a pass that moved every ETA); the page's part is refetched (debounced, so a burst of
// events costs one request). Reconnects with backoff; no third-party code.
//
// The part is swapped without losing what the user is doing: while focus is in one of its fields the
// swap waits until focus leaves, and what was typed into its fields is carried over to the new part, as
// are the open tables (a `<details id>`, the drain plot's numbers) and the focus on one of them.
// A part whose plan is older than its `data-stale-after` seconds says so (`.stale`), and its relative
// times stop ticking (static/portal/times.js reads `data-stale` on #live).
(function () {
  "use strict";
  const live = document.getElementById("live");
  if (!live) return;
  const status = document.getElementById("live-status");
  const tableUrl = live.dataset.tableUrl;
  const wsUrl = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + live.dataset.wsPath;
  const DEBOUNCE_MS = 750;
  const MAX_BACKOFF_MS = 30000;
  const FRESHNESS_EVERY_MS = 1000;
  let timer = null;
  let backoff = 1000;
  let pinger = null;
  let waitingForBlur = false;
  // Server clock minus this browser's, from the part's `data-now` when it arrived.
  let skewMs = 0;

  function say(text) { if (status) status.textContent = text; }

  function typing() {
    const active = document.activeElement;
    return active !== null && live.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }

  function swap(html) {
    const typed = {};
    live.querySelectorAll("input[id], textarea[id], select[id]").forEach(function (field) {
      if (field.type !== "hidden" && field.value) typed[field.id] = field.value;
    });
    const opened = [...live.querySelectorAll("details[id][open]")].map(function (details) { return details.id; });
    const focused = document.activeElement && live.contains(document.activeElement) ? document.activeElement.closest("details[id]") : null;
    live.innerHTML = html;
    if (window.fairschedZone) window.fairschedZone.apply(live);
    opened.forEach(function (id) {
      const details = document.getElementById(id);
      if (details && live.contains(details)) details.open = true;
    });
    if (focused) {
      const again = document.getElementById(focused.id);
      if (again && live.contains(again)) again.querySelector("summary").focus();
    }
    Object.keys(typed).forEach(function (id) {
      const field = document.getElementById(id);
      if (field && live.contains(field)) field.value = typed[id];
    });
    readClock();
    freshness();
  }

  async function refresh() {
    timer = null;
    if (typing()) {
      waitingForBlur = true;
      return;
    }
    try {
      const response = await fetch(tableUrl + location.search, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } });
      if (response.ok) swap(await response.text());
    } catch (error) {
      say("Could not refresh; retrying on the next update.");
    }
  }

  function soon() { if (timer === null) timer = setTimeout(refresh, DEBOUNCE_MS); }

  live.addEventListener("focusout", function () {
    if (waitingForBlur) {
      waitingForBlur = false;
      setTimeout(function () { if (typing()) waitingForBlur = true; else soon(); }, 0);
    }
  });

  function readClock() {
    const stale = live.querySelector(".stale");
    if (!stale) return;
    const now = Date.parse(stale.dataset.now);
    if (!Number.isNaN(now)) skewMs = now - Date.now();
  }

  function clock(at) {
    if (window.fairschedZone) return window.fairschedZone.format(at);
    return new Date(at).toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }

  function freshness() {
    const stale = live.querySelector(".stale");
    if (!stale) return;
    const plannedAt = Date.parse(stale.dataset.plannedAt);
    const staleAfter = parseFloat(stale.dataset.staleAfter);
    if (Number.isNaN(plannedAt) || Number.isNaN(staleAfter)) return;
    const age = (Date.now() + skewMs - plannedAt) / 1000;
    if (age > staleAfter) {
      if (!live.hasAttribute("data-stale")) {
        live.setAttribute("data-stale", "");
        stale.textContent = "Not updated since " + clock(plannedAt) + ": the scheduler has not replanned since then, so the times below may be out of date.";
        stale.hidden = false;
      }
    } else if (live.hasAttribute("data-stale") || !stale.hidden) {
      live.removeAttribute("data-stale");
      stale.hidden = true;
      stale.textContent = "";
    }
  }

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

  readClock();
  freshness();
  setInterval(freshness, FRESHNESS_EVERY_MS);
  connect();
})();
