"""canonical-invocation-store: one trustworthy boundary for LLM-agent tool calls.

The public API: the kernel's values and codes, the stores (in memory and Redis,
sync and async) and their Protocols, :class:`ToolBoundary` /
:class:`AsyncToolBoundary` with their tool registry, and the provider envelope
parsers. Everything else lives in underscore modules or subpackages.
"""

from __future__ import annotations

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._completion import CompletionRetry
    from .adapters import (
        AsyncInvocationStore,
        AsyncMemoryStore,
        AsyncRedisStore,
        InvocationStore,
        MemoryStore,
        RedisStore,
        StoreUnavailableError,
    )
    from .boundary import (
        AsyncExecutor,
        AsyncProjector,
        AsyncToolBoundary,
        BoundaryResult,
        Executor,
        Projector,
        ToolBoundary,
        ToolRegistry,
        ToolSpec,
    )
    from .kernel import (
        ERROR_MESSAGES,
        CanonicalRecord,
        Citation,
        CitationKind,
        ErrorCode,
        EvidenceStatus,
        ExclusionReason,
        InvocationStatus,
        Limits,
        ObservedFact,
        ProgressReport,
        Projection,
        RunContext,
        RunState,
        RunStatus,
        ToolCallEnvelope,
        ToolPolicy,
    )
    from .providers import (
        envelope_from_anthropic,
        envelope_from_gemini,
        envelope_from_openai_chat,
        envelope_from_openai_responses,
        envelopes_from_anthropic,
        envelopes_from_gemini,
        envelopes_from_openai_chat,
        envelopes_from_openai_responses,
    )

    __version__: str

# A library's logger gets a NullHandler, so an application that configures no logging
# prints nothing (Python's last-resort handler stays quiet) (CIS-OBS-1).
_logging.getLogger("invocation_store").addHandler(_logging.NullHandler())
# Every logger of the package names the call its records are about (CIS-OBS-2).
_importlib.import_module("._logs", __name__)

#: Where each public name lives. Nothing is imported until a name is first used
#: (PEP 562 module ``__getattr__``): ``import invocation_store`` loads no Redis client,
#: provider SDK or framework, and the in-memory path never loads redis-py.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CompletionRetry",), "._completion"),
    **dict.fromkeys(
        (
            "AsyncInvocationStore",
            "AsyncMemoryStore",
            "AsyncRedisStore",
            "InvocationStore",
            "MemoryStore",
            "RedisStore",
            "StoreUnavailableError",
        ),
        ".adapters",
    ),
    **dict.fromkeys(
        (
            "AsyncExecutor",
            "AsyncProjector",
            "AsyncToolBoundary",
            "BoundaryResult",
            "Executor",
            "Projector",
            "ToolBoundary",
            "ToolRegistry",
            "ToolSpec",
        ),
        ".boundary",
    ),
    **dict.fromkeys(
        (
            "ERROR_MESSAGES",
            "CanonicalRecord",
            "Citation",
            "CitationKind",
            "ErrorCode",
            "EvidenceStatus",
            "ExclusionReason",
            "InvocationStatus",
            "Limits",
            "ObservedFact",
            "ProgressReport",
            "Projection",
            "RunContext",
            "RunState",
            "RunStatus",
            "ToolCallEnvelope",
            "ToolPolicy",
        ),
        ".kernel",
    ),
    **dict.fromkeys(
        (
            "envelope_from_anthropic",
            "envelope_from_gemini",
            "envelope_from_openai_chat",
            "envelope_from_openai_responses",
            "envelopes_from_anthropic",
            "envelopes_from_gemini",
            "envelopes_from_openai_chat",
            "envelopes_from_openai_responses",
        ),
        ".providers",
    ),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its home module on first use and kept here."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - lazy on purpose

        try:
            #: The installed distribution's version (``canonical-invocation-store``), e.g. ``"0.1.0"``.
            value: Any = version("canonical-invocation-store")
        except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
            value = "0+unknown"
    else:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})


__all__ = [
    "ERROR_MESSAGES",
    "AsyncExecutor",
    "AsyncInvocationStore",
    "AsyncMemoryStore",
    "AsyncProjector",
    "AsyncRedisStore",
    "AsyncToolBoundary",
    "BoundaryResult",
    "CanonicalRecord",
    "Citation",
    "CitationKind",
    "CompletionRetry",
    "ErrorCode",
    "EvidenceStatus",
    "ExclusionReason",
    "Executor",
    "InvocationStatus",
    "InvocationStore",
    "Limits",
    "MemoryStore",
    "ObservedFact",
    "ProgressReport",
    "Projection",
    "Projector",
    "RedisStore",
    "RunContext",
    "RunState",
    "RunStatus",
    "StoreUnavailableError",
    "ToolBoundary",
    "ToolCallEnvelope",
    "ToolPolicy",
    "ToolRegistry",
    "ToolSpec",
    "envelope_from_anthropic",
    "envelope_from_gemini",
    "envelope_from_openai_chat",
    "envelope_from_openai_responses",
    "envelopes_from_anthropic",
    "envelopes_from_gemini",
    "envelopes_from_openai_chat",
    "envelopes_from_openai_responses",
]
