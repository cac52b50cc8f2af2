// The operators' dashboard. The server renders every table (orgs, in flight, outside the plan,
// providers, events, the header and the scheduler's settings) and htmx swaps one in when a small
// WebSocket hint ("org 3 changed") names something it shows. JavaScript keeps what earns it: the
// virtualised queue (JSON pages), the hand-drawn SVG plots, relative times, and sending every lever
// to the REST API (/api/v1/, the staff session's CSRF token), whose 400s name the field and are shown
// next to the control. The socket reconnects with backoff and every (re)connect refreshes everything,
// so nothing stays stale after a server restart or a Redis blip. Nothing is loaded from elsewhere.
"use strict";

(function () {
  const ROW_H = 28;
  const TIMELINE_ROWS = 40;
  const BLOCK = 100;
  const OVERSCAN = 10;
  const REGIONS = ["summary", "config", "orgs", "inflight", "at_risk", "outside", "providers", "events"];
  const ALL = [...REGIONS, "samples", "queue"];
  // Which parts each hint's kind can have moved (the queue is refetched for its visible rows only).
  // An org's levers (weight, hold, cap, queue limit, costs, members) move no chart and no budget, so
  // not the header: the replan they may ask for sends its own hint.
  const REFETCH = {
    org: ["orgs", "outside", "events"],
    config: ["summary", "config", "events", "at_risk"],
    provider: ["providers", "events", "orgs"],
    chart: ["summary", "orgs", "inflight", "at_risk", "outside", "events", "queue"],
    charts: ["summary", "orgs", "inflight", "at_risk", "outside", "events", "queue"],
    plan: ["summary", "orgs", "inflight", "at_risk", "outside", "samples", "queue"],
    dispatch: ["summary", "orgs", "inflight", "at_risk", "events", "queue"],
    reconcile: ["summary", "orgs", "inflight", "at_risk", "events"],
  };
  // The element htmx swaps for each region (scheduling.views.REGIONS).
  const REGION_EL = { summary: "#summary", config: "#config", orgs: "#org-rows", inflight: "#inflight",
    at_risk: "#at-risk", outside: "#outside", providers: "#provider-list", events: "#events" };

  const $ = (sel, root) => (root || document).querySelector(sel);
  const csrf = $('meta[name="csrf-token"]').content;
  const state = JSON.parse($("#dashboard-initial").textContent);
  let skew = 0; // server clock minus client clock, in ms

  // --- formatting ---------------------------------------------------------------------------
  const esc = (v) => String(v == null ? "" : v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const now = () => Date.now() + skew;
  // Durations and clock times by the pages' one rule (static/zone.js): the viewer's zone, named.
  const dur = (seconds) => window.fairschedZone.duration(seconds);
  // An instant as ISO 8601 text or as milliseconds (the plot's, already parsed).
  const full = (at) => window.fairschedZone.format(typeof at === "number" ? at : Date.parse(at));
  function rel(iso) {
    if (!iso) return "–";
    const d = (Date.parse(iso) - now()) / 1000;
    if (Math.abs(d) < 1) return "now";
    return d > 0 ? "in " + dur(d) : dur(d) + " ago";
  }
  const clock = (iso) => (iso ? window.fairschedZone.format(Date.parse(iso), { date: false }) : "–");
  const timeCell = (iso) => `<span title="${esc(iso ? full(iso) : "not planned")}" data-rel="${esc(iso || "")}">${esc(rel(iso))}</span>`;
  // The ETA with its p10-p90 band (from the spread of past durations) when the plan has one.
  const etaCell = (r) => {
    if (!r.eta_low || !r.eta_high || r.eta_low === r.eta_high) return timeCell(r.eta);
    const band = `p10-p90: ${full(r.eta_low)} to ${full(r.eta_high)}`;
    return `${timeCell(r.eta)} <small class="band" title="${esc(band)}">(${esc(rel(r.eta_low))}–${esc(rel(r.eta_high))})</small>`;
  };

  function toast(text, ok) {
    const el = document.createElement("div");
    el.className = "toast" + (ok ? " ok" : "");
    el.textContent = text;
    $("#toasts").appendChild(el);
    setTimeout(() => el.remove(), ok ? 2000 : 6000);
  }

  // --- HTTP ---------------------------------------------------------------------------------
  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(url + ": HTTP " + response.status);
    return response.json();
  }

  // The API's errors: {"field": ["message"]}, nested for lists ({"costs": {"0": {"cost": [...]}}}).
  function errorText(body, status) {
    if (!body || typeof body !== "object") return "HTTP " + status;
    const parts = [];
    (function walk(value, path) {
      if (Array.isArray(value) && value.every((v) => typeof v !== "object" || v === null)) {
        parts.push((path.length ? path.join(".") + ": " : "") + value.join("; "));
      } else if (value && typeof value === "object") {
        for (const [key, inner] of Object.entries(value)) walk(inner, key === "detail" || key === "non_field_errors" ? path : [...path, key]);
      } else if (value != null) {
        parts.push((path.length ? path.join(".") + ": " : "") + value);
      }
    })(body, []);
    return parts.join(" · ") || "HTTP " + status;
  }

  // Call the API; show its refusal next to the control and as a toast. `err` is the slot, or a
  // function that finds it when the answer comes (a swap may have replaced the control meanwhile).
  // `ifMatch`: the ETag of the version the operator saw (an edit of a row); a 412 (someone else changed
  // it meanwhile, nothing was written) goes to `onStale`, which says so and shows what is there now;
  // `onEtag` gets the ETag a successful edit answers (the version it made; null for none).
  // Returns the answer's body ({} when it has none), or null when refused or unreachable.
  async function api(method, url, body, err, { ifMatch, onStale, onEtag } = {}) {
    const slot = () => (typeof err === "function" ? err() : err);
    let errEl = slot();
    if (errEl) errEl.textContent = "";
    const headers = { "X-CSRFToken": csrf, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (ifMatch) headers["If-Match"] = ifMatch;
    let response;
    try {
      response = await fetch(url, {
        method, credentials: "same-origin", headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      const text = "server unreachable: " + error.message;
      errEl = slot();
      if (errEl) errEl.textContent = text;
      toast(text);
      return null;
    }
    let data = null;
    try { data = await response.json(); } catch (error) { data = null; }
    if (response.status === 412 && onStale) {
      const text = await onStale();
      errEl = slot();
      if (errEl) errEl.textContent = text;
      toast(text);
      return null;
    }
    if (!response.ok) {
      const text = errorText(data, response.status);
      errEl = slot();
      if (errEl) errEl.textContent = text;
      toast(text);
      return null;
    }
    if (onEtag) await onEtag(response.headers.get("ETag"));
    return data || {};
  }

  // Input text to a lever value: "" is null (no cap), a number is a number, anything else goes as
  // typed so that the API names the field and the bad value.
  function value(text) {
    const t = String(text).trim();
    if (t === "") return null;
    return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
  }

  // A datetime-local input's value, the wall clock in the viewer's zone (the account's, else the
  // browser's), as ISO 8601 in UTC; anything else as typed.
  const instant = (text) => window.fairschedZone.instant(text);

  // --- refreshing -----------------------------------------------------------------------------
  const pending = new Set();
  let flushTimer = null;
  let lastFlush = 0;
  let swapping = false; // a partials request is on its way
  // Hints are coalesced: wait 40 ms for more, and refresh at most five times a second per page, so a
  // burst of submissions costs the server a few refetches, not one per chart.
  function want(parts, delay = 40) {
    parts.forEach((p) => pending.add(p));
    if (!flushTimer && pending.size) flushTimer = setTimeout(flush, Math.max(delay, lastFlush + 200 - Date.now()));
  }

  // One partials request at a time: what a hint moves while one is on its way waits for it and then
  // goes in the next, together with whatever else came meanwhile. (htmx would queue a second request
  // of the same source and drop all but the last queued one, losing what the dropped ones asked for;
  // and two at once could land out of order, an older table over a newer row.)
  function flush() {
    flushTimer = null;
    lastFlush = Date.now();
    const parts = [...pending].filter((p) => !swapping || p === "queue" || p === "samples");
    parts.forEach((p) => pending.delete(p));
    const regions = [];
    const orgIds = new Set();
    for (const part of parts) {
      if (part === "queue") queueView.reload().catch(() => want(["queue"]));
      else if (part === "samples") getJSON("/dashboard/samples/").then((data) => { state.samples = data.samples; drawDepth(); drawBudget(); }).catch(() => {});
      else if (part.startsWith("org:")) orgIds.add(part.slice(4));
      else if (!editing(part)) regions.push(part);
    }
    // A hint about one org moves its row only, unless the whole table is due anyway.
    let query = "";
    if (orgIds.size && !regions.includes("orgs") && !editing("orgs")) {
      regions.push("orgs");
      if (orgIds.size === 1) query = "&org=" + encodeURIComponent([...orgIds][0]);
    }
    if (!regions.length) return;
    // One request for every region the hint moved: each comes back as an out-of-band swap of its id.
    swapping = true;
    htmx.ajax("GET", "/dashboard/partials/?names=" + regions.join(",") + query, { source: document.body, swap: "none" })
      .catch(() => want(regions))
      .finally(() => { swapping = false; want([], 0); });
  }

  // A region is not swapped under the operator's hands: while they type in it, the swap waits until
  // focus leaves; values typed and not yet sent survive a swap, and so does the focus.
  function editing(name) {
    const el = $(REGION_EL[name]);
    if (!el || !(el.contains(document.activeElement) && document.activeElement.dataset.dirty)) return false;
    el.dataset.stale = name;
    return true;
  }
  document.addEventListener("focusout", (e) => {
    const el = e.target.closest("[data-stale]");
    if (el) setTimeout(() => { if (!el.contains(document.activeElement)) { want([el.dataset.stale]); delete el.dataset.stale; } }, 0);
  });
  document.addEventListener("input", (e) => { if (e.target.matches("input, select")) e.target.dataset.dirty = "1"; });

  // The key of a control that survives a swap: its lever's call and its name.
  const controlKey = (input) => ((input.form && input.form.dataset.api) || "") + " " + input.name;
  document.addEventListener("htmx:oobBeforeSwap", (e) => {
    const target = e.detail.target;
    target.__typed = [...target.querySelectorAll("[data-dirty]")].map((input) => [controlKey(input), input.value]);
    const focused = document.activeElement;
    target.__focused = focused && focused.name && target.contains(focused) ? controlKey(focused) : null;
    // ... and its selection: what the operator types next replaces it, as it would have.
    target.__selection = target.__focused && typeof focused.selectionStart === "number"
      ? [focused.selectionStart, focused.selectionEnd, focused.selectionDirection] : null;
    target.__errors = [...target.querySelectorAll("[data-err]")].map((slot) => slot.textContent);
    // A form typed into keeps the ETag of the version its operator saw (the new one is someone else's).
    target.__etags = [...target.querySelectorAll("form[data-etag]")].filter((form) => form.querySelector("[data-dirty]"))
      .map((form) => [form.dataset.api + " " + (form.querySelector("[name]") || {}).name, form.dataset.etag]);
    target.__swapped = true;
  });
  // Fired for every element swapped in, with the details of the region swapped last: each region is
  // finished once.
  document.addEventListener("htmx:oobAfterSwap", (e) => {
    const swapped = e.detail.target;
    if (!swapped.__swapped) return;
    delete swapped.__swapped;
    // A row swapped whole (outerHTML) is a new element with the old one's id.
    const target = swapped.isConnected ? swapped : document.getElementById(swapped.id);
    if (!target) return;
    for (const key of ["__typed", "__focused", "__selection", "__errors", "__etags"]) target[key] = swapped[key];
    const etags = new Map(target.__etags || []);
    delete target.__etags;
    target.querySelectorAll("form[data-etag]").forEach((form) => {
      const key = form.dataset.api + " " + (form.querySelector("[name]") || {}).name;
      if (etags.has(key)) form.dataset.etag = etags.get(key);
    });
    const typed = new Map(target.__typed || []);
    const focused = target.__focused;
    const selection = target.__selection;
    // A refusal stays shown where it was (the slots of a region are the same ones after a swap).
    const errors = target.__errors || [];
    const slots = target.querySelectorAll("[data-err]");
    if (slots.length === errors.length) slots.forEach((slot, i) => { slot.textContent = errors[i]; });
    delete target.__typed;
    delete target.__focused;
    delete target.__selection;
    delete target.__errors;
    if (typed.size || focused) {
      target.querySelectorAll("input[name], select[name]").forEach((input) => {
        const key = controlKey(input);
        if (typed.has(key)) { input.value = typed.get(key); input.dataset.dirty = "1"; }
        if (key !== focused) return;
        input.focus();
        if (selection && typeof input.selectionStart === "number") input.setSelectionRange(...selection);
      });
    }
    ticks(target);
    if (target.id === "summary") readSummary();
    if (target.id === "org-rows" || target.matches("tr[data-org]")) orgEditor.rowSwapped(target);
    if (target.id === "summary" || target.id === "org-rows" || target.matches("tr[data-org]")) drawTimeline();
    if (target.id === "org-rows" && !document.body.dataset.ready) painted();
  });
  document.addEventListener("htmx:responseError", (e) => {
    // Staff only: a 403 means the session ended; anything else is tried again on the next hint.
    if (e.detail.xhr.status === 403) toast("not allowed: sign in again");
  });

  function readSummary() {
    const counts = $("#summary .counts");
    if (counts && counts.dataset.now) skew = Date.parse(counts.dataset.now) - Date.now();
  }

  // --- levers: every one is a call of the API -------------------------------------------------
  // A form or button names its call: data-api="METHOD /api/v1/...". A form's named controls are its
  // JSON body (data-type: number, optional ("" leaves it null), datetime; data-omit-empty leaves an
  // empty one out); "{name}" in the URL takes that control's value; data-null-method is the call
  // when every value is null (a cost left empty goes back to the default: DELETE). A button's body
  // is its data-body. The org table's rows name no call: their Hold/Release and their org's editor
  // act on the row's org (below), so that 500 rows do not carry 500 copies of the same URLs.
  // data-reason-from names the input whose text goes as the call's `reason` (one reason input serves
  // several forms); data-etag is the ETag of the values the form shows, sent as If-Match.
  function formCall(form) {
    let [method, url] = form.dataset.api.split(" ");
    const body = {};
    const reason = reasonOf(form.dataset.reasonFrom);
    for (const input of form.querySelectorAll("[name]")) {
      const placeholder = "{" + input.name + "}";
      if (url.includes(placeholder)) { url = url.replace(placeholder, encodeURIComponent(input.value)); continue; }
      const type = input.dataset.type;
      let v = input.value;
      if (type === "number") v = value(v);
      else if (type === "optional") v = v === "" ? null : v;
      else if (type === "datetime") v = instant(v);
      if (input.hasAttribute("data-omit-empty") && (v === null || v === "")) continue;
      body[input.name] = v;
    }
    const values = Object.values(body);
    if (form.dataset.nullMethod && values.length && values.every((v) => v === null)) {
      return { method: form.dataset.nullMethod, url, body: reason ? { reason } : undefined };
    }
    if (reason) body.reason = reason;
    return { method, url, body };
  }

  // The text of a reason input (by selector), trimmed; "" when there is none.
  function reasonOf(selector) {
    const input = selector ? $(selector) : null;
    return input ? input.value.trim() : "";
  }
  function reasonUsed(selector) {
    const input = selector ? $(selector) : null;
    if (input) { input.value = ""; delete input.dataset.dirty; }
  }

  // A 412 on a form's edit: read what is stored now (GET of the same URL), put it in the form's
  // controls with its ETag, and say what changed. Nothing was written; the operator decides again.
  async function stale(form, url) {
    const read = url.replace(/\?.*$/, "");
    let now = null;
    try {
      const response = await fetch(read, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) { now = await response.json(); form.dataset.etag = response.headers.get("ETag") || ""; }
    } catch (error) { now = null; }
    want(["orgs", "config", "events"]);
    if (!now) return "changed by someone else meanwhile: nothing was saved; reload to see the current values";
    const shown = [];
    for (const input of form.querySelectorAll("input[name], select[name]")) {
      if (!(input.name in now) || ["org", "workflow", "reason"].includes(input.name)) continue;
      const v = now[input.name];
      input.value = v == null ? "" : String(v);
      delete input.dataset.dirty;
      shown.push(`${input.name.replace("_", " ")} ${v == null ? "none" : v}`);
    }
    return `changed by someone else meanwhile: now ${shown.join(", ") || "different"}. Nothing was saved; check and set again.`;
  }

  // Where a control's refusal is shown: the nearest row, form or section around it that has a slot.
  function errSlot(el) {
    if (el.closest("#provider-list")) return $("#form-provider [data-err]");
    for (let scope = el; scope && scope !== document.body; scope = scope.parentElement) {
      if (!scope.matches("tr, form, li, section, details")) continue;
      const slot = scope.querySelector("[data-err]");
      if (slot) return slot;
    }
    return null;
  }

  function flash(el) {
    const row = el.closest("tr, form, li") || el;
    row.classList.add("ok-flash");
    setTimeout(() => row.classList.remove("ok-flash"), 1000);
  }

  // The edits of one row go one at a time: an edit sent while the one before is on its way waits for
  // its answer, so that it sends the version that one made (the operator's own quick edits never
  // refuse each other as "changed meanwhile").
  const editsOf = new Map();
  document.addEventListener("submit", (e) => {
    const form = e.target.closest("form[data-api]");
    if (!form) return;
    e.preventDefault();
    const call = formCall(form);
    const sent = new Map([...form.querySelectorAll("[name]")].map((input) => [input.name, input.value]));
    const key = form.dataset.api;
    const edit = (editsOf.get(key) || Promise.resolve()).then(() => submit(form, call, sent));
    const last = edit.catch(() => {});
    editsOf.set(key, last);
    last.then(() => { if (editsOf.get(key) === last) editsOf.delete(key); });
  });

  async function submit(form, { method, url, body }, sent) {
    // An edit of a row sends the version its form shows; the version it makes is then every such
    // form's of the same call (the editor's weight, cap and queue limit; the scheduler's three forms).
    const siblings = () => document.querySelectorAll(`form[data-etag][data-api="${CSS.escape(form.dataset.api)}"]`);
    const options = !("etag" in form.dataset) ? {} : {
      ifMatch: form.dataset.etag,
      onStale: () => stale(current(), url),
      onEtag: async (etag) => {
        const made = etag || (await etagOf(url.replace(/\?.*$/, ""), ""));
        siblings().forEach((other) => { other.dataset.etag = made; });
      },
    };
    // The same form after a swap: its call and its first control's name say which one it is.
    const first = form.querySelector("[name]");
    const again = `form[data-api="${CSS.escape(form.dataset.api)}"]` + (first ? `:has([name="${CSS.escape(first.name)}"])` : "");
    const current = () => (form.isConnected ? form : document.querySelector(again) || form);
    // `sent`: what this call sends; a control typed into again while it is on its way is still the operator's.
    const answer = await api(method, url, body, () => errSlot(current()), options);
    if (answer) {
      current().querySelectorAll("[data-dirty]").forEach((input) => {
        if (sent.get(input.name) === input.value) delete input.dataset.dirty;
      });
      if (body && body.reason) reasonUsed(form.dataset.reasonFrom);
      flash(current());
    }
  }

  // The ETag of a row the API reads (its GET), or `fallback` when it cannot be read.
  async function etagOf(url, fallback) {
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      return (response.ok && response.headers.get("ETag")) || fallback;
    } catch (error) { return fallback; }
  }

  document.addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-api]");
    if (!button) return;
    const [method, url] = button.dataset.api.split(" ");
    const body = button.dataset.body ? JSON.parse(button.dataset.body) : {};
    const reason = reasonOf(button.dataset.reasonFrom);
    if (reason) body.reason = reason;
    button.disabled = true;
    const ok = await api(method, url, body, errSlot(button));
    button.disabled = false;
    if (ok && reason) reasonUsed(button.dataset.reasonFrom);
    if (ok) flash(button);
  });

  // An org row's Hold/Release acts on the row's org: POST /api/v1/orgs/<slug>/hold/ (or release/); the
  // org editor's does the same for its org, with the editor's reason (a hold's is written for the
  // customer: the org's members see it until the release).
  document.addEventListener("click", async (e) => {
    const button = e.target.closest("tr[data-org] button[data-hold], #org-editor button[data-editor-hold]");
    if (!button) return;
    const inEditor = button.matches("[data-editor-hold]");
    const row = inEditor ? orgRow(orgEditor.org()) : button.closest("tr[data-org]");
    if (!row) return;
    const slug = row.dataset.org;
    const action = row.dataset.held === "1" ? "release" : "hold";
    const reason = inEditor ? reasonOf("#org-reason") : "";
    button.disabled = true;
    const err = () => (inEditor ? errSlot(button) : errSlot(orgRow(slug) || row));
    // The editor's forms of this org show values a hold leaves as they were: they take its new version.
    const onEtag = (etag) => {
      if (!etag || orgEditor.org() !== slug) return;
      $("#org-editor").querySelectorAll("form[data-etag]:not(.costs)").forEach((form) => { form.dataset.etag = etag; });
    };
    const ok = await api("POST", `/api/v1/orgs/${encodeURIComponent(slug)}/${action}/`, reason ? { reason } : {}, err, { onEtag });
    button.disabled = false;
    if (ok && reason) reasonUsed("#org-reason");
    if (ok) flash(inEditor ? button : orgRow(slug) || row);
  });
  const orgRow = (slug) => document.querySelector(`#org-rows tr[data-org="${CSS.escape(slug)}"]`);

  // --- the org editor: one set of lever forms for the org picked in the table -------------------
  // An org's name in its row opens the editor for that org; its forms are levers like any other (their
  // hidden "org" control fills the {org} of their API call). The controls show the row's values and
  // follow them when a hint swaps the row in, except those the operator has typed into and not sent.
  const orgEditor = (function () {
    const editor = $("#org-editor");
    const costForm = $("form.costs", editor);
    let slug = null;

    // The cost the row shows for the selected workflow ("" when it costs the workflow's default).
    function cost(row) {
      const tag = [...row.querySelectorAll(".tag[data-workflow]")].find((t) => t.dataset.workflow === costForm.workflow.value);
      return tag ? tag.dataset.cost : "";
    }

    // A form's controls show the row's values, and the form keeps the ETag of the version they show:
    // while the operator has typed into it, neither moves, so that their edit is sent with the version
    // they saw (a change made meanwhile is then a 412, never silently overwritten).
    function fill(row, force) {
      $("[data-editor-hold]", editor).textContent = row.dataset.held === "1" ? "Release" : "Hold";
      const values = { weight: row.dataset.weight, max_concurrency: row.dataset.cap, queue_limit: row.dataset.limit, cost: cost(row) };
      for (const [name, v] of Object.entries(values)) {
        const input = $(`[name=${name}]`, editor);
        if (!force && input.dataset.dirty) continue;
        const moved = input.value !== v;
        input.value = v;
        delete input.dataset.dirty;
        if (input.form === costForm) { if (force || moved) costEtag(); } else input.form.dataset.etag = row.dataset.etag;
      }
    }

    // The cost of one (org, workflow) is a row of its own: its ETag comes from its API read.
    async function costEtag() {
      const url = `/api/v1/orgs/${encodeURIComponent(slug)}/costs/${encodeURIComponent(costForm.workflow.value)}/`;
      costForm.dataset.etag = "";
      costForm.dataset.etag = await etagOf(url, "");
    }

    function open(row, focus) {
      const previous = slug && orgRow(slug);
      if (previous) previous.removeAttribute("aria-current");
      slug = row.dataset.org;
      editor.dataset.org = slug;
      $("#org-editor-slug").textContent = slug;
      editor.querySelectorAll("[name=org]").forEach((input) => { input.value = slug; });
      editor.querySelectorAll("[data-err]").forEach((err) => { err.textContent = ""; });
      reasonUsed("#org-reason"); // a reason typed for another org is not this one's
      row.setAttribute("aria-current", "true");
      fill(row, true);
      editor.hidden = false;
      if (focus) $("[name=weight]", editor).focus();
    }

    function close() {
      const row = slug && orgRow(slug);
      if (row) row.removeAttribute("aria-current");
      editor.hidden = true;
      slug = null;
      delete editor.dataset.org;
      if (row) $("[data-edit]", row).focus();
    }

    // A swapped-in row (or table) is new markup: mark the picked row again (an attribute htmx's settling
    // leaves alone: it puts back the class of the markup) and show its values.
    function rowSwapped(target) {
      const row = slug && orgRow(slug);
      if (!row || !(target === row || target.contains(row))) return;
      row.setAttribute("aria-current", "true");
      fill(row, false);
    }

    document.addEventListener("click", (e) => {
      const button = e.target.closest("tr[data-org] button[data-edit]");
      if (button) open(button.closest("tr[data-org]"), true);
      else if (e.target.closest("[data-editor-close]")) close();
    });
    editor.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
    costForm.workflow.addEventListener("change", () => {
      const row = slug && orgRow(slug);
      if (row) { costForm.cost.value = cost(row); delete costForm.cost.dataset.dirty; costEtag(); }
    });

    return { rowSwapped, org: () => slug };
  })();

  // A provider pause is usually for a few minutes: offer a quarter of an hour from now, in the viewer's zone.
  $("#form-provider [name=until]").value = window.fairschedZone.wall(Date.now() + 15 * 60000);

  // Chart levers (queue, in flight, outside the plan): the row names the chart, the button the lever.
  const CHART_LEVERS = { priority: "prioritize", top: "move-to-top", pause: "pause", resume: "resume", cancel: "cancel" };
  async function chartLever(button) {
    const row = button.closest("[data-chart]");
    const id = row.dataset.chart;
    const act = button.dataset.act;
    // The confirmation names the chart as the row shows it: its external id and its org.
    if (act === "cancel" && !confirm(`Cancel ${row.dataset.external} of ${row.dataset.org}?`)) return;
    const body = act === "priority" ? { high_priority: button.dataset.hp === "1" } : {};
    const reason = reasonOf("#lever-reason");
    if (reason) body.reason = reason;
    button.disabled = true;
    const ok = await api("POST", `/api/v1/charts/${encodeURIComponent(id)}/${CHART_LEVERS[act]}/`, body, row.closest("#queue-rows") ? $("#queue-err") : errSlot(button));
    button.disabled = false;
    if (!ok) return;
    if (reason) reasonUsed("#lever-reason");
    row.classList.add("ok-flash");
    // The broadcast refreshes every open dashboard; this one does not wait for it to see its own change,
    // which it shows at once even under the pointer (the operator asked for it).
    queueView.reload({ now: true }).catch(() => want(["queue"]));
  }
  document.addEventListener("click", (e) => {
    const button = e.target.closest("[data-chart] button[data-act]");
    if (button) chartLever(button);
  });

  // --- queue (virtualized: only the visible rows exist in the DOM) ------------------------------
  const queueView = (function () {
    const scroller = $("#queue-scroll");
    const spacer = $("#queue-spacer");
    const rowsEl = $("#queue-rows");
    let org = "";
    let total = 0;
    let rows = new Map(); // row index -> row: plan position for the whole queue, offset within one org
    let requested = new Set(); // blocks fetched or being fetched since the last reload
    let generation = 0;

    function url(from, limit) {
      return org
        ? `/dashboard/queue/?org=${encodeURIComponent(org)}&offset=${from}&limit=${limit}`
        : `/dashboard/queue/?start=${from}&limit=${limit}`;
    }

    function accept(page, from, into) {
      total = page.total;
      page.rows.forEach((row, i) => into.set(org ? from + i : row.position, row));
      $("#queue-total").textContent = total.toLocaleString();
      spacer.style.height = total * ROW_H + "px";
      $("#queue-empty").hidden = total > 0;
    }

    function visible() {
      const first = Math.max(0, Math.floor(scroller.scrollTop / ROW_H) - OVERSCAN);
      const last = Math.floor((scroller.scrollTop + (scroller.clientHeight || 460)) / ROW_H) + OVERSCAN;
      return { first, last };
    }

    // Fetch the blocks of the visible rows that nobody has asked for yet (scrolling).
    function fill(view) {
      const gen = generation;
      for (let b = Math.floor(view.first / BLOCK); b <= Math.floor(view.last / BLOCK); b++) {
        if (requested.has(b) || b * BLOCK >= Math.max(total, 1)) continue;
        requested.add(b);
        getJSON(url(b * BLOCK, BLOCK))
          .then((page) => { if (gen === generation) { accept(page, b * BLOCK, rows); paint(); } })
          .catch(() => requested.delete(b));
      }
    }

    // Only the rows that changed are replaced: each row element is keyed by its chart (a row still
    // loading by its index) and kept, with its focus and hover, while what it shows is the same.
    function paint() {
      const view = visible();
      fill(view);
      const last = Math.min(view.last, total - 1);
      const kept = new Map([...rowsEl.children].map((el) => [el.dataset.key, el]));
      const wanted = [];
      for (let i = view.first; i <= last; i++) {
        const row = rows.get(i);
        const key = row ? "chart:" + row.id : "slot:" + i;
        const shows = row ? JSON.stringify([i, row]) : "";
        let el = kept.get(key);
        if (!el || el.dataset.shows !== shows) {
          const made = document.createElement("template");
          made.innerHTML = row ? queueRow(row, i) : `<div class="vt-row loading" role="row"><span class="pos">${i}</span><span>…</span></div>`;
          const fresh = made.content.firstElementChild;
          fresh.dataset.key = key;
          fresh.dataset.shows = shows;
          if (el) el.replaceWith(fresh);
          el = fresh;
        }
        kept.delete(key);
        wanted.push(el);
      }
      kept.forEach((el) => el.remove());
      wanted.forEach((el, n) => { if (rowsEl.children[n] !== el) rowsEl.insertBefore(el, rowsEl.children[n] || null); });
      rowsEl.style.transform = `translateY(${view.first * ROW_H}px)`;
    }

    // While the pointer is over the queue or focus is in it, a new page of the plan waits (the row
    // under the operator's hand does not move) behind the bar that counts them; it is shown when they
    // leave, or on a click of the bar.
    const bar = $("#queue-wait");
    let waiting = null; // [page, from] of the latest update held back
    let held = 0; // updates held back since the last one shown
    const holding = () => scroller.matches(":hover") || scroller.contains(document.activeElement);
    function hold(page, from) {
      waiting = [page, from];
      held += 1;
      bar.querySelector("button").textContent = `${held} ${held === 1 ? "update waits" : "updates wait"} — show`;
      bar.classList.add("on");
    }
    function release() {
      if (!waiting) return;
      const [page, from] = waiting;
      waiting = null;
      held = 0;
      bar.classList.remove("on");
      take(page, from);
    }
    function take(page, from) {
      rows = new Map();
      requested = new Set();
      accept(page, from, rows);
      paint();
    }
    scroller.addEventListener("mouseleave", () => { if (!scroller.contains(document.activeElement)) release(); });
    scroller.addEventListener("focusout", () => setTimeout(() => { if (!holding()) release(); }, 0));
    bar.querySelector("button").addEventListener("click", release);

    // The tooltip of a queue row's reason: what holds the chart and until when (charts.models.WaitingReason).
    function waitingDetail(r) {
      const words = {
        budget: r.head_of_line ? `would fit, but waits behind chart ${r.head_of_line} at the head of the line` : "heads the line: waits for budget to free",
        turn: "waits for its org's turn in the fair order",
        org_cap: `${r.org} runs its max_concurrency`,
        provider_paused: `its workflow's provider is paused (for everyone or for ${r.org})`,
        backoff: `retry backoff after attempt ${r.attempt}`,
        retry_budget: "retries fill the retry budget",
      };
      const parts = [`${r.state}: ${words[r.waiting_reason] || "the last replan starts it now"}`];
      if (r.waiting_until) parts.push(`until ${r.waiting_until}`);
      if (r.available_at) parts.push(`backoff ends ${r.available_at}`);
      return parts.join("; ");
    }

    // Every cell that may be cut short carries its full text in a title.
    function queueRow(r, i) {
      const words = r.waiting_words || "starting now";
      const state = `<span class="badge reason${r.state === "retry_wait" ? " retry_wait" : ""}" data-reason="${esc(r.waiting_reason)}" title="${esc(words + " · " + waitingDetail(r))}">${esc(words)}</span>`;
      const hp = r.high_priority ? ` <span class="badge hp" title="high priority">★</span>` : "";
      const eta = r.eta_low && r.eta_high && r.eta_low !== r.eta_high
        ? `${r.eta ? full(r.eta) : "not planned"}; likely between ${full(r.eta_low)} and ${full(r.eta_high)}`
        : (r.eta ? full(r.eta) : "not planned");
      return `<div class="vt-row" role="row" data-chart="${r.id}" data-external="${esc(r.external_id)}" data-org="${esc(r.org)}">
        <span class="pos">${r.position != null ? r.position : i}</span>
        <span title="${esc(r.external_id)} · priority ${r.priority}">${esc(r.external_id)}${hp}</span>
        <span title="${esc(r.org)}">${esc(r.org)}</span><span title="${esc(r.workflow)}">${esc(r.workflow)}</span><span>${r.cost}</span>
        <span>${state}</span>
        <span>${timeCell(r.predicted_start)}</span><span title="${esc(eta)}">${etaCell(r)}</span>
        <span class="levers">
          <button data-act="priority" data-hp="${r.high_priority ? "0" : "1"}" title="${r.high_priority ? "Clear high priority" : "High priority"}">★</button>
          <button data-act="top" title="Move to the top of ${esc(r.org)}'s queue">⤒</button>
          <button data-act="pause" title="Pause">‖</button>
          <button data-act="cancel" class="danger" title="Cancel">✕</button>
        </span></div>`;
    }

    let ticking = false;
    scroller.addEventListener("scroll", () => {
      if (ticking) return;
      ticking = true;
      requestAnimationFrame(() => { ticking = false; paint(); });
    });

    let owed = false; // an operator's own lever's answer not shown yet
    return {
      seed(page) { generation++; rows = new Map(); requested = new Set([0]); accept(page, 0, rows); paint(); },
      // The plan moved: refetch just the rows on screen in one request, keeping the scroll position.
      // `now`: shown even while the operator's hand is on the queue (their own lever's answer).
      // A refetch for a hint may overtake the lever's own (the newer one wins): the lever's answer is
      // then owed, and the refetch that overtook it shows it under the hand all the same.
      reload({ now = false } = {}) {
        const gen = ++generation;
        if (now) owed = true;
        const view = visible();
        const limit = Math.min(500, view.last - view.first + 1);
        return getJSON(url(view.first, limit)).then((page) => {
          if (gen !== generation) return;
          if (!owed && holding()) { hold(page, view.first); return; }
          owed = false;
          waiting = null;
          held = 0;
          bar.classList.remove("on");
          take(page, view.first);
        });
      },
      setOrg(slug) { org = slug; scroller.scrollTop = 0; return this.reload({ now: true }); },
      jump(position) { scroller.scrollTop = position * ROW_H; paint(); },
    };
  })();

  $("#queue-org").addEventListener("change", (e) => queueView.setOrg(e.target.value));
  $("#queue-jump").addEventListener("change", (e) => queueView.jump(Math.max(0, parseInt(e.target.value, 10) || 0)));


  // --- relative times and elapsed clocks ------------------------------------------------------
  function progress(startedAt, expected, st) {
    const elapsed = startedAt ? Math.max(0, (now() - Date.parse(startedAt)) / 1000) : 0;
    const share = expected > 0 ? Math.min(1, elapsed / expected) : 0;
    const badge = st === "dispatching" ? '<span class="badge dispatching">starting</span> ' : "";
    return `${badge}${dur(elapsed)} / ${dur(expected)}<svg class="progress" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true"><rect class="${elapsed > expected ? "over" : ""}" width="${(share * 100).toFixed(1)}" height="6"></rect></svg>`;
  }

  // The server writes times in UTC; here they become relative ("in 4m") and local clocks.
  // A text is written only when it changes: every write makes the browser lay the page out again, and
  // the org table's 1,500 times (most hours away, so changing once a minute) made that a long task
  // every second, which held back the swaps a hint asks for.
  function ticks(root) {
    root.querySelectorAll("[data-rel]").forEach((el) => {
      // A running chart's ETA is never shown in the past (`running_eta`): the next replan moves it.
      const passed = el.hasAttribute("data-not-past") && Date.parse(el.dataset.rel) <= now();
      const text = passed ? "any moment" : rel(el.dataset.rel || null);
      if (el.textContent !== text) el.textContent = text;
    });
    root.querySelectorAll("[data-started]").forEach((el) => {
      el.innerHTML = progress(el.dataset.started || null, Number(el.dataset.expected), el.dataset.state);
    });
    root.querySelectorAll("time[datetime]:not([data-local])").forEach((el) => { el.textContent = clock(el.getAttribute("datetime")); el.dataset.local = "1"; });
  }

  // --- what-if: every lever of the API's plan preview, applied through the API's levers ---------
  const whatIf = (function () {
    const form = $("#form-whatif");
    // The controls each kind of change reads.
    const FIELDS = {
      weight: ["org", "value"], hold: ["org"], release: ["org"], cap: ["org", "value"], queue_limit: ["org", "value"],
      cost: ["org", "workflow", "value"], budget: ["value"], policy: ["value"], quantum: ["value"],
      aging_step: ["value"], aging_cap: ["value"], priority: ["chart", "value"], high_priority: ["chart", "value"],
      provider_pause: ["provider", "org", "until"], provider_resume: ["provider", "org"],
    };
    const CONFIG = ["budget", "policy", "quantum", "aging_step", "aging_cap"];
    const ORG_FIELD = { weight: "weight", cap: "max_concurrency", queue_limit: "queue_limit" };
    const PLURAL = { weight: "weights", cap: "caps", queue_limit: "queue_limits" };
    let changes = [];
    let preview = null;

    const shown = (v) => (v == null ? "none" : String(v));
    function label(c) {
      if (c.kind in PLURAL) return `${c.org} ${c.kind.replace("_", " ")} → ${shown(c.value)}`;
      if (c.kind === "hold" || c.kind === "release") return `${c.kind} ${c.org}`;
      if (c.kind === "cost") return `${c.org}/${c.workflow} cost → ${c.value == null ? "default" : c.value}`;
      if (CONFIG.includes(c.kind)) return `${c.kind.replace("_", " ")} → ${shown(c.value)}`;
      if (c.kind === "priority" || c.kind === "high_priority") return `chart ${c.chart} ${c.kind.replace("_", " ")} → ${shown(c.value)}`;
      if (c.kind === "provider_pause") return `pause ${c.provider} for ${c.org || "everyone"} until ${clock(c.until)}`;
      return `resume ${c.provider} for ${c.org || "everyone"}`;
    }

    // The body of POST /api/v1/scheduler/plan-preview/.
    function payload() {
      const out = {};
      const list = (key) => (out[key] = out[key] || []);
      for (const c of changes) {
        if (c.kind in PLURAL) (out[PLURAL[c.kind]] = out[PLURAL[c.kind]] || {})[c.org] = c.value;
        else if (c.kind === "hold" || c.kind === "release") list(c.kind).push(c.org);
        else if (CONFIG.includes(c.kind)) out[c.kind] = c.value;
        else if (c.kind === "cost") list("costs").push({ org: c.org, workflow: c.workflow, cost: c.value });
        else if (c.kind === "priority" || c.kind === "high_priority") {
          let item = list("priorities").find((p) => p.chart === c.chart);
          if (!item) list("priorities").push((item = { chart: c.chart }));
          item[c.kind] = c.value;
        } else if (c.kind === "provider_pause") list("provider_pauses").push({ provider: c.provider, org: c.org, until: c.until });
        else list("provider_resumes").push({ provider: c.provider, org: c.org });
      }
      return out;
    }

    // The real lever of one change (the config changes go together, in one PATCH).
    function call(c) {
      const org = `/api/v1/orgs/${encodeURIComponent(c.org || "")}/`;
      if (c.kind in ORG_FIELD) return ["PATCH", org, { [ORG_FIELD[c.kind]]: c.value }];
      if (c.kind === "hold" || c.kind === "release") return ["POST", org + c.kind + "/", {}];
      if (c.kind === "cost") {
        const url = org + "costs/" + encodeURIComponent(c.workflow) + "/";
        return c.value === null ? ["DELETE", url, undefined] : ["PUT", url, { cost: c.value }];
      }
      if (c.kind === "priority" || c.kind === "high_priority") return ["POST", `/api/v1/charts/${encodeURIComponent(c.chart)}/prioritize/`, { [c.kind]: c.value }];
      if (c.kind === "provider_pause") return ["POST", "/api/v1/provider-pauses/", { provider: c.provider, org: c.org, until: c.until }];
      return ["POST", `/api/v1/providers/${encodeURIComponent(c.provider)}/resume/`, { org: c.org }];
    }

    function renderChanges() {
      $("#whatif-changes").innerHTML = changes.map((c, i) => `<li>${esc(label(c))}<button type="button" data-remove="${i}" aria-label="remove">×</button></li>`).join("");
    }

    function renderResult() {
      const table = $("#whatif-result");
      table.hidden = !preview;
      if (!preview) { $("#whatif-moves").hidden = true; drawTimeline(); return; }
      const moved = (d) => Math.abs(d) < 1 ? "same" : `<span class="${d < 0 ? "earlier" : "later"}">${d < 0 ? "−" : "+"}${dur(d)}</span>`;
      const counts = (r) => r.charts_earlier == null ? "" : [
        r.charts_earlier ? `${r.charts_earlier} earlier` : "", r.charts_later ? `${r.charts_later} later` : "",
        r.charts_unplanned ? `${r.charts_unplanned} no ETA` : "",
      ].filter(Boolean).join(" · ") || "none move";
      const line = (name, r) => {
        const before = r.before ? Date.parse(r.before) : null;
        const after = r.after ? Date.parse(r.after) : null;
        let moves = "–";
        if (before != null && after != null) {
          const d = (after - before) / 1000;
          moves = Math.abs(d) < 1 ? "same" : `<span class="${d < 0 ? "earlier" : "later"}">${d < 0 ? "−" : "+"}${dur(d)}</span>`;
        } else if (before != null) moves = '<span class="later">no longer clears</span>';
        else if (after != null) moves = '<span class="earlier">now clears</span>';
        return `<tr><td>${name}</td><td>${timeCell(r.before)}</td><td>${timeCell(r.after)}</td><td>${moves}</td><td>${esc(counts(r))}</td></tr>`;
      };
      const rows = [line("<b>all</b>", preview.global || {})];
      for (const [slug, r] of Object.entries(preview.orgs || {})) rows.push(line(esc(slug), r));
      table.querySelector("tbody").innerHTML = rows.join("");
      const charts = preview.charts || [];
      $("#whatif-moves").hidden = !charts.length;
      $("#whatif-moves tbody").innerHTML = charts.map((m) => `<tr data-chart="${Number(m.id)}"><td>#${Number(m.id)}</td><td>${esc(m.org)}</td>
        <td>${timeCell(m.before)}</td><td>${timeCell(m.after)}</td>
        <td>${m.moved_seconds == null ? (m.after ? '<span class="earlier">now planned</span>' : '<span class="later">no ETA</span>') : moved(m.moved_seconds)}</td></tr>`).join("");
      drawTimeline();
    }

    async function run() {
      if (!changes.length) { $("#whatif-err").textContent = "add a change first"; return; }
      preview = await api("POST", "/api/v1/scheduler/plan-preview/", payload(), $("#whatif-err"));
      renderResult();
    }

    // Each change goes through its own lever, with the panel's reason (kept in its history).
    async function apply() {
      const err = $("#whatif-err");
      const reason = reasonOf("#whatif-reason");
      const withReason = (body) => (reason ? { ...(body || {}), reason } : body);
      const config = changes.filter((c) => CONFIG.includes(c.kind));
      if (config.length) {
        const body = Object.fromEntries(config.map((c) => [c.kind, c.value]));
        if (!(await api("PATCH", "/api/v1/scheduler/config/", withReason(body), err))) return;
        changes = changes.filter((c) => !CONFIG.includes(c.kind));
        renderChanges();
      }
      while (changes.length) {
        const [method, url, body] = call(changes[0]);
        if (!(await api(method, url, withReason(body), err))) return;
        changes.shift();
        renderChanges();
      }
      preview = null;
      renderResult();
      reasonUsed("#whatif-reason");
      toast("applied", true);
    }

    function showFields() {
      const used = FIELDS[form.kind.value];
      for (const name of ["org", "workflow", "provider", "chart", "until", "value"]) form[name].hidden = !used.includes(name);
      $("#whatif-until-zone").hidden = form.until.hidden;
      form.org.options[0].disabled = !used.includes("provider");
      if (form.org.options[0].disabled && form.org.selectedIndex === 0 && form.org.options.length > 1) form.org.selectedIndex = 1;
    }

    function read() {
      const kind = form.kind.value;
      const c = { kind };
      for (const name of FIELDS[kind]) c[name] = form[name].value;
      if ("org" in c && kind.startsWith("provider")) c.org = c.org || null;
      if ("value" in c) c.value = kind === "high_priority" ? ({ true: true, yes: true, "1": true, false: false, no: false, "0": false })[c.value.trim().toLowerCase()] ?? c.value : value(c.value);
      if ("chart" in c) c.chart = value(c.chart);
      if ("until" in c) c.until = instant(c.until);
      return c;
    }

    form.kind.addEventListener("change", showFields);
    form.addEventListener("submit", (e) => { e.preventDefault(); add(read(), false); });
    $("#whatif-changes").addEventListener("click", (e) => {
      const b = e.target.closest("[data-remove]");
      if (b) { changes.splice(Number(b.dataset.remove), 1); renderChanges(); }
    });
    $("#whatif-preview").addEventListener("click", run);
    $("#whatif-apply").addEventListener("click", apply);
    $("#whatif-clear").addEventListener("click", () => { changes = []; preview = null; renderChanges(); renderResult(); });
    showFields();

    const same = (a, b) => ["kind", "org", "workflow", "chart", "provider"].every((k) => a[k] === b[k]);
    function add(change, andRun) {
      // A new change replaces an earlier one of the same lever; hold and release replace each other.
      const opposite = { hold: "release", release: "hold" }[change.kind];
      changes = changes.filter((c) => !same(c, change) && !(c.kind === opposite && c.org === change.org));
      changes.push(change);
      renderChanges();
      if (andRun) run();
    }

    // The "?" buttons beside a lever preview its value as typed.
    document.addEventListener("click", (e) => {
      const b = e.target.closest("[data-preview]");
      if (!b) return;
      const kind = b.dataset.preview;
      const f = b.closest("form");
      if (kind === "budget") add({ kind, value: value(f.budget.value) }, true);
      else if (kind === "weight") add({ kind, org: orgEditor.org(), value: value(f.weight.value) }, true);
      else if (kind === "cost") add({ kind, org: orgEditor.org(), workflow: f.workflow.value, value: value(f.cost.value) }, true);
    });

    return { add, preview: () => preview };
  })();

  // --- plots (hand-drawn SVG) -----------------------------------------------------------------
  const PALETTE = ["#4aa3ff", "#3ecf8e", "#f5b942", "#ff8f6b", "#b58cff", "#5fd3d3", "#ff6bb5", "#a3d95f"];
  function colour(slug) {
    let h = 0;
    for (const ch of slug) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return PALETTE[h % PALETTE.length];
  }
  // Widths are read once and on resize only: reading layout after the org table changed would force
  // a layout of the whole page on every redraw.
  const widths = new Map();
  function widthOf(svg) {
    if (!widths.has(svg.id)) widths.set(svg.id, Math.max(200, svg.parentNode.clientWidth || 400));
    return widths.get(svg.id);
  }

  function axisTicks(max, count) {
    if (max <= 0) return [0];
    const raw = max / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let v = 0; v <= max + 1e-9; v += step) out.push(v);
    return out;
  }

  function drawTimeline() {
    const svg = $("#plot-timeline");
    const W = widthOf(svg);
    const t0 = now();
    const preview = whatIf.preview();
    // The org table the server rendered is the plot's data: each row carries its clear-time and load.
    const rows = [...document.querySelectorAll("#org-rows tr[data-org]")]
      .map((tr) => ({ slug: tr.dataset.org, held: tr.dataset.held === "1", clear: tr.dataset.clear, busy: tr.dataset.queued !== "0" || tr.dataset.running !== "0" }))
      .filter((o) => o.held || o.clear || o.busy)
      .map((o) => ({ slug: o.slug, held: o.held, end: o.clear ? Date.parse(o.clear) : null,
        after: preview && preview.orgs && preview.orgs[o.slug] && preview.orgs[o.slug].after ? Date.parse(preview.orgs[o.slug].after) : null }))
      .sort((a, b) => (a.held - b.held) || ((b.end || 0) - (a.end || 0)) || a.slug.localeCompare(b.slug));
    // The longest backlogs (and a few held orgs) are what an operator reads here; the rest is counted.
    const shown = rows.filter((r) => !r.held).slice(0, TIMELINE_ROWS).concat(rows.filter((r) => r.held).slice(0, 10));
    const hidden = rows.length - shown.length;
    rows.length = 0;
    rows.push(...shown);
    const counts = $("#summary .counts"); // the header comes with the first resync, like the org table
    const globalClear = counts && counts.dataset.globalClear;
    const globalEnd = globalClear ? Date.parse(globalClear) : null;
    const ends = rows.flatMap((r) => [r.end, r.after]).concat([globalEnd]).filter((x) => x != null);
    const span = Math.max(60000, ...ends.map((e) => e - t0)) * 1.05;
    const left = 90, right = 10, top = 18, rowH = 16;
    const H = top + Math.max(1, rows.length) * rowH + (hidden ? 18 : 6);
    const x = (t) => left + ((Math.max(t0, t) - t0) / span) * (W - left - right);
    const parts = [`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#20272f"/><line x1="0" y1="0" x2="0" y2="6" stroke="#4a5562" stroke-width="2"/></pattern></defs>`];
    for (const s of axisTicks(span / 1000, 5)) {
      const px = x(t0 + s * 1000);
      parts.push(`<line class="grid-line" x1="${px}" x2="${px}" y1="${top - 4}" y2="${H}"/><text x="${px + 2}" y="10">${s ? "+" + dur(s) : "now"}</text>`);
    }
    rows.forEach((r, i) => {
      const y = top + i * rowH;
      parts.push(`<text class="label" x="${left - 6}" y="${y + 11}" text-anchor="end">${esc(r.slug)}</text>`);
      if (r.held) parts.push(`<rect class="held-bar" x="${left}" y="${y + 2}" width="${W - left - right}" height="${rowH - 4}"/><text x="${left + 4}" y="${y + 11}">held</text>`);
      else if (r.end) parts.push(`<rect x="${left}" y="${y + 2}" width="${Math.max(1, x(r.end) - left)}" height="${rowH - 4}" rx="2" fill="${colour(r.slug)}" opacity=".85"><title>${esc(r.slug)} clears ${esc(full(r.end))}</title></rect>`);
      else parts.push(`<text x="${left + 4}" y="${y + 11}">no ETA</text>`);
      if (r.after) parts.push(`<rect class="after-bar" x="${left}" y="${y + 3}" width="${Math.max(1, x(r.after) - left)}" height="${rowH - 6}"><title>would clear ${esc(full(r.after))}</title></rect>`);
    });
    if (globalEnd) parts.push(`<line class="clear-line" x1="${x(globalEnd)}" x2="${x(globalEnd)}" y1="${top - 4}" y2="${H}"/>`);
    if (!rows.length) parts.push(`<text x="${left}" y="${top + 10}">no backlog</text>`);
    if (hidden) parts.push(`<text x="${left}" y="${H - 4}">… and ${hidden} more orgs clearing sooner (see the org table)</text>`);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("height", H);
    svg.innerHTML = parts.join("");
    // The plot's text alternative, with the numbers it shows (kept current with each drawing).
    const said = rows.map((r) => (r.held ? `${r.slug} held` : r.end ? `${r.slug} clears ${full(r.end)}` : `${r.slug} no ETA`)
      + (r.after ? `, would clear ${full(r.after)} with the what-if` : ""));
    if (globalEnd) said.push(`all orgs clear ${full(globalEnd)}`);
    if (hidden) said.push(`and ${hidden} more orgs clearing sooner`);
    svg.setAttribute("aria-label", `Projected clear time per org: ${said.length ? said.join("; ") : "no backlog"}.`);
    timelineTable(rows, globalEnd, hidden);
  }

  // The plot's numbers as a table (`#plot-timeline-numbers`, a <details> a keyboard opens), one row per
  // org the plot draws, with the clear time of all orgs and the count of those it leaves out.
  function timelineTable(rows, globalEnd, hidden) {
    const body = $("#plot-timeline-rows");
    if (!body) return;
    const cell = (at) => (at ? `<time datetime="${new Date(at).toISOString()}">${esc(full(at))}</time>` : "");
    const lines = rows.map((r) => `<tr><th scope="row">${esc(r.slug)}</th><td>${r.held ? "held" : r.end ? cell(r.end) : "no ETA"}</td><td>${cell(r.after)}</td></tr>`);
    if (globalEnd) lines.push(`<tr><th scope="row">all orgs</th><td>${cell(globalEnd)}</td><td></td></tr>`);
    if (hidden) lines.push(`<tr><td colspan="3">and ${hidden} more orgs clearing sooner (see the org table)</td></tr>`);
    body.innerHTML = lines.length ? lines.join("") : `<tr><td colspan="3">no backlog</td></tr>`;
  }

  function linePlot(svg, title, series) {
    // The legend has a band of its own above the plot area (`top`), never drawn over the data.
    const W = widthOf(svg), H = 164, left = 40, right = 8, top = 22, bottom = 18;
    const samples = state.samples || [];
    const parts = [];
    plotTable($(`#${svg.id}-numbers tbody`), series, samples);
    if (samples.length < 2) {
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      svg.setAttribute("height", H);
      svg.innerHTML = `<text x="${left}" y="${H / 2}">waiting for replans…</text>`;
      svg.setAttribute("aria-label", `${title}: waiting for replans.`);
      return;
    }
    const ts = samples.map((s) => Date.parse(s.at));
    const tMin = ts[0], tMax = Math.max(ts[ts.length - 1], tMin + 1000);
    const yMax = Math.max(1, ...series.flatMap((s) => samples.map(s.get)));
    const x = (t) => left + ((t - tMin) / (tMax - tMin)) * (W - left - right);
    const y = (v) => top + (1 - v / yMax) * (H - top - bottom);
    for (const v of axisTicks(yMax, 4)) parts.push(`<line class="grid-line" x1="${left}" x2="${W - right}" y1="${y(v)}" y2="${y(v)}"/><text x="${left - 4}" y="${y(v) + 3}" text-anchor="end">${v.toLocaleString()}</text>`);
    parts.push(`<text x="${left}" y="${H - 4}">${esc(clock(samples[0].at))}</text><text x="${W - right}" y="${H - 4}" text-anchor="end">${esc(clock(samples[samples.length - 1].at))}</text>`);
    for (const s of series) {
      const pts = samples.map((p, i) => `${x(ts[i]).toFixed(1)},${y(s.get(p)).toFixed(1)}`);
      if (s.area) parts.push(`<path d="M${x(ts[0]).toFixed(1)},${y(0)} L${pts.join(" L")} L${x(ts[ts.length - 1]).toFixed(1)},${y(0)} Z" fill="${s.colour}" opacity=".25"/>`);
      parts.push(`<polyline points="${pts.join(" ")}" fill="none" stroke="${s.colour}" stroke-width="1.5"${s.step ? ' stroke-dasharray="4 3"' : ""}/>`);
    }
    series.forEach((s, i) => parts.push(`<rect class="legend" x="${left + 6 + i * 90}" y="4" width="8" height="8" fill="${s.colour}"/><text class="legend" x="${left + 18 + i * 90}" y="12">${esc(s.name)}</text>`));
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("height", H);
    svg.innerHTML = parts.join("");
    // The plot's text alternative, with the numbers it shows (kept current with each drawing).
    const last = samples[samples.length - 1];
    const said = series.map((s) => `${s.name} ${s.get(last).toLocaleString()} now (lowest ${Math.min(...samples.map(s.get)).toLocaleString()}, highest ${Math.max(...samples.map(s.get)).toLocaleString()})`);
    svg.setAttribute("aria-label", `${title}, ${clock(samples[0].at)} to ${clock(last.at)}: ${said.join("; ")}.`);
  }

  // A line plot's numbers as a table (its <details>, a keyboard opens; only the body is redrawn, so an
  // open one stays open), newest first: at most PLOT_TABLE_ROWS samples, evenly spread over the plot's
  // span, the newest and the oldest always among them; its last row says how many it shows of how many.
  const PLOT_TABLE_ROWS = 12;
  function plotTable(body, series, samples) {
    if (!body) return;
    const columns = series.length + 1;
    if (samples.length < 2) {
      body.innerHTML = `<tr><td colspan="${columns}">waiting for replans…</td></tr>`;
      return;
    }
    const step = Math.max(1, (samples.length - 1) / (PLOT_TABLE_ROWS - 1));
    const picked = [];
    for (let i = samples.length - 1; i > 0; i -= step) picked.push(samples[Math.round(i)]);
    picked.push(samples[0]);
    const shown = [...new Set(picked)];
    const lines = shown.map((sample) => `<tr><th scope="row"><time datetime="${esc(sample.at)}" data-clock-only>${esc(clock(sample.at))}</time></th>`
      + series.map((s) => `<td>${s.get(sample).toLocaleString()}</td>`).join("") + "</tr>");
    if (shown.length < samples.length) lines.push(`<tr><td colspan="${columns}">${shown.length} of the plot's ${samples.length} samples, evenly spread</td></tr>`);
    body.innerHTML = lines.join("");
  }

  const drawDepth = () => linePlot($("#plot-depth"), "Queued and running charts over time", [
    { name: "queued", colour: "#4aa3ff", get: (s) => s.queued, area: true },
    { name: "running", colour: "#3ecf8e", get: (s) => s.running },
  ]);
  const drawBudget = () => linePlot($("#plot-budget"), "Cost in use and budget over time", [
    { name: "cost in use", colour: "#3ecf8e", get: (s) => s.cost_in_use, area: true },
    { name: "budget", colour: "#f5b942", get: (s) => s.budget, step: true },
  ]);

  // --- live updates over the WebSocket --------------------------------------------------------
  const live = (function () {
    const conn = $("#conn");
    let socket = null;
    let attempt = 0;
    let pingTimer = null;
    let pongDeadline = null;
    let connected = false;

    function status(kind, text) {
      conn.className = "conn conn-" + kind;
      conn.textContent = text;
      document.body.dataset.live = kind;
    }

    function connect() {
      status(attempt ? "reconnecting" : "connecting", attempt ? "reconnecting…" : "connecting…");
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + "/ws/dashboard/");
      socket.onopen = () => {
        attempt = 0;
        status("live", "live");
        // Resync: whatever happened while we were away. On the first open this brings the org table
        // too (the page leaves it out to paint sooner): read after the socket joined, it misses no
        // change, and it is fetched once.
        want(ALL);
        connected = true;
        pingTimer = setInterval(ping, 15000);
      };
      socket.onmessage = (e) => {
        const message = JSON.parse(e.data);
        if (message.type === "pong") { clearTimeout(pongDeadline); pongDeadline = null; return; }
        if (message.type !== "event") return;
        const parts = REFETCH[message.kind] || ALL;
        // An org's own change moves its row only (a replan, a dispatch... move every row).
        want(message.kind === "org" && message.org != null ? parts.map((p) => (p === "orgs" ? "org:" + message.org : p)) : parts);
      };
      socket.onclose = (e) => {
        // A page whose socket never opened still shows its header and org table (it is not live, and
        // says so).
        if (!connected && attempt === 0) want(["summary", "orgs"]);
        clearInterval(pingTimer);
        clearTimeout(pongDeadline);
        pongDeadline = null;
        socket = null;
        attempt += 1;
        // Exponential backoff with jitter, at most 10 s; a refusal (signed out) retries slowly.
        const refused = e.code === 4403 || e.code === 4401; // not staff, or logged out
        const base = refused ? 30000 : Math.min(10000, 300 * Math.pow(2, attempt - 1));
        const delay = base * (0.6 + Math.random() * 0.4);
        status(refused ? "refused" : "reconnecting", refused ? "not allowed: sign in again" : `reconnecting in ${Math.ceil(delay / 1000)}s`);
        setTimeout(connect, delay);
      };
    }

    // A socket that stops answering is dead even if the browser has not noticed: close and redial.
    function ping() {
      if (!socket || socket.readyState !== WebSocket.OPEN) return;
      socket.send(JSON.stringify({ type: "ping" }));
      if (!pongDeadline) pongDeadline = setTimeout(() => socket && socket.close(), 10000);
    }

    return { connect };
  })();

  // --- rescue: the least change that clears the at-risk charts (POST /api/v1/scheduler/rescue/) -
  // "Find" previews it (nothing applied); "Apply" asks for the same search with a reason and the
  // levers the preview read (searched_from), which the server refuses with a 409 if one moved since.
  const rescue = (function () {
    let found = null;
    const url = "/api/v1/scheduler/rescue/";
    const orgOf = () => $("#form-rescue [name=org]").value || null;

    function describe(change) {
      const parts = [];
      for (const [slug, weight] of Object.entries(change.weights || {})) parts.push(`${slug}'s weight to ${weight}`);
      if (change.budget != null) parts.push(`the budget to ${change.budget}`);
      const charts = (change.priorities || []).map((p) => "#" + p.chart);
      if (charts.length) parts.push(`chart${charts.length > 1 ? "s" : ""} ${charts.join(", ")} to the high tier`);
      return parts.length ? parts.join(", ") : "no change";
    }

    function render() {
      const box = $("#rescue-result");
      box.hidden = !found;
      if (!found) return;
      const cleared = found.at_risk_after === 0 ? "clears every at-risk chart" : `leaves ${found.at_risk_after} at risk (the least)`;
      $("#rescue-change").textContent = `${describe(found.change)}: ${found.at_risk_before} at risk, ${cleared}.`;
      $("#rescue-apply").disabled = !found.levers;
      const rows = Object.entries(found.orgs || {}).filter(([, r]) => r.before.at_risk || r.after.at_risk || r.before.late);
      $("#rescue-orgs tbody").innerHTML = rows.map(([slug, r]) =>
        `<tr data-org="${esc(slug)}"><td>${esc(slug)}</td><td class="num">${r.before.at_risk}</td><td class="num">${r.after.at_risk}</td>` +
        `<td class="num">${r.before.late}</td><td>${timeCell(r.before.clear)}</td><td>${timeCell(r.after.clear)}</td></tr>`).join("");
    }

    async function find(e) {
      e.preventDefault();
      found = await api("POST", url, { org: orgOf() }, $("#rescue-err"));
      render();
    }

    async function apply() {
      if (!found) return;
      const reason = $("#rescue-reason").value.trim();
      if (!reason) { $("#rescue-err").textContent = "reason: say why the rescue is applied"; return; }
      const body = { org: found.org, apply: true, reason, searched_from: found.searched_from };
      const done = await api("POST", url, body, $("#rescue-err"));
      if (!done) return;
      found = null;
      render();
      $("#rescue-reason").value = "";
      toast(`rescue applied: ${describe(done.change)}`, true);
    }

    $("#form-rescue").addEventListener("submit", find);
    $("#rescue-apply").addEventListener("click", apply);
    return { found: () => found };
  })();
  void rescue;

  // --- start ----------------------------------------------------------------------------------
  // The tables came with the page but the header and the org table, which come with the socket's
  // first resync; the queue and the plots are drawn from the inlined JSON. The page is ready once the
  // org table is in.
  queueView.seed(state.queue);
  performance.mark("queue-painted");
  // The rest once htmx has run too (it comes after this script, so as not to hold the queue back).
  document.addEventListener("DOMContentLoaded", () => {
    ticks(document);
    drawDepth();
    drawBudget();
    live.connect();
  });
  function painted() {
    document.body.dataset.ready = "1";
    performance.mark("dashboard-painted");
  }

  // Relative times and elapsed clocks move every second without a refetch.
  setInterval(() => ticks(document), 1000);
  window.addEventListener("resize", () => { widths.clear(); drawTimeline(); drawDepth(); drawBudget(); });
})();
