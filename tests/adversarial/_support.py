"""Small helpers shared by the adversarial tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from invocation_store.kernel import Projection, ToolCallEnvelope

RUN = "run-adv"
ARGS = "{}"


def found(_raw: str, _args: Mapping[str, Any]) -> Projection:
    """A projector that always finds a small piece of evidence."""
    return Projection(evidence_status="EVIDENCE_FOUND", content="c", scope="s")


def envelope(tool_call_id: object, tool_name: str = "t", run_id: str = RUN) -> ToolCallEnvelope:
    """An envelope of run :data:`RUN` for tool ``tool_name`` with empty arguments."""
    return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name=tool_name, arguments=ARGS)  # type: ignore[arg-type]


def run_params(now_ms: int) -> dict[str, int]:
    """Generous run parameters opened at ``now_ms``."""
    return {"deadline_ms": now_ms + 60_000, "ttl_ms": 600_000, "tool_call_budget": 10, "byte_budget": 1 << 20}
