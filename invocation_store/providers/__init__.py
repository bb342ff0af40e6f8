"""Provider formats: envelopes from what the model returned, result messages back (CIS-PRE-7, CIS-ECO-1..3).

One module per provider API: :mod:`~invocation_store.providers.openai_chat`
(Chat Completions), :mod:`~invocation_store.providers.openai_responses`,
:mod:`~invocation_store.providers.anthropic` (Messages) and
:mod:`~invocation_store.providers.gemini`. Each gives

- ``envelope_from_<provider>(item, run_id)`` for one call and
  ``envelopes_from_<provider>(turn, run_id)`` for every call of a model turn, in
  the provider's order. They accept the SDK's typed objects, their dumps, JSON text
  and the natural sub-objects; anything else raises ``TypeError``/``ValueError``
  (see :mod:`invocation_store.providers._common`): another provider's object names
  the parser to use, a streamed piece asks to be accumulated first
  (:mod:`invocation_store.providers._shapes`), every call item gets an envelope, and
  an item of a kind this version does not know is reported and skipped. Object
  arguments are measured against ``request_bytes`` while serialized, typed objects
  included (read field by field, never dumped in full); JSON text over
  ``max_text_bytes`` (default 32 MiB) is refused before it is decoded. Ids are
  kept byte for byte; a missing id stays missing (MISSING_TOOL_CALL_ID), never
  generated (CIS-ID-2, CIS-ID-4, CIS-ID-6);
- a builder of the tool-result message the provider expects from the envelope and
  its :class:`~invocation_store.boundary.BoundaryResult` (CIS-ECO-3);
- its transcript format, in :data:`FORMATS` (detection order) for the CLI's
  ``replay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import anthropic, gemini, openai_chat, openai_responses
from ._common import DEFAULT_MAX_TEXT_BYTES
from ._formats import DEFAULT_MAX_TRANSCRIPT_BYTES, TranscriptFormat, TranscriptShapeError
from ._results import agent_payload, agent_text
from .anthropic import (
    anthropic_tool_result,
    anthropic_tool_results_message,
    envelope_from_anthropic,
    envelopes_from_anthropic,
)
from .gemini import (
    envelope_from_gemini,
    envelopes_from_gemini,
    gemini_function_response,
    gemini_function_responses_content,
)
from .openai_chat import envelope_from_openai_chat, envelopes_from_openai_chat, openai_chat_tool_message
from .openai_responses import (
    envelope_from_openai_responses,
    envelopes_from_openai_responses,
    openai_responses_call_outputs,
    openai_responses_call_types,
    openai_responses_failure_note,
    openai_responses_function_call_output,
)

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "DEFAULT_MAX_TRANSCRIPT_BYTES",
    "FORMATS",
    "TranscriptFormat",
    "TranscriptShapeError",
    "agent_payload",
    "agent_text",
    "anthropic_tool_result",
    "anthropic_tool_results_message",
    "detect_format",
    "envelope_from_anthropic",
    "envelope_from_gemini",
    "envelope_from_openai_chat",
    "envelope_from_openai_responses",
    "envelopes_from_anthropic",
    "envelopes_from_gemini",
    "envelopes_from_openai_chat",
    "envelopes_from_openai_responses",
    "gemini_function_response",
    "gemini_function_responses_content",
    "openai_chat_tool_message",
    "openai_responses_call_outputs",
    "openai_responses_call_types",
    "openai_responses_failure_note",
    "openai_responses_function_call_output",
    "transcript_format",
]

#: Every transcript format, in detection order: Gemini (``contents``/``candidates``),
#: OpenAI Responses (``"object": "response"`` or ``input``/``output`` lists of typed
#: items), Chat Completions (``choices``, or messages with ``tool_calls`` or
#: ``role: tool``), Anthropic (messages or a Message whose content holds ``tool_use``).
FORMATS: tuple[TranscriptFormat, ...] = (
    gemini.FORMAT,
    openai_responses.FORMAT,
    openai_chat.FORMAT,
    anthropic.FORMAT,
)


def detect_format(transcript: Mapping[str, Any]) -> TranscriptFormat | None:
    """The first format of :data:`FORMATS` whose ``detect`` matches, or None."""
    return next((fmt for fmt in FORMATS if fmt.detect(transcript)), None)


def transcript_format(name: str) -> TranscriptFormat:
    """The format called ``name`` (``openai-chat``, ...); ``ValueError`` for an unknown name."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise ValueError(f"unknown transcript format: expected one of {', '.join(f.name for f in FORMATS)}")
