"""Drives `planwright serve` with the official LangGraph SDK (langgraph-sdk from PyPI).

Usage: sdk_client.py URL. Exits non-zero (with the failed assertion) when the server does not
behave as the SDK expects.
"""
import asyncio
import json
import pathlib
import sys

from langgraph_sdk import get_client

FIELD = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "field"

GOAL = ("Create a short research brief on whether our support team should adopt "
        "retrieval-augmented generation for customer support")


async def main(url: str) -> None:
    client = get_client(url=url)
    thread = await client.threads.create(metadata={"who": "sdk"})
    tid = thread["thread_id"]
    assert thread["status"] == "idle", thread

    # Run and wait: the planner pauses for plan approval.
    out = await client.runs.wait(
        tid, "research",
        input={"input": GOAL, "constraints": {"require_approval": True, "max_steps": 4}})
    assert out["status"] == "interrupted", out
    assert out["__interrupt__"][0]["value"]["plan"], out

    # The interrupt is visible in the thread's state and status.
    state = await client.threads.get_state(tid)
    assert state["next"] == ["review_plan"], state
    assert len(state["interrupts"]) == 1, state
    assert (await client.threads.get(tid))["status"] == "interrupted"

    # Resume with a command.
    out = await client.runs.wait(tid, "research", command={"resume": {"action": "approve"}})
    assert out["status"] == "ok", out
    assert "[rag-" in out["final_report"], out

    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "ok", state
    assert any(t["thread_id"] == tid for t in await client.threads.search(limit=50))

    # Stream a run on a second thread.
    other = await client.threads.create()
    events = []
    last_values = None
    async for part in client.runs.stream(other["thread_id"], "research",
                                         input={"input": GOAL}, stream_mode=["values", "updates"]):
        events.append(part.event)
        if part.event == "values":
            last_values = part.data
    assert events[0] == "metadata", events
    assert "updates" in events and "values" in events, events
    assert last_values["status"] == "ok", last_values
    # Rejoin that stream after its second event: the rest, each event once, by id.
    parts = []
    async for part in client.runs.stream(other["thread_id"], "research",
                                         input={"input": GOAL}, stream_mode="updates",
                                         stream_resumable=True):
        parts.append(part)
    run_id = parts[0].data["run_id"]
    rejoined = [p async for p in client.runs.join_stream(
        other["thread_id"], run_id, last_event_id=parts[1].id)]
    assert [p.id for p in rejoined] == [p.id for p in parts[2:]], (parts, rejoined)
    only = [p async for p in client.runs.join_stream(
        other["thread_id"], run_id, stream_mode=["updates"])]
    assert [p.event for p in only] == ["updates"] * (len(parts) - 1), only
    # A background run joined as LangGraph's docs show (`runs.create`, then `runs.join_stream`,
    # no `stream_resumable`): it streams live from the join, ending with the final values.
    bg = await client.runs.create(other["thread_id"], "research", input={"input": GOAL},
                                  stream_mode=["values"])
    live = [p async for p in client.runs.join_stream(other["thread_id"], bg["run_id"])]
    assert live[0].event == "metadata", live
    assert live[-1].event == "values" and live[-1].data["status"] == "ok", live

    # The acquire assistant: each question is an interrupt, answered with a resume command.
    acq = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(
        acq, "acquire",
        input={"schema": json.loads((FIELD / "dental.schema.json").read_text()),
               "corpus": json.loads((FIELD / "dental.corpus.json").read_text()),
               "goal": "Size the dental practice software market"})
    assert out["status"] == "interrupted", out
    assert out["__interrupt__"][0]["value"]["field"] == "region", out
    out = await client.runs.wait(acq, "acquire", command={"resume": "Nordland"})
    assert out["status"] == "interrupted", out
    assert out["__interrupt__"][0]["value"]["field"] == "currency", out
    assert out["fields"]["region"]["value"] == "Nordland", out
    state = await client.threads.get_state(acq)
    assert state["interrupts"][0]["value"]["field"] == "currency", state
    # The store, through the SDK's store client.
    await client.store.put_item(["users", "sdk"], "prefs", {"lang": "fr", "n": 1})
    await client.store.put_item(["users", "sdk", "notes"], "n1", {"lang": "de"}, ttl=30)
    item = await client.store.get_item(["users", "sdk"], "prefs")
    assert item["value"] == {"lang": "fr", "n": 1}, item
    assert item["namespace"] == ["users", "sdk"], item
    found = await client.store.search_items(["users"], filter={"lang": "fr"})
    assert [i["key"] for i in found["items"]] == ["prefs"], found
    found = await client.store.search_items(["users", "sdk"], limit=1, offset=1)
    assert [i["key"] for i in found["items"]] == ["n1"], found
    spaces = await client.store.list_namespaces(prefix=["users"], max_depth=2)
    assert spaces["namespaces"] == [["users", "sdk"]], spaces
    await client.store.delete_item(["users", "sdk"], "prefs")
    found = await client.store.search_items(["users"])
    assert [i["key"] for i in found["items"]] == ["n1"], found
    # Background runs through the SDK's runs client: create, join, get, list, cancel.
    bg = (await client.threads.create())["thread_id"]
    run = await client.runs.create(bg, "research", input={"input": GOAL},
                                   metadata={"from": "sdk"})
    assert run["status"] in ("pending", "running"), run
    values = await client.runs.join(bg, run["run_id"])
    assert values["status"] == "ok", values
    got = await client.runs.get(bg, run["run_id"])
    assert got["status"] == "success" and got["metadata"] == {"from": "sdk"}, got
    listed = await client.runs.list(bg)
    assert [r["run_id"] for r in listed] == [run["run_id"]], listed
    # Cancelling a run that has ended is a no-op.
    await client.runs.cancel(bg, run["run_id"], wait=True, action="interrupt")
    print("sdk ok:", len(events), "stream events")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
