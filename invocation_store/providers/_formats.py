"""The registry of transcript formats: how each provider's transcript is detected and walked.

A transcript is one JSON document in a provider's own shape (the request history a
harness sends, or a response it received). Each :class:`TranscriptFormat` knows
how to recognise its shape (``detect``), how to find every tool-call item in it, in
transcript order (``call_items``), and how one item becomes an envelope
(``envelope``). :data:`FORMATS` lists them in detection order; the CLI only wires
them (CIS-PRE-7, CIS-ECO-1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from attrs import frozen

from ..kernel import ToolCallEnvelope
from ._common import DEFAULT_MAX_TEXT_BYTES, document

__all__ = [
    "DEFAULT_MAX_TRANSCRIPT_BYTES",
    "TranscriptFormat",
    "TranscriptShapeError",
    "has_block",
    "messages",
]

#: The largest transcript text read, in UTF-8 bytes, when not told one: 32 MiB, for the API
#: (:meth:`TranscriptFormat.envelopes_from_transcript`) and the command line
#: (``invocation-store replay --max-transcript-bytes``) alike (CIS-SIZE-2).
DEFAULT_MAX_TRANSCRIPT_BYTES: int = DEFAULT_MAX_TEXT_BYTES


class TranscriptShapeError(ValueError):
    """A transcript's structure is not its format's (one safe line: no payload text)."""


@frozen(kw_only=True)
class TranscriptFormat:
    """One provider's transcript shape.

    ``name``: as ``--format`` spells it. ``detect(document)``: True if the decoded
    document has this shape. ``call_items(document)``: every tool-call item in
    transcript order; raises :class:`TranscriptShapeError` for a malformed
    structure (a malformed *item* is yielded, for preflight to answer).
    ``envelope(item, run_id, request_bytes)``: the envelope of one item, object
    arguments measured against ``request_bytes`` UTF-8 bytes (None: the kernel's
    default), as the parsers do.
    """

    name: str
    detect: Callable[[Mapping[str, Any]], bool]
    call_items: Callable[[Mapping[str, Any]], Iterator[object]]
    envelope: Callable[[object, str, int | None], ToolCallEnvelope]

    def envelopes_from_transcript(
        self,
        transcript: object,
        run_id: str,
        *,
        request_bytes: int | None = None,
        max_text_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES,
    ) -> list[ToolCallEnvelope]:
        """Every call of ``transcript`` (JSON text, or the decoded object) as an envelope, in order.

        CIS-PRE-7, CIS-SIZE-2. JSON text (``str`` or UTF-8 ``bytes``) over
        ``max_text_bytes`` UTF-8 bytes (default :data:`DEFAULT_MAX_TRANSCRIPT_BYTES`, the
        command line's limit) raises ``ValueError`` before it is decoded; a decoded
        object was already paid for by whoever decoded it. Object arguments are
        measured against ``request_bytes`` (None: the kernel's default).
        """
        decoded = document(transcript, f"a {self.name} transcript (a JSON object)", max_text_bytes)
        if not isinstance(decoded, Mapping):
            raise ValueError(f"a {self.name} transcript is a JSON object, not an array")
        return [self.envelope(item, run_id, request_bytes) for item in self.call_items(decoded)]


def messages(transcript: Mapping[str, Any]) -> list[Any]:
    """The transcript's ``messages`` list, or ``[]``."""
    found = transcript.get("messages")
    return found if isinstance(found, list) else []


def has_block(message: object, kind: str) -> bool:
    """True if ``message`` has a ``content`` list holding a block of type ``kind``."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == kind for block in content
    )
