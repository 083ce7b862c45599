"""Walks every call of the official Python SDK (`langgraph-sdk` 0.4.14, and `RemoteGraph` from
`langgraph` 1.2) against an Agent Server, checking the shapes the SDK reads.

Usage: walk.py URL [--api-key KEY] [--assistant ID] [--config FILE] [--only PREFIX]

Each call prints one JSON line, `{"call": "py:…", "ok": true|false, "error": "…"}`; the script
exits 0 when it could run at all (the caller judges the lines). The graph the calls run is
described by the config file (JSON; the defaults below fit the research planner):

- `input`: input that makes a run pause on an interrupt; `resume`: the value that answers it;
- `interrupt_node`: the node the thread waits at (`next` of the paused state);
- `plain_input`: input that runs to the end without pausing;
- `interrupt_before`: a node to pause before on a per-run `interrupt_before`;
- `as_node`: a node for `update_state(as_node=…)`; `update`: values for `update_state` and
  `command.update`; `goto`: a node for `command.goto`, with `goto_expect` a subset of the final
  values after it;
- `values_filter_key`: a text field of the state for `threads.search(values=…)`;
- `stream_modes_with_events`: the stream modes the graph emits events for.
"""
import argparse
import asyncio
import json
import re
import sys
import traceback
import uuid

import httpx
from langgraph_sdk import get_client

DEFAULTS = {
    "input": {
        "input": "Create a short research brief on whether our support team should adopt "
                 "retrieval-augmented generation for customer support",
        "constraints": {"require_approval": True, "max_steps": 4},
    },
    "resume": {"action": "approve"},
    "interrupt_node": "review_plan",
    "plain_input": {"input": "Evaluate heat pumps for our home", "constraints": {"max_steps": 3}},
    "interrupt_before": "create_plan",
    "as_node": "prepare_input",
    "update": {"goal": "goal set by the SDK walk"},
    "goto": "mark_needs_review",
    "goto_expect": {"status": "needs_review"},
    "values_filter_key": "goal",
    "stream_modes_with_events": ["values", "updates", "messages", "messages-tuple", "debug",
                                 "tasks", "checkpoints", "events"],
    "all_stream_modes": ["values", "updates", "messages", "messages-tuple", "custom", "debug",
                         "tasks", "checkpoints", "events"],
}

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$")
TIMEOUT = 60


class Check(Exception):
    """A shape or behaviour the SDK expects and did not get."""


def need(cond, what):
    if not cond:
        raise Check(what)


def iso(obj, *fields):
    for f in fields:
        need(f in obj, f"missing `{f}` in {short(obj)}")
        v = obj[f]
        need(isinstance(v, str) and ISO.match(v), f"`{f}` is not ISO-8601: {v!r}")


def short(v, n=300):
    s = json.dumps(v, default=str)
    return s if len(s) <= n else s[:n] + "…"


def describe(e):
    status = getattr(e, "status_code", None) or getattr(getattr(e, "response", None),
                                                        "status_code", None)
    if status is not None:
        body = ""
        try:
            body = e.response.text[:300]
        except Exception:  # noqa: BLE001 - a streamed body cannot be read again
            pass
        return f"HTTP {status}: {body}".strip()
    if isinstance(e, Check):
        return str(e)
    if isinstance(e, asyncio.TimeoutError):
        return f"timed out after {TIMEOUT}s"
    return f"{type(e).__name__}: {e}"[:500]


def status_of(e):
    return getattr(e, "status_code", None) or getattr(getattr(e, "response", None),
                                                      "status_code", None)


class Walk:
    def __init__(self, url, key, aid, cfg):
        self.url, self.key, self.aid, self.cfg = url, key, aid, cfg
        headers = {"Authorization": f"Bearer {key}"} if key else None
        self.headers = headers
        self.client = get_client(url=url, api_key=key, headers=headers)
        self.results = []

    async def call(self, name, fn):
        full = f"py:{name}"
        if ONLY and not full.startswith(ONLY):
            return None
        try:
            try:
                out = await asyncio.wait_for(fn(), TIMEOUT)
            except httpx.TransportError as e:
                # A connection the server dropped between requests: the call is made once more
                # (on a new connection), and the drop is told on stderr.
                print(f"# retried {full} after {describe(e)}", file=sys.stderr, flush=True)
                out = await asyncio.wait_for(fn(), TIMEOUT)
            line = {"call": full, "ok": True, "error": ""}
        except Exception as e:  # noqa: BLE001 - every failure is one line of the report
            out = None
            line = {"call": full, "ok": False, "error": describe(e)}
            if VERBOSE:
                traceback.print_exc()
        print(json.dumps(line), flush=True)
        self.results.append(line)
        return out

    # --- helpers ---------------------------------------------------------------------------

    async def new_thread(self, **kw):
        return (await self.client.threads.create(**kw))["thread_id"]

    async def paused_thread(self, **kw):
        tid = await self.new_thread(**kw)
        await self.client.runs.wait(tid, self.aid, input=self.cfg["input"])
        return tid

    async def finished_thread(self):
        tid = await self.new_thread()
        await self.client.runs.wait(tid, self.aid, input=self.cfg["plain_input"])
        return tid

    async def collect(self, gen):
        return [p async for p in gen]

    @staticmethod
    def shape(obj, what, fields, times=()):
        """Every field the SDK reads is there and every time is ISO-8601; one message naming
        all that is not."""
        missing = [f for f in fields if f not in obj]
        bad = [f"`{f}` is {obj[f]!r}, not ISO-8601" for f in times
               if f in obj and not (isinstance(obj[f], str) and ISO.match(obj[f]))]
        missing += [f for f in times if f not in obj and f not in missing]
        problems = ([f"lacks {', '.join(f'`{m}`' for m in missing)}"] if missing else []) + bad
        need(not problems, f"{what} {'; '.join(problems)}")

    def check_thread(self, t):
        self.shape(t, "thread", ("thread_id", "metadata", "status", "values", "interrupts"),
                   ("created_at", "updated_at", "state_updated_at"))
        need(isinstance(t["interrupts"], dict), f"thread.interrupts is not an object: {short(t)}")

    def check_assistant(self, a):
        self.shape(a, "assistant", ("assistant_id", "graph_id", "config", "context", "metadata",
                                    "version", "name"),
                   ("created_at", "updated_at"))

    def check_run(self, r):
        self.shape(r, "run", ("run_id", "thread_id", "assistant_id", "status", "metadata",
                              "multitask_strategy"), ("created_at", "updated_at"))

    def check_state(self, s, history=False):
        what = "history entry" if history else "state"
        self.shape(s, what, ("values", "next", "checkpoint", "metadata", "parent_checkpoint",
                             "tasks", "interrupts"), ("created_at",))
        need(isinstance(s["checkpoint"], dict) and s["checkpoint"].get("checkpoint_id"),
             f"{what}.checkpoint is not {{thread_id, checkpoint_ns, checkpoint_id}}: "
             f"{short(s['checkpoint'])}")
        for t in s["tasks"]:
            self.shape(t, f"{what}.tasks[]", ("id", "name", "error", "interrupts", "checkpoint",
                                              "state"))

    # --- the walk --------------------------------------------------------------------------

    async def run(self):
        tag = uuid.uuid4().hex[:8]
        sections = [("auth", self.auth()), ("assistants", self.assistants(tag)),
                    ("threads", self.threads(tag)), ("runs", self.runs()),
                    ("multitask", self.multitask()), ("commands", self.commands()),
                    ("streams", self.streams()), ("crons", self.crons()),
                    ("store", self.store(tag)), ("remote", self.remote()),
                    ("protocol", self.protocol())]
        for name, section in sections:
            try:
                await section
            except Exception as e:  # noqa: BLE001 - a setup step failed: the rest is not walked
                line = {"call": f"py:{name}.setup", "ok": False, "error": describe(e)}
                print(json.dumps(line), flush=True)
                self.results.append(line)

    async def auth(self):
        async def x_api_key():
            # The key alone, as `x-api-key` (no `Authorization` header).
            only = get_client(url=self.url, api_key=self.key or "none")
            await only.assistants.search(limit=1)
        await self.call("auth.x_api_key", x_api_key)

    async def assistants(self, tag):
        c, aid = self.client, self.aid
        graph_id = aid

        async def search():
            got = await c.assistants.search(limit=50)
            need(any(a["assistant_id"] == aid or a["graph_id"] == aid for a in got),
                 f"`{aid}` not in {short(got)}")
            for a in got:
                self.check_assistant(a)
        await self.call("assistants.search", search)

        async def count():
            n = await c.assistants.count()
            need(isinstance(n, int) and n >= 1, f"count is {n!r}")
        await self.call("assistants.count", count)

        async def get():
            nonlocal graph_id
            a = await c.assistants.get(aid)
            self.check_assistant(a)
            graph_id = a["graph_id"]
        await self.call("assistants.get", get)

        async def graph():
            g = await c.assistants.get_graph(aid)
            need(g.get("nodes") and "edges" in g, f"graph: {short(g)}")
        await self.call("assistants.get_graph", graph)

        async def xray():
            g = await c.assistants.get_graph(aid, xray=True)
            need(g.get("nodes") and "edges" in g, f"graph: {short(g)}")
        await self.call("assistants.get_graph_xray", xray)

        async def schemas():
            s = await c.assistants.get_schemas(aid)
            for f in ("graph_id", "input_schema", "output_schema", "state_schema",
                      "config_schema"):
                need(f in s, f"schemas lack `{f}`: {short(s)}")
            need(isinstance(s["input_schema"], dict) and isinstance(s["state_schema"], dict),
                 f"input/state schema are not JSON Schemas: {short(s)}")
        await self.call("assistants.get_schemas", schemas)

        async def subgraphs():
            s = await c.assistants.get_subgraphs(aid, recurse=True)
            need(isinstance(s, dict), f"subgraphs: {short(s)}")
        await self.call("assistants.get_subgraphs", subgraphs)

        created = {}

        async def create():
            a = await c.assistants.create(graph_id, config={"configurable": {}},
                                          metadata={"walk": tag}, name=f"walk-{tag}")
            self.check_assistant(a)
            need(a["graph_id"] == graph_id and a["assistant_id"] != aid, f"created: {short(a)}")
            created.update(a)
        await self.call("assistants.create", create)
        new = created.get("assistant_id", aid)

        async def search_metadata():
            got = await c.assistants.search(metadata={"walk": tag}, graph_id=graph_id)
            need([a["assistant_id"] for a in got] == [new],
                 f"search by metadata: {[a['assistant_id'] for a in got]}, want [{new}]")
        await self.call("assistants.search_metadata", search_metadata)

        async def update():
            a = await c.assistants.update(new, metadata={"walk": tag, "v": 2})
            need(a["version"] == 2 and a["metadata"].get("v") == 2, f"updated: {short(a)}")
        await self.call("assistants.update", update)

        async def versions():
            v = await c.assistants.get_versions(new)
            need(len(v) >= 2 and all("version" in x for x in v), f"versions: {short(v)}")
        await self.call("assistants.get_versions", versions)

        async def latest():
            a = await c.assistants.set_latest(new, 1)
            need(a["version"] == 1, f"set_latest: {short(a)}")
        await self.call("assistants.set_latest", latest)

        async def delete():
            need(created, "nothing was created to delete")
            await c.assistants.delete(new)
            try:
                await c.assistants.get(new)
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 404, f"get after delete: {describe(e)}")
                return
            raise Check("the assistant is still there after delete")
        await self.call("assistants.delete", delete)

    async def threads(self, tag):
        c, aid, cfg = self.client, self.aid, self.cfg
        ids = {}

        async def create():
            t = await c.threads.create(metadata={"walk": tag})
            self.check_thread(t)
            need(t["status"] == "idle" and t["metadata"].get("walk") == tag, f"thread: {short(t)}")
            ids["fresh"] = t["thread_id"]
        await self.call("threads.create", create)
        fresh = ids.get("fresh") or await self.new_thread(metadata={"walk": tag})

        async def create_if_exists():
            t = await c.threads.create(thread_id=fresh, if_exists="do_nothing")
            need(t["thread_id"] == fresh, f"thread: {short(t)}")
        await self.call("threads.create_if_exists", create_if_exists)

        async def get():
            self.check_thread(await c.threads.get(fresh))
        await self.call("threads.get", get)

        async def update():
            t = await c.threads.update(fresh, metadata={"k": "v"})
            need(t["metadata"].get("k") == "v" and t["metadata"].get("walk") == tag,
                 f"metadata not merged: {short(t)}")
            iso(t, "updated_at")
        await self.call("threads.update", update)

        paused = await self.paused_thread(metadata={"walk": tag, "paused": True})
        # A thread with other values, so that a values filter that is ignored shows.
        done = await self.finished_thread()

        async def search():
            got = await c.threads.search(limit=100)
            need(got, "no thread is listed")
            for t in got:
                self.check_thread(t)
        await self.call("threads.search", search)

        async def search_unrun():
            got = await c.threads.search(ids=[fresh])
            need([t["thread_id"] for t in got] == [fresh],
                 f"a thread never run is not found by ids: got {[t['thread_id'] for t in got]}")
        await self.call("threads.search_never_run", search_unrun)

        async def search_metadata():
            got = await c.threads.search(metadata={"walk": tag}, limit=100)
            ids = [t["thread_id"] for t in got]
            other = [t for t in got if t["metadata"].get("walk") != tag]
            need(sorted(ids) == sorted([fresh, paused]),
                 f"metadata filter: {len(got)} threads, {len(other)} without the metadata, "
                 f"the thread never run {'listed' if fresh in ids else 'missing'}")
        await self.call("threads.search_metadata", search_metadata)

        async def search_status():
            got = await c.threads.search(status="interrupted", limit=100)
            need(all(t["status"] == "interrupted" for t in got)
                 and any(t["thread_id"] == paused for t in got), f"status filter: {short(got)}")
        await self.call("threads.search_status", search_status)

        async def search_values():
            state = await c.threads.get_state(paused)
            key = cfg["values_filter_key"]
            need(isinstance(state["values"].get(key), str),
                 f"the state has no text `{key}`: {short(state['values'])}")
            got = await c.threads.search(values={key: state["values"][key]}, limit=100)
            other = [t for t in got if (t["values"] or {}).get(key) != state["values"][key]]
            need(any(t["thread_id"] == paused for t in got) and not other,
                 f"values filter on `{key}` ignored: {len(got)} threads, {len(other)} "
                 f"with another `{key}`")
        await self.call("threads.search_values", search_values)

        async def search_sort():
            got = await c.threads.search(metadata={"walk": tag}, sort_by="created_at",
                                         sort_order="asc", limit=10)
            need([t["thread_id"] for t in got] == [fresh, paused],
                 f"sorted by created_at: {len(got)} threads, want the 2 with the metadata, "
                 f"oldest first")
        await self.call("threads.search_sort", search_sort)

        async def count():
            n = await c.threads.count(metadata={"walk": tag})
            need(n == 2, f"count with metadata is {n!r}, want 2")
        await self.call("threads.count", count)

        async def thread_interrupts():
            t = await c.threads.get(paused)
            need(t["status"] == "interrupted", f"status {t['status']}")
            self.check_thread(t)
            need(t["interrupts"] and all(isinstance(v, list) and v
                                         for v in t["interrupts"].values()),
                 f"thread.interrupts of a paused thread: {short(t.get('interrupts'))}")
        await self.call("threads.get_interrupts", thread_interrupts)

        async def get_state():
            s = await c.threads.get_state(paused)
            self.check_state(s)
            need(list(s["next"]) == [cfg["interrupt_node"]], f"next: {s['next']}")
            need(s["interrupts"], "state.interrupts is empty")
            need(any(t["interrupts"] for t in s["tasks"]),
                 f"no tasks[].interrupts: {short(s['tasks'])}")
        await self.call("threads.get_state", get_state)

        history = []

        async def get_history():
            h = await c.threads.get_history(paused, limit=100)
            need(len(h) >= 2, f"history of {len(h)} entries")
            for e in h:
                self.check_state(e, history=True)
            need(h[0]["parent_checkpoint"] and h[0]["parent_checkpoint"].get("checkpoint_id")
                 == h[1]["checkpoint"]["checkpoint_id"],
                 f"parent_checkpoint of the head is not the next entry: "
                 f"{short(h[0].get('parent_checkpoint'))}")
            history.extend(h)
        await self.call("threads.get_history", get_history)
        if not history:
            history = await c.threads.get_history(paused, limit=100)
        older = history[1]["checkpoint"]["checkpoint_id"] if len(history) > 1 else None

        async def state_at():
            s = await c.threads.get_state(paused, checkpoint={"checkpoint_id": older,
                                                              "thread_id": paused,
                                                              "checkpoint_ns": ""})
            need(s["checkpoint"]["checkpoint_id"] == older,
                 f"asked {older}, got {s['checkpoint'].get('checkpoint_id')}")
        await self.call("threads.get_state_checkpoint", state_at)

        async def state_at_id():
            s = await c.threads.get_state(paused, checkpoint_id=older)
            need(s["checkpoint"]["checkpoint_id"] == older,
                 f"asked {older}, got {s['checkpoint'].get('checkpoint_id')}")
        await self.call("threads.get_state_checkpoint_id", state_at_id)

        async def history_before():
            h = await c.threads.get_history(paused, before=history[0]["checkpoint"], limit=100)
            need([e["checkpoint"]["checkpoint_id"] for e in h]
                 == [e["checkpoint"]["checkpoint_id"] for e in history[1:]],
                 "`before` does not list the older entries")
        await self.call("threads.get_history_before", history_before)

        async def history_limit():
            h = await c.threads.get_history(paused, limit=1)
            need(len(h) == 1, f"{len(h)} entries for limit 1")
        await self.call("threads.get_history_limit", history_limit)

        async def history_checkpoint():
            h = await c.threads.get_history(paused, checkpoint={"checkpoint_id": older}, limit=100)
            need(h and all(e["checkpoint"]["checkpoint_id"] == older for e in h),
                 f"checkpoint filter ignored: {len(h)} entries, first "
                 f"{h[0]['checkpoint'].get('checkpoint_id') if h else None}")
        await self.call("threads.get_history_checkpoint", history_checkpoint)

        async def history_metadata():
            source = history[0]["metadata"].get("source")
            need(source, f"the head's metadata has no `source`: {short(history[0]['metadata'])}")
            h = await c.threads.get_history(paused, metadata={"source": source}, limit=100)
            want = [e for e in history if e["metadata"].get("source") == source]
            need(len(h) == len(want) and len(want) < len(history),
                 f"metadata filter: {len(h)} entries, want {len(want)} of {len(history)}")
        await self.call("threads.get_history_metadata", history_metadata)

        async def update_state():
            r = await c.threads.update_state(done, cfg["update"])
            need(r.get("checkpoint", {}).get("checkpoint_id"), f"answer: {short(r)}")
            s = await c.threads.get_state(done)
            for k, v in cfg["update"].items():
                need(s["values"].get(k) == v, f"`{k}` is {short(s['values'].get(k))}")
        await self.call("threads.update_state", update_state)

        async def update_state_as_node():
            r = await c.threads.update_state(done, cfg["update"], as_node=cfg["as_node"])
            need(r.get("checkpoint", {}).get("checkpoint_id"), f"answer: {short(r)}")
            h = await c.threads.get_history(done, limit=1)
            need(h[0]["metadata"].get("source") == "update", f"head: {short(h[0]['metadata'])}")
        await self.call("threads.update_state_as_node", update_state_as_node)

        async def update_state_checkpoint():
            h = await c.threads.get_history(done, limit=100)
            r = await c.threads.update_state(done, cfg["update"], checkpoint=h[-1]["checkpoint"])
            need(r.get("checkpoint", {}).get("checkpoint_id"), f"answer: {short(r)}")
        await self.call("threads.update_state_checkpoint", update_state_checkpoint)

        async def copy():
            t = await c.threads.copy(done)
            need(t["thread_id"] != done, f"copy: {short(t)}")
            ids["copy"] = t["thread_id"]
            s = await c.threads.get_state(t["thread_id"])
            need(s["values"], "the copy has no values")
        await self.call("threads.copy", copy)

        async def prune():
            need(ids.get("copy"), "no copy to prune")
            r = await c.threads.prune([ids["copy"]])
            need(r.get("pruned_count") == 1, f"prune: {short(r)}")
        await self.call("threads.prune", prune)

        async def join_stream():
            tid = await self.new_thread()
            # Pending for a second, so the stream joins before the run starts, as a client that
            # watches a thread does.
            await c.runs.create(tid, aid, input=cfg["plain_input"], stream_mode=["values"],
                                after_seconds=1)
            events = []
            async for p in await c.threads.join_stream(tid):
                events.append(p.event)
                if p.event in ("values", "updates"):
                    break
            need("values" in events or "updates" in events, f"events: {events}")
        await self.call("threads.join_stream", join_stream)

        async def delete():
            await c.threads.delete(fresh)
            try:
                await c.threads.get(fresh)
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 404, f"get after delete: {describe(e)}")
                return
            raise Check("the thread is still there")
        await self.call("threads.delete", delete)

    async def runs(self):
        c, aid, cfg = self.client, self.aid, self.cfg
        tid = await self.new_thread()
        made = {}

        async def create():
            r = await c.runs.create(tid, aid, input=cfg["plain_input"], metadata={"from": "walk"})
            self.check_run(r)
            made.update(r)
        await self.call("runs.create", create)

        async def join():
            v = await c.runs.join(tid, made["run_id"])
            need(isinstance(v, dict) and v, f"join: {short(v)}")
        await self.call("runs.join", join)

        async def get():
            r = await c.runs.get(tid, made["run_id"])
            self.check_run(r)
            need(r["status"] == "success" and r["metadata"].get("from") == "walk", short(r))
        await self.call("runs.get", get)

        async def list_():
            rs = await c.runs.list(tid)
            need([r["run_id"] for r in rs] == [made["run_id"]], short(rs))
            for r in rs:
                self.check_run(r)
        await self.call("runs.list", list_)

        async def wait():
            t = await self.new_thread()
            out = await c.runs.wait(t, aid, input=cfg["input"])
            need(out.get("__interrupt__"), f"no __interrupt__ in {short(out)}")
            out = await c.runs.wait(t, aid, command={"resume": cfg["resume"]})
            need(not out.get("__interrupt__"), f"still paused: {short(out)}")
        await self.call("runs.wait", wait)

        async def stream():
            t = await self.new_thread()
            ev = [p.event async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                       stream_mode=["values", "updates"])]
            need(ev[0] == "metadata" and "values" in ev and "updates" in ev, f"events: {ev}")
        await self.call("runs.stream", stream)

        async def on_run_created():
            t = await self.new_thread()
            seen = []
            parts = [p async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                    on_run_created=seen.append)]
            need(seen and seen[0].get("run_id") == parts[0].data["run_id"],
                 f"on_run_created got {seen} (no Content-Location header?)")
        await self.call("runs.stream_on_run_created", on_run_created)

        async def create_content_location():
            t = await self.new_thread()
            seen = []
            r = await c.runs.create(t, aid, input=cfg["plain_input"], on_run_created=seen.append)
            need(seen and seen[0].get("run_id") == r["run_id"],
                 f"on_run_created got {seen} (no Content-Location header?)")
        await self.call("runs.create_on_run_created", create_content_location)

        async def stateless_create():
            r = await c.runs.create(None, aid, input=cfg["plain_input"])
            need(r.get("run_id"), short(r))
        await self.call("runs.create_stateless", stateless_create)

        async def stateless_wait():
            out = await c.runs.wait(None, aid, input=cfg["plain_input"])
            need(isinstance(out, dict) and out, short(out))
        await self.call("runs.wait_stateless", stateless_wait)

        async def stateless_stream():
            ev = [p.event async for p in c.runs.stream(None, aid, input=cfg["plain_input"])]
            need(ev and ev[0] == "metadata" and "values" in ev, f"events: {ev}")
        await self.call("runs.stream_stateless", stateless_stream)

        async def batch():
            rs = await c.runs.create_batch([
                {"assistant_id": aid, "input": cfg["plain_input"]},
                {"assistant_id": aid, "input": cfg["plain_input"]},
            ])
            need(len(rs) == 2 and all(r.get("run_id") for r in rs), short(rs))
        await self.call("runs.create_batch", batch)

        async def join_stream():
            t = await self.new_thread()
            parts = [p async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                    stream_mode="updates",
                                                    stream_resumable=True)]
            rid = parts[0].data["run_id"]
            again = [p async for p in c.runs.join_stream(t, rid, last_event_id=parts[1].id)]
            need([p.id for p in again] == [p.id for p in parts[2:]],
                 f"rejoined {[p.id for p in again]}, want {[p.id for p in parts[2:]]}")
        await self.call("runs.join_stream", join_stream)

        async def cancel():
            t = await self.new_thread()
            r = await c.runs.create(t, aid, input=cfg["plain_input"])
            await c.runs.cancel(t, r["run_id"], wait=True, action="interrupt")
            got = await c.runs.get(t, r["run_id"])
            need(got["status"] == "interrupted", f"status after cancel: {got['status']}")
        await self.call("runs.cancel", cancel)

        async def cancel_rollback():
            t = await self.new_thread()
            r = await c.runs.create(t, aid, input=cfg["plain_input"])
            await c.runs.cancel(t, r["run_id"], wait=True, action="rollback")
            try:
                got = await c.runs.get(t, r["run_id"])
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 404, describe(e))
                return
            raise Check(f"the rolled-back run is still there: {got['status']}")
        await self.call("runs.cancel_rollback", cancel_rollback)

        async def cancel_many():
            t = await self.new_thread()
            r = await c.runs.create(t, aid, input=cfg["plain_input"])
            await c.runs.cancel_many(thread_id=t, run_ids=[r["run_id"]], action="interrupt")
            await c.runs.join(t, r["run_id"])
            got = await c.runs.get(t, r["run_id"])
            need(got["status"] == "interrupted", f"status after cancel_many: {got['status']}")
        await self.call("runs.cancel_many", cancel_many)

        async def delete():
            t = await self.new_thread()
            r = await c.runs.create(t, aid, input=cfg["plain_input"])
            await c.runs.join(t, r["run_id"])
            await c.runs.delete(t, r["run_id"])
            try:
                await c.runs.get(t, r["run_id"])
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 404, describe(e))
                return
            raise Check("the run is still there after delete")
        await self.call("runs.delete", delete)

        async def if_not_exists():
            t = str(uuid.uuid4())
            r = await c.runs.create(t, aid, input=cfg["plain_input"], if_not_exists="create")
            need(r["thread_id"] == t, short(r))
            await c.runs.join(t, r["run_id"])
            self.check_thread(await c.threads.get(t))
        await self.call("runs.if_not_exists_create", if_not_exists)

        async def interrupt_before():
            t = await self.new_thread()
            await c.runs.wait(t, aid, input=cfg["plain_input"],
                              interrupt_before=[cfg["interrupt_before"]])
            s = await c.threads.get_state(t)
            need(list(s["next"]) == [cfg["interrupt_before"]],
                 f"next is {s['next']}, want [{cfg['interrupt_before']}]")
        await self.call("runs.interrupt_before", interrupt_before)

        async def interrupt_after():
            t = await self.new_thread()
            await c.runs.wait(t, aid, input=cfg["plain_input"],
                              interrupt_after=[cfg["interrupt_before"]])
            s = await c.threads.get_state(t)
            h = await c.threads.get_history(t, limit=100)
            need(s["next"] and (await c.threads.get(t))["status"] == "interrupted",
                 f"next is {s['next']} after interrupt_after ({len(h)} checkpoints)")
        await self.call("runs.interrupt_after", interrupt_after)

        async def after_seconds():
            t = await self.new_thread()
            r = await c.runs.create(t, aid, input=cfg["plain_input"], after_seconds=1)
            need(r["status"] == "pending", f"a run delayed 1 s is {r['status']}")
            await c.runs.join(t, r["run_id"])
            need((await c.runs.get(t, r["run_id"]))["status"] == "success", "did not run")
        await self.call("runs.after_seconds", after_seconds)

        async def durability():
            t = await self.new_thread()
            out = await c.runs.wait(t, aid, input=cfg["plain_input"], durability="exit")
            need(isinstance(out, dict) and out, short(out))
        await self.call("runs.durability_exit", durability)

        async def time_travel():
            t = await self.paused_thread()
            await c.runs.wait(t, aid, command={"resume": cfg["resume"]})
            h = await c.threads.get_history(t, limit=100)
            at = next((e for e in h if list(e["next"]) == [cfg["interrupt_node"]]), None)
            need(at, f"no history entry has next == [{cfg['interrupt_node']}]: "
                     f"{[e['next'] for e in h]}")
            out = await c.runs.wait(t, aid, input=None, checkpoint=at["checkpoint"])
            need(out.get("__interrupt__"), f"replay from the pause did not pause: {short(out)}")
        await self.call("runs.checkpoint_time_travel", time_travel)

    async def multitask(self):
        c, aid, cfg = self.client, self.aid, self.cfg

        async def two(strategy):
            t = await self.new_thread()
            first = await c.runs.create(t, aid, input=cfg["plain_input"])
            second = await c.runs.create(t, aid, input=cfg["plain_input"],
                                         multitask_strategy=strategy)
            await c.runs.join(t, second["run_id"])
            return t, first, second

        async def reject():
            t = await self.new_thread()
            await c.runs.create(t, aid, input=cfg["plain_input"])
            try:
                await c.runs.create(t, aid, input=cfg["plain_input"], multitask_strategy="reject")
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 409, describe(e))
                return
            raise Check("a second run on a busy thread was accepted")
        await self.call("runs.multitask_reject", reject)

        async def enqueue():
            t, first, second = await two("enqueue")
            a = await c.runs.get(t, first["run_id"])
            b = await c.runs.get(t, second["run_id"])
            need(a["status"] == "success" and b["status"] == "success",
                 f"{a['status']} / {b['status']}")
        await self.call("runs.multitask_enqueue", enqueue)

        async def interrupt():
            t, first, second = await two("interrupt")
            a = await c.runs.get(t, first["run_id"])
            b = await c.runs.get(t, second["run_id"])
            need(a["status"] == "interrupted" and b["status"] == "success",
                 f"{a['status']} / {b['status']}")
        await self.call("runs.multitask_interrupt", interrupt)

        async def rollback():
            t, first, second = await two("rollback")
            b = await c.runs.get(t, second["run_id"])
            need(b["status"] == "success", f"second: {b['status']}")
            try:
                a = await c.runs.get(t, first["run_id"])
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 404, describe(e))
                return
            raise Check(f"the rolled-back first run is still there: {a['status']}")
        await self.call("runs.multitask_rollback", rollback)

    async def commands(self):
        c, aid, cfg = self.client, self.aid, self.cfg

        async def resume():
            t = await self.paused_thread()
            out = await c.runs.wait(t, aid, command={"resume": cfg["resume"]})
            need(not out.get("__interrupt__") and (await c.threads.get(t))["status"] == "idle",
                 short(out))
        await self.call("runs.command_resume", resume)

        async def goto():
            t = await self.paused_thread()
            out = await c.runs.wait(t, aid, command={"goto": cfg["goto"]})
            for k, v in cfg["goto_expect"].items():
                need(out.get(k) == v, f"after goto `{k}` is {short(out.get(k))}, want {v!r}")
        await self.call("runs.command_goto", goto)

        async def update():
            t = await self.paused_thread()
            out = await c.runs.wait(t, aid, command={"update": cfg["update"],
                                                     "resume": cfg["resume"]})
            for k, v in cfg["update"].items():
                need(out.get(k) == v, f"after update `{k}` is {short(out.get(k))}")
        await self.call("runs.command_update", update)

    async def streams(self):
        c, aid, cfg = self.client, self.aid, self.cfg

        for mode in cfg["all_stream_modes"]:
            async def one(mode=mode):
                t = await self.new_thread()
                ev = [p.event async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                           stream_mode=mode)]
                need(ev and ev[0] == "metadata", f"events: {ev[:5]}")
                if mode in cfg["stream_modes_with_events"]:
                    base = "messages" if mode.startswith("messages") else mode
                    need(any(e.split("|")[0].split("/")[0] == base for e in ev),
                         f"only {sorted(set(ev))} for stream_mode {mode}")
            await self.call(f"stream.{mode}", one)

        async def interrupt_in_updates():
            t = await self.new_thread()
            parts = [p async for p in c.runs.stream(t, aid, input=cfg["input"],
                                                    stream_mode="updates")]
            need(any(p.event == "updates" and isinstance(p.data, dict)
                     and "__interrupt__" in p.data for p in parts),
                 "no `updates` event carries `__interrupt__`")
        await self.call("stream.updates_interrupt", interrupt_in_updates)

        async def subgraphs():
            t = await self.new_thread()
            ev = [p.event async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                       stream_mode="updates",
                                                       stream_subgraphs=True)]
            need(any(e.startswith("updates") for e in ev), f"events: {sorted(set(ev))}")
        await self.call("stream.subgraphs", subgraphs)

        async def unknown():
            t = await self.new_thread()
            try:
                [p async for p in c.runs.stream(t, aid, input=cfg["plain_input"],
                                                stream_mode="no-such-mode")]
            except Exception as e:  # noqa: BLE001
                need(status_of(e) == 422, describe(e))
                return
            raise Check("an unknown stream mode was accepted")
        await self.call("stream.unknown_mode_422", unknown)

    async def crons(self):
        c, aid, cfg = self.client, self.aid, self.cfg
        made = {}

        def check_cron(x):
            self.shape(x, "cron", ("cron_id", "assistant_id", "thread_id", "schedule", "payload",
                                   "metadata", "next_run_date"), ("created_at", "updated_at"))

        async def create():
            x = await c.crons.create(aid, schedule="*/5 * * * *", input=cfg["plain_input"])
            check_cron(x)
            made["stateless"] = x["cron_id"]
        await self.call("crons.create", create)

        async def for_thread():
            t = await self.new_thread()
            x = await c.crons.create_for_thread(t, aid, schedule="*/5 * * * *",
                                                input=cfg["plain_input"])
            check_cron(x)
            need(x.get("thread_id") == t, short(x))
            made["thread"] = x["cron_id"]
        await self.call("crons.create_for_thread", for_thread)

        async def search():
            got = await c.crons.search(assistant_id=aid, limit=100)
            need(set(made.values()) <= {x["cron_id"] for x in got} and made, short(got))
        await self.call("crons.search", search)

        async def count():
            n = await c.crons.count(assistant_id=aid)
            need(isinstance(n, int) and n >= len(made) and made, f"count {n!r}")
        await self.call("crons.count", count)

        async def update():
            need(made.get("stateless"), "no cron to update")
            x = await c.crons.update(made["stateless"], schedule="*/10 * * * *")
            need(x["schedule"] == "*/10 * * * *", short(x))
        await self.call("crons.update", update)

        async def delete():
            need(made, "no cron to delete")
            for cid in made.values():
                await c.crons.delete(cid)
            got = await c.crons.search(assistant_id=aid, limit=100)
            need(not set(made.values()) & {x["cron_id"] for x in got}, "still listed")
        await self.call("crons.delete", delete)

    async def store(self, tag):
        c = self.client
        ns = ["walk", tag]

        async def put():
            await c.store.put_item(ns, "a", {"text": "alpha", "n": 1})
        await self.call("store.put", put)

        async def put_index_ttl():
            await c.store.put_item(ns + ["deep"], "b", {"text": "beta"}, index=["text"], ttl=30)
            await c.store.put_item(ns, "c", {"text": "gamma"}, index=False)
        await self.call("store.put_index_ttl", put_index_ttl)

        async def get():
            it = await c.store.get_item(ns, "a")
            need(it["value"] == {"text": "alpha", "n": 1} and it["namespace"] == ns, short(it))
            iso(it, "created_at", "updated_at")
        await self.call("store.get", get)

        async def refresh():
            it = await c.store.get_item(ns + ["deep"], "b", refresh_ttl=True)
            need(it["value"] == {"text": "beta"}, short(it))
        await self.call("store.get_refresh_ttl", refresh)

        async def search():
            got = await c.store.search_items(ns, filter={"n": 1})
            need([i["key"] for i in got["items"]] == ["a"], short(got))
        await self.call("store.search", search)

        async def search_query():
            got = await c.store.search_items(ns, query="beta", limit=5)
            need([i["key"] for i in got["items"]] == ["b"] and got["items"][0]["score"] > 0, short(got))
        await self.call("store.search_query", search_query)

        async def namespaces():
            got = await c.store.list_namespaces(prefix=ns, max_depth=3)
            need(sorted(got["namespaces"]) == sorted([ns, ns + ["deep"]]), short(got))
        await self.call("store.list_namespaces", namespaces)

        async def delete():
            await c.store.delete_item(ns, "a")
            got = await c.store.search_items(ns, filter={"n": 1})
            need(got["items"] == [], short(got))
        await self.call("store.delete", delete)

    async def remote(self):
        from langgraph.pregel.remote import RemoteGraph
        aid, cfg = self.aid, self.cfg
        remote = RemoteGraph(aid, url=self.url, api_key=self.key, headers=self.headers)

        def conf(t):
            return {"configurable": {"thread_id": t}}
        holder = {}

        async def invoke():
            t = await self.new_thread()
            holder["t"] = t
            out = await remote.ainvoke(cfg["plain_input"], conf(t))
            need(isinstance(out, dict) and out, short(out))
        await self.call("remote.invoke", invoke)

        async def invoke_stateless():
            out = await remote.ainvoke(cfg["plain_input"])
            need(isinstance(out, dict) and out, short(out))
        await self.call("remote.invoke_stateless", invoke_stateless)

        async def stream():
            t = await self.new_thread()
            chunks = [ch async for ch in remote.astream(cfg["plain_input"], conf(t),
                                                         stream_mode="updates")]
            need(chunks, "no chunks")
        await self.call("remote.stream", stream)

        t = holder.get("t") or await self.finished_thread()

        async def get_state():
            s = await remote.aget_state(conf(t))
            need(s.values and s.config["configurable"].get("checkpoint_id"), repr(s)[:300])
        await self.call("remote.get_state", get_state)

        async def history():
            h = [s async for s in remote.aget_state_history(conf(t))]
            need(len(h) >= 2 and all(s.created_at for s in h), f"{len(h)} snapshots")
        await self.call("remote.get_state_history", history)

        async def update_state():
            out = await remote.aupdate_state(conf(t), cfg["update"])
            need(out["configurable"].get("checkpoint_id"), short(out))
        await self.call("remote.update_state", update_state)

        async def get_graph():
            g = await remote.aget_graph()
            need(g.nodes, "no nodes")
        await self.call("remote.get_graph", get_graph)

        async def as_node():
            from typing import Any, Optional
            from typing_extensions import TypedDict
            from langgraph.checkpoint.memory import InMemorySaver
            from langgraph.graph import StateGraph, START
            from langgraph.types import Command
            fields = {k: Optional[Any] for k in list(cfg["input"]) + ["status"]}
            State = TypedDict("State", fields, total=False)
            parent = (StateGraph(State).add_node("remote", remote)
                      .add_edge(START, "remote").compile(checkpointer=InMemorySaver()))
            hexdigits = set("0123456789abcdef")

            async def paused_parent():
                pc = conf(str(uuid.uuid4()))
                out = await parent.ainvoke(cfg["input"], pc)
                need("__interrupt__" in out, f"the parent did not pause: {short(out)}")
                ids = [i.id for i in out["__interrupt__"]]
                need(all(len(i) == 32 and set(i) <= hexdigits for i in ids),
                     f"interrupt ids a parent cannot forward as a resume map: {ids}")
                return pc, out["__interrupt__"]
            # The documented way to answer specific interrupts: a map of id to value, which the
            # parent forwards to the server (`configurable.__pregel_resume_map`).
            pc, interrupts = await paused_parent()
            out = await parent.ainvoke(Command(resume={i.id: cfg["resume"] for i in interrupts}),
                                       pc)
            need("__interrupt__" not in out, f"the resume did not reach the remote: {short(out)}")
            # A single value never leaves the parent's process: the remote node runs again with
            # no answer and asks again (docs/server.md).
            pc, interrupts = await paused_parent()
            out = await parent.ainvoke(Command(resume=cfg["resume"]), pc)
            need([i.id for i in out.get("__interrupt__", [])] == [i.id for i in interrupts],
                 f"a single resume value: want the same question again, got {short(out)}")
        await self.call("remote.as_node_interrupt", as_node)

    async def protocol(self):
        """The thread-centric protocol (`client.threads.stream`, `/threads/{id}/commands` and
        `/threads/{id}/stream/events`)."""
        c, aid, cfg = self.client, self.aid, self.cfg

        async def start_values():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:
                await ts.run.start(input=cfg["plain_input"])
                out = await ts.output
                need(isinstance(out, dict) and out, short(out))
        await self.call("protocol.run_start_output", start_values)

        async def respond():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:
                await ts.run.start(input=cfg["input"])
                for _ in range(400):
                    if ts.interrupts:
                        break
                    await asyncio.sleep(0.05)
                need(ts.interrupts, "no interrupt seen")
                await ts.run.respond(cfg["resume"])
        await self.call("protocol.input_respond", respond)

        # The same over the WebSocket transport (its handshake carries only the stream's headers).
        ws = {"transport": "websocket", "headers": {"x-api-key": self.key} if self.key else None}

        async def ws_start_values():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20, **ws) as ts:
                await ts.run.start(input=cfg["plain_input"])
                out = await ts.output
                need(isinstance(out, dict) and out, short(out))
        await self.call("protocol.ws_run_start_output", ws_start_values)

        async def ws_respond():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20, **ws) as ts:
                await ts.run.start(input=cfg["input"])
                for _ in range(400):
                    if ts.interrupts:
                        break
                    await asyncio.sleep(0.05)
                need(ts.interrupts, "no interrupt seen")
                await ts.run.respond(cfg["resume"])
        await self.call("protocol.ws_input_respond", ws_respond)

        # Every channel, through the SDK's all-channel stream: each protocol run carries these.
        async def all_channels():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:
                await ts.run.start(input=cfg["plain_input"])
                seen = set()
                async for e in ts.events:
                    seen.add(e["method"])
                    data = e["params"].get("data") or {}
                    if e["method"] == "lifecycle" and not e["params"]["namespace"] and \
                            data.get("event") in ("completed", "interrupted", "failed"):
                        break
                want = {"values", "updates", "messages", "lifecycle", "checkpoints", "tasks"}
                need(want <= seen, f"missing {sorted(want - seen)} (saw {sorted(seen)})")
                need("tools" not in seen, "tool events from a graph without tools")
        await self.call("protocol.events_all_channels", all_channels)

        async def messages():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:
                await ts.run.start(input=cfg["plain_input"])
                async for m in ts.messages:
                    need(m.message_id, "a message without an id")
                    break
                else:
                    need(False, "no messages")
        await self.call("protocol.messages", messages)

        async def tool_calls():
            got = []
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:

                async def read():
                    async for t in ts.tool_calls:
                        got.append(t)
                await ts.run.start(input=cfg["plain_input"])
                reading = asyncio.create_task(read())
                await ts.output
            # The projection ends when the stream closes, the run's tool events all read.
            await asyncio.wait_for(reading, 10)
            need(not got, f"tool calls from a graph without tools: {got}")
        await self.call("protocol.tool_calls", tool_calls)

        async def get_tree():
            async with c.threads.stream(assistant_id=aid, run_start_timeout=20) as ts:
                tree = await ts.agent.get_tree()
                need(tree.get("nodes"), short(tree))
        await self.call("protocol.agent_get_tree", get_tree)


ONLY = None
VERBOSE = False


async def main():
    global ONLY, VERBOSE
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--assistant", default="research")
    ap.add_argument("--config", default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    ONLY, VERBOSE = a.only, a.v
    cfg = dict(DEFAULTS)
    if a.config:
        with open(a.config) as f:
            cfg.update(json.load(f))
    w = Walk(a.url, a.api_key, a.assistant, cfg)
    await w.run()
    ok = sum(r["ok"] for r in w.results)
    print(f"# python: {ok} of {len(w.results)} calls pass", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
