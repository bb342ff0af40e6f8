"""What every tool-result message carries back to the model (CIS-ECO-3).

The model is answered with the agent view of a :class:`~invocation_store.boundary.BoundaryResult`
and nothing else: on success ``{"ok": true, "evidence_status", "negative",
"content", "scope"}``, on failure ``{"ok": false, "code", "message"}`` (the stable
code and its fixed message from ``ERROR_MESSAGES``). Never a raw response, a
request text, a key or exception text.

Which id goes back (the unsafe-id rule): the provider matches an answer to its call
by the id *it* sent, so the message carries the envelope's original tool_call_id,
byte for byte, even when the boundary refused it as unsafe (UNSAFE_TOOL_CALL_ID).
That id is only ever echoed to the provider that issued it; it never enters a
record, a log or a span, and the agent-facing ``BoundaryResult.tool_call_id`` stays
None for it. A call whose id is missing cannot be answered by an id: OpenAI and
Anthropic require one (the builders raise ``ValueError``), Gemini matches by name
and order (the id is omitted).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..kernel import ToolCallEnvelope

if TYPE_CHECKING:  # the boundary imports nothing from here; avoid the cycle at run time
    from ..boundary import BoundaryResult

__all__ = ["agent_payload", "agent_text", "checked_pair", "required_id"]


def agent_payload(result: BoundaryResult) -> dict[str, object]:
    """The agent view of ``result`` as a JSON-ready dict (see the module docstring)."""
    if result.ok:
        return {
            "ok": True,
            "evidence_status": None if result.evidence_status is None else result.evidence_status.value,
            "negative": result.negative,
            "content": result.content,
            "scope": result.scope,
        }
    return {
        "ok": False,
        "code": None if result.code is None else result.code.value,
        "message": result.message,
    }


def agent_text(result: BoundaryResult) -> str:
    """:func:`agent_payload` as compact JSON text, UTF-8 characters kept, keys in a fixed order."""
    return json.dumps(agent_payload(result), ensure_ascii=False, separators=(",", ":"))


def checked_pair(envelope: object, result: object) -> tuple[ToolCallEnvelope, BoundaryResult]:
    """``(envelope, result)`` after checking they are one call's envelope and result.

    ``TypeError`` for the wrong types; ``ValueError`` when the result names another
    call (its ``envelope_tool_call_id`` differs from the envelope's id).
    """
    from ..boundary import BoundaryResult  # noqa: PLC0415 - the boundary is heavier than the parsers

    if not isinstance(envelope, ToolCallEnvelope):
        raise TypeError("envelope must be a ToolCallEnvelope")
    if not isinstance(result, BoundaryResult):
        raise TypeError("result must be a BoundaryResult")
    if result.envelope_tool_call_id is not None and result.envelope_tool_call_id != envelope.tool_call_id:
        raise ValueError("the result belongs to another tool call than the envelope")
    return envelope, result


def required_id(envelope: ToolCallEnvelope, provider: str) -> str:
    """The envelope's original id for a provider that needs one, else ``ValueError``."""
    tool_call_id = envelope.tool_call_id
    if not isinstance(tool_call_id, str) or tool_call_id == "":
        raise ValueError(f"{provider} matches a tool result by its call id, and this call has none")
    return str.__str__(tool_call_id)
