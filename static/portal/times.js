// Relative times ("in 4 min") stay true while a page is open: every 15 s each one is recomputed from
// the <time datetime> before it, by the server's rule (charts/templatetags/portal_time.py `relative`).
// A live table that is refetched brings fresh ones; this keeps the ones in between from going stale.
// A page whose plan is stale (#live[data-stale], static/portal/portal.js) stops ticking: its times are
// as old as its plan, and counting them down would make old data look fresh.
(function () {
  "use strict";
  const EVERY_MS = 15000;

  function relative(ms) {
    const seconds = Math.round(ms / 1000);
    if (seconds === 0) return "just now";
    const size = Math.abs(seconds);
    let amount;
    if (size < 60) amount = size + " s";
    else if (size < 90 * 60) amount = Math.round(size / 60) + " min";
    else if (size < 48 * 3600) {
      const minutes = Math.round(size / 60);
      const hours = Math.floor(minutes / 60);
      amount = minutes % 60 ? hours + " h " + (minutes % 60) + " min" : hours + " h";
    } else amount = Math.round(size / 86400) + " days";
    return seconds >= 0 ? "in " + amount : amount + " ago";
  }

  function update() {
    const live = document.getElementById("live");
    if (live && live.hasAttribute("data-stale")) return;
    document.querySelectorAll("time + .relative").forEach(function (span) {
      const time = span.previousElementSibling;
      const at = Date.parse(time.getAttribute("datetime"));
      if (Number.isNaN(at)) return;
      // A running chart's ETA is never shown in the past (portal_time `finish_when`).
      if (time.hasAttribute("data-not-past") && at <= Date.now()) {
        time.textContent = "any moment now";
        span.textContent = "";
      } else if (time.hasAttribute("data-past")) {
        // A past event is never "in 2 s" (the server's clock a little ahead of this one).
        span.textContent = "(" + relative(Math.min(0, at - Date.now())) + ")";
      } else span.textContent = "(" + relative(at - Date.now()) + ")";
    });
  }

  setInterval(update, EVERY_MS);
})();
