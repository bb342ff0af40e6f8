"""The Google ADK adapter against a stand-in of ADK's tool interface (CIS-ECO-4, CIS-ID-6).

google-adk 2.x pins ``google-genai<3`` and OpenTelemetry ``<=1.44``, which conflict
with the versions ``dev`` pins, so ADK itself is not installed here (its runner drives
the adapter in tests/integrations/frameworks/test_google_adk.py). What is tested:
the adapter module against a stand-in ``google.adk.tools.base_tool.BaseTool`` /
``tool_context.ToolContext`` with ADK 2.13's interface (``BaseTool(name=...,
description=...)``, ``run_async(*, args, tool_context)``, ``_get_declaration()``,
``ToolContext.function_call_id``), the real ``google.genai`` types, and the ids ADK
invents (``adk-<uuid>``, ``google/adk/utils/_function_call_names.py``), with the
google-genai 3.x types of ``dev``.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types as genai_types

from ._support import RUN, Lookup, async_boundary, sync_boundary

ADK_ID = "adk-3f2a8c1e-6b7d-4e9f-a0b1-c2d3e4f5a6b7"


class _BaseTool:
    def __init__(self, *, name: str, description: str) -> None:
        self.name = name
        self.description = description


class _ToolContext:
    def __init__(self, function_call_id: str | None) -> None:
        self.function_call_id = function_call_id


@pytest.fixture
def adk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The adapter module, imported over the stand-in ADK modules."""
    base_tool = types.ModuleType("google.adk.tools.base_tool")
    base_tool.BaseTool = _BaseTool  # type: ignore[attr-defined]
    tool_context = types.ModuleType("google.adk.tools.tool_context")
    tool_context.ToolContext = _ToolContext  # type: ignore[attr-defined]
    for name, module in {
        "google.adk": types.ModuleType("google.adk"),
        "google.adk.tools": types.ModuleType("google.adk.tools"),
        "google.adk.tools.base_tool": base_tool,
        "google.adk.tools.tool_context": tool_context,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "invocation_store.integrations.google_adk", raising=False)
    yield importlib.import_module("invocation_store.integrations.google_adk")
    sys.modules.pop("invocation_store.integrations.google_adk", None)


def test_native_ids_run_and_adk_ids_are_missing(adk: Any) -> None:
    """CIS-ECO-8, CIS-ID-6: ``function_call_id`` is the key; ``adk-...`` and None are MISSING_TOOL_CALL_ID."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = adk.boundary_tool(boundary, context, "lookup", "Look rows up")

    async def calls() -> list[dict[str, Any]]:
        return [
            await tool.run_async(args={"q": "a", "n": 1}, tool_context=_ToolContext("fc-native-1")),
            await tool.run_async(args={"q": "b"}, tool_context=_ToolContext(ADK_ID)),
            await tool.run_async(args={"q": "c"}, tool_context=_ToolContext(None)),
            await tool.run_async(args={"q": "a"}, tool_context=_ToolContext("fc-native-1")),
        ]

    answers = asyncio.run(calls())
    assert [a.get("code") for a in answers] == [
        None,
        "MISSING_TOOL_CALL_ID",
        "MISSING_TOOL_CALL_ID",
        "DUPLICATE_TOOL_CALL",
    ]
    assert answers[0]["ok"] is True
    assert lookup.calls == [{"q": "a", "n": 1}]
    assert store.get(RUN, "fc-native-1").request_json == '{"n":1,"q":"a"}'
    assert "RAW-ONLY" not in repr(answers)


def test_the_declaration_and_the_async_boundary(adk: Any) -> None:
    """CIS-ECO-4: it declares itself with a google-genai FunctionDeclaration; either boundary runs it."""

    async def main() -> dict[str, Any]:
        boundary, _, context = await async_boundary(Lookup())
        tool = adk.boundary_tool(boundary, lambda ctx: context, "lookup", "Look rows up", {"type": "object"})
        declaration = tool._get_declaration()
        assert isinstance(declaration, genai_types.FunctionDeclaration)
        assert (declaration.name, declaration.parameters_json_schema) == ("lookup", {"type": "object"})
        return dict(await tool.run_async(args={"q": 1}, tool_context=_ToolContext("fc-2")))

    assert asyncio.run(main())["ok"] is True
    boundary, _, context = sync_boundary(Lookup())
    with pytest.raises(ValueError, match="not registered"):
        adk.boundary_tool(boundary, context, "launch", "x")


def test_an_adk_events_invented_ids_are_missing(adk: Any) -> None:
    """CIS-ID-6: ``event.content`` carries ADK's ids; envelopes_from_adk_event makes them missing."""
    content = genai_types.Content(
        role="model",
        parts=[
            genai_types.Part(function_call=genai_types.FunctionCall(id=ADK_ID, name="lookup", args={"q": 1})),
            genai_types.Part(function_call=genai_types.FunctionCall(id="fc-7", name="lookup", args={})),
        ],
    )
    event = types.SimpleNamespace(content=content)
    envelopes = adk.envelopes_from_adk_event(event, RUN)
    assert [e.tool_call_id for e in envelopes] == [None, "fc-7"]
    assert adk.envelopes_from_adk_event(types.SimpleNamespace(content=None), RUN) == []
    assert adk.adk_tool_call_id("") is None
