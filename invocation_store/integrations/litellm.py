"""LiteLLM: its ``ModelResponse`` through the Chat parser, with LiteLLM's invented ids refused (CIS-ECO-4).

LiteLLM answers every provider in the OpenAI Chat Completions shape, so a
``ModelResponse`` (or its message, or its dump) is read by
:func:`~invocation_store.providers.envelopes_from_openai_chat`. What LiteLLM adds
is ids of its own where the provider sent none:

- Gemini / Vertex AI without a native call id: ``call_`` + 28 lowercase hex digits
  (``uuid4().hex[:28]``); a native Gemini id (Gemini 3.5+) is kept as Gemini sent it;
- Ollama: a dashed uuid4 (``call_``-prefixed on some paths), for every call without
  an id. LiteLLM's message class gives *any* tool call that arrives without an id a
  bare uuid4; only for the providers above is that known to be the case, so for
  other providers an id of that form is kept (a provider may use uuids itself).

Such an id names no call of the model's, so :func:`envelopes_from_litellm` turns it
into a missing id: MISSING_TOOL_CALL_ID, no record, the tool never runs
(CIS-ID-6). The provider is read from the response (``_hidden_params
["custom_llm_provider"]``, which LiteLLM sets) or passed as ``provider=``. Ids of
other providers (OpenAI, Anthropic, ...) are the provider's own and kept.

Gemini 3 thought signatures: by default LiteLLM appends the signature to the id
(``<id>__thought__<base64>``), which is no safe id (``+/=``, often over 128
characters): every such call is UNSAFE_TOOL_CALL_ID. Run this setup with
``litellm.completion(..., thought_signature_in_tool_call_id=False)``: the id stays
the call's own and the signature travels in ``provider_specific_fields`` (LiteLLM
restores it from there when the answer is sent back). The adapter never strips the
suffix itself: the id the harness echoes must be the one LiteLLM gave.

This module imports no LiteLLM (it reads the response's dump), so it needs no extra.
"""

from __future__ import annotations

import re
from typing import Any

from ..kernel import ToolCallEnvelope
from ..providers import envelopes_from_openai_chat

__all__ = ["FABRICATED_IDS", "envelopes_from_litellm", "is_fabricated"]

_HEX28 = re.compile(r"call_[0-9a-f]{28}(?:__thought__.*)?", re.DOTALL)
_UUID = re.compile(
    r"(?:call_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:__thought__.*)?", re.DOTALL
)

#: LiteLLM provider name -> the form of the ids LiteLLM invents for it.
FABRICATED_IDS: dict[str, re.Pattern[str]] = {
    "gemini": _HEX28,
    "vertex_ai": _HEX28,
    "vertex_ai_beta": _HEX28,
    "ollama": _UUID,
    "ollama_chat": _UUID,
}


def is_fabricated(tool_call_id: object, provider: str | None) -> bool:
    """True if ``tool_call_id`` has the form LiteLLM invents for ``provider`` (see module docstring)."""
    pattern = FABRICATED_IDS.get(provider or "")
    return (
        pattern is not None and isinstance(tool_call_id, str) and pattern.fullmatch(tool_call_id) is not None
    )


def _provider(response: object) -> str | None:
    hidden = getattr(response, "_hidden_params", None)
    found = hidden.get("custom_llm_provider") if isinstance(hidden, dict) else None
    return found if isinstance(found, str) else None


def envelopes_from_litellm(
    response: object, run_id: str, *, provider: str | None = None
) -> list[ToolCallEnvelope]:
    """Every call of a LiteLLM response, in order, LiteLLM's invented ids made missing (CIS-ECO-4, CIS-ID-6).

    ``response``: a ``litellm.ModelResponse``, its message, or the dump/JSON text of
    either (read by :func:`~invocation_store.providers.envelopes_from_openai_chat`,
    whose errors it raises). ``provider``: LiteLLM's provider name (``gemini``,
    ``ollama``, ...), read from the response when omitted; a dump carries none, so
    pass it with a dump. An id of the form LiteLLM invents for that provider
    (:data:`FABRICATED_IDS`) becomes ``tool_call_id=None`` (MISSING_TOOL_CALL_ID).
    """
    found = provider if provider is not None else _provider(response)
    envelopes: list[Any] = envelopes_from_openai_chat(response, run_id)
    return [
        ToolCallEnvelope(run_id=e.run_id, tool_call_id=None, tool_name=e.tool_name, arguments=e.arguments)
        if is_fabricated(e.tool_call_id, found)
        else e
        for e in envelopes
    ]
