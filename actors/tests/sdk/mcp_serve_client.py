"""The official Python `mcp` client against `planwright serve`'s `/mcp`: lists the tools, calls
one whose run pauses, resumes it on the thread the result names, and calls an unknown tool.
Prints one JSON object with what it saw, for the Rust test to check.

Usage: mcp_serve_client.py URL TOKEN TOOL INPUT_JSON RESUME_JSON
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def result_json(r):
    return {
        "is_error": bool(r.is_error),
        "text": [c.text for c in r.content if getattr(c, "type", None) == "text"],
        "structured": r.structured_content,
    }


async def main(url, token, tool, given, answer):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            tools = {t.name: {"description": t.description, "input_schema": t.input_schema} for t in listed.tools}
            first = await session.call_tool(tool, arguments=given)
            thread = (first.structured_content or {}).get("thread_id")
            resumed = await session.call_tool(tool, arguments={"thread_id": thread, "resume": answer})
            unknown_error = None
            try:
                unknown = await session.call_tool("no-such-tool", arguments={})
                unknown_error = {"result": result_json(unknown)}
            except Exception as e:  # the SDK raises a JSON-RPC error
                unknown_error = {"error": str(e)}
            bad = await session.call_tool(tool, arguments={"resume": answer})
    print(json.dumps({
        "server": init.server_info.name,
        "tools": tools,
        "first": result_json(first),
        "resumed": result_json(resumed),
        "unknown": unknown_error,
        "resume_without_thread": result_json(bad),
    }))


if __name__ == "__main__":
    url, token, tool, given, answer = sys.argv[1:6]
    asyncio.run(main(url, token, tool, json.loads(given), json.loads(answer)))
