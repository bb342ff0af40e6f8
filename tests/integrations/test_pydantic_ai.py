"""The pydantic-ai adapter, with pydantic-ai's FunctionModel and TestModel (no network) (CIS-ECO-4)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from invocation_store.integrations.pydantic_ai import GENERATED_ID_PREFIX, boundary_tool

from ._support import RUN, Lookup, code, sync_boundary


class Script:
    """A FunctionModel body: one turn of tool calls, then text; records the tool returns."""

    def __init__(self, parts: list[ToolCallPart]) -> None:
        self.parts = parts
        self.returns: dict[str, str] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=list(self.parts))
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                self.returns[part.tool_call_id] = str(part.content)
        return ModelResponse(parts=[TextPart("done")])


def test_provider_ids_and_raw_arguments_reach_the_record() -> None:
    """CIS-ECO-4, CIS-ECO-2: RunContext.tool_call_id and the ToolCallPart's raw args; I-JSON holds."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_tool(boundary, context, "lookup", "Look rows up")
    script = Script(
        [
            ToolCallPart("lookup", '{"q": "x"}', tool_call_id="call_P1"),  # OpenAI style: text
            ToolCallPart("lookup", {"q": "y", "extra": 1}, tool_call_id="toolu_P2"),  # Anthropic style
            ToolCallPart("lookup", '{"q": 1, "q": 2}', tool_call_id="call_P3"),  # duplicate name
            ToolCallPart("lookup", {"q": float("nan")}, tool_call_id="toolu_P4"),
        ]
    )
    result = Agent(FunctionModel(script), tools=[tool]).run_sync("go")
    assert result.output == "done"
    assert {i: code(t) for i, t in script.returns.items()} == {
        "call_P1": None,
        "toolu_P2": None,
        "call_P3": "INVALID_ARGUMENTS",
        "toolu_P4": "INVALID_ARGUMENTS",
    }
    assert sorted(store.calls(RUN)) == ["call_P1", "toolu_P2"]  # pydantic-ai runs calls concurrently
    assert store.get(RUN, "call_P1").request_json == '{"q": "x"}'
    assert store.get(RUN, "toolu_P2").request_json == '{"extra":1,"q":"y"}'
    assert sorted(lookup.calls, key=str) == sorted([{"q": "x"}, {"extra": 1, "q": "y"}], key=str)
    assert all("RAW-ONLY" not in text for text in script.returns.values())


def test_fabricated_ids_are_missing_ids_by_default() -> None:
    """CIS-ECO-4, CIS-ID-6: pydantic-ai's pyd_ai_ ids (TestModel always makes them) are never recorded."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_tool(boundary, context, "lookup", "Look rows up")
    result = Agent(TestModel(), tools=[tool]).run_sync("go")
    returned = [
        part
        for message in result.all_messages()
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolReturnPart)
    ]
    assert returned
    assert all(part.tool_call_id.startswith(GENERATED_ID_PREFIX) for part in returned)
    assert {code(str(part.content)) for part in returned} == {"MISSING_TOOL_CALL_ID"}
    assert store.calls(RUN) == ()
    assert lookup.calls == []


def test_fabricated_ids_can_be_accepted_explicitly() -> None:
    """CIS-ECO-4: a harness may opt in to pydantic-ai's ids as its own."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_tool(boundary, context, "lookup", "Look rows up", accept_generated_ids=True)
    Agent(TestModel(), tools=[tool]).run_sync("go")
    (recorded,) = store.calls(RUN)
    assert recorded.startswith(GENERATED_ID_PREFIX)


def test_the_run_can_come_from_deps() -> None:
    """CIS-ECO-4: the RunContext may travel in pydantic-ai's deps."""
    boundary, store, context = sync_boundary(Lookup())
    tool = boundary_tool(boundary, lambda ctx: ctx.deps["run"], "lookup", "Look rows up")
    script = Script([ToolCallPart("lookup", "{}", tool_call_id="call_D1")])
    agent: Agent[Any, str] = Agent(FunctionModel(script), tools=[tool], deps_type=dict)
    agent.run_sync("go", deps={"run": context})
    assert store.calls(RUN) == ("call_D1",)


def test_what_pydantic_ai_answers_itself_leaves_no_record() -> None:
    """CIS-ECO-4, CIS-PRE-1: non-JSON text and unknown tools get pydantic-ai's retry prompt (documented)."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_tool(boundary, context, "lookup", "Look rows up")
    answered: dict[str, str] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", '{"q": ', tool_call_id="call_B1"),
                    ToolCallPart("launch", "{}", tool_call_id="call_B2"),
                ]
            )
        answered.update(
            {p.tool_call_id: str(p.content) for p in messages[-1].parts if hasattr(p, "tool_call_id")}
        )
        return ModelResponse(parts=[TextPart("done")])

    Agent(FunctionModel(model), tools=[tool]).run_sync("go")
    assert set(answered) == {"call_B1", "call_B2"}
    assert "Unknown tool name" in answered["call_B2"]
    assert store.calls(RUN) == ()
    assert lookup.calls == []
