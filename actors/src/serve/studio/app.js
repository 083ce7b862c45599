// Planwright Studio: a page to watch and steer conversations, written for this project with no
// framework and no network beyond the server's own HTTP API. Views are chosen by the URL's hash:
//   #/graphs            each assistant's graph, nodes running now lit, per-node statistics
//   #/threads           threads with status, paged, filtered by status and id prefix
//   #/thread/ID         one thread: live timeline (Gantt) and events, checkpoints with diffs,
//                       the planner's own view of the state, interrupts answered, runs steered
//   #/new               start a run of either planner
//   #/load              open a `load --report` JSON file and chart it
"use strict";

// ---------------------------------------------------------------- utilities

const $ = (sel, root = document) => root.querySelector(sel);
const SVGNS = "http://www.w3.org/2000/svg";

/** Builds an element: h("div", {class: "x", onclick: f}, child, "text", …). */
function h(tag, attrs, ...children) {
  const svg = ["svg", "g", "rect", "text", "path", "line", "polyline", "title", "circle", "polygon"].includes(tag);
  const el = svg ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const enc = encodeURIComponent;
const fmtUs = (us) => us == null ? "–" : us >= 1e6 ? (us / 1e6).toFixed(2) + " s" : us >= 1e3 ? (us / 1e3).toFixed(1) + " ms" : Math.round(us) + " µs";
const fmtMs = (ms) => fmtUs(ms * 1000);
const badge = (s) => h("span", { class: "badge " + String(s || "").toLowerCase() }, s || "–");
const pretty = (v) => JSON.stringify(v, null, 2);

function flash(message, isError) {
  const box = h("div", { class: "msg" + (isError ? " error" : ""), role: isError ? "alert" : "status" }, message);
  $("#flash").append(box);
  setTimeout(() => box.remove(), isError ? 9000 : 4000);
}

// ---------------------------------------------------------------- the API

let token = sessionStorage.getItem("planwright-token") || "";

function askToken() {
  return new Promise((resolve) => {
    const dlg = $("#token-dialog");
    $("#token-input").value = token;
    const done = (ok) => {
      if (ok) { token = $("#token-input").value.trim(); sessionStorage.setItem("planwright-token", token); }
      dlg.close();
      resolve(ok);
    };
    $("#token-ok").onclick = (e) => { e.preventDefault(); done(true); };
    $("#token-cancel").onclick = () => done(false);
    dlg.showModal();
    $("#token-input").focus();
  });
}

function headers(extra) {
  const hd = Object.assign({ Accept: "application/json" }, extra || {});
  if (token) hd.Authorization = "Bearer " + token;
  return hd;
}

class ApiError extends Error {
  constructor(status, detail) { super(`${status}: ${detail}`); this.status = status; this.detail = detail; }
}

async function errorOf(res) {
  let detail = res.statusText;
  try { const body = await res.json(); detail = body.detail || body.message || body.error || JSON.stringify(body); } catch (_) { /* not JSON */ }
  return new ApiError(res.status, detail);
}

/** Calls the API; asks for a token once on 401 and retries. */
async function api(path, opts = {}, retried = false) {
  const init = { method: opts.method || (opts.body !== undefined ? "POST" : "GET"), headers: headers(opts.body !== undefined ? { "Content-Type": "application/json" } : {}) };
  if (opts.body !== undefined) init.body = JSON.stringify(opts.body);
  const res = await fetch(path, init);
  if (res.status === 401 && !retried && await askToken()) return api(path, opts, true);
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** Starts a streamed run and feeds its events to the thread's live record. */
async function streamRun(threadId, body) {
  const live = liveFor(threadId);
  live.streaming = true;
  live.runId = null;
  live.runs += 1;
  const req = Object.assign({}, body, { stream_mode: ["events", "values"] });
  let res = await fetch(`/threads/${enc(threadId)}/runs/stream`, { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(req) });
  if (res.status === 401 && await askToken()) {
    res = await fetch(`/threads/${enc(threadId)}/runs/stream`, { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(req) });
  }
  if (!res.ok) { live.streaming = false; throw await errorOf(res); }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onStreamEvent(live, name, JSON.parse(data.join("\n")));
      }
    }
  } finally {
    live.streaming = false;
    for (const t of live.tasks.values()) if (t.running) { t.running = false; t.cut = true; }
    refreshLive(threadId, true);
  }
}

// ---------------------------------------------------------------- live runs

/** What the page has seen of each thread's runs: tasks for the timeline and the events log. */
const lives = new Map();

function liveFor(threadId) {
  if (!lives.has(threadId)) {
    lives.set(threadId, { threadId, t0: performance.now(), runs: 0, runId: null, streaming: false, tasks: new Map(), events: [], values: null, lastStep: 0 });
  }
  return lives.get(threadId);
}

function taskKey(ev) { return JSON.stringify(ev.task) + "#" + ev.attempt; }

function onStreamEvent(live, name, data) {
  const now = performance.now() - live.t0;
  if (name === "metadata") { live.runId = data.run_id; live.events.push({ t: now, kind: "metadata", data }); }
  else if (name === "values") { live.values = data; }
  else if (name === "error") { live.events.push({ t: now, kind: "error", data }); flash("run error: " + (data.message || pretty(data)), true); }
  else if (name === "events" && data.event === "message") {
    // A model's tokens: one log line per message, its text growing, not one line per token.
    const last = live.events.findLast((e) => e.kind === "message" && e.data.message_id === data.message_id);
    if (last) last.data = { ...last.data, chunk: last.data.chunk + data.chunk };
    else live.events.push({ t: now, kind: "message", data: { ...data } });
  }
  else if (name === "events") {
    live.events.push({ t: now, kind: data.event, data });
    if (data.event === "node_started") {
      live.tasks.set(taskKey(data), { node: data.node, task: data.task, attempt: data.attempt, step: live.lastStep, start: now, end: now, queue: 0, running: true });
    } else if (data.event === "node_finished") {
      const work = data.duration_us / 1000, queue = data.queued_us / 1000;
      const t = live.tasks.get(taskKey(data)) || { node: data.node, task: data.task, attempt: data.attempt, step: live.lastStep };
      // A node that stops on `interrupt` reports it as its error: that is a pause, not a failure.
      const paused = /^interrupted\b/.test(data.error || "");
      Object.assign(t, { end: now, start: now - work, queue, running: false, paused, error: paused ? null : data.error || null });
      live.tasks.set(taskKey(data), t);
    } else if (data.event === "state_updated") {
      live.lastStep = data.step;
    }
  }
  refreshLive(live.threadId, false);
}

let refreshQueued = false;
function refreshLive(threadId, final) {
  if (currentThread !== threadId) return;
  if (final) { renderLive(threadId); loadThread(threadId, { keepSelection: true }); return; }
  if (refreshQueued) return;
  refreshQueued = true;
  requestAnimationFrame(() => { refreshQueued = false; renderLive(threadId); });
}

// ---------------------------------------------------------------- routing

let currentThread = null;
let timer = null;

function route() {
  clearInterval(timer);
  timer = null;
  currentThread = null;
  const hash = (location.hash || "#/graphs").split("?")[0];
  const [, view, ...rest] = hash.split("/");
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === view) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const main = $("#view");
  main.replaceChildren();
  const arg = decodeURIComponent(rest.join("/"));
  const views = { graphs: viewGraphs, threads: viewThreads, thread: viewThread, new: viewNew, load: viewLoad };
  (views[view] || viewGraphs)(main, arg).catch((e) => { main.append(h("p", { class: "card", role: "alert" }, "Could not load this view: " + e.message)); });
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  $("#token-button").addEventListener("click", () => askToken().then((ok) => ok && route()));
  route();
});

// ---------------------------------------------------------------- graph layout

/**
 * Lays a graph out in layers: edges that close a cycle (found by a depth-first walk from
 * `__start__`) are drawn as back edges on the right; the rest decide each node's layer by the
 * longest path to it, so every forward edge points down.
 */
function layout(nodes, edges, opts = {}) {
  const W = opts.width || 150, H = opts.height || 34, GAPX = 40, GAPY = 46;
  const ids = nodes.map((n) => n.id);
  const out = new Map(ids.map((i) => [i, []]));
  for (const e of edges) if (out.has(e.source) && out.has(e.target)) out.get(e.source).push(e);
  const back = new Set(), state = new Map();
  const roots = opts.roots || [ids[0]];
  const visit = (id) => {
    state.set(id, 1);
    for (const e of out.get(id) || []) {
      const s = state.get(e.target);
      if (s === 1) back.add(e);
      else if (!s) visit(e.target);
    }
    state.set(id, 2);
  };
  for (const r of roots) if (!state.get(r)) visit(r);
  for (const id of ids) if (!state.get(id)) visit(id);
  const layer = new Map(ids.map((i) => [i, 0]));
  for (let round = 0; round < ids.length; round++) {
    let changed = false;
    for (const e of edges) {
      if (back.has(e) || !layer.has(e.source) || !layer.has(e.target)) continue;
      if (layer.get(e.target) < layer.get(e.source) + 1) { layer.set(e.target, layer.get(e.source) + 1); changed = true; }
    }
    if (!changed) break;
  }
  if (opts.lastId && layer.has(opts.lastId)) layer.set(opts.lastId, Math.max(...layer.values()) + (ids.length > 1 ? 0 : 0));
  const rows = [];
  for (const id of ids) { const l = layer.get(id); (rows[l] = rows[l] || []).push(id); }
  const widest = Math.max(1, ...rows.map((r) => (r || []).length));
  const width = widest * (W + GAPX) + 140;
  const pos = new Map();
  rows.forEach((row, l) => {
    (row || []).forEach((id, i) => {
      const x = (width - 140) / 2 - (row.length * (W + GAPX) - GAPX) / 2 + i * (W + GAPX);
      pos.set(id, { x, y: 10 + l * (H + GAPY), w: W, h: H });
    });
  });
  return { pos, back, width, height: rows.length * (H + GAPY) + 10, W, H };
}

/** Draws a laid-out graph as SVG; `decorate(id, g)` may add classes and titles to a node. */
function drawGraph(nodes, edges, opts = {}) {
  const L = layout(nodes, edges, opts);
  const svg = h("svg", { viewBox: `0 0 ${L.width} ${L.height}`, width: L.width, height: L.height, role: "img", "aria-label": opts.label || "graph" });
  const defs = document.createElementNS(SVGNS, "defs");
  defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#777"/></marker>';
  svg.append(defs);
  let backIndex = 0;
  for (const e of edges) {
    const a = L.pos.get(e.source), b = L.pos.get(e.target);
    if (!a || !b) continue;
    let d, lx, ly;
    if (L.back.has(e) || b.y <= a.y) {
      const off = 30 + 14 * (backIndex++ % 6);
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x + b.w, y2 = b.y + b.h / 2;
      const xr = Math.max(x1, x2) + off;
      d = `M ${x1} ${y1} C ${xr} ${y1}, ${xr} ${y2}, ${x2 + 2} ${y2}`;
      lx = xr - 4; ly = (y1 + y2) / 2;
    } else {
      const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y - 2;
      d = `M ${x1} ${y1} C ${x1} ${(y1 + y2) / 2}, ${x2} ${(y1 + y2) / 2}, ${x2} ${y2}`;
      lx = (x1 + x2) / 2 + 4; ly = (y1 + y2) / 2;
    }
    svg.append(h("path", { class: "edge" + (e.conditional ? " conditional" : ""), d, "marker-end": "url(#arrow)" }, h("title", {}, `${e.source} → ${e.target}${e.data ? " (" + e.data + ")" : ""}`)));
    if (e.conditional && e.data && opts.labels !== false) svg.append(h("text", { class: "edge-label", x: lx, y: ly }, e.data));
  }
  for (const n of nodes) {
    const p = L.pos.get(n.id);
    const g = h("g", { class: "node" + (n.id.startsWith("__") ? " special" : ""), "data-node": n.id, transform: `translate(${p.x},${p.y})` },
      h("rect", { width: p.w, height: p.h }),
      h("text", { x: p.w / 2, y: p.h / 2 + 5, "text-anchor": "middle" }, n.label || n.id));
    if (opts.decorate) opts.decorate(n.id, g);
    svg.append(g);
  }
  return svg;
}

// ---------------------------------------------------------------- #/graphs

async function viewGraphs(main) {
  main.append(h("h1", {}, "Graphs"));
  const assistants = await api("/assistants/search", { body: {} });
  const panels = [];
  for (const a of assistants) {
    const graph = await api(`/assistants/${enc(a.assistant_id)}/graph`);
    const svgBox = h("div", { class: "scroll-x", id: "graph-" + a.assistant_id });
    const table = h("table", { id: "nodes-" + a.assistant_id, class: "stats" },
      h("thead", {}, h("tr", {}, ["node", "runs now", "executions", "failures", "mailbox", "queue p50", "queue p99", "work p50", "work p99"].map((c, i) => h("th", { class: i ? "num" : "" }, c)))),
      h("tbody"));
    const active = h("span", { class: "muted" });
    main.append(h("section", { class: "card" },
      h("h2", {}, a.assistant_id, " ", active), h("p", { class: "muted" }, a.description || ""),
      h("div", { class: "graphs-grid" }, svgBox, h("div", { class: "scroll-x" }, table))));
    panels.push({ a, graph, svgBox, table, active });
  }
  const refresh = async () => {
    for (const p of panels) {
      let stats;
      try { stats = await api(`/assistants/${enc(p.a.assistant_id)}/nodes`); } catch (e) { p.active.textContent = "(statistics unavailable: " + e.message + ")"; continue; }
      const by = new Map(stats.nodes.map((n) => [n.node, n]));
      const liveNodes = new Set();
      for (const l of lives.values()) for (const t of l.tasks.values()) if (t.running) liveNodes.add(t.node);
      p.svgBox.replaceChildren(drawGraph(p.graph.nodes, p.graph.edges, {
        label: p.a.assistant_id + " graph",
        decorate: (id, g) => {
          const s = by.get(id);
          if ((s && (s.running > 0 || s.mailbox_depth > 0)) || liveNodes.has(id)) g.classList.add("lit");
          if (s) g.append(h("title", {}, `${id}: ${s.executions} executions, ${s.running} running, mailbox ${s.mailbox_depth}, work p50 ${fmtUs(s.work_p50_us)}, p99 ${fmtUs(s.work_p99_us)}`));
        },
      }));
      p.active.textContent = `— ${stats.active_runs} active run${stats.active_runs === 1 ? "" : "s"}`;
      p.table.tBodies[0].replaceChildren(...stats.nodes.map((s) => h("tr", { "data-node": s.node },
        h("td", {}, s.node), h("td", { class: "num" }, s.running), h("td", { class: "num" }, s.executions), h("td", { class: "num" }, s.failures),
        h("td", { class: "num" }, s.mailbox_depth), h("td", { class: "num" }, fmtUs(s.queue_p50_us)), h("td", { class: "num" }, fmtUs(s.queue_p99_us)),
        h("td", { class: "num" }, fmtUs(s.work_p50_us)), h("td", { class: "num" }, fmtUs(s.work_p99_us)))));
    }
  };
  await refresh();
  timer = setInterval(refresh, 1000);
}

// ---------------------------------------------------------------- #/threads

const PAGE = 25;

async function viewThreads(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  let offset = Number(params.get("offset") || 0);
  const status = h("select", { id: "thread-status", "aria-label": "status" }, ["", "idle", "busy", "interrupted", "error"].map((s) => h("option", { value: s }, s || "any status")));
  const prefix = h("input", { id: "thread-prefix", placeholder: "thread id starts with…", "aria-label": "thread id prefix" });
  status.value = params.get("status") || "";
  prefix.value = params.get("prefix") || "";
  const tbody = h("tbody");
  const info = h("span", { class: "muted", id: "threads-info" });
  const prev = h("button", { class: "secondary", id: "threads-prev", type: "button" }, "← Newer page");
  const next = h("button", { class: "secondary", id: "threads-next", type: "button" }, "Next page →");
  const form = h("form", { class: "row", id: "threads-filter" }, status, prefix, h("button", { type: "submit" }, "Filter"));
  main.append(h("h1", {}, "Threads"), h("div", { class: "card" }, form,
    h("table", { id: "threads-table" }, h("thead", {}, h("tr", {}, ["thread", "assistant", "status", "created", "step"].map((c) => h("th", {}, c)))), tbody),
    h("div", { class: "row pager" }, prev, next, info)));
  const load = async () => {
    const body = { limit: PAGE + 1, offset };
    if (status.value) body.status = status.value;
    if (prefix.value.trim()) body.prefix = prefix.value.trim();
    const found = await api("/threads/search", { body });
    const list = found.slice(0, PAGE);
    tbody.replaceChildren(...list.map((t) => h("tr", {},
      h("td", {}, h("a", { href: "#/thread/" + enc(t.thread_id) }, t.thread_id)),
      h("td", {}, (t.metadata && t.metadata.assistant_id) || "–"),
      h("td", {}, badge(t.status)),
      h("td", { class: "muted" }, t.created_at || ""),
      h("td", { class: "num" }, t.values && t.values.iterations !== undefined ? t.values.iterations : ""))));
    if (!list.length) tbody.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No threads here.")));
    info.textContent = `threads ${list.length ? offset + 1 : 0}–${offset + list.length}`;
    prev.disabled = offset === 0;
    next.disabled = found.length <= PAGE;
  };
  const go = () => {
    const q = new URLSearchParams({ offset: String(offset) });
    if (status.value) q.set("status", status.value);
    if (prefix.value.trim()) q.set("prefix", prefix.value.trim());
    history.replaceState(null, "", "#/threads?" + q);
    load().catch((e) => flash(e.message, true));
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); offset = 0; go(); });
  prev.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); go(); });
  next.addEventListener("click", () => { offset += PAGE; go(); });
  await load();
}

// ---------------------------------------------------------------- #/thread/ID

let threadCtx = null;

async function viewThread(main, id) {
  const threadId = id;
  currentThread = threadId;
  threadCtx = { threadId, selected: null, before: [], page: null };
  main.append(h("div", { id: "thread-view" },
    h("div", { class: "row" }, h("h1", {}, "Thread ", h("code", {}, threadId)), h("span", { id: "thread-status-badge" }), h("span", { id: "thread-assistant", class: "muted" })),
    h("div", { class: "row", id: "thread-actions" }),
    h("div", { id: "interrupt-panel" }),
    h("div", { class: "grid2" },
      h("section", { class: "card" }, h("h2", {}, "Timeline"),
        h("p", { class: "legend" }, h("span", {}, h("i", { style: "background:var(--queue)" }), "queue wait"), h("span", {}, h("i", { style: "background:var(--work)" }), "work"), h("span", {}, h("i", { style: "background:var(--lit)" }), "running"), h("span", {}, h("i", { style: "background:var(--err)" }), "error"), h("span", {}, h("i", { style: "background:var(--pause)" }), "paused (interrupt)"), h("span", {}, "↻ retry")),
        h("div", { id: "timeline", class: "scroll-x" })),
      h("section", { class: "card" }, h("h2", {}, "Events"), h("div", { id: "events-log", class: "events", tabindex: 0, "aria-label": "events log" }))),
    h("div", { class: "grid2" },
      h("section", { class: "card" }, h("h2", {}, "Checkpoints"), h("div", { id: "checkpoints" })),
      h("section", { class: "card" }, h("h2", {}, "What this superstep changed"), h("div", { id: "diff", class: "diff" }))),
    h("section", { class: "card", id: "planner-view" })));
  renderLive(threadId);
  await loadThread(threadId, {});
  timer = setInterval(() => {
    const live = lives.get(threadId);
    if (threadCtx && threadCtx.status === "busy" && !(live && live.streaming)) loadThread(threadId, { keepSelection: true }).catch(() => {});
  }, 1500);
}

async function loadThread(threadId, { keepSelection }) {
  if (currentThread !== threadId) return;
  const [thread, state] = await Promise.all([api(`/threads/${enc(threadId)}`), api(`/threads/${enc(threadId)}/state`)]);
  if (currentThread !== threadId) return;
  const assistant = (thread.metadata && thread.metadata.assistant_id) || "research";
  Object.assign(threadCtx, { thread, state, assistant, status: thread.status });
  $("#thread-status-badge").replaceChildren(badge(thread.status));
  $("#thread-assistant").textContent = "assistant " + assistant + (state.checkpoint && state.checkpoint.checkpoint_id ? ` · checkpoint ${state.checkpoint.checkpoint_id}` : "") + (state.next && state.next.length ? ` · next: ${state.next.join(", ")}` : "");
  renderActions(threadId);
  renderInterrupt(threadId);
  await loadHistory(threadId, keepSelection);
}

function renderActions(threadId) {
  const live = lives.get(threadId);
  const busy = threadCtx.status === "busy" || (live && live.streaming);
  const cancel = h("button", { class: "danger", id: "cancel-run", type: "button", disabled: !busy }, "Cancel run");
  cancel.addEventListener("click", async () => {
    try {
      let runId = live && live.runId;
      if (!runId) {
        const runs = await api(`/threads/${enc(threadId)}/runs?limit=10`);
        const running = (runs || []).find((r) => r.status === "running" || r.status === "pending");
        runId = running && running.run_id;
      }
      if (!runId) throw new Error("no running run found on this thread");
      await api(`/threads/${enc(threadId)}/runs/${enc(runId)}/cancel`, { method: "POST" });
      flash("cancel sent to run " + runId);
    } catch (e) { flash("cancel: " + e.message, true); }
  });
  const fork = h("button", { class: "secondary", id: "fork-thread", type: "button" }, "Fork thread");
  fork.addEventListener("click", () => copyThread(threadId, null, false));
  const cont = h("button", { class: "secondary", id: "continue-run", type: "button", disabled: busy || !(threadCtx.state.next || []).length || (threadCtx.state.interrupts || []).length > 0 }, "Continue");
  cont.addEventListener("click", () => follow(threadId, { assistant_id: threadCtx.assistant, input: null }));
  $("#thread-actions").replaceChildren(cancel, fork, cont);
}

/** Forks the thread (at a checkpoint, or its newest) into a new one; `rerun` continues it. */
async function copyThread(threadId, checkpointId, rerun) {
  try {
    const body = checkpointId ? { checkpoint_id: checkpointId } : {};
    const copy = await api(`/threads/${enc(threadId)}/copy`, { body });
    flash(`forked into ${copy.thread_id}`);
    location.hash = "#/thread/" + enc(copy.thread_id);
    if (rerun) {
      // A copy paused on a question waits for the person; one between supersteps goes on.
      const state = await api(`/threads/${enc(copy.thread_id)}/state`);
      const assistant = (copy.metadata && copy.metadata.assistant_id) || threadCtx.assistant;
      if (!(state.interrupts || []).length && (state.next || []).length) follow(copy.thread_id, { assistant_id: assistant, input: null });
    }
  } catch (e) { flash("fork: " + e.message, true); }
}

/** Streams a run on the thread and keeps the page following it. */
function follow(threadId, body) {
  if (threadCtx && threadCtx.threadId === threadId) threadCtx.pinned = false;
  streamRun(threadId, body).catch((e) => flash("run: " + e.message, true));
  setTimeout(() => currentThread === threadId && loadThread(threadId, { keepSelection: true }).catch(() => {}), 200);
}

function renderInterrupt(threadId) {
  const panel = $("#interrupt-panel");
  const interrupts = (threadCtx.state.interrupts || []);
  if (!interrupts.length) { panel.replaceChildren(); delete panel.dataset.interrupt; return; }
  // The same question stays as it is, so a refresh never wipes what a person is typing.
  const key = threadId + "/" + (interrupts[0].id || pretty(interrupts[0].value));
  if (panel.dataset.interrupt === key && panel.firstChild) return;
  panel.dataset.interrupt = key;
  const value = interrupts[0].value || {};
  const resume = (v) => follow(threadId, { assistant_id: threadCtx.assistant, command: { resume: v } });
  const card = h("section", { class: "card", "aria-label": "pending interrupt" }, h("h2", {}, "Waiting for you"));
  if (threadCtx.assistant === "acquire" || value.question) {
    const input = h("input", { id: "answer-input", size: 50, "aria-label": "answer" });
    const form = h("form", { class: "row" }, input, h("button", { id: "answer-submit", type: "submit" }, "Answer"));
    form.addEventListener("submit", (e) => { e.preventDefault(); if (input.value.trim()) resume(input.value.trim()); });
    card.append(h("p", { id: "question" }, h("strong", {}, value.field ? value.field + ": " : ""), value.question || pretty(value)), form);
    setTimeout(() => input.focus(), 0);
  } else {
    const plan = value.plan || [];
    card.append(h("p", {}, value.message || "Review the plan."),
      h("table", { id: "review-plan" }, h("thead", {}, h("tr", {}, ["step", "description", "depends on", "tool"].map((c) => h("th", {}, c)))),
        h("tbody", {}, plan.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, s.description), h("td", {}, (s.depends_on || []).join(", ")), h("td", {}, s.tool))))));
    const reason = h("input", { id: "deny-reason", placeholder: "why (for deny)", "aria-label": "reason to deny" });
    const edit = h("textarea", { id: "edit-plan-json", rows: 8, "aria-label": "edited plan (JSON)" });
    edit.value = pretty(plan);
    const approve = h("button", { id: "approve", type: "button" }, "Approve");
    const deny = h("button", { id: "deny", class: "danger", type: "button" }, "Deny");
    const doEdit = h("button", { id: "edit-plan", class: "secondary", type: "button" }, "Run the edited plan");
    approve.addEventListener("click", () => resume({ action: "approve" }));
    deny.addEventListener("click", () => resume({ action: "deny", reason: reason.value }));
    doEdit.addEventListener("click", () => {
      let p;
      try { p = JSON.parse(edit.value); } catch (e) { flash("the edited plan is not JSON: " + e.message, true); return; }
      resume({ action: "edit", plan: p });
    });
    card.append(h("div", { class: "row" }, approve, deny, reason), h("details", {}, h("summary", {}, "Edit the plan"), edit, doEdit));
    setTimeout(() => approve.focus(), 0);
  }
  panel.replaceChildren(card);
}

// Timeline (Gantt) and events of the runs this page follows.
const MAX_ROWS = 300;
const MAX_EVENTS = 400;

function renderLive(threadId) {
  const live = lives.get(threadId);
  const box = $("#timeline"), log = $("#events-log");
  if (!box || !log) return;
  if (!live || !live.tasks.size) {
    box.replaceChildren(h("p", { class: "muted" }, "No node executions seen yet: start, resume or continue a run from this page to follow it live."));
  } else {
    const all = [...live.tasks.values()].sort((a, b) => (a.start - a.queue) - (b.start - b.queue));
    const tasks = all.slice(-MAX_ROWS);
    const now = performance.now() - live.t0;
    const t0 = Math.min(...tasks.map((t) => t.start - t.queue));
    const t1 = Math.max(...tasks.map((t) => (t.running ? now : t.end)), t0 + 1);
    const LABEL = 150, W = 560, ROW = 16;
    const x = (t) => LABEL + ((t - t0) / (t1 - t0)) * W;
    const svg = h("svg", { width: "100%", viewBox: `0 0 ${LABEL + W + 30} ${tasks.length * ROW + 30}`, role: "img", "aria-label": "timeline of node executions" });
    for (let i = 0; i <= 4; i++) {
      const t = t0 + ((t1 - t0) * i) / 4, gx = x(t);
      svg.append(h("line", { class: "gridline", x1: gx, x2: gx, y1: 0, y2: tasks.length * ROW + 4 }), h("text", { x: gx, y: tasks.length * ROW + 20, "font-size": 10, "text-anchor": "middle" }, fmtMs(t - t0)));
    }
    tasks.forEach((t, i) => {
      const y = i * ROW + 2, end = t.running ? now : t.end;
      const g = h("g", { class: "task", "data-node": t.node });
      g.append(h("text", { x: 4, y: y + 11, "font-size": 11 }, `${t.node}${t.attempt > 1 ? " ↻" + t.attempt : ""}`));
      if (t.queue > 0) g.append(h("rect", { class: "bar-queue", x: x(t.start - t.queue), y, width: Math.max(1, x(t.start) - x(t.start - t.queue)), height: ROW - 4 }));
      g.append(h("rect", { class: "bar-work" + (t.error ? " error" : "") + (t.paused ? " paused" : "") + (t.running ? " running" : ""), x: x(t.start), y, width: Math.max(2, x(end) - x(t.start)), height: ROW - 4 },
        h("title", {}, `${t.node} attempt ${t.attempt}: queued ${fmtMs(t.queue)}, ran ${fmtMs(end - t.start)}${t.error ? ", error: " + t.error : ""}${t.paused ? ", paused on an interrupt" : ""}`)));
      svg.append(g);
    });
    const note = all.length > MAX_ROWS ? h("p", { class: "muted" }, `showing the latest ${MAX_ROWS} of ${all.length} tasks`) : null;
    box.replaceChildren(...[note, svg].filter(Boolean));
  }
  const events = live ? live.events.slice(-MAX_EVENTS) : [];
  log.replaceChildren(...events.map((e) => h("div", { "data-kind": e.kind }, `${fmtMs(e.t)}  ${e.kind}  ${summarize(e)}`)));
  if (live && live.events.length > MAX_EVENTS) log.prepend(h("div", { class: "muted" }, `(${live.events.length - MAX_EVENTS} earlier events not shown)`));
  log.scrollTop = log.scrollHeight;
  if (live && live.values && threadCtx && threadCtx.selected === "live") renderPlannerView(live.values);
}

function summarize(e) {
  const d = e.data || {};
  switch (e.kind) {
    case "node_started": return `${d.node} (attempt ${d.attempt})`;
    case "node_finished": return `${d.node} ran ${fmtUs(d.duration_us)}, queued ${fmtUs(d.queued_us)}${d.error ? (/^interrupted\b/.test(d.error) ? " — paused: " : " ERROR ") + d.error : ""}`;
    case "state_updated": return `step ${d.step}: ${(d.nodes || []).join(", ")}`;
    case "interrupted": return (d.interrupts || []).map((i) => i.node).join(", ");
    case "run_finished": return `${d.status} after ${d.steps} steps, ${d.node_executions} node executions`;
    case "metadata": return `run ${d.run_id}`;
    default: return JSON.stringify(d).slice(0, 200);
  }
}

// Checkpoints: newest first, paged with `before`; selecting one shows its state and its diff.
const HISTORY_PAGE = 20;

async function loadHistory(threadId, keepSelection) {
  const before = threadCtx.before.length ? threadCtx.before[threadCtx.before.length - 1] : null;
  const body = { limit: HISTORY_PAGE + 1 };
  if (before) body.before = { checkpoint_id: before };
  const list = await api(`/threads/${enc(threadId)}/history`, { body });
  if (currentThread !== threadId) return;
  const page = list.slice(0, HISTORY_PAGE);
  threadCtx.page = page;
  const more = list.length > HISTORY_PAGE;
  const tbody = h("tbody");
  page.forEach((c, i) => {
    const id = c.checkpoint.checkpoint_id;
    const tr = h("tr", { tabindex: 0, "data-checkpoint": id, class: threadCtx.selected === id ? "selected" : "" },
      h("td", { class: "num" }, c.metadata.step), h("td", {}, id), h("td", {}, (c.metadata.writes || []).join(", ") || c.metadata.source || ""),
      h("td", {}, h("button", { class: "secondary", type: "button", "data-rerun": id, title: "fork the thread here and run from this checkpoint" }, "Rerun from here")));
    const pick = () => { threadCtx.pinned = true; selectCheckpoint(threadId, i); };
    tr.addEventListener("click", (e) => { if (!e.target.dataset.rerun) pick(); });
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") pick(); });
    tr.querySelector("button").addEventListener("click", () => copyThread(threadId, id, true));
    tbody.append(tr);
  });
  const newer = h("button", { class: "secondary", type: "button", id: "history-newer", disabled: !threadCtx.before.length }, "← Newer");
  const older = h("button", { class: "secondary", type: "button", id: "history-older", disabled: !more }, "Older →");
  // Both buttons go inactive until the page they asked for is shown: a double click moves one page.
  const turn = (f) => () => { newer.disabled = older.disabled = true; f(); loadHistory(threadId, false).catch((e) => flash(e.message, true)); };
  newer.addEventListener("click", turn(() => threadCtx.before.pop()));
  older.addEventListener("click", turn(() => threadCtx.before.push(page[page.length - 1].checkpoint.checkpoint_id)));
  $("#checkpoints").replaceChildren(
    page.length ? h("table", { id: "checkpoints-table" }, h("thead", {}, h("tr", {}, ["step", "checkpoint", "written by", ""].map((c) => h("th", {}, c)))), tbody) : h("p", { class: "muted" }, "No checkpoints yet."),
    h("div", { class: "row pager" }, newer, older));
  if (!page.length) { renderPlannerView(threadCtx.thread.values || {}); return; }
  const index = keepSelection && threadCtx.pinned && threadCtx.selected ? page.findIndex((c) => c.checkpoint.checkpoint_id === threadCtx.selected) : -1;
  await selectCheckpoint(threadId, index >= 0 ? index : 0);
}

async function selectCheckpoint(threadId, i) {
  const page = threadCtx.page;
  const c = page[i];
  threadCtx.selected = c.checkpoint.checkpoint_id;
  for (const tr of document.querySelectorAll("#checkpoints-table tbody tr")) tr.classList.toggle("selected", tr.dataset.checkpoint === threadCtx.selected);
  let parentValues = null;
  if (page[i + 1] && c.parent_checkpoint && page[i + 1].checkpoint.checkpoint_id === c.parent_checkpoint.checkpoint_id) parentValues = page[i + 1].values;
  else if (c.parent_checkpoint) {
    try { parentValues = (await api(`/threads/${enc(threadId)}/state/${enc(c.parent_checkpoint.checkpoint_id)}`)).values; } catch (_) { parentValues = null; }
  }
  renderDiff(parentValues, c.values, c);
  renderPlannerView(c.values || {});
}

/** Flattens JSON to path → leaf, so two states can be compared key by key. */
function flatten(v, path = "", out = new Map(), depth = 0) {
  if (v !== null && typeof v === "object" && depth < 6 && Object.keys(v).length) {
    for (const [k, x] of Object.entries(v)) flatten(x, path ? `${path}.${k}` : k, out, depth + 1);
  } else out.set(path, v);
  return out;
}

function renderDiff(before, after, c) {
  const box = $("#diff");
  const head = h("p", { class: "muted" }, `checkpoint ${c.checkpoint.checkpoint_id}, step ${c.metadata.step}, written by ${(c.metadata.writes || []).join(", ") || c.metadata.source}`);
  if (!before) { box.replaceChildren(head, h("p", {}, "The first checkpoint of the thread: everything is new."), h("pre", { class: "json" }, pretty(after).slice(0, 20000))); return; }
  const a = flatten(before), b = flatten(after), lines = [];
  for (const [k, v] of b) {
    if (!a.has(k)) lines.push(h("div", { class: "add" }, `+ ${k}: ${JSON.stringify(v)}`));
    else if (JSON.stringify(a.get(k)) !== JSON.stringify(v)) lines.push(h("div", { class: "chg" }, `~ ${k}: ${JSON.stringify(a.get(k))} → ${JSON.stringify(v)}`));
  }
  for (const [k, v] of a) if (!b.has(k)) lines.push(h("div", { class: "del" }, `- ${k}: ${JSON.stringify(v)}`));
  box.replaceChildren(head, ...(lines.length ? lines.slice(0, 500) : [h("p", {}, "No change to the values.")]));
}

// The planner's own view of a state.
function renderPlannerView(values) {
  const box = $("#planner-view");
  if (!box) return;
  if (threadCtx.assistant === "acquire") renderField(box, values); else renderResearch(box, values);
}

const STEP_COLOURS = { complete: "#e2f3e4", failed: "#fde0e0", running: "#ffe8a3", pending: "#fff", skipped: "#eee", blocked: "#fde0e0" };

function renderResearch(box, v) {
  const plan = v.plan || [];
  const planSvg = plan.length ? drawGraph(plan.map((s) => ({ id: s.id, label: `${s.id} · ${s.status || "pending"}` })),
    plan.flatMap((s) => (s.depends_on || []).map((d) => ({ source: d, target: s.id, conditional: false }))),
    { width: 170, label: "plan dependency graph", roots: plan.filter((s) => !(s.depends_on || []).length).map((s) => s.id),
      decorate: (id, g) => { const s = plan.find((p) => p.id === id); g.dataset.status = s.status; g.querySelector("rect").style.fill = STEP_COLOURS[s.status] || "#fff"; g.append(h("title", {}, `${s.id}: ${s.description}`)); } }) : h("p", { class: "muted" }, "No plan yet.");
  const evidence = v.evidence || [];
  box.replaceChildren(
    h("h2", {}, "Research planner ", badge(v.status || "")),
    v.goal ? h("p", {}, h("strong", {}, "Goal: "), v.goal) : null,
    h("div", { class: "grid2" },
      h("div", {}, h("h3", {}, "Plan"), h("div", { id: "plan-graph", class: "scroll-x" }, planSvg),
        h("table", { id: "plan-table" }, h("thead", {}, h("tr", {}, ["step", "status", "description"].map((c) => h("th", {}, c)))),
          h("tbody", {}, plan.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, badge(s.status)), h("td", {}, s.description)))))),
      h("div", {}, h("h3", {}, "Evidence"), evidence.length ? h("table", { id: "evidence" }, h("thead", {}, h("tr", {}, ["source", "title", "finding"].map((c) => h("th", {}, c)))),
        h("tbody", {}, evidence.map((e) => h("tr", {}, h("td", {}, e.source_id), h("td", {}, e.title || ""), h("td", {}, e.sentence || e.finding || ""))))) : h("p", { class: "muted" }, "No evidence yet."),
        (v.knowledge_gaps || []).length ? h("div", {}, h("h3", {}, "Gaps"), h("ul", {}, v.knowledge_gaps.map((g) => h("li", {}, typeof g === "string" ? g : pretty(g))))) : null,
        v.blocked_reason ? h("p", { role: "note" }, h("strong", {}, "Blocked: "), v.blocked_reason) : null)),
    h("h3", {}, "Brief"),
    v.final_report ? h("article", { id: "brief", class: "markdown" }, ...markdown(v.final_report)) : h("p", { id: "brief-empty", class: "muted" }, "No brief yet."));
}

function renderField(box, v) {
  const fields = Object.entries(v.fields || {});
  const prov = (p) => {
    if (!p) return "";
    const parts = [p.kind, p.source, p.formula ? "= " + p.formula : null, p.quote ? `“${p.quote}”` : null, p.note || null].filter(Boolean);
    return parts.join(" · ");
  };
  const num = (x) => typeof x === "number" ? x.toLocaleString(undefined, { maximumFractionDigits: 2 }) : x == null ? "–" : String(x);
  box.replaceChildren(
    h("h2", {}, "Field-acquisition planner ", badge(v.status || "")),
    h("h3", {}, "Targets"), h("p", { id: "targets" }, Object.entries(v.targets || {}).map(([k, x]) => h("span", { style: "margin-right:1.5rem" }, h("strong", {}, k + ": "), num(x)))),
    h("h3", {}, "Fields"),
    h("table", { id: "fields-table" }, h("thead", {}, h("tr", {}, ["field", "value", "provenance"].map((c) => h("th", {}, c)))),
      h("tbody", {}, fields.map(([name, f]) => h("tr", { "data-field": name }, h("td", {}, name), h("td", { class: "num" }, num(f.value)), h("td", {}, prov(f.provenance)))))),
    h("h3", {}, "Decisions"),
    h("table", { id: "decisions" }, h("thead", {}, h("tr", {}, ["#", "action", "target", "origin", "rewritten by"].map((c) => h("th", {}, c)))),
      h("tbody", {}, (v.decisions || []).map((d) => h("tr", {}, h("td", { class: "num" }, d.iteration), h("td", {}, d.action), h("td", {}, d.target || ""), h("td", {}, d.origin || ""), h("td", {}, d.rewritten_by || ""))))));
}

/** A small Markdown renderer (headings, lists, paragraphs, emphasis, code, links), built from
 *  DOM nodes so nothing in a brief is ever parsed as HTML. */
function markdown(src) {
  const out = [];
  let list = null, para = [];
  const inline = (text) => {
    const parts = [];
    const re = /(\*\*[^*]+\*\*|`[^`]+`|\[[^\]]+\]\([^)\s]+\)|\*[^*]+\*)/g;
    let last = 0, m;
    while ((m = re.exec(text))) {
      if (m.index > last) parts.push(text.slice(last, m.index));
      const t = m[0];
      if (t.startsWith("**")) parts.push(h("strong", {}, t.slice(2, -2)));
      else if (t.startsWith("`")) parts.push(h("code", {}, t.slice(1, -1)));
      else if (t.startsWith("[")) { const [, label, href] = /\[([^\]]+)\]\(([^)]+)\)/.exec(t); parts.push(/^(https?:|#|\/)/.test(href) ? h("a", { href }, label) : `${label} (${href})`); }
      else parts.push(h("em", {}, t.slice(1, -1)));
      last = m.index + t.length;
    }
    if (last < text.length) parts.push(text.slice(last));
    return parts;
  };
  const flush = () => { if (para.length) { out.push(h("p", {}, inline(para.join(" ")))); para = []; } if (list) { out.push(list); list = null; } };
  for (const line of String(src).split("\n")) {
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:[-*]|\d+\.)\s+(.*)$/.exec(line);
    if (heading) { flush(); out.push(h("h" + Math.min(6, heading[1].length + 1), {}, inline(heading[2]))); }
    else if (item) { if (para.length) { out.push(h("p", {}, inline(para.join(" ")))); para = []; } list = list || h("ul"); list.append(h("li", {}, inline(item[1]))); }
    else if (!line.trim()) flush();
    else { if (list) { out.push(list); list = null; } para.push(line.trim()); }
  }
  flush();
  return out;
}

// ---------------------------------------------------------------- #/new

async function viewNew(main) {
  let examples = {};
  try { examples = await (await fetch("/studio/examples.json")).json(); } catch (_) { /* the form works without */ }
  const assistant = h("select", { id: "new-assistant", "aria-label": "assistant" }, h("option", { value: "research" }, "research — research-brief planner"), h("option", { value: "acquire" }, "acquire — field-acquisition planner"));
  const threadId = h("input", { id: "new-thread-id", placeholder: "(a fresh id)", "aria-label": "thread id" });
  const goal = h("textarea", { id: "goal", rows: 2 });
  goal.value = examples.goal || "";
  const constraints = h("textarea", { id: "constraints", rows: 3 });
  constraints.value = pretty(examples.constraints || { max_steps: 4, require_approval: true });
  const notes = h("textarea", { id: "notes", rows: 3, placeholder: "blank: the bundled notes; or a JSON array of {id, title, text}" });
  const schema = h("textarea", { id: "schema", rows: 10 });
  schema.value = examples.schema ? pretty(examples.schema) : "";
  const corpus = h("textarea", { id: "corpus", rows: 3, placeholder: "blank: the bundled corpus; or a JSON array of {id, title, text}" });
  const research = h("div", { id: "research-fields" }, h("label", { for: "goal" }, "Goal"), goal, h("label", { for: "constraints" }, "Constraints (JSON)"), constraints, h("label", { for: "notes" }, "Notes (JSON, optional)"), notes);
  const acquire = h("div", { id: "acquire-fields", hidden: true }, h("label", { for: "schema" }, "Schema (JSON)"), schema, h("label", { for: "corpus" }, "Corpus (JSON, optional)"), corpus);
  const sync = () => { research.hidden = assistant.value !== "research"; acquire.hidden = assistant.value !== "acquire"; };
  assistant.addEventListener("change", sync);
  const form = h("form", { class: "card", id: "new-run" },
    h("label", { for: "new-assistant" }, "Assistant"), assistant, h("label", { for: "new-thread-id" }, "Thread id"), threadId, research, acquire,
    h("p", {}, h("button", { type: "submit", id: "start-run" }, "Start run")));
  const parse = (el, what, optional) => {
    if (optional && !el.value.trim()) return null;
    try { return JSON.parse(el.value); } catch (e) { throw new Error(`${what} is not valid JSON: ${e.message}`); }
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const input = assistant.value === "research"
        ? { input: goal.value, constraints: parse(constraints, "the constraints", true) || {}, source_notes: parse(notes, "the notes", true) }
        : { schema: parse(schema, "the schema"), corpus: parse(corpus, "the corpus", true) };
      const body = threadId.value.trim() ? { thread_id: threadId.value.trim() } : {};
      const thread = await api("/threads", { body });
      location.hash = "#/thread/" + enc(thread.thread_id);
      setTimeout(() => follow(thread.thread_id, { assistant_id: assistant.value, input }), 50);
    } catch (err) { flash(err.message, true); }
  });
  main.append(h("h1", {}, "New run"), form);
  sync();
  goal.focus();
}

// ---------------------------------------------------------------- #/load

async function viewLoad(main) {
  const file = h("input", { type: "file", id: "load-file", accept: ".json,application/json", "aria-label": "load report file" });
  const paste = h("textarea", { id: "load-json", rows: 4, placeholder: "…or paste the report's JSON here", "aria-label": "load report JSON" });
  const show = h("button", { type: "button", id: "load-show" }, "Show");
  const out = h("div", { id: "load-out" });
  const render = (text) => {
    let report;
    try { report = JSON.parse(text); } catch (e) { flash("not a load report: " + e.message, true); return; }
    out.replaceChildren(...renderReport(report));
  };
  file.addEventListener("change", async () => { if (file.files[0]) render(await file.files[0].text()); });
  show.addEventListener("click", () => render(paste.value));
  main.append(h("h1", {}, "Load report"), h("div", { class: "card" }, h("p", {}, "Open the JSON that ", h("code", {}, "planwright load --report FILE"), " writes."), file, paste, show), out);
}

function renderReport(r) {
  const scalars = Object.entries(r).filter(([, v]) => v === null || typeof v !== "object");
  const parts = [h("section", { class: "card" }, h("h2", {}, "Summary"), h("table", { id: "load-summary" }, h("tbody", {}, scalars.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { class: "num" }, typeof v === "number" ? (Number.isInteger(v) ? v : v.toFixed(3)) : String(v)))))))];
  for (const [k, v] of Object.entries(r)) {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "number")) {
      parts.push(h("section", { class: "card" }, h("h3", {}, k), h("table", {}, h("tbody", {}, Object.entries(v).map(([a, b]) => h("tr", {}, h("th", {}, a), h("td", { class: "num" }, b.toFixed ? b.toFixed(3) : b)))))));
    }
  }
  const charts = h("div", { id: "load-charts" });
  const series = Array.isArray(r.series) ? r.series : [];
  if (series.length) {
    const keys = new Map();
    for (const s of series) for (const [k, v] of flatten(s)) if (k !== "t_s" && typeof v === "number") keys.set(k, true);
    for (const k of keys.keys()) charts.append(lineChart(k, series.map((s) => [Number(s.t_s), flatten(s).get(k)]).filter(([, y]) => typeof y === "number")));
  }
  const nodes = nodeRows(r);
  if (nodes.length) {
    const metrics = [...new Set(nodes.flatMap((n) => [...flatten(n.figures)].filter(([, v]) => typeof v === "number").map(([k]) => k)))].filter((k) => /p50|p99|executions|total/.test(k));
    for (const m of metrics.slice(0, 8)) charts.append(barChart(`${m} per node`, nodes.map((n) => [n.node, flatten(n.figures).get(m) || 0])));
  }
  parts.push(h("section", { class: "card" }, h("h2", {}, "Charts"), series.length || nodes.length ? charts : h("p", { class: "muted" }, "This report has no time series or per-node figures.")));
  return parts;
}

function nodeRows(r) {
  const n = r.nodes || r.per_node;
  if (Array.isArray(n)) return n.map((x) => ({ node: x.node || x.name, figures: x }));
  if (n && typeof n === "object") return Object.entries(n).map(([node, figures]) => ({ node, figures }));
  return [];
}

function lineChart(title, points) {
  const W = 560, H = 160, P = 40;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1), y0 = Math.min(0, ...ys), y1 = Math.max(...ys, y0 + 1e-9);
  const X = (x) => P + ((x - x0) / (x1 - x0)) * (W - P - 10), Y = (y) => H - 20 - ((y - y0) / (y1 - y0)) * (H - 40);
  return h("figure", { class: "chart", "data-series": title },
    h("figcaption", {}, title),
    h("svg", { width: W, height: H, role: "img", "aria-label": title + " over time" },
      h("line", { class: "axis", x1: P, x2: W - 10, y1: H - 20, y2: H - 20 }), h("line", { class: "axis", x1: P, x2: P, y1: 10, y2: H - 20 }),
      h("text", { x: 2, y: 16, "font-size": 10 }, fmtNum(y1)), h("text", { x: 2, y: H - 22, "font-size": 10 }, fmtNum(y0)),
      h("text", { x: P, y: H - 4, "font-size": 10 }, `${x0}s`), h("text", { x: W - 40, y: H - 4, "font-size": 10 }, `${x1}s`),
      h("polyline", { class: "series", stroke: "#2458b3", points: points.map(([x, y]) => `${X(x)},${Y(y)}`).join(" ") })));
}

function barChart(title, rows) {
  const W = 560, ROW = 18, LABEL = 170, max = Math.max(...rows.map((r) => r[1]), 1e-9);
  return h("figure", { class: "chart", "data-bars": title }, h("figcaption", {}, title),
    h("svg", { width: W, height: rows.length * ROW + 6, role: "img", "aria-label": title },
      rows.map(([name, v], i) => h("g", {}, h("text", { x: 0, y: i * ROW + 13, "font-size": 11 }, name),
        h("rect", { class: "bar-work", x: LABEL, y: i * ROW + 2, height: ROW - 5, width: Math.max(1, ((W - LABEL - 70) * v) / max) }),
        h("text", { x: LABEL + ((W - LABEL - 70) * v) / max + 4, y: i * ROW + 13, "font-size": 10 }, fmtNum(v))))));
}

function fmtNum(v) { return Math.abs(v) >= 1000 ? v.toLocaleString(undefined, { maximumFractionDigits: 0 }) : Number(v.toPrecision(3)).toString(); }
