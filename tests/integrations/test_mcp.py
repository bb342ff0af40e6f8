"""The MCP middleware, with the MCP SDK's in-memory client and server (no network) (CIS-ECO-4)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
from mcp.client.client import Client
from mcp.server import Server

from invocation_store.integrations.mcp import RUN_ID_KEY, TOOL_CALL_ID_KEY, boundary_call_tool, call_meta

from ._support import RUN, Lookup, async_boundary, code


async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
    return mcp_types.ListToolsResult(tools=[mcp_types.Tool(name="lookup", input_schema={"type": "object"})])


async def echo(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
    """A server's own handler, for tools the boundary does not know."""
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=f"inner {params.name}")])


def text(result: mcp_types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def test_tools_call_takes_id_and_run_from_meta_never_the_jsonrpc_id() -> None:
    """CIS-ECO-4, CIS-ID-6: _meta carries the ids; absent is MISSING_TOOL_CALL_ID; never the JSON-RPC id."""
    lookup = Lookup()

    async def main() -> dict[str, Any]:
        boundary, store, context = await async_boundary(lookup)
        server = Server("ops", on_list_tools=list_tools, on_call_tool=boundary_call_tool(boundary, context))
        async with Client(server) as client:
            ok = await client.call_tool("lookup", {"q": "x"}, meta=call_meta("call_M1", RUN))
            no_id = await client.call_tool("lookup", {"q": "x"})
            no_run = await client.call_tool("lookup", {"q": "x"}, meta={TOOL_CALL_ID_KEY: "call_M2"})
            other_run = await client.call_tool("lookup", {}, meta=call_meta("call_M3", "run-other"))
            again = await client.call_tool("lookup", {"q": "y"}, meta=call_meta("call_M1", RUN))
            unknown = await client.call_tool("launch", {}, meta=call_meta("call_M4", RUN))
        return {
            "results": [ok, no_id, no_run, other_run, again, unknown],
            "calls": await store.calls(RUN),
            "request": (await store.get(RUN, "call_M1")).request_json,
        }

    found = anyio.run(main)
    results = found["results"]
    assert [code(text(r)) for r in results] == [
        None,
        "MISSING_TOOL_CALL_ID",
        "RUN_MISMATCH",
        "RUN_MISMATCH",
        "DUPLICATE_TOOL_CALL",
        "UNAUTHORIZED",
    ]
    assert [r.is_error for r in results] == [False, True, True, True, True, True]
    assert found["calls"] == ("call_M1",)  # request ids 1, 2, ... never became tool_call_ids
    assert json.loads(found["request"]) == {"q": "x"}
    assert lookup.calls == [{"q": "x"}]
    assert all("RAW-ONLY" not in text(r) for r in results)


def test_middleware_hands_unknown_tools_to_the_inner_handler() -> None:
    """CIS-ECO-4: wrapping an existing server, only the boundary's tools go through the boundary."""

    async def main() -> tuple[str, str]:
        boundary, _, context = await async_boundary(Lookup())
        handler = boundary_call_tool(boundary, lambda run_id: context, inner=echo)
        server = Server("ops", on_list_tools=list_tools, on_call_tool=handler)
        async with Client(server) as client:
            mine = await client.call_tool("lookup", {}, meta={TOOL_CALL_ID_KEY: "c1", RUN_ID_KEY: RUN})
            theirs = await client.call_tool("weather", {})
        return text(mine), text(theirs)

    mine, theirs = anyio.run(main)
    assert code(mine) is None
    assert theirs == "inner weather"
