// Times in the viewer's zone, with the zone named: the portal, the dashboard and the admin render times in
// UTC (`<time datetime>`, the server's clock); this shows each one in the zone the viewer chose (a setting
// of the account, kept on the server: the page names it in `<meta name="fairsched-zone">`), the browser's
// own zone when the account has none, to the second. Loaded in the page's head, before its body: until
// the times are shown in that zone they are hidden (`zone-pending`, static/zone.css), so no UTC flashes.
// Durations share one rule here too (`duration`): whole seconds first, so 539.6 s is "9m00s", never "8m60s".
(function () {
  "use strict";
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const setting = document.querySelector('meta[name="fairsched-zone"]');
  let accountZone = (setting && setting.content) || "";
  document.documentElement.classList.add("zone-pending");

  function zone() {
    return accountZone || browserZone;
  }

  function parts(at, timeZone) {
    const format = new Intl.DateTimeFormat("en-GB", {
      timeZone: timeZone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    });
    const out = {};
    format.formatToParts(new Date(at)).forEach(function (part) { out[part.type] = part.value; });
    return out;
  }

  // "2026-12-03 07:16:50 CET" (`date: false`: "07:16:50 CET"; `seconds: false`: "07:16 CET").
  function format(at, options) {
    const settings = Object.assign({ date: true, seconds: true, zoneName: true }, options || {});
    const p = parts(at, zone());
    let text = p.hour + ":" + p.minute + (settings.seconds ? ":" + p.second : "");
    if (settings.date) text = p.year + "-" + p.month + "-" + p.day + " " + text;
    return settings.zoneName ? text + " " + p.timeZoneName : text;
  }

  // A datetime-local input's value for `at`, the wall clock in the viewer's zone: "2026-12-03T07:16".
  function wall(at) {
    const p = parts(at, zone());
    return p.year + "-" + p.month + "-" + p.day + "T" + p.hour + ":" + p.minute;
  }

  // A datetime-local input's value ("2026-12-03T07:16", seconds optional) read as the wall clock in the
  // viewer's zone, as ISO 8601 in UTC; anything else comes back as typed (the API names the field):
  // 1. the wall clock taken as if it were UTC; 2. less the zone's offset at that moment; 3. less the
  // offset at the result instead, when the two differ (the wall clock is near a change of the offset).
  function instant(text) {
    const match = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d))?$/.exec(String(text).trim());
    if (!match) return text;
    const [, y, mo, d, h, mi, sec] = match.map(Number);
    const asUtc = Date.UTC(y, mo - 1, d, h, mi, sec || 0);
    const offset = (at) => {
      const p = parts(at, zone());
      return Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour % 24, +p.minute, +p.second) - Math.floor(at / 1000) * 1000;
    };
    let at = asUtc - offset(asUtc);
    const again = asUtc - offset(at);
    if (again !== at) at = again;
    return new Date(at).toISOString();
  }

  // "Europe/Berlin (CET)".
  function label() {
    return zone() + " (" + parts(Date.now(), zone()).timeZoneName + ")";
  }

  // "40s", "1m00s", "9m59s", "10m", "1h00m", "2d3h": rounded to the second before it is split.
  function duration(seconds) {
    const s = Math.round(Math.abs(seconds));
    if (s < 60) return s + "s";
    if (s < 600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    const m = Math.round(s / 60);
    if (m < 60) return m + "m";
    if (m < 1440) return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
    const h = Math.round(m / 60);
    return Math.floor(h / 24) + "d" + (h % 24) + "h";
  }

  // Every `<time datetime>` under `root` in the viewer's zone (an ETA said as "any moment now" stays so),
  // every `[data-clock]` and `[data-band-low]` too, and every `[data-zone-name]` names the zone.
  function apply(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (time) {
      const at = Date.parse(time.getAttribute("datetime"));
      if (Number.isNaN(at) || time.textContent === "any moment now") return;
      // `data-clock-only`: a time of day in a sentence ("expected to start at about 06:19 GMT-5").
      time.textContent = format(at, { seconds: !time.hasAttribute("data-minutes"), date: !time.hasAttribute("data-clock-only") });
    });
    // A plot's axis labels (`data-clock`, an SVG text cannot hold a <time>): the clock alone.
    (root || document).querySelectorAll("[data-clock]").forEach(function (label) {
      const at = Date.parse(label.getAttribute("data-clock"));
      if (Number.isNaN(at)) return;
      label.textContent = format(at, { date: false, zoneName: false, seconds: label.hasAttribute("data-seconds") });
    });
    // A band ("likely between 13:52-14:10"): both ends in the zone, the zone named once, after the second.
    (root || document).querySelectorAll("[data-band-low]").forEach(function (band) {
      const low = Date.parse(band.getAttribute("data-band-low"));
      const high = Date.parse(band.getAttribute("data-band-high"));
      if (Number.isNaN(low) || Number.isNaN(high)) return;
      const shape = { date: band.hasAttribute("data-dates"), seconds: band.hasAttribute("data-seconds") };
      band.textContent = format(low, Object.assign({ zoneName: false }, shape)) + "\u2013" + format(high, shape);
    });
    (root || document).querySelectorAll("[data-zone-name]").forEach(function (element) {
      element.textContent = "Times are in " + label() + ".";
    });
    // Beside a time one types (a datetime-local input): the zone it is read in.
    (root || document).querySelectorAll("[data-zone-label]").forEach(function (element) {
      element.textContent = label();
    });
  }

  // The picker's choice is the account's: kept on the server, so every browser of the user shows it.
  async function choose(select, value) {
    const status = document.getElementById("zone-status");
    const say = (text) => { if (status) status.textContent = text; };
    let response = null;
    try {
      response = await fetch("/api/v1/me/zone/", {
        method: "PUT",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": setting ? setting.dataset.csrf : "" },
        body: JSON.stringify({ zone: value || null }),
      });
    } catch (error) {
      response = null;
    }
    if (!response || !response.ok) {
      let why = "the server did not answer";
      if (response) {
        try { why = ((await response.json()).zone || [why])[0]; } catch (error) { why = "the server refused it"; }
      }
      select.value = accountZone;
      say("The zone was not saved: " + why + ".");
      return;
    }
    accountZone = (await response.json()).zone || "";
    if (setting) setting.content = accountZone;
    say(accountZone ? "Saved: times are in " + accountZone + " in every browser of yours." : "Saved: times are in your browser's zone.");
    apply(document);
  }

  function setUp() {
    const select = document.getElementById("zone-choice");
    if (select) {
      select.querySelector("option[value='']").textContent = "Your browser's (" + browserZone + ")";
      if (accountZone && !select.querySelector("option[value='" + accountZone.replace(/'/g, "") + "']")) {
        const option = document.createElement("option");
        option.value = option.textContent = accountZone;
        select.appendChild(option);
      }
      select.value = accountZone;
      select.addEventListener("change", function () { choose(select, select.value); });
    }
    apply(document);
    document.documentElement.classList.remove("zone-pending");
  }

  window.fairschedZone = {
    zone: zone, format: format, label: label, duration: duration, apply: apply, wall: wall, instant: instant,
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
