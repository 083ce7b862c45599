// Walks every call of the official JavaScript SDK (`@langchain/langgraph-sdk` 1.15) against an
// Agent Server, checking the shapes the SDK reads. The twin of walk.py (same call names, `js:`
// instead of `py:`, same config file), plus what only the JS SDK has (`patchState`,
// `onRunCreated` on `runs.stream`, the thread-centric `ThreadStream`).
//
// Usage: node walk.mjs URL [--api-key KEY] [--assistant ID] [--config FILE] [--only PREFIX]
//        [--sdk DIR]   (DIR: where `npm install --prefix DIR` put the SDK)
//
// Each call prints one JSON line, {"call": "js:…", "ok": true|false, "error": "…"}; the
// script exits 0 when it could run at all (the caller judges the lines).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import path from "node:path";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const URL_ = args[0];
const KEY = opt("--api-key", undefined);
const AID = opt("--assistant", "research");
const ONLY = opt("--only", undefined);
const SDK = opt("--sdk", process.cwd());
const require_ = createRequire(path.join(path.resolve(SDK), "package.json"));
const { Client, ProtocolWebSocketTransportAdapter } = await import(require_.resolve("@langchain/langgraph-sdk"));

const DEFAULTS = {
  input: {
    input:
      "Create a short research brief on whether our support team should adopt " +
      "retrieval-augmented generation for customer support",
    constraints: { require_approval: true, max_steps: 4 },
  },
  resume: { action: "approve" },
  interrupt_node: "review_plan",
  plain_input: { input: "Evaluate heat pumps for our home", constraints: { max_steps: 3 } },
  interrupt_before: "create_plan",
  as_node: "prepare_input",
  update: { goal: "goal set by the SDK walk" },
  goto: "mark_needs_review",
  goto_expect: { status: "needs_review" },
  values_filter_key: "goal",
  inject: "refused",
  stream_modes_with_events: ["values", "updates", "messages", "messages-tuple", "debug", "tasks",
    "checkpoints", "events"],
  all_stream_modes: ["values", "updates", "messages", "messages-tuple", "custom", "debug", "tasks",
    "checkpoints", "events"],
};
const cfg = { ...DEFAULTS, ...(opt("--config") ? JSON.parse(readFileSync(opt("--config"), "utf8")) : {}) };

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$/;
const TIMEOUT = 60_000;

class Check extends Error {}
const need = (cond, what) => {
  if (!cond) throw new Check(what);
};
const short = (v, n = 300) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length <= n ? s : s.slice(0, n) + "…";
};
// Canonical JSON (keys sorted), to compare values whatever their key order.
const canon = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]])) : x));
const same = (a, b) => canon(a) === canon(b);
const iso = (obj, ...fields) => {
  for (const f of fields) {
    need(obj && f in obj, `missing \`${f}\` in ${short(obj)}`);
    need(typeof obj[f] === "string" && ISO.test(obj[f]), `\`${f}\` is not ISO-8601: ${short(obj[f])}`);
  }
};
const statusOf = (e) => e?.status ?? e?.response?.status;
const describe = (e) => {
  if (e instanceof Check) return e.message;
  if (statusOf(e) !== undefined) return `HTTP ${statusOf(e)}: ${(e.text ?? e.message ?? "").slice(0, 300)}`;
  return `${e?.name ?? "Error"}: ${e?.message ?? e}`.slice(0, 500);
};
const expectStatus = async (p, status) => {
  try {
    await p;
  } catch (e) {
    need(statusOf(e) === status, describe(e));
    return;
  }
  throw new Check(`expected HTTP ${status}, got success`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const headers = KEY ? { Authorization: `Bearer ${KEY}` } : undefined;
const mk = (h) => new Client({ apiUrl: URL_, apiKey: KEY ?? null, defaultHeaders: h, callerOptions: { maxRetries: 0 } });
const c = mk(headers);
const results = [];

async function call(name, fn) {
  const full = `js:${name}`;
  if (ONLY && !full.startsWith(ONLY)) return undefined;
  let out, line;
  let timer;
  try {
    const once = () => Promise.race([
      fn(),
      new Promise((_, rej) => {
        clearTimeout(timer);
        timer = setTimeout(() => rej(new Check(`timed out after ${TIMEOUT / 1000}s`)), TIMEOUT);
      }),
    ]);
    try {
      out = await once();
    } catch (e) {
      // A connection the server dropped between requests (fetch's "fetch failed", no HTTP
      // status): the call is made once more, and the drop is told on stderr.
      if (statusOf(e) !== undefined || e instanceof Check || !/fetch failed|ECONNRESET|socket/i.test(`${e?.message} ${e?.cause?.code}`)) throw e;
      console.error(`# retried ${full} after ${describe(e)}`);
      out = await once();
    }
    line = { call: full, ok: true, error: "" };
  } catch (e) {
    line = { call: full, ok: false, error: describe(e) };
    if (process.env.WALK_VERBOSE) console.error(e);
  } finally {
    clearTimeout(timer);
  }
  console.log(JSON.stringify(line));
  results.push(line);
  return out;
}

const collect = async (gen) => {
  const all = [];
  for await (const p of gen) all.push(p);
  return all;
};
const newThread = async (payload = {}) => (await c.threads.create(payload)).thread_id;
const pausedThread = async (payload = {}) => {
  const t = await newThread(payload);
  await c.runs.wait(t, AID, { input: cfg.input });
  return t;
};
const finishedThread = async () => {
  const t = await newThread();
  await c.runs.wait(t, AID, { input: cfg.plain_input });
  return t;
};
// Every field the SDK reads is there and every time is ISO-8601; one message naming all that is not.
const shape = (obj, what, fields, times = []) => {
  const missing = fields.filter((f) => !(f in obj));
  const bad = times.filter((f) => f in obj && !(typeof obj[f] === "string" && ISO.test(obj[f])))
    .map((f) => `\`${f}\` is ${short(obj[f])}, not ISO-8601`);
  missing.push(...times.filter((f) => !(f in obj)));
  const problems = [...(missing.length ? [`lacks ${missing.map((m) => `\`${m}\``).join(", ")}`] : []), ...bad];
  need(!problems.length, `${what} ${problems.join("; ")}`);
};
const checkThread = (t) => {
  shape(t, "thread", ["thread_id", "metadata", "status", "values", "interrupts"], ["created_at", "updated_at", "state_updated_at"]);
  need(t.interrupts && typeof t.interrupts === "object", `thread.interrupts is not an object: ${short(t)}`);
};
const checkAssistant = (a) =>
  shape(a, "assistant", ["assistant_id", "graph_id", "config", "context", "metadata", "version", "name"], ["created_at", "updated_at"]);
const checkRun = (r) =>
  shape(r, "run", ["run_id", "thread_id", "assistant_id", "status", "metadata", "multitask_strategy"], ["created_at", "updated_at"]);
const checkState = (s, what = "state") => {
  shape(s, what, ["values", "next", "checkpoint", "metadata", "parent_checkpoint", "tasks", "interrupts"], ["created_at"]);
  need(s.checkpoint?.checkpoint_id, `${what}.checkpoint is not {thread_id, checkpoint_ns, checkpoint_id}: ${short(s.checkpoint)}`);
  for (const t of s.tasks) shape(t, `${what}.tasks[]`, ["id", "name", "error", "interrupts", "checkpoint", "state"]);
};

// --- auth -------------------------------------------------------------------------------------
await call("auth.x_api_key", async () => {
  const only = new Client({ apiUrl: URL_, apiKey: KEY ?? "none", callerOptions: { maxRetries: 0 } });
  await only.assistants.search({ limit: 1 });
});

// --- assistants -------------------------------------------------------------------------------
const tag = randomUUID().slice(0, 8);
let graphId = AID;
await call("assistants.search", async () => {
  const got = await c.assistants.search({ limit: 50 });
  need(got.some((a) => a.assistant_id === AID || a.graph_id === AID), `\`${AID}\` not in ${short(got)}`);
  got.forEach(checkAssistant);
});
await call("assistants.count", async () => {
  const n = await c.assistants.count();
  need(Number.isInteger(n) && n >= 1, `count is ${short(n)}`);
});
await call("assistants.get", async () => {
  const a = await c.assistants.get(AID);
  checkAssistant(a);
  graphId = a.graph_id;
});
await call("assistants.get_graph", async () => {
  const g = await c.assistants.getGraph(AID);
  need(g.nodes?.length && "edges" in g, `graph: ${short(g)}`);
});
await call("assistants.get_graph_xray", async () => {
  const g = await c.assistants.getGraph(AID, { xray: true });
  need(g.nodes?.length && "edges" in g, `graph: ${short(g)}`);
});
await call("assistants.get_schemas", async () => {
  const s = await c.assistants.getSchemas(AID);
  for (const f of ["graph_id", "input_schema", "output_schema", "state_schema", "config_schema"])
    need(f in s, `schemas lack \`${f}\`: ${short(s)}`);
  need(typeof s.input_schema === "object" && s.input_schema && typeof s.state_schema === "object" && s.state_schema,
    `input/state schema are not JSON Schemas: ${short(s)}`);
});
await call("assistants.get_subgraphs", async () => {
  const s = await c.assistants.getSubgraphs(AID, { recurse: true });
  need(s && typeof s === "object", `subgraphs: ${short(s)}`);
});
let created = null;
await call("assistants.create", async () => {
  const a = await c.assistants.create({ graphId, config: { configurable: {} }, metadata: { walk: tag }, name: `walk-${tag}` });
  checkAssistant(a);
  need(a.graph_id === graphId && a.assistant_id !== AID, `created: ${short(a)}`);
  created = a;
});
const newAid = created?.assistant_id ?? AID;
await call("assistants.search_metadata", async () => {
  const got = await c.assistants.search({ metadata: { walk: tag }, graphId });
  need(same(got.map((a) => a.assistant_id), [newAid]), `search by metadata: ${short(got.map((a) => a.assistant_id))}, want [${newAid}]`);
});
await call("assistants.update", async () => {
  const a = await c.assistants.update(newAid, { metadata: { walk: tag, v: 2 } });
  need(a.version === 2 && a.metadata?.v === 2, `updated: ${short(a)}`);
});
await call("assistants.get_versions", async () => {
  const v = await c.assistants.getVersions(newAid);
  need(v.length >= 2 && v.every((x) => "version" in x), `versions: ${short(v)}`);
});
await call("assistants.set_latest", async () => {
  const a = await c.assistants.setLatest(newAid, 1);
  need(a.version === 1, `setLatest: ${short(a)}`);
});
await call("assistants.delete", async () => {
  need(created, "nothing was created to delete");
  await c.assistants.delete(newAid);
  await expectStatus(c.assistants.get(newAid), 404);
});

// --- threads ----------------------------------------------------------------------------------
let fresh;
await call("threads.create", async () => {
  const t = await c.threads.create({ metadata: { walk: tag } });
  checkThread(t);
  need(t.status === "idle" && t.metadata?.walk === tag, `thread: ${short(t)}`);
  fresh = t.thread_id;
});
fresh ??= await newThread({ metadata: { walk: tag } });
await call("threads.create_if_exists", async () => {
  const t = await c.threads.create({ threadId: fresh, ifExists: "do_nothing" });
  need(t.thread_id === fresh, `thread: ${short(t)}`);
});
await call("threads.get", async () => checkThread(await c.threads.get(fresh)));
await call("threads.update", async () => {
  const t = await c.threads.update(fresh, { metadata: { k: "v" } });
  need(t.metadata?.k === "v" && t.metadata?.walk === tag, `metadata not merged: ${short(t)}`);
  iso(t, "updated_at");
});
const paused = await pausedThread({ metadata: { walk: tag, paused: true } });
// A thread with other values, so that a values filter that is ignored shows.
const done = await finishedThread();

await call("threads.search", async () => {
  const got = await c.threads.search({ limit: 100 });
  need(got.length, "no thread is listed");
  got.forEach(checkThread);
});
await call("threads.search_never_run", async () => {
  const got = await c.threads.search({ ids: [fresh] });
  need(same(got.map((t) => t.thread_id), [fresh]), `a thread never run is not found by ids: got ${short(got.map((t) => t.thread_id))}`);
});
await call("threads.search_metadata", async () => {
  const got = await c.threads.search({ metadata: { walk: tag }, limit: 100 });
  const ids = got.map((t) => t.thread_id);
  const other = got.filter((t) => t.metadata?.walk !== tag);
  need(same([...ids].sort(), [fresh, paused].sort()),
    `metadata filter: ${got.length} threads, ${other.length} without the metadata, the thread never run ${ids.includes(fresh) ? "listed" : "missing"}`);
});
await call("threads.search_status", async () => {
  const got = await c.threads.search({ status: "interrupted", limit: 100 });
  need(got.every((t) => t.status === "interrupted") && got.some((t) => t.thread_id === paused), `status filter: ${short(got)}`);
});
await call("threads.search_values", async () => {
  const s = await c.threads.getState(paused);
  const key = cfg.values_filter_key;
  need(typeof s.values?.[key] === "string", `the state has no text \`${key}\`: ${short(s.values)}`);
  const got = await c.threads.search({ values: { [key]: s.values[key] }, limit: 100 });
  const other = got.filter((t) => t.values?.[key] !== s.values[key]);
  need(got.some((t) => t.thread_id === paused) && !other.length,
    `values filter on \`${key}\` ignored: ${got.length} threads, ${other.length} with another \`${key}\``);
});
await call("threads.search_sort", async () => {
  const got = await c.threads.search({ metadata: { walk: tag }, sortBy: "created_at", sortOrder: "asc", limit: 10 });
  need(same(got.map((t) => t.thread_id), [fresh, paused]), `sorted by created_at: ${got.length} threads, want the 2 with the metadata, oldest first`);
});
await call("threads.count", async () => {
  const n = await c.threads.count({ metadata: { walk: tag } });
  need(n === 2, `count with metadata is ${short(n)}, want 2`);
});
await call("threads.get_interrupts", async () => {
  const t = await c.threads.get(paused);
  need(t.status === "interrupted", `status ${t.status}`);
  checkThread(t);
  const v = Object.values(t.interrupts ?? {});
  need(v.length && v.every((x) => Array.isArray(x) && x.length), `thread.interrupts of a paused thread: ${short(t.interrupts)}`);
});
await call("threads.get_state", async () => {
  const s = await c.threads.getState(paused);
  checkState(s);
  need(same(s.next, [cfg.interrupt_node]), `next: ${short(s.next)}`);
  need(s.tasks.some((t) => t.interrupts?.length), `no tasks[].interrupts: ${short(s.tasks)}`);
});
let history = [];
await call("threads.get_history", async () => {
  const h = await c.threads.getHistory(paused, { limit: 100 });
  need(h.length >= 2, `history of ${h.length} entries`);
  h.forEach((e) => checkState(e, "history entry"));
  need(h[0].parent_checkpoint?.checkpoint_id === h[1].checkpoint.checkpoint_id,
    `parent_checkpoint of the head is not the next entry: ${short(h[0].parent_checkpoint)}`);
  history = h;
});
if (!history.length) history = await c.threads.getHistory(paused, { limit: 100 });
const older = history[1]?.checkpoint?.checkpoint_id;
await call("threads.get_state_checkpoint", async () => {
  const s = await c.threads.getState(paused, { checkpoint_id: older, thread_id: paused, checkpoint_ns: "" });
  need(s.checkpoint?.checkpoint_id === older, `asked ${older}, got ${s.checkpoint?.checkpoint_id}`);
});
await call("threads.get_state_checkpoint_id", async () => {
  const s = await c.threads.getState(paused, older);
  need(s.checkpoint?.checkpoint_id === older, `asked ${older}, got ${s.checkpoint?.checkpoint_id}`);
});
await call("threads.get_history_before", async () => {
  const h = await c.threads.getHistory(paused, { before: history[0].checkpoint, limit: 100 });
  need(same(h.map((e) => e.checkpoint.checkpoint_id), history.slice(1).map((e) => e.checkpoint.checkpoint_id)),
    "`before` does not list the older entries");
});
await call("threads.get_history_limit", async () => {
  const h = await c.threads.getHistory(paused, { limit: 1 });
  need(h.length === 1, `${h.length} entries for limit 1`);
});
await call("threads.get_history_checkpoint", async () => {
  const h = await c.threads.getHistory(paused, { checkpoint: { checkpoint_id: older }, limit: 100 });
  need(h.length && h.every((e) => e.checkpoint.checkpoint_id === older),
    `checkpoint filter ignored: ${h.length} entries, first ${h[0]?.checkpoint?.checkpoint_id}`);
});
await call("threads.get_history_metadata", async () => {
  const source = history[0].metadata?.source;
  need(source, `the head's metadata has no \`source\`: ${short(history[0].metadata)}`);
  const h = await c.threads.getHistory(paused, { metadata: { source }, limit: 100 });
  const want = history.filter((e) => e.metadata?.source === source);
  need(h.length === want.length && want.length < history.length, `metadata filter: ${h.length} entries, want ${want.length} of ${history.length}`);
});
await call("threads.update_state", async () => {
  const r = await c.threads.updateState(done, { values: cfg.update });
  need(r?.checkpoint?.checkpoint_id, `answer: ${short(r)}`);
  const s = await c.threads.getState(done);
  for (const [k, v] of Object.entries(cfg.update)) need(same(s.values[k], v), `\`${k}\` is ${short(s.values[k])}`);
});
await call("threads.update_state_as_node", async () => {
  const r = await c.threads.updateState(done, { values: cfg.update, asNode: cfg.as_node });
  need(r?.checkpoint?.checkpoint_id, `answer: ${short(r)}`);
  const h = await c.threads.getHistory(done, { limit: 1 });
  need(h[0].metadata?.source === "update", `head: ${short(h[0].metadata)}`);
});
await call("threads.update_state_checkpoint", async () => {
  const h = await c.threads.getHistory(done, { limit: 100 });
  const r = await c.threads.updateState(done, { values: cfg.update, checkpoint: h[h.length - 1].checkpoint });
  need(r?.checkpoint?.checkpoint_id, `answer: ${short(r)}`);
});
await call("threads.patch_state", async () => {
  await c.threads.patchState(done, { patched: tag });
  const s = await c.threads.getState(done);
  need(s.metadata?.patched === tag, `the head checkpoint's metadata: ${short(s.metadata)}`);
});
let copyId;
await call("threads.copy", async () => {
  const t = await c.threads.copy(done);
  need(t.thread_id !== done, `copy: ${short(t)}`);
  copyId = t.thread_id;
  const s = await c.threads.getState(copyId);
  need(s.values && Object.keys(s.values).length, "the copy has no values");
});
await call("threads.prune", async () => {
  need(copyId, "no copy to prune");
  const r = await c.threads.prune([copyId]);
  need(r?.pruned_count === 1, `prune: ${short(r)}`);
});
await call("threads.join_stream", async () => {
  const t = await newThread();
  // Pending for a second, so the stream joins before the run starts.
  await c.runs.create(t, AID, { input: cfg.plain_input, streamMode: ["values"], afterSeconds: 1 });
  const events = [];
  for await (const p of c.threads.joinStream(t)) {
    events.push(p.event);
    if (p.event === "values" || p.event === "updates") break;
  }
  need(events.includes("values") || events.includes("updates"), `events: ${short(events)}`);
});
await call("threads.delete", async () => {
  await c.threads.delete(fresh);
  await expectStatus(c.threads.get(fresh), 404);
});

// --- runs -------------------------------------------------------------------------------------
{
  const tid = await newThread();
  let made = {};
  await call("runs.create", async () => {
    made = await c.runs.create(tid, AID, { input: cfg.plain_input, metadata: { from: "walk" } });
    checkRun(made);
  });
  await call("runs.join", async () => {
    const v = await c.runs.join(tid, made.run_id);
    need(v && typeof v === "object" && Object.keys(v).length, `join: ${short(v)}`);
  });
  await call("runs.get", async () => {
    const r = await c.runs.get(tid, made.run_id);
    checkRun(r);
    need(r.status === "success" && r.metadata?.from === "walk", short(r));
  });
  await call("runs.list", async () => {
    const rs = await c.runs.list(tid);
    need(same(rs.map((r) => r.run_id), [made.run_id]), short(rs));
    rs.forEach(checkRun);
  });
}
await call("runs.wait", async () => {
  const t = await newThread();
  let out = await c.runs.wait(t, AID, { input: cfg.input });
  need(out?.__interrupt__?.length, `no __interrupt__ in ${short(out)}`);
  out = await c.runs.wait(t, AID, { command: { resume: cfg.resume } });
  need(!out?.__interrupt__, `still paused: ${short(out)}`);
});
await call("runs.stream", async () => {
  const t = await newThread();
  const ev = (await collect(c.runs.stream(t, AID, { input: cfg.plain_input, streamMode: ["values", "updates"] }))).map((p) => p.event);
  need(ev[0] === "metadata" && ev.includes("values") && ev.includes("updates"), `events: ${short(ev)}`);
});
await call("runs.stream_on_run_created", async () => {
  const t = await newThread();
  const seen = [];
  const parts = await collect(c.runs.stream(t, AID, { input: cfg.plain_input, onRunCreated: (p) => seen.push(p) }));
  need(seen.length && seen[0].run_id === parts[0].data.run_id, `onRunCreated got ${short(seen)} (no Content-Location header?)`);
});
await call("runs.create_on_run_created", async () => {
  const t = await newThread();
  const seen = [];
  const r = await c.runs.create(t, AID, { input: cfg.plain_input, onRunCreated: (p) => seen.push(p) });
  need(seen.length && seen[0].run_id === r.run_id, `onRunCreated got ${short(seen)} (no Content-Location header?)`);
});
await call("runs.create_stateless", async () => {
  const r = await c.runs.create(null, AID, { input: cfg.plain_input });
  need(r?.run_id, short(r));
});
await call("runs.wait_stateless", async () => {
  const out = await c.runs.wait(null, AID, { input: cfg.plain_input });
  need(out && typeof out === "object" && Object.keys(out).length, short(out));
});
await call("runs.stream_stateless", async () => {
  const ev = (await collect(c.runs.stream(null, AID, { input: cfg.plain_input }))).map((p) => p.event);
  need(ev[0] === "metadata" && ev.includes("values"), `events: ${short(ev)}`);
});
await call("runs.create_batch", async () => {
  const rs = await c.runs.createBatch([
    { assistantId: AID, input: cfg.plain_input },
    { assistantId: AID, input: cfg.plain_input },
  ]);
  need(rs?.length === 2 && rs.every((r) => r.run_id), short(rs));
});
await call("runs.join_stream", async () => {
  const t = await newThread();
  const parts = await collect(c.runs.stream(t, AID, { input: cfg.plain_input, streamMode: "updates", streamResumable: true }));
  const rid = parts[0].data.run_id;
  const again = await collect(c.runs.joinStream(t, rid, { lastEventId: parts[1].id }));
  need(same(again.map((p) => p.id), parts.slice(2).map((p) => p.id)),
    `rejoined ${short(again.map((p) => p.id))}, want ${short(parts.slice(2).map((p) => p.id))}`);
});
await call("runs.cancel", async () => {
  const t = await newThread();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input });
  await c.runs.cancel(t, r.run_id, true, "interrupt");
  const got = await c.runs.get(t, r.run_id);
  need(got.status === "interrupted", `status after cancel: ${got.status}`);
});
await call("runs.cancel_rollback", async () => {
  const t = await newThread();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input });
  await c.runs.cancel(t, r.run_id, true, "rollback");
  await expectStatus(c.runs.get(t, r.run_id), 404);
});
await call("runs.cancel_many", async () => {
  const t = await newThread();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input });
  await c.runs.cancelMany({ threadId: t, runIds: [r.run_id], action: "interrupt" });
  await c.runs.join(t, r.run_id);
  const got = await c.runs.get(t, r.run_id);
  need(got.status === "interrupted", `status after cancelMany: ${got.status}`);
});
await call("runs.delete", async () => {
  const t = await newThread();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input });
  await c.runs.join(t, r.run_id);
  await c.runs.delete(t, r.run_id);
  await expectStatus(c.runs.get(t, r.run_id), 404);
});
await call("runs.if_not_exists_create", async () => {
  const t = randomUUID();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input, ifNotExists: "create" });
  need(r.thread_id === t, short(r));
  await c.runs.join(t, r.run_id);
  checkThread(await c.threads.get(t));
});
await call("runs.interrupt_before", async () => {
  const t = await newThread();
  await c.runs.wait(t, AID, { input: cfg.plain_input, interruptBefore: [cfg.interrupt_before] });
  const s = await c.threads.getState(t);
  need(same(s.next, [cfg.interrupt_before]), `next is ${short(s.next)}, want [${cfg.interrupt_before}]`);
});
await call("runs.interrupt_after", async () => {
  const t = await newThread();
  await c.runs.wait(t, AID, { input: cfg.plain_input, interruptAfter: [cfg.interrupt_before] });
  const s = await c.threads.getState(t);
  need(s.next?.length && (await c.threads.get(t)).status === "interrupted", `next is ${short(s.next)} after interruptAfter`);
});
await call("runs.after_seconds", async () => {
  const t = await newThread();
  const r = await c.runs.create(t, AID, { input: cfg.plain_input, afterSeconds: 1 });
  need(r.status === "pending", `a run delayed 1 s is ${r.status}`);
  await c.runs.join(t, r.run_id);
  need((await c.runs.get(t, r.run_id)).status === "success", "did not run");
});
await call("runs.durability_exit", async () => {
  const t = await newThread();
  const out = await c.runs.wait(t, AID, { input: cfg.plain_input, durability: "exit" });
  need(out && typeof out === "object" && Object.keys(out).length, short(out));
});
await call("runs.checkpoint_time_travel", async () => {
  const t = await pausedThread();
  await c.runs.wait(t, AID, { command: { resume: cfg.resume } });
  const h = await c.threads.getHistory(t, { limit: 100 });
  const at = h.find((e) => same(e.next, [cfg.interrupt_node]));
  need(at, `no history entry has next == [${cfg.interrupt_node}]: ${short(h.map((e) => e.next))}`);
  const out = await c.runs.wait(t, AID, { input: null, checkpoint: at.checkpoint });
  need(out?.__interrupt__?.length, `replay from the pause did not pause: ${short(out)}`);
});

// --- multitask strategies ---------------------------------------------------------------------
const two = async (strategy) => {
  const t = await newThread();
  const first = await c.runs.create(t, AID, { input: cfg.plain_input });
  const second = await c.runs.create(t, AID, { input: cfg.plain_input, multitaskStrategy: strategy });
  await c.runs.join(t, second.run_id);
  return [t, first, second];
};
await call("runs.multitask_reject", async () => {
  const t = await newThread();
  await c.runs.create(t, AID, { input: cfg.plain_input });
  await expectStatus(c.runs.create(t, AID, { input: cfg.plain_input, multitaskStrategy: "reject" }), 409);
});
await call("runs.multitask_enqueue", async () => {
  const [t, first, second] = await two("enqueue");
  const a = await c.runs.get(t, first.run_id);
  const b = await c.runs.get(t, second.run_id);
  need(a.status === "success" && b.status === "success", `${a.status} / ${b.status}`);
});
await call("runs.multitask_interrupt", async () => {
  const [t, first, second] = await two("interrupt");
  const a = await c.runs.get(t, first.run_id);
  const b = await c.runs.get(t, second.run_id);
  need(a.status === "interrupted" && b.status === "success", `${a.status} / ${b.status}`);
});
await call("runs.multitask_rollback", async () => {
  const [t, first, second] = await two("rollback");
  const b = await c.runs.get(t, second.run_id);
  need(b.status === "success", `second: ${b.status}`);
  await expectStatus(c.runs.get(t, first.run_id), 404);
});

// --- commands ---------------------------------------------------------------------------------
await call("runs.command_resume", async () => {
  const t = await pausedThread();
  const out = await c.runs.wait(t, AID, { command: { resume: cfg.resume } });
  need(!out?.__interrupt__ && (await c.threads.get(t)).status === "idle", short(out));
});
await call("runs.command_goto", async () => {
  const t = await pausedThread();
  const out = await c.runs.wait(t, AID, { command: { goto: cfg.goto } });
  for (const [k, v] of Object.entries(cfg.goto_expect)) need(same(out?.[k], v), `after goto \`${k}\` is ${short(out?.[k])}, want ${short(v)}`);
});
await call("runs.command_update", async () => {
  const t = await pausedThread();
  const out = await c.runs.wait(t, AID, { command: { update: cfg.update, resume: cfg.resume } });
  for (const [k, v] of Object.entries(cfg.update)) need(same(out?.[k], v), `after update \`${k}\` is ${short(out?.[k])}`);
});

// --- stream modes -----------------------------------------------------------------------------
for (const mode of cfg.all_stream_modes) {
  await call(`stream.${mode}`, async () => {
    const t = await newThread();
    const ev = (await collect(c.runs.stream(t, AID, { input: cfg.plain_input, streamMode: mode }))).map((p) => p.event);
    need(ev[0] === "metadata", `events: ${short(ev.slice(0, 5))}`);
    if (cfg.stream_modes_with_events.includes(mode)) {
      const base = mode.startsWith("messages") ? "messages" : mode;
      need(ev.some((e) => e.split("|")[0].split("/")[0] === base), `only ${short([...new Set(ev)].sort())} for streamMode ${mode}`);
    }
  });
}
await call("stream.updates_interrupt", async () => {
  const t = await newThread();
  const parts = await collect(c.runs.stream(t, AID, { input: cfg.input, streamMode: "updates" }));
  need(parts.some((p) => p.event === "updates" && p.data && "__interrupt__" in p.data), "no `updates` event carries `__interrupt__`");
});
await call("stream.subgraphs", async () => {
  const t = await newThread();
  const ev = (await collect(c.runs.stream(t, AID, { input: cfg.plain_input, streamMode: "updates", streamSubgraphs: true }))).map((p) => p.event);
  need(ev.some((e) => e.startsWith("updates")), `events: ${short([...new Set(ev)])}`);
});
await call("stream.unknown_mode_422", async () => {
  const t = await newThread();
  await expectStatus(collect(c.runs.stream(t, AID, { input: cfg.plain_input, streamMode: "no-such-mode" })), 422);
});

// --- crons ------------------------------------------------------------------------------------
{
  const made = {};
  const checkCron = (x) =>
    shape(x, "cron", ["cron_id", "assistant_id", "thread_id", "schedule", "payload", "metadata", "next_run_date"], ["created_at", "updated_at"]);
  await call("crons.create", async () => {
    const x = await c.crons.create(AID, { schedule: "*/5 * * * *", input: cfg.plain_input });
    checkCron(x);
    made.stateless = x.cron_id;
  });
  await call("crons.create_for_thread", async () => {
    const t = await newThread();
    const x = await c.crons.createForThread(t, AID, { schedule: "*/5 * * * *", input: cfg.plain_input });
    checkCron(x);
    need(x.thread_id === t, short(x));
    made.thread = x.cron_id;
  });
  await call("crons.search", async () => {
    const got = await c.crons.search({ assistantId: AID, limit: 100 });
    const ids = new Set(got.map((x) => x.cron_id));
    need(Object.keys(made).length && Object.values(made).every((id) => ids.has(id)), short(got));
  });
  await call("crons.count", async () => {
    const n = await c.crons.count({ assistantId: AID });
    need(Number.isInteger(n) && Object.keys(made).length && n >= Object.keys(made).length, `count ${short(n)}`);
  });
  await call("crons.update", async () => {
    need(made.stateless, "no cron to update");
    const x = await c.crons.update(made.stateless, { schedule: "*/10 * * * *" });
    need(x.schedule === "*/10 * * * *", short(x));
  });
  await call("crons.delete", async () => {
    need(Object.keys(made).length, "no cron to delete");
    for (const id of Object.values(made)) await c.crons.delete(id);
    const got = await c.crons.search({ assistantId: AID, limit: 100 });
    need(!got.some((x) => Object.values(made).includes(x.cron_id)), "still listed");
  });
}

// --- store ------------------------------------------------------------------------------------
{
  const ns = ["walk", tag];
  await call("store.put", () => c.store.putItem(ns, "a", { text: "alpha", n: 1 }));
  await call("store.put_index_ttl", async () => {
    await c.store.putItem([...ns, "deep"], "b", { text: "beta" }, { index: ["text"], ttl: 30 });
    await c.store.putItem(ns, "c", { text: "gamma" }, { index: false });
  });
  await call("store.get", async () => {
    const it = await c.store.getItem(ns, "a");
    need(same(it?.value, { text: "alpha", n: 1 }) && same(it.namespace, ns), short(it));
    iso(it, "createdAt", "updatedAt");
  });
  await call("store.get_refresh_ttl", async () => {
    const it = await c.store.getItem([...ns, "deep"], "b", { refreshTtl: true });
    need(it?.value?.text === "beta", short(it));
  });
  await call("store.search", async () => {
    const got = await c.store.searchItems(ns, { filter: { n: 1 } });
    need(same(got.items.map((i) => i.key), ["a"]), short(got));
  });
  await call("store.search_query", async () => {
    const got = await c.store.searchItems(ns, { query: "beta", limit: 5 });
    need(same(got.items.map((i) => i.key), ["b"]) && got.items[0].score > 0, short(got));
  });
  await call("store.list_namespaces", async () => {
    const got = await c.store.listNamespaces({ prefix: ns, maxDepth: 3 });
    const want = [ns, [...ns, "deep"]].map((x) => JSON.stringify(x)).sort();
    need(same(got.namespaces.map((x) => JSON.stringify(x)).sort(), want), short(got));
  });
  await call("store.delete", async () => {
    await c.store.deleteItem(ns, "a");
    const got = await c.store.searchItems(ns, { filter: { n: 1 } });
    need(got.items.length === 0, short(got));
  });
}

// --- the thread-centric protocol (ThreadStream: /threads/{id}/commands, /stream/events) -------
const untilTrue = async (f, ms = 20_000) => {
  for (let i = 0; i < ms / 50; i++) {
    if (f()) return true;
    await sleep(50);
  }
  return false;
};
await call("protocol.run_start_output", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    const r = await thread.run.start({ input: cfg.plain_input });
    need(r?.run_id, `run.start answered ${short(r)}`);
    const out = await thread.output;
    need(out && typeof out === "object", short(out));
  } finally {
    await thread.close();
  }
});
await call("protocol.values", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input: cfg.plain_input });
    const vals = [];
    for await (const v of thread.values) vals.push(v);
    need(vals.length, "no values");
  } finally {
    await thread.close();
  }
});
await call("protocol.input_respond", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input: cfg.input });
    need(await untilTrue(() => thread.interrupts.length > 0), "no interrupt seen");
    const i = thread.interrupts[0];
    await thread.input.respond({ namespace: [], interrupt_id: i.interruptId, response: cfg.resume });
  } finally {
    await thread.close();
  }
});
// The WebSocket transport: built here, as the SDK's own refuses headers (a browser's WebSocket
// sends none); Node's WebSocket (undici, --experimental-websocket on Node 20) takes the API key.
const wsThread = () =>
  c.threads.stream({
    assistantId: AID,
    transport: new ProtocolWebSocketTransportAdapter({
      apiUrl: URL_,
      webSocketFactory: (url) => new WebSocket(url, KEY ? { headers: { "x-api-key": KEY } } : undefined),
    }),
  });
await call("protocol.ws_run_start_output", async () => {
  const thread = wsThread();
  try {
    const r = await thread.run.start({ input: cfg.plain_input });
    need(r?.run_id, `run.start answered ${short(r)}`);
    const out = await thread.output;
    need(out && typeof out === "object", short(out));
  } finally {
    await thread.close();
  }
});
await call("protocol.ws_input_respond", async () => {
  const thread = wsThread();
  try {
    await thread.run.start({ input: cfg.input });
    need(await untilTrue(() => thread.interrupts.length > 0), "no interrupt seen");
    const i = thread.interrupts[0];
    await thread.input.respond({ namespace: [], interrupt_id: i.interruptId, response: cfg.resume });
  } finally {
    await thread.close();
  }
});
await call("protocol.state_get", async () => {
  const thread = c.threads.stream(await finishedThread(), { assistantId: AID });
  try {
    const s = await thread.state.get({});
    need(s && typeof s === "object", short(s));
  } finally {
    await thread.close();
  }
});

// Every command and channel the SDK exposes.
const rootEnd = (e) => e.method === "lifecycle" && e.params.namespace.length === 0 &&
  ["completed", "interrupted", "failed"].includes(e.params.data?.event);
// A protocol run's events on `channel` (with `lifecycle`, to know where the run ends).
const channelEvents = async (channel, input) => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input });
    const sub = await thread.subscribe({ channels: [channel, "lifecycle"] });
    const got = [];
    for await (const e of sub) {
      if (channel === "lifecycle" || e.method !== "lifecycle") got.push(e);
      if (rootEnd(e)) break;
    }
    return got;
  } finally {
    await thread.close();
  }
};
const methodOf = { input: ["input.requested", "input.answered"] };
for (const channel of ["values", "updates", "messages", "tools", "custom", "lifecycle", "checkpoints",
  "tasks", "input"]) {
  await call(`protocol.channel_${channel}`, async () => {
    const got = await channelEvents(channel, channel === "input" ? cfg.input : cfg.plain_input);
    const methods = methodOf[channel] ?? [channel];
    need(got.every((e) => methods.includes(e.method)), `not ${channel}: ${short(got)}`);
    // No graph walked calls tools (the channel is empty, as LangGraph's is then); custom events
    // are the graph's choice; every other channel carries something on every run.
    if (!["tools", "custom"].includes(channel)) need(got.length, `nothing on ${channel}`);
    if (channel === "messages") {
      need(got[0].params.data.event === "message-start", short(got[0]));
      need(got.some((e) => e.params.data.event === "message-finish"), "no message-finish");
    }
  });
}
await call("protocol.messages", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input: cfg.plain_input });
    const got = [];
    for await (const m of thread.messages) got.push(m);
    need(got.length, "no messages");
  } finally {
    await thread.close();
  }
});
await call("protocol.tool_calls", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input: cfg.plain_input });
    const got = [];
    for await (const t of thread.toolCalls) got.push(t);
    need(got.length === 0, `tool calls from a graph without tools: ${short(got)}`);
  } finally {
    await thread.close();
  }
});
await call("protocol.input_answered", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  let other;
  try {
    await thread.run.start({ input: cfg.input });
    need(await untilTrue(() => thread.interrupts.length > 0), "no interrupt seen");
    const id = thread.interrupts[0].interruptId;
    // Another client on the same thread learns the question was answered.
    other = c.threads.stream(thread.threadId, { assistantId: AID });
    const sub = await other.subscribe({ channels: ["input"] });
    await thread.input.respond({ namespace: [], interrupt_id: id, response: cfg.resume });
    for await (const e of sub) {
      if (e.method !== "input.answered") continue;
      need(e.params.data.interrupt_ids.includes(id), short(e));
      break;
    }
  } finally {
    await other?.close();
    await thread.close();
  }
});
// The message goes to the graph as a run's `{messages: [message]}` input: a graph whose input
// has no `messages` refuses it (`cfg.inject`: "refused"), as the research planner's does.
await call("protocol.input_inject", async () => {
  const thread = c.threads.stream({ assistantId: AID });
  try {
    await thread.run.start({ input: cfg.plain_input });
    await thread.output;
    const message = { namespace: [], message: { role: "user", content: "one more thing" } };
    if (cfg.inject === "refused") {
      const e = await thread.input.inject(message).then(() => undefined, (err) => err);
      need(e?.code === "invalid_argument", `want invalid_argument, got ${e ? describe(e) : "success"}`);
      return;
    }
    await thread.input.inject(message);
    const runs = await c.runs.list(thread.threadId);
    need(runs.length === 2, `want the injected message's run, got ${short(runs)}`);
  } finally {
    await thread.close();
  }
});
await call("protocol.state_list_checkpoints", async () => {
  const thread = c.threads.stream(await finishedThread(), { assistantId: AID });
  try {
    const r = await thread.state.listCheckpoints({ limit: 3 });
    need(r.checkpoints?.length === 3, short(r));
    for (const cp of r.checkpoints) {
      need(typeof cp.id === "string" && Number.isInteger(cp.step), short(cp));
      iso(cp, "timestamp");
    }
  } finally {
    await thread.close();
  }
});
await call("protocol.state_fork", async () => {
  const thread = c.threads.stream(await finishedThread(), { assistantId: AID });
  try {
    const { checkpoints } = await thread.state.listCheckpoints({ limit: 2 });
    const r = await thread.state.fork({ checkpoint_id: checkpoints[1].id });
    need(r.run_id && r.thread_id === thread.threadId, short(r));
    await c.runs.join(thread.threadId, r.run_id);
  } finally {
    await thread.close();
  }
});
await call("protocol.agent_get_tree", async () => {
  const thread = c.threads.stream(await finishedThread(), { assistantId: AID });
  try {
    const r = await thread.agent.getTree();
    need(r.tree?.graph_name && Array.isArray(r.tree.namespace), short(r));
    need(r.tree.status === "completed", short(r));
  } finally {
    await thread.close();
  }
});

const ok = results.filter((r) => r.ok).length;
console.error(`# javascript: ${ok} of ${results.length} calls pass`);
process.exit(0);
