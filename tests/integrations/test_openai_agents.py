"""The OpenAI Agents SDK adapter, with the SDK's Runner and a fake Model (no network) (CIS-ECO-4)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.exceptions import ModelBehaviorError
from agents.items import ModelResponse
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from invocation_store.integrations.openai_agents import boundary_function_tool

from ._support import RUN, Lookup, code, sync_boundary

set_tracing_disabled(True)  # the SDK's own tracing would try to export to the network


class FakeModel(Model):
    """Plays back model turns and records each turn's input."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the tests do not stream")


def call(call_id: str, arguments: str, name: str = "lookup") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=arguments
    )


DONE = [
    ResponseOutputMessage(
        type="message",
        id="msg_1",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
    )
]


def outputs(model: FakeModel, turn: int = -1) -> dict[str, str]:
    """The function_call_output items the SDK sent to the model at ``turn`` (latest per id)."""
    items = model.inputs[turn]
    return {
        i["call_id"]: i["output"]
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }


def test_calls_keep_the_sdk_id_and_raw_arguments() -> None:
    """CIS-ECO-4, CIS-ECO-2, CIS-BND-6: ToolContext's id and raw text reach the record; failures are codes."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_function_tool(boundary, context, "lookup", "Look rows up")
    restart = boundary_function_tool(boundary, context, "restart", "Restart a service")
    model = FakeModel(
        [
            [
                call("call_A1", '{"q": "x"}'),
                call("call_A2", '{"q": 1, "q": 2}'),  # duplicate name: the SDK passes it through raw
                call("call_A3", '{"q": '),  # not JSON
                call(FAKE_RESPONSES_ID, "{}"),  # the SDK's placeholder is no id
                call("call_A4", "{}", name="restart"),
            ],
            DONE,
        ]
    )
    agent = Agent(name="ops", instructions="help", tools=[tool, restart], model=model)
    result = Runner.run_sync(agent, "go")
    assert result.final_output == "done"
    answered = outputs(model)
    assert code(answered["call_A1"]) is None
    assert code(answered["call_A2"]) == "INVALID_ARGUMENTS"
    assert code(answered["call_A3"]) == "INVALID_ARGUMENTS"
    assert code(answered[FAKE_RESPONSES_ID]) == "MISSING_TOOL_CALL_ID"
    assert code(answered["call_A4"]) == "NOT_READ_ONLY"
    assert store.calls(RUN) == ("call_A1",)
    record = store.get(RUN, "call_A1")
    assert record.request_json == '{"q": "x"}'
    assert lookup.calls == [{"q": "x"}]  # the executor ran once
    assert all("RAW-ONLY" not in text for text in answered.values())

    # The SDK refuses a reused id within one Runner run itself (ModelBehaviorError); a
    # second Runner run of the same harness run reaches the boundary: DUPLICATE_TOOL_CALL.
    again = FakeModel([[call("call_A1", '{"q": "again"}')], DONE])
    Runner.run_sync(Agent(name="ops", tools=[tool], model=again), "go")
    assert code(outputs(again)["call_A1"]) == "DUPLICATE_TOOL_CALL"
    assert lookup.calls == [{"q": "x"}]


def test_the_run_can_come_from_the_agent_context() -> None:
    """CIS-ECO-4: the RunContext may live in the SDK's context object."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_function_tool(boundary, lambda ctx: ctx.context["run"], "lookup", "Look rows up")
    model = FakeModel([[call("call_C1", '{"q": "x"}')], DONE])
    Runner.run_sync(Agent(name="ops", tools=[tool], model=model), "go", context={"run": context})
    assert code(outputs(model)["call_C1"]) is None
    assert store.calls(RUN) == ("call_C1",)


def test_an_unregistered_tool_is_refused_when_built() -> None:
    """CIS-ECO-4: the FunctionTool must name a registered tool."""
    boundary, _, context = sync_boundary(Lookup())
    with pytest.raises(ValueError, match="not registered"):
        boundary_function_tool(boundary, context, "launch", "x")


def test_an_unknown_tool_is_refused_by_the_sdk_itself() -> None:
    """CIS-ECO-4, CIS-PRE-1: as documented, the SDK raises before any tool runs; no record is written."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_function_tool(boundary, context, "lookup", "Look rows up")
    model = FakeModel([[call("call_U1", "{}", name="launch")], DONE])
    with pytest.raises(ModelBehaviorError):
        Runner.run_sync(Agent(name="ops", tools=[tool], model=model), "go")
    assert store.calls(RUN) == ()
    assert lookup.calls == []
