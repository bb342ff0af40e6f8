"""canonical-invocation-store: one trustworthy boundary for LLM-agent tool calls.

The public API: the kernel's values and codes, the stores (in memory and Redis,
sync and async) and their Protocols, :class:`ToolBoundary` /
:class:`AsyncToolBoundary` with their tool registry, and the provider envelope
parsers. Everything else lives in underscore modules or subpackages.
"""

import logging as _logging
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

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

# A library's logger gets a NullHandler, so an application that configures no logging
# prints nothing (Python's last-resort handler stays quiet) (CIS-OBS-1).
_logging.getLogger("invocation_store").addHandler(_logging.NullHandler())

try:
    #: The installed distribution's version (``canonical-invocation-store``), e.g. ``"0.1.0"``.
    __version__: str = _distribution_version("canonical-invocation-store")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
    __version__ = "0+unknown"

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
