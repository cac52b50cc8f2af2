// The operators' dashboard: paints the inlined first state at once, then keeps itself current from
// small WebSocket hints ("org 3 changed") by refetching only the parts a hint names. The socket
// reconnects with backoff and every (re)connect refetches everything, so nothing stays stale after
// a server restart or a Redis blip. Plots are hand-drawn SVG; nothing is loaded from elsewhere.
"use strict";

(function () {
  const ROW_H = 28;
  const TIMELINE_ROWS = 40;
  const BLOCK = 100;
  const OVERSCAN = 10;
  const ALL_PARTS = ["summary", "orgs", "inflight", "outside", "events", "samples", "meta"];
  // Which parts each hint's kind can have moved (the queue is refetched for its visible rows only).
  const REFETCH = {
    org: ["summary", "orgs", "outside", "events"],
    config: ["summary", "events"],
    provider: ["meta", "events", "orgs"],
    chart: ["summary", "orgs", "inflight", "outside", "events", "queue"],
    charts: ["summary", "orgs", "inflight", "outside", "events", "queue"],
    plan: ["summary", "orgs", "inflight", "outside", "samples", "queue"],
    dispatch: ["summary", "orgs", "inflight", "events", "queue"],
    reconcile: ["summary", "orgs", "inflight", "events"],
  };

  const $ = (sel, root) => (root || document).querySelector(sel);
  const csrf = $('meta[name="csrf-token"]').content;
  const state = JSON.parse($("#dashboard-initial").textContent);
  let skew = 0; // server clock minus client clock, in ms

  // --- formatting ---------------------------------------------------------------------------
  const esc = (v) => String(v == null ? "" : v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const now = () => Date.now() + skew;
  function dur(seconds) {
    const s = Math.abs(seconds);
    if (s < 60) return Math.round(s) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s < 600 ? String(Math.round(s % 60)).padStart(2, "0") + "s" : "");
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
  }
  function rel(iso) {
    if (!iso) return "–";
    const d = (Date.parse(iso) - now()) / 1000;
    if (Math.abs(d) < 1) return "now";
    return d > 0 ? "in " + dur(d) : dur(d) + " ago";
  }
  const clock = (iso) => (iso ? new Date(iso).toLocaleTimeString([], { hour12: false }) : "–");
  const timeCell = (iso) => `<span title="${esc(iso ? new Date(iso).toLocaleString() : "not planned")}" data-rel="${esc(iso || "")}">${esc(rel(iso))}</span>`;
  // The ETA with its p10-p90 band (from the spread of past durations) when the plan has one.
  const etaCell = (r) => {
    if (!r.eta_low || !r.eta_high || r.eta_low === r.eta_high) return timeCell(r.eta);
    const band = `p10-p90: ${new Date(r.eta_low).toLocaleString()} to ${new Date(r.eta_high).toLocaleString()}`;
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

  function errorText(body, status) {
    if (body && typeof body === "object") {
      return Object.entries(body).map(([field, messages]) => (field === "detail" ? "" : field + ": ") + [].concat(messages).join("; ")).join(" · ");
    }
    return "HTTP " + status;
  }

  // POST one lever; shows the service's message next to the control (errEl) and as a toast.
  async function pull(path, body, errEl) {
    if (errEl) errEl.textContent = "";
    let response;
    try {
      response = await fetch("/dashboard/" + path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
        body: JSON.stringify(body || {}),
      });
    } catch (error) {
      const text = "server unreachable: " + error.message;
      if (errEl) errEl.textContent = text;
      toast(text);
      return null;
    }
    let data = null;
    try { data = await response.json(); } catch (error) { data = null; }
    if (!response.ok) {
      const text = errorText(data, response.status);
      if (errEl) errEl.textContent = text;
      toast(text);
      return null;
    }
    return data || {};
  }

  // Input text to a lever value: "" is null (no cap), a number is a number, anything else goes as
  // typed so that the service names the field and the bad value.
  function value(text) {
    const t = String(text).trim();
    if (t === "") return null;
    return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
  }

  // --- refetching -----------------------------------------------------------------------------
  const pending = new Set();
  let flushTimer = null;
  let flushing = false;

  let lastFlush = 0;
  // Hints are coalesced: wait 40 ms for more, and refetch at most five times a second per page, so a
  // burst of submissions costs the server a few refetches, not one per chart.
  function want(parts) {
    parts.forEach((p) => pending.add(p));
    if (!flushTimer) flushTimer = setTimeout(flush, Math.max(40, lastFlush + 200 - Date.now()));
  }

  async function flush() {
    flushTimer = null;
    if (flushing) { flushTimer = setTimeout(flush, 60); return; }
    lastFlush = Date.now();
    const parts = [...pending];
    pending.clear();
    if (!parts.length) return;
    flushing = true;
    try {
      const jobs = [];
      const stateParts = parts.filter((p) => p !== "queue");
      if (stateParts.length) {
        jobs.push(getJSON("/dashboard/state/?parts=" + stateParts.join(",")).then((data) => {
          Object.assign(state, data);
          render(stateParts);
        }));
      }
      if (parts.includes("queue")) jobs.push(queueView.reload());
      await Promise.all(jobs);
    } catch (error) {
      parts.forEach((p) => pending.add(p)); // try again on the next hint or reconnect
    } finally {
      flushing = false;
    }
  }

  function render(parts) {
    if (parts.includes("summary")) renderSummary();
    if (parts.includes("orgs")) { renderOrgs(); renderSelects(); }
    if (parts.includes("inflight")) renderInflight();
    if (parts.includes("outside")) renderOutside();
    if (parts.includes("events")) renderEvents();
    if (parts.includes("meta")) { renderProviders(); renderSelects(); }
    if (parts.includes("samples") || parts.includes("summary")) { drawDepth(); drawBudget(); }
    if (parts.includes("orgs") || parts.includes("summary")) drawTimeline();
  }

  // --- summary ------------------------------------------------------------------------------
  function renderSummary() {
    const s = state.summary;
    skew = Date.parse(s.now) - Date.now();
    $("#budget-use").textContent = s.cost_in_use;
    $("#budget-total").textContent = s.budget;
    const bar = $("#budget-bar");
    bar.style.width = Math.min(100, (100 * s.cost_in_use) / Math.max(1, s.budget)) + "%";
    bar.classList.toggle("full", s.cost_in_use >= s.budget);
    $("#count-queued").textContent = s.queued.toLocaleString();
    $("#count-retry").textContent = s.retry_wait.toLocaleString();
    $("#count-paused").textContent = s.paused.toLocaleString();
    $("#count-running").textContent = s.running.toLocaleString();
    $("#global-clear").innerHTML = timeCell(s.global_clear);
    $("#planned-at").innerHTML = timeCell(s.planned_at);
    const budgetInput = $("#form-budget [name=budget]");
    setInput(budgetInput, s.budget);
    const policy = $("#form-policy [name=policy]");
    if (!policy.options.length) {
      policy.innerHTML = s.policies.map((p) => `<option value="${esc(p.value)}">${esc(p.label)}</option>`).join("");
    }
    setInput(policy, s.policy);
    setInput($("#form-policy [name=quantum]"), s.quantum);
  }

  // Refresh an input from the server unless the operator is editing it.
  function setInput(input, v) {
    if (document.activeElement === input || input.dataset.dirty) return;
    input.value = v == null ? "" : v;
  }
  document.addEventListener("input", (e) => { if (e.target.matches("input, select")) e.target.dataset.dirty = "1"; });

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

    function paint() {
      const view = visible();
      fill(view);
      const last = Math.min(view.last, total - 1);
      const html = [];
      for (let i = view.first; i <= last; i++) {
        const row = rows.get(i);
        html.push(row ? queueRow(row, i) : `<div class="vt-row loading" role="row"><span class="pos">${i}</span><span>…</span></div>`);
      }
      rowsEl.style.transform = `translateY(${view.first * ROW_H}px)`;
      rowsEl.innerHTML = html.join("");
    }

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

    function queueRow(r, i) {
      const state = `<span class="badge reason${r.state === "retry_wait" ? " retry_wait" : ""}" data-reason="${esc(r.waiting_reason)}" title="${esc(waitingDetail(r))}">${esc(r.waiting_reason || "starting")}</span>`;
      const hp = r.high_priority ? ` <span class="badge hp" title="high priority">★</span>` : "";
      return `<div class="vt-row" role="row" data-chart="${r.id}">
        <span class="pos">${r.position != null ? r.position : i}</span>
        <span title="${esc(r.external_id)} · priority ${r.priority}">${esc(r.external_id)}${hp}</span>
        <span>${esc(r.org)}</span><span>${esc(r.workflow)}</span><span>${r.cost}</span><span>${state}</span>
        <span>${timeCell(r.predicted_start)}</span><span>${etaCell(r)}</span>
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

    return {
      seed(page) { generation++; rows = new Map(); requested = new Set([0]); accept(page, 0, rows); paint(); },
      // The plan moved: refetch just the rows on screen in one request, keeping the scroll position.
      reload() {
        const gen = ++generation;
        const view = visible();
        const limit = Math.min(500, view.last - view.first + 1);
        return getJSON(url(view.first, limit)).then((page) => {
          if (gen !== generation) return;
          rows = new Map();
          requested = new Set();
          accept(page, view.first, rows);
          paint();
        });
      },
      setOrg(slug) { org = slug; scroller.scrollTop = 0; return this.reload(); },
      jump(position) { scroller.scrollTop = position * ROW_H; paint(); },
    };
  })();

  $("#queue-org").addEventListener("change", (e) => queueView.setOrg(e.target.value));
  $("#queue-jump").addEventListener("change", (e) => queueView.jump(Math.max(0, parseInt(e.target.value, 10) || 0)));

  async function chartLever(button) {
    const row = button.closest("[data-chart]");
    const id = row.dataset.chart;
    const act = button.dataset.act;
    if (act === "cancel" && !confirm("Cancel chart " + id + "?")) return;
    const body = act === "priority" ? { high_priority: button.dataset.hp === "1" } : {};
    button.disabled = true;
    const ok = await pull(`levers/charts/${id}/${act}/`, body, null);
    button.disabled = false;
    if (!ok) return;
    row.classList.add("ok-flash");
    // The broadcast refreshes every open dashboard; this one does not wait for it to see its own change.
    want(["queue"]);
  }
  document.addEventListener("click", (e) => {
    const button = e.target.closest("[data-chart] button[data-act]");
    if (button) chartLever(button);
  });

  // --- outside the plan, in flight ------------------------------------------------------------
  function renderOutside() {
    const o = state.outside;
    $("#outside-total").textContent = o.total.toLocaleString();
    $("#outside-rows").innerHTML = o.rows.map((r) => `<tr data-chart="${r.id}">
      <td>${esc(r.external_id)}</td><td>${esc(r.org)}</td><td>${esc(r.workflow)}</td><td>${r.cost}</td>
      <td>${r.held ? '<span class="badge held">org held</span>' : '<span class="badge paused">paused</span>'}</td>
      <td class="levers">${r.held ? "" : '<button data-act="resume" title="Resume">▶</button>'}
        <button data-act="cancel" class="danger" title="Cancel">✕</button></td></tr>`).join("");
  }

  function renderInflight() {
    const f = state.inflight;
    $("#inflight-total").textContent = f.total.toLocaleString();
    $("#inflight-rows").innerHTML = f.rows.map((r) => `<tr data-chart="${r.id}">
      <td>${esc(r.external_id)} ${r.attempt > 1 ? `<small>attempt ${r.attempt}</small>` : ""}</td>
      <td>${esc(r.org)}</td><td>${esc(r.workflow)}</td><td>${r.cost}</td>
      <td data-started="${esc(r.started_at || "")}" data-expected="${r.expected}" data-state="${esc(r.state)}">${progress(r.started_at, r.expected, r.state)}</td>
      <td class="levers"><button data-act="cancel" class="danger" title="Cancel">✕</button></td></tr>`).join("");
  }

  function progress(startedAt, expected, st) {
    const elapsed = startedAt ? Math.max(0, (now() - Date.parse(startedAt)) / 1000) : 0;
    const share = expected > 0 ? Math.min(1, elapsed / expected) : 0;
    const badge = st === "dispatching" ? '<span class="badge dispatching">starting</span> ' : "";
    return `${badge}${dur(elapsed)} / ${dur(expected)}<svg class="progress" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true"><rect class="${elapsed > expected ? "over" : ""}" width="${(share * 100).toFixed(1)}" height="6"></rect></svg>`;
  }

  // --- orgs -----------------------------------------------------------------------------------
  function orgRow(o) {
    const wf = (state.meta && state.meta.workflows) || [];
    const costs = Object.entries(o.costs).map(([w, c]) => `<span class="tag">${esc(w)}=${c}</span>`).join(" ");
    return `<tr data-org="${esc(o.slug)}">
      <td><b>${esc(o.slug)}</b> <small>${esc(o.name)}</small></td>
      <td><form class="lever" data-lever="weight"><input name="weight" aria-label="weight of ${esc(o.slug)}" inputmode="numeric">
        <button type="submit">Set</button><button type="button" class="ghost" data-preview="weight">?</button></form></td>
      <td><button type="button" data-hold></button></td>
      <td><form class="lever" data-lever="cap"><input name="max_concurrency" placeholder="none" aria-label="cap of ${esc(o.slug)}" inputmode="numeric"><button type="submit">Set</button></form></td>
      <td><form class="lever" data-lever="queue-limit"><input name="queue_limit" placeholder="none" aria-label="queue limit of ${esc(o.slug)}" inputmode="numeric"><button type="submit">Set</button></form></td>
      <td><form class="lever costs" data-lever="cost"><span data-k="costs">${costs}</span>
        <select name="workflow" aria-label="workflow">${wf.map((w) => `<option value="${esc(w.name)}">${esc(w.name)} (${w.default_cost})</option>`).join("")}</select>
        <input name="cost" placeholder="default" aria-label="cost for ${esc(o.slug)}" inputmode="numeric">
        <button type="submit">Set</button><button type="button" class="ghost" data-preview="cost">?</button></form></td>
      <td class="num" data-k="queued"></td><td class="num" data-k="paused"></td><td class="num" data-k="running"></td>
      <td class="num" data-k="cost_in_use"></td><td data-k="clear_at"></td>
      <td class="err" data-err></td></tr>`;
  }

  const orgSignatures = new Map(); // slug -> the row's data when last drawn: unchanged rows are skipped

  function renderOrgs() {
    const body = $("#org-rows");
    const slugs = state.orgs.map((o) => o.slug).join(",");
    const wfKey = ((state.meta && state.meta.workflows) || []).map((w) => w.name + w.default_cost).join(",");
    if (body.dataset.slugs !== slugs || body.dataset.wf !== wfKey) {
      body.innerHTML = state.orgs.map(orgRow).join("");
      body.dataset.slugs = slugs;
      body.dataset.wf = wfKey;
      orgSignatures.clear();
    }
    state.orgs.forEach((o, index) => {
      const signature = JSON.stringify(o);
      if (orgSignatures.get(o.slug) === signature) return;
      orgSignatures.set(o.slug, signature);
      const tr = body.rows[index];
      tr.classList.toggle("is-held", o.held);
      setInput(tr.querySelector("[name=weight]"), o.weight);
      setInput(tr.querySelector("[name=max_concurrency]"), o.max_concurrency);
      setInput(tr.querySelector("[name=queue_limit]"), o.queue_limit);
      const hold = tr.querySelector("[data-hold]");
      hold.textContent = o.held ? "Release" : "Hold";
      hold.className = o.held ? "warn" : "";
      hold.title = o.held ? `held; release restores weight ${o.weight_before_hold || 1}` : "weight → 0: nothing of this org dispatches";
      tr.dataset.held = o.held ? "1" : "0";
      for (const k of ["queued", "paused", "running", "cost_in_use"]) tr.querySelector(`[data-k=${k}]`).textContent = o[k].toLocaleString();
      tr.querySelector("[data-k=clear_at]").innerHTML = o.held
        ? '<span class="badge held">held</span>'
        : etaCell({ eta: o.clear_at, eta_low: o.clear_low, eta_high: o.clear_high });
      tr.querySelector("[data-k=costs]").innerHTML = Object.entries(o.costs).map(([w, c]) => `<span class="tag">${esc(w)}=${c}</span>`).join(" ");
    });
  }

  $("#org-rows").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    const tr = form.closest("tr");
    const slug = tr.dataset.org;
    const kind = form.dataset.lever;
    const input = form.querySelector("input");
    const body = { [input.name]: value(input.value) };
    if (kind === "cost") body.workflow = form.querySelector("[name=workflow]").value;
    const ok = await pull(`levers/orgs/${encodeURIComponent(slug)}/${kind}/`, body, tr.querySelector("[data-err]"));
    if (ok) { delete input.dataset.dirty; tr.classList.add("ok-flash"); setTimeout(() => tr.classList.remove("ok-flash"), 1000); }
  });
  $("#org-rows").addEventListener("click", async (e) => {
    const tr = e.target.closest("tr");
    if (!tr) return;
    const slug = tr.dataset.org;
    if (e.target.matches("[data-hold]")) {
      await pull(`levers/orgs/${encodeURIComponent(slug)}/${tr.dataset.held === "1" ? "release" : "hold"}/`, {}, tr.querySelector("[data-err]"));
    } else if (e.target.matches("[data-preview=weight]")) {
      whatIf.add({ kind: "weight", org: slug, value: value(tr.querySelector("[name=weight]").value) }, true);
    } else if (e.target.matches("[data-preview=cost]")) {
      const form = e.target.closest("form");
      whatIf.add({ kind: "cost", org: slug, workflow: form.querySelector("[name=workflow]").value, value: value(form.querySelector("[name=cost]").value) }, true);
    }
  });

  function renderSelects() {
    const orgOptions = state.orgs.map((o) => `<option value="${esc(o.slug)}">${esc(o.slug)}</option>`).join("");
    const fill = (select, html) => {
      if (select.dataset.html === html) return;
      const current = select.value;
      select.innerHTML = html;
      select.dataset.html = html;
      if ([...select.options].some((option) => option.value === current)) select.value = current;
    };
    fill($("#queue-org"), '<option value="">all orgs</option>' + orgOptions);
    fill($("#form-whatif [name=org]"), orgOptions);
    fill($("#form-provider [name=org]"), '<option value="">everyone</option>' + orgOptions);
    const wf = (state.meta && state.meta.workflows) || [];
    fill($("#form-whatif [name=workflow]"), wf.map((w) => `<option value="${esc(w.name)}">${esc(w.name)}</option>`).join(""));
    const providers = (state.meta && state.meta.providers) || [];
    fill($("#form-provider [name=provider]"), providers.map((p) => `<option value="${esc(p.slug)}">${esc(p.name)}</option>`).join(""));
  }

  // --- scheduler levers -------------------------------------------------------------------------
  $("#form-budget").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = e.target.budget;
    if (await pull("levers/budget/", { budget: value(input.value) }, $("#form-budget [data-err]"))) delete input.dataset.dirty;
  });
  $("#form-budget [data-preview]").addEventListener("click", () => whatIf.add({ kind: "budget", value: value($("#form-budget [name=budget]").value) }, true));
  $("#form-policy").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { policy: e.target.policy.value };
    const quantum = value(e.target.quantum.value);
    if (quantum !== null) body.quantum = quantum;
    if (await pull("levers/policy/", body, $("#form-policy [data-err]"))) {
      delete e.target.policy.dataset.dirty;
      delete e.target.quantum.dataset.dirty;
    }
  });

  // --- providers ------------------------------------------------------------------------------
  function renderProviders() {
    const providers = (state.meta && state.meta.providers) || [];
    $("#provider-list").innerHTML = providers.map((p) => `<li><b>${esc(p.name)}</b> ${p.pauses.length ? "" : '<small>running</small>'}
      ${p.pauses.map((x) => `<div>paused for ${esc(x.org || "everyone")} until ${esc(clock(x.until))} <small>(${esc(rel(x.until))}, ${esc(x.by)}${x.reason ? ": " + esc(x.reason) : ""})</small>
        <button type="button" data-resume="${esc(p.slug)}" data-org="${esc(x.org || "")}">Resume</button></div>`).join("")}</li>`).join("") || "<li><small>no providers</small></li>";
  }
  // A pause is usually for a few minutes: offer a quarter of an hour from now, in local time.
  (function () {
    const soon = new Date(Date.now() + 15 * 60000);
    soon.setSeconds(0, 0);
    $("#form-provider [name=until]").value = new Date(soon - soon.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  })();
  $("#form-provider").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = e.target;
    const local = f.until.value;
    const until = local ? new Date(local) : null;
    const body = { until: until && !isNaN(until) ? until.toISOString() : local, reason: f.reason.value };
    if (f.org.value) body.org = f.org.value;
    if (!f.provider.value) { $("#form-provider [data-err]").textContent = "provider: pick one"; return; }
    await pull(`levers/providers/${encodeURIComponent(f.provider.value)}/pause/`, body, $("#form-provider [data-err]"));
  });
  $("#provider-list").addEventListener("click", (e) => {
    const b = e.target.closest("[data-resume]");
    if (!b) return;
    const body = b.dataset.org ? { org: b.dataset.org } : {};
    pull(`levers/providers/${encodeURIComponent(b.dataset.resume)}/resume/`, body, $("#form-provider [data-err]"));
  });

  // --- events ---------------------------------------------------------------------------------
  function renderEvents() {
    $("#events").innerHTML = state.events.map((e) => `<li class="k-${esc(e.kind)}"><time datetime="${esc(e.at)}">${esc(clock(e.at))}</time>
      ${e.org ? `<b>${esc(e.org)}</b> ` : ""}${esc(e.text)} <span class="actor">· ${esc(e.actor)}${e.reason ? " · " + esc(e.reason) : ""}</span></li>`).join("");
  }

  // --- what-if --------------------------------------------------------------------------------
  const whatIf = (function () {
    let changes = [];
    let preview = null;
    const label = (c) => c.kind === "budget" ? `budget → ${c.value}` : c.kind === "cost" ? `${c.org}/${c.workflow} cost → ${c.value == null ? "default" : c.value}` : c.kind === "weight" ? `${c.org} weight → ${c.value}` : c.kind === "cap" ? `${c.org} cap → ${c.value == null ? "none" : c.value}` : `${c.kind} ${c.org}`;

    function payload() {
      const out = {};
      for (const c of changes) {
        if (c.kind === "weight") (out.weights = out.weights || {})[c.org] = c.value;
        else if (c.kind === "cap") (out.caps = out.caps || {})[c.org] = c.value;
        else if (c.kind === "budget") out.budget = c.value;
        else if (c.kind === "cost") (out.costs = out.costs || []).push({ org: c.org, workflow: c.workflow, cost: c.value });
        else (out[c.kind] = out[c.kind] || []).push(c.org);
      }
      return out;
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
      const data = await pull("what-if/", { changes: payload() }, $("#whatif-err"));
      preview = data ? data.preview : null;
      renderResult();
    }

    async function apply() {
      for (const c of [...changes]) {
        let path, body;
        if (c.kind === "budget") { path = "levers/budget/"; body = { budget: c.value }; }
        else if (c.kind === "weight") { path = `levers/orgs/${encodeURIComponent(c.org)}/weight/`; body = { weight: c.value }; }
        else if (c.kind === "cost") { path = `levers/orgs/${encodeURIComponent(c.org)}/cost/`; body = { workflow: c.workflow, cost: c.value }; }
        else if (c.kind === "cap") { path = `levers/orgs/${encodeURIComponent(c.org)}/cap/`; body = { max_concurrency: c.value }; }
        else { path = `levers/orgs/${encodeURIComponent(c.org)}/${c.kind}/`; body = {}; }
        if (!(await pull(path, body, $("#whatif-err")))) return;
        changes.shift();
        renderChanges();
      }
      preview = null;
      renderResult();
      toast("applied", true);
    }

    $("#form-whatif").addEventListener("submit", (e) => {
      e.preventDefault();
      const f = e.target;
      const c = { kind: f.kind.value };
      if (c.kind !== "budget") c.org = f.org.value;
      if (c.kind === "cost") c.workflow = f.workflow.value;
      if (["weight", "budget", "cost", "cap"].includes(c.kind)) c.value = value(f.value.value);
      add(c, false);
    });
    $("#whatif-changes").addEventListener("click", (e) => {
      const b = e.target.closest("[data-remove]");
      if (b) { changes.splice(Number(b.dataset.remove), 1); renderChanges(); }
    });
    $("#whatif-preview").addEventListener("click", run);
    $("#whatif-apply").addEventListener("click", apply);
    $("#whatif-clear").addEventListener("click", () => { changes = []; preview = null; renderChanges(); renderResult(); });

    function add(change, andRun) {
      // A new change replaces an earlier one of the same lever.
      changes = changes.filter((c) => !(c.kind === change.kind && c.org === change.org && c.workflow === change.workflow));
      if (change.kind === "hold") changes = changes.filter((c) => !(c.kind === "release" && c.org === change.org));
      if (change.kind === "release") changes = changes.filter((c) => !(c.kind === "hold" && c.org === change.org));
      changes.push(change);
      renderChanges();
      if (andRun) run();
    }

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
    const rows = state.orgs
      .filter((o) => o.held || o.clear_at || o.queued || o.running)
      .map((o) => ({ slug: o.slug, held: o.held, end: o.clear_at ? Date.parse(o.clear_at) : null,
        after: preview && preview.orgs && preview.orgs[o.slug] && preview.orgs[o.slug].after ? Date.parse(preview.orgs[o.slug].after) : null }))
      .sort((a, b) => (a.held - b.held) || ((b.end || 0) - (a.end || 0)) || a.slug.localeCompare(b.slug));
    // The longest backlogs (and a few held orgs) are what an operator reads here; the rest is counted.
    const shown = rows.filter((r) => !r.held).slice(0, TIMELINE_ROWS).concat(rows.filter((r) => r.held).slice(0, 10));
    const hidden = rows.length - shown.length;
    rows.length = 0;
    rows.push(...shown);
    const globalEnd = state.summary.global_clear ? Date.parse(state.summary.global_clear) : null;
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
      else if (r.end) parts.push(`<rect x="${left}" y="${y + 2}" width="${Math.max(1, x(r.end) - left)}" height="${rowH - 4}" rx="2" fill="${colour(r.slug)}" opacity=".85"><title>${esc(r.slug)} clears ${esc(new Date(r.end).toLocaleString())}</title></rect>`);
      else parts.push(`<text x="${left + 4}" y="${y + 11}">no ETA</text>`);
      if (r.after) parts.push(`<rect class="after-bar" x="${left}" y="${y + 3}" width="${Math.max(1, x(r.after) - left)}" height="${rowH - 6}"><title>would clear ${esc(new Date(r.after).toLocaleString())}</title></rect>`);
    });
    if (globalEnd) parts.push(`<line class="clear-line" x1="${x(globalEnd)}" x2="${x(globalEnd)}" y1="${top - 4}" y2="${H}"/>`);
    if (!rows.length) parts.push(`<text x="${left}" y="${top + 10}">no backlog</text>`);
    if (hidden) parts.push(`<text x="${left}" y="${H - 4}">… and ${hidden} more orgs clearing sooner (see the org table)</text>`);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("height", H);
    svg.innerHTML = parts.join("");
  }

  function linePlot(svg, series) {
    const W = widthOf(svg), H = 150, left = 40, right = 8, top = 8, bottom = 18;
    const samples = state.samples || [];
    const parts = [];
    if (samples.length < 2) {
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      svg.setAttribute("height", H);
      svg.innerHTML = `<text x="${left}" y="${H / 2}">waiting for replans…</text>`;
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
    series.forEach((s, i) => parts.push(`<rect x="${left + 6 + i * 90}" y="${top}" width="8" height="8" fill="${s.colour}"/><text x="${left + 18 + i * 90}" y="${top + 8}">${esc(s.name)}</text>`));
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("height", H);
    svg.innerHTML = parts.join("");
  }

  const drawDepth = () => linePlot($("#plot-depth"), [
    { name: "queued", colour: "#4aa3ff", get: (s) => s.queued, area: true },
    { name: "running", colour: "#3ecf8e", get: (s) => s.running },
  ]);
  const drawBudget = () => linePlot($("#plot-budget"), [
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
        want([...ALL_PARTS, "queue"]); // resync: whatever happened while we were away
        pingTimer = setInterval(ping, 15000);
      };
      socket.onmessage = (e) => {
        const message = JSON.parse(e.data);
        if (message.type === "pong") { clearTimeout(pongDeadline); pongDeadline = null; return; }
        if (message.type !== "event") return;
        want(REFETCH[message.kind] || [...ALL_PARTS, "queue"]);
      };
      socket.onclose = (e) => {
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

  // --- start ----------------------------------------------------------------------------------
  // The queue and the header first; the org table and the plots (hundreds of rows) right after.
  renderSummary();
  queueView.seed(state.queue);
  performance.mark("queue-painted");
  setTimeout(() => {
    renderSelects();
    renderOrgs();
    renderInflight();
    renderOutside();
    renderEvents();
    renderProviders();
    drawTimeline();
    drawDepth();
    drawBudget();
    document.body.dataset.ready = "1";
    performance.mark("dashboard-painted");
    live.connect();
  }, 0);

  // Relative times and elapsed clocks move every second without a refetch.
  setInterval(() => {
    document.querySelectorAll("[data-rel]").forEach((el) => { el.textContent = rel(el.dataset.rel || null); });
    document.querySelectorAll("[data-started]").forEach((el) => {
      el.innerHTML = progress(el.dataset.started || null, Number(el.dataset.expected), el.dataset.state);
    });
  }, 1000);
  window.addEventListener("resize", () => { widths.clear(); drawTimeline(); drawDepth(); drawBudget(); });
})();
