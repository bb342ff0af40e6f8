"""ToolBoundary: one tool call from envelope to bounded result (CIS-BND-1).

Theory of operation
-------------------
A harness registers its tools once in a :class:`ToolRegistry` (CIS-BND-3) and
passes every tool call the model makes through :meth:`ToolBoundary.invoke` (or
``await`` :meth:`AsyncToolBoundary.invoke`). The boundary owns no lifecycle rule:
every decision is the kernel's, every write the store's. It only orchestrates, in
this order (each step's failure is a code, CIS-BND-2):

1. ``check_envelope`` (preflight 1-6) against the registry's policy for the tool:
   on rejection nothing is written and the executor is not called (CIS-PRE-1).
2. ``store.create`` (preflight 7-11 and the PROJECTING record, atomically in the
   store, CIS-PRE-8). Round trip 1. A replay of this call's own create (resent by
   the client library) counts as created; any other replay is DUPLICATE_TOOL_CALL
   (see "Retried creates" below).
3. ``executor(arguments)`` with the tool's ``timeout_ms`` -> raw response
   (EXECUTION_FAILED, EXECUTION_TIMEOUT, CIS-FAIL-2, CIS-FAIL-3); a non-text raw
   response is serialized as compact sorted JSON, or SERIALIZATION_FAILED
   (CIS-FAIL-4).
4. kernel ``RawReceived``: over the raw limit the record is ERROR/RESULT_TOO_LARGE,
   the raw response is not kept and the projector is never called (CIS-SIZE-3).
5. ``projector(raw, arguments)`` -> :class:`~invocation_store.kernel.Projection`
   (PROJECTION_FAILED on raise, PROJECTION_INVALID for anything not a
   Projection), then kernel ``ProjectionReceived`` (PROJECTION_INVALID,
   RESULT_TOO_LARGE, CIS-EVID-5, CIS-SIZE-4). A raw response already received
   stays in the record, harness-only (CIS-FAIL-6).
6. ``store.complete(before=created, after=final)``: one compare-and-set write that
   keeps the TTL. Round trip 2: a successful call costs exactly two store round
   trips and no extra read (CIS-STORE-9).
7. a :class:`BoundaryResult`: the bounded agent result (READY) or a code and its
   fixed message (anything else). Never the raw response, the request text, a key,
   a credential or exception text (CIS-BND-4, CIS-ERR-1).

NO_EVIDENCE is returned as it came, as a scoped negative observation
(``negative=True`` with its ``scope``): never retried, never upgraded (CIS-EVID-4).

Failure containment: no exception raised by an executor, a projector or the store
escapes :meth:`ToolBoundary.invoke`. A :class:`StoreUnavailableError` (or any other
exception from a store method) becomes STORE_UNAVAILABLE (CIS-FAIL-5). Logs carry
exception *type names* and codes only, never ``str(exc)``, payloads or keys
(CIS-ERR-2); a type name that is not a short ASCII identifier is logged as
``UnprintableType``, since a hostile class name could carry text. Exceptions that do
escape are programming errors of the caller: a non-:class:`RunContext` context, a
non-envelope, an async tool on the sync boundary, run parameters out of range
(``ValueError``: ints within ``[0, 2**53 - 1]``, ``deadline_ms + ttl_ms`` included,
CIS-RUN-1).

BaseException policy, the same on both boundaries (CIS-FAIL-2, CIS-BND-2): whatever
tool code raises is that tool's failure, ``SystemExit`` and ``KeyboardInterrupt``
included: EXECUTION_FAILED from an executor, PROJECTION_FAILED from a projector. On
the async boundary a ``CancelledError`` the tool raises of its own (from a sub-task
it cancelled, say) is likewise EXECUTION_FAILED / PROJECTION_FAILED while the task
awaiting ``invoke`` is not itself being cancelled (``cancelling() == 0``). The only
interruptions that escape ``invoke`` are the caller's own: a real cancellation of the
awaiting task (propagated after cancelling the tool's task, which is not awaited), or
a ``KeyboardInterrupt`` delivered to the calling thread while the sync boundary
waits on an executor with a time limit or on the store. A real Ctrl-C landing while
tool code runs inline in the calling thread (a sync boundary's projector, or an
executor declared with ``timeout_ms=None``) cannot be told from one the tool raised:
it is PROJECTION_FAILED (EXECUTION_FAILED for the executor). An interrupted call
leaves its record PROJECTING;
:meth:`ToolBoundary.sweep_stale` moves it to ERROR/STALE_PROJECTION later
(CIS-LIFE-7).

Text at the edge (CIS-ID-4..6, CIS-SIZE-4): a ``str`` subclass can override
``__eq__``, ``__hash__``, ``__len__`` or ``isascii`` and be one string when checked
and another when keyed, compared or measured. None gets past the boundary's edge:
every envelope field (``run_id``, ``tool_call_id``, ``tool_name``, ``arguments``),
every :class:`~invocation_store.kernel.Projection` field (``evidence_status``,
``content``, ``scope``), the run id given to ``open_run``, the id given to ``cite``
and a raw response are *copied* to an exact ``str`` of the same characters
(``str.__str__``, which no subclass method intercepts) before any check. The copy is
what is validated, stored and echoed; no overridden method is ever called. An object
that is no ``str`` at all but claims to be one through ``__class__`` counts as
missing text. Envelopes and projections are rebuilt from fields read once, so a
subclass with properties cannot answer differently later.

Retried creates (CIS-RETRY-2, CIS-BND-6): a client library may resend ``create``
after a lost reply; the store then answers ``replayed=True`` with the record the
first attempt wrote. The invocation token is drawn per call (128 random bits), so a
replay carrying *this* call's token, of a record still exactly as this request
created it (PROJECTING, no raw response, same ids, tool, request text and
``created_at_ms``), is this call's own create: the executor runs, once. Any other
replay is DUPLICATE_TOOL_CALL: a record that moved on, or a token that more than one
call of the same boundary drew (a token factory that repeats itself, concurrently or
one call after another, within the last 65,536 tokens): fail closed, so the executor
never runs twice for one key; a record left PROJECTING is swept. Repeats across
processes cannot be seen locally: tokens must be unique (CIS-RETRY-1).

Timeouts and workers (CIS-FAIL-3, CIS-PERF-1; the mechanics live in ``_runners.py``):
no call starts a thread of its own. On the sync boundary an executor declared
without a limit (``timeout_ms=None``) and every projector run inline, in the
calling thread; an executor with a limit runs on a persistent worker of a
process-wide pool, and the boundary waits for it ``timeout_ms``. On the async
boundary every executor and projector call runs in an asyncio task of its own,
awaited (under ``timeout_ms`` for executors): a coroutine in the loop, a sync
callable on a persistent worker. Over the limit the task is
cancelled but never awaited, so a tool that ignores cancellation cannot stretch the
call, which is EXECUTION_TIMEOUT; an abandoned task stays referenced until it ends,
and its outcome is then retrieved and discarded. Python cannot kill a thread: a
sync tool that overruns keeps its worker busy until it returns by itself, its
result discarded (the record is already ERROR/EXECUTION_TIMEOUT). That worker is
counted as hung and leaves the pool; a call that finds no idle worker starts a new
one, so a hung tool never blocks other calls, nor the loop's default executor
behind ``asyncio.to_thread``. Workers are daemon threads: they never delay
interpreter exit nor the end of ``asyncio.run``. (A coroutine that ignores
cancellation for ever does delay the end of ``asyncio.run``, which cancels and
awaits every task left.) Tools should enforce their own deadlines too.

Example (sync)::

    store = MemoryStore()
    registry = ToolRegistry([ToolSpec(name="search", executor=search, projector=project)])
    boundary = ToolBoundary(store, registry)
    context = boundary.open_run(
        "run-1", deadline_ms=store.now_ms() + 60_000, ttl_ms=3_600_000,
        tool_call_budget=20, byte_budget=1 << 20,
    )
    assert isinstance(context, RunContext)
    for envelope in envelopes_from_openai_chat(assistant_message, context.run_id):
        result = boundary.invoke(context, envelope)
        reply = result.content if result.ok else result.code
    report = boundary.project_progress(context)
    boundary.close_run(context)

Example (asyncio)::

    boundary = AsyncToolBoundary(AsyncMemoryStore(), registry)
    context = await boundary.open_run("run-1", deadline_ms=..., ttl_ms=..., ...)
    results = await asyncio.gather(*(boundary.invoke(context, e) for e in envelopes))
"""

from __future__ import annotations

import collections
import json
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, TypeAlias, TypeVar

from attrs import field, frozen

from . import _telemetry
from ._completion import DEFAULT_COMPLETION_RETRY, CompletionRetry, PendingCompletion, PendingCompletions
from ._runners import Outcome as _Outcome
from ._runners import acall, call_inline, call_with_timeout, safe_name, type_name
from ._runners import is_async_callable as _is_async_callable
from .adapters import AsyncInvocationStore, InvocationStore, StoreUnavailableError
from .adapters._progress import async_progress_reader, progress_reader
from .kernel import (
    ERROR_MESSAGES,
    MAX_SAFE_INT,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Citation,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    ProgressReport,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    cite,
    is_safe_id,
    project_progress,
    transition,
)
from .kernel._preflight import parse_envelope

__all__ = [
    "AsyncExecutor",
    "AsyncProjector",
    "AsyncToolBoundary",
    "BoundaryResult",
    "Executor",
    "Projector",
    "ToolBoundary",
    "ToolRegistry",
    "ToolSpec",
]

#: A sync executor: parsed arguments (a JSON object) -> raw response. A ``str`` is
#: stored as-is; any other value is serialized as compact sorted JSON, and a value
#: that cannot be is SERIALIZATION_FAILED (CIS-FAIL-4).
Executor: TypeAlias = Callable[[Mapping[str, Any]], object]
#: An async executor, same contract.
AsyncExecutor: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[object]]
#: A sync projector: (raw response text, parsed arguments) -> Projection (CIS-EVID-2).
Projector: TypeAlias = Callable[[str, Mapping[str, Any]], Projection]
#: An async projector, same contract.
AsyncProjector: TypeAlias = Callable[[str, Mapping[str, Any]], Awaitable[Projection]]

_LOGGER: Final = logging.getLogger("invocation_store.boundary")
_DEFAULT_LIMITS: Final = Limits()
T = TypeVar("T")


def _new_token() -> str:
    """The default invocation token: 128 random bits as hex (CIS-RETRY-1)."""
    return secrets.token_hex(16)


def _positive_int(_inst: object, _attribute: object, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SAFE_INT:
        raise ValueError("timeout_ms must be None or an int in [1, 2**53 - 1] (milliseconds)")


def _exact_text(value: object) -> Any:
    """The boundary's edge for text (CIS-ID-4..6, CIS-SIZE-4).

    An exact ``str`` is returned as is; a ``str`` subclass is copied to an exact
    ``str`` of its real characters (``str.__str__`` cannot be intercepted by the
    subclass); an object that is no ``str`` but claims to be one (``__class__``)
    becomes ``None`` (missing text); anything else is returned unchanged for the
    kernel to refuse with its code. Typed ``Any``: the result goes into fields
    the kernel checks totally.
    """
    cls = type(value)
    if cls is str:
        return value
    if issubclass(cls, str):
        return str.__str__(value)
    return None if isinstance(value, str) else value


def _callable(_inst: object, attribute: Any, value: Any) -> None:
    if not callable(value):
        raise TypeError(f"{attribute.name} must be callable")


@frozen(kw_only=True)
class ToolSpec:
    """A tool registered once with a harness (CIS-BND-3, CIS-BND-5).

    - ``name``: the name the model calls the tool by (the envelope's ``tool_name``).
    - ``executor``: runs the tool; sync or async callable (a function or an object
      with ``__call__``): parsed arguments -> raw response (see :data:`Executor`).
    - ``projector``: turns the raw response text and the parsed arguments into a
      bounded :class:`~invocation_store.kernel.Projection` (see :data:`Projector`).
    - ``authorized`` / ``read_only``: only the literal ``True`` passes preflight;
      anything else fails closed as UNAUTHORIZED / NOT_READ_ONLY (CIS-PRE-4..6).
    - ``timeout_ms``: the executor's time limit in ms (default 30 s); over it the
      call is EXECUTION_TIMEOUT (CIS-FAIL-3); at most ``2**53 - 1``. ``None``
      declares no limit: the sync boundary then runs the executor inline, in the
      calling thread, with no hand-over at all (CIS-PERF-1); the kernel's
      :class:`~invocation_store.kernel.ToolPolicy` records it as ``2**53 - 1``.

    A ``str`` subclass given as ``name`` is stored as an exact ``str`` copy. The
    async boundary accepts sync and async callables; the sync boundary only sync
    ones. Construction raises ``ValueError`` for a timeout out of range and
    ``TypeError`` for a non-callable executor or projector.
    """

    name: str = field(converter=_exact_text)
    executor: Executor | AsyncExecutor = field(validator=_callable)
    projector: Projector | AsyncProjector = field(validator=_callable)
    authorized: bool = True
    read_only: bool = True
    timeout_ms: int | None = field(default=30_000, validator=_positive_int)

    @property
    def policy(self) -> ToolPolicy:
        """The kernel's view of this tool (CIS-PRE-5, CIS-PRE-6)."""
        timeout_ms = MAX_SAFE_INT if self.timeout_ms is None else self.timeout_ms
        return ToolPolicy(
            name=self.name, authorized=self.authorized, read_only=self.read_only, timeout_ms=timeout_ms
        )


class ToolRegistry:
    """Tools by name, registered once (CIS-BND-3).

    ``register`` raises ``ValueError`` for a name registered twice (a second
    registration never silently replaces the first) and ``TypeError`` for a
    non-:class:`ToolSpec`. Lookups of unknown or non-string names return None, which
    preflight answers with UNAUTHORIZED (CIS-PRE-5).
    """

    def __init__(self, tools: Iterable[ToolSpec] | None = None) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: ToolSpec) -> ToolSpec:
        """Add ``tool``; returns it."""
        if not isinstance(tool, ToolSpec):
            raise TypeError("register takes a ToolSpec")
        if tool.name in self._tools:
            raise ValueError("tool already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: object) -> ToolSpec | None:
        """The tool named ``name``, or None (unknown tools are UNAUTHORIZED)."""
        return self._tools.get(name) if isinstance(name, str) else None

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None

    def __len__(self) -> int:
        return len(self._tools)


@frozen(kw_only=True)
class BoundaryResult:
    """What the agent sees of one tool call (CIS-BND-4, CIS-ERR-1).

    Success (the record is READY): ``ok`` True, ``evidence_status``
    EVIDENCE_FOUND or NO_EVIDENCE, ``content`` the bounded agent result, ``scope``
    what the tool covered, ``negative`` True for NO_EVIDENCE (a scoped negative
    observation, never upgraded or retried, CIS-EVID-3, CIS-EVID-4).

    Failure (rejected, or the record is ERROR): ``ok`` False, ``code`` from
    :class:`~invocation_store.kernel.ErrorCode`, ``message`` its fixed text from
    ``ERROR_MESSAGES``. ``tool_call_id`` is echoed only when it is a safe id (else
    None). Never raw data, request text, keys, credentials or exception text.

    For the tool-result message to the provider (CIS-ECO-3), not for the agent:
    ``tool_name`` is the registered tool's name (None when the registry does not
    know the envelope's name: model text is not echoed) and
    ``envelope_tool_call_id`` the envelope's original tool_call_id, exactly as
    supplied (even when unsafe: the provider needs its own id back; it is never
    stored, logged or shown by ``repr``). Both are None on results not made by
    ``invoke``; neither is in :meth:`as_dict` nor in equality (two results are equal
    when the agent sees the same).
    """

    ok: bool
    tool_call_id: str | None
    code: ErrorCode | None = None
    message: str | None = None
    evidence_status: EvidenceStatus | None = None
    content: str | None = None
    scope: str | None = None
    negative: bool = False
    tool_name: str | None = field(default=None, eq=False)
    envelope_tool_call_id: str | None = field(default=None, repr=False, eq=False)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready agent view: ``{"ok", "tool_call_id", ...}`` without empty fields."""
        if self.ok:
            return {
                "ok": True,
                "tool_call_id": self.tool_call_id,
                "evidence_status": None if self.evidence_status is None else self.evidence_status.value,
                "negative": self.negative,
                "content": self.content,
                "scope": self.scope,
            }
        return {
            "ok": False,
            "tool_call_id": self.tool_call_id,
            "code": None if self.code is None else self.code.value,
            "message": self.message,
        }


# ---------------------------------------------------------------------------
# Pure helpers shared by both boundaries


class _Prepared(NamedTuple):
    """A call that passed preflight 1-6: its tool, exact id, exact arguments text and
    two independent copies of the parsed arguments (one for the executor, one for
    the projector; CIS-PERF-2). A named tuple: built once per call."""

    tool: ToolSpec
    tool_call_id: str
    arguments: str
    executor_args: dict[str, Any]
    projector_args: dict[str, Any]


def _echo(envelope: ToolCallEnvelope) -> str | None:
    """The envelope's tool_call_id if it is safe to show, else None (CIS-ERR-1)."""
    tool_call_id = envelope.tool_call_id
    return tool_call_id if is_safe_id(tool_call_id) else None


def _failure(code: ErrorCode, tool_call_id: str | None) -> BoundaryResult:
    return BoundaryResult(ok=False, tool_call_id=tool_call_id, code=code, message=ERROR_MESSAGES[code])


def _from_record(record: CanonicalRecord) -> BoundaryResult:
    """The agent's view of a terminal record: bounded result or code, never raw (CIS-BND-4)."""
    if record.status is InvocationStatus.READY and record.evidence_status in (
        EvidenceStatus.EVIDENCE_FOUND,
        EvidenceStatus.NO_EVIDENCE,
    ):
        return BoundaryResult(
            ok=True,
            tool_call_id=record.tool_call_id,
            evidence_status=record.evidence_status,
            content=record.agent_result,
            scope=record.scope,
            negative=record.evidence_status is EvidenceStatus.NO_EVIDENCE,
        )
    code = record.error_code if isinstance(record.error_code, ErrorCode) else ErrorCode.INVALID_TRANSITION
    return _failure(code, record.tool_call_id)


def _raw_text(value: object) -> str | None:
    """Normalise an executor's return value to text; None if it cannot be (CIS-FAIL-4).

    A ``str`` is kept as is (a subclass is copied to a plain ``str``); anything else
    is serialized once as compact, key-sorted JSON without NaN/Infinity.
    """
    if issubclass(type(value), str):
        text: str = _exact_text(value)
        return text
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except Exception:  # noqa: BLE001 - any failure to serialize is SERIALIZATION_FAILED (CIS-FAIL-4)
        return None


#: What each ToolSpec seen declares, computed once per spec (specs are frozen): its
#: kernel policy and whether a callable is async. Keyed by ``id``, the spec itself
#: kept in the value so that the id stays its own; bounded (cleared when full).
_VETTED: Final[dict[int, tuple[ToolSpec, ToolPolicy, bool]]] = {}


def _vetted(tool: ToolSpec) -> tuple[ToolPolicy, bool]:
    """``(tool.policy, is any of its callables async)``, cached per spec."""
    entry = _VETTED.get(id(tool))
    if entry is None or entry[0] is not tool:
        if len(_VETTED) >= 4096:
            _VETTED.clear()
        entry = (tool, tool.policy, _is_async_callable(tool.executor) or _is_async_callable(tool.projector))
        _VETTED[id(tool)] = entry
    return entry[1], entry[2]


def _require_sync(tool: ToolSpec) -> None:
    if _vetted(tool)[1]:
        raise TypeError("ToolBoundary runs sync tools only; use AsyncToolBoundary for async ones")


def _check_context(context: object) -> RunContext:
    """The context as an exact RunContext holding an exact ``str`` run id.

    Raises ``TypeError`` for a non-RunContext and ``ValueError`` (RunContext's own
    check) if a subclass or a mutated context holds an unsafe run id.
    """
    if not isinstance(context, RunContext):
        raise TypeError("context must be a RunContext")
    run_id = context.run_id
    if type(context) is RunContext and type(run_id) is str:
        return context
    return RunContext(run_id=_exact_text(run_id))


def _exact_envelope(envelope: ToolCallEnvelope) -> ToolCallEnvelope:
    """The envelope rebuilt from its fields, each read once and copied to exact text
    (see "Text at the edge" in the module docstring). An exact ToolCallEnvelope (frozen,
    no subclass properties) whose fields are all exact ``str`` already is that copy."""
    if (
        type(envelope) is ToolCallEnvelope
        and type(envelope.run_id) is str
        and type(envelope.tool_call_id) is str
        and type(envelope.tool_name) is str
        and type(envelope.arguments) is str
    ):
        return envelope
    return ToolCallEnvelope(
        run_id=_exact_text(envelope.run_id),
        tool_call_id=_exact_text(envelope.tool_call_id),
        tool_name=_exact_text(envelope.tool_name),
        arguments=_exact_text(envelope.arguments),
    )


def _exact_projection(projection: Projection) -> Projection:
    """The projection rebuilt from its fields, each read once and copied to exact text.
    An exact Projection (frozen, no subclass properties) whose fields are exact ``str``
    (or the kernel's own EvidenceStatus) already is that copy."""
    if (
        type(projection) is Projection
        and type(projection.content) is str
        and type(projection.scope) is str
        and type(projection.evidence_status) in (str, EvidenceStatus)
    ):
        return projection
    return Projection(
        evidence_status=_exact_text(projection.evidence_status),
        content=_exact_text(projection.content),
        scope=_exact_text(projection.scope),
    )


def copy_json(value: Any) -> Any:
    """An independent copy of a parsed JSON value (CIS-PERF-2).

    Objects and arrays are copied, recursively; strings, numbers, booleans and
    ``None`` are immutable and shared. Several times cheaper than parsing the text
    again or ``copy.deepcopy`` (``benchmarks/bench_invocation.py`` measures it).
    The value must come from a parse bounded in depth (kernel ``parse_arguments``).
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    return value


def _is_int_in(value: object, minimum: int) -> bool:
    """``value`` is a non-bool int in ``[minimum, MAX_SAFE_INT]`` (exact in every store)."""
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= MAX_SAFE_INT


def _check_older_than(older_than_ms: object) -> None:
    if not _is_int_in(older_than_ms, 0):
        raise ValueError("older_than_ms must be an int in [0, 2**53 - 1] (milliseconds)")


def _check_run_parameters(
    deadline_ms: object, ttl_ms: object, tool_call_budget: object, byte_budget: object
) -> None:
    """Raise ``ValueError`` unless every parameter is an int within its range (CIS-RUN-1).

    Ranges: ``deadline_ms`` and both budgets ``[0, 2**53 - 1]``, ``ttl_ms``
    ``[1, 2**53 - 1]``, and ``deadline_ms + ttl_ms`` (when the run state lapses) at
    most ``2**53 - 1``: larger values are not exact in every store (Lua numbers are
    doubles), a caller's error rather than a store failure (CIS-FAIL-5).
    """
    for name, value, minimum in (
        ("deadline_ms", deadline_ms, 0),
        ("ttl_ms", ttl_ms, 1),
        ("tool_call_budget", tool_call_budget, 0),
        ("byte_budget", byte_budget, 0),
    ):
        if not _is_int_in(value, minimum):
            raise ValueError(f"{name} must be an int in [{minimum}, 2**53 - 1]")
    assert isinstance(deadline_ms, int)
    assert isinstance(ttl_ms, int)
    if deadline_ms + ttl_ms > MAX_SAFE_INT:
        raise ValueError("deadline_ms + ttl_ms must be at most 2**53 - 1")


_type_name = type_name
_safe_name = safe_name


def _cause(exc: BaseException) -> str:
    """Type name of a store failure, for logs (the original type for a StoreUnavailableError)."""
    name = _type_name(exc)
    if isinstance(exc, StoreUnavailableError):
        return f"{name}({_safe_name(getattr(exc, 'cause', None))})"
    return name


def _unavailable(exc: BaseException) -> StoreUnavailableError:
    """A safe StoreUnavailableError for any store exception: type names only (CIS-FAIL-5)."""
    if isinstance(exc, StoreUnavailableError):
        return exc
    return StoreUnavailableError(_type_name(exc))


def _code_of(exc: StoreUnavailableError) -> ErrorCode:
    code = getattr(exc, "code", None)
    return code if isinstance(code, ErrorCode) else ErrorCode.STORE_UNAVAILABLE


def _sync_store(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a store method; any exception it raises becomes a safe StoreUnavailableError."""
    try:
        with _telemetry.phase("store"):
            return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE (CIS-FAIL-5)
        raise _unavailable(exc) from None


async def _async_store(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await a store method; any exception it raises becomes a safe StoreUnavailableError."""
    try:
        with _telemetry.phase("store"):
            return await fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE (CIS-FAIL-5)
        raise _unavailable(exc) from None


#: How many recent invocation tokens a boundary remembers to recognise a token
#: factory that repeats itself (CIS-RETRY-1); older repeats cannot be detected.
_TOKEN_WINDOW = 65_536


class _Core:
    """State and pure steps shared by :class:`ToolBoundary` and :class:`AsyncToolBoundary`."""

    def __init__(
        self,
        registry: ToolRegistry,
        limits: Limits,
        token_factory: Callable[[], str],
        logger: logging.Logger | None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError("registry must be a ToolRegistry")
        if not isinstance(limits, Limits):
            raise TypeError("limits must be a Limits")
        self.registry = registry
        self.limits = limits
        self._token_factory = token_factory
        self._log = _telemetry.CallLogger(logger if logger is not None else _LOGGER)
        # How many calls of this boundary drew each recent token (a bounded LRU
        # window). A replay is our own create only while exactly one call ever drew
        # its token: a factory that repeats itself, concurrently or one call after
        # another, makes every later replay under that token a DUPLICATE (fail
        # closed: the executor never runs twice, a leftover PROJECTING is swept).
        self._token_uses: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._token_lock = threading.Lock()

    def _claim(self, token: str) -> bool:
        """Count one more call drawing ``token``; True if it is the first in the window."""
        with self._token_lock:
            uses = self._token_uses.pop(token, 0) + 1
            self._token_uses[token] = uses
            while len(self._token_uses) > _TOKEN_WINDOW:
                self._token_uses.popitem(last=False)
            return uses == 1

    def _sole_use(self, token: str) -> bool:
        """True while exactly one call of this boundary has drawn ``token``."""
        with self._token_lock:
            return self._token_uses.get(token) == 1

    # -- completions the store could not apply (CIS-DUR-5, see _completion) ----------

    completions: PendingCompletions

    def pending_completions(self, run_id: str | None = None) -> tuple[tuple[str, str], ...]:
        """(run_id, tool_call_id) of every completion held because the store could not apply it.

        Each is a call whose tool ran and whose agent was told STORE_UNAVAILABLE; its
        record is PROJECTING in the store, its raw response kept here. Apply them with
        ``finish_pending`` (or by the harness re-sending the call), or drop one with
        :meth:`drop_pending` and sweep its record (CIS-DUR-5).
        """
        return self.completions.keys(run_id)

    def drop_pending(self, context: RunContext, tool_call_id: str) -> bool:
        """Forget a held completion and its raw response; True if one was held (then ``sweep_stale`` it)."""
        context = _check_context(context)
        return self.completions.drop(context.run_id, tool_call_id)

    # -- step 1: preflight 1-6 and argument parsing (nothing written) ----------------

    def _prepare(self, context: RunContext, envelope: ToolCallEnvelope) -> _Prepared | BoundaryResult:
        """Preflight checks 1-6; the executor gets the object the I-JSON check parsed
        and the projector an independent copy of it, never a second parse (an executor
        mutating its arguments cannot change what the projector sees, CIS-PERF-2)."""
        context = _check_context(context)
        if not isinstance(envelope, ToolCallEnvelope):
            raise TypeError("envelope must be a ToolCallEnvelope")
        envelope = _exact_envelope(envelope)
        tool = self.registry.get(envelope.tool_name)
        parsed = parse_envelope(context, envelope, None if tool is None else _vetted(tool)[0], self.limits)
        if isinstance(parsed, ErrorCode):
            self._log.info("tool call rejected at preflight: %s", parsed.value)
            return _failure(parsed, _echo(envelope))
        assert tool is not None
        assert isinstance(envelope.tool_call_id, str)
        assert isinstance(envelope.arguments, str)
        return _Prepared(
            tool=tool,
            tool_call_id=envelope.tool_call_id,
            arguments=envelope.arguments,
            executor_args=parsed,
            projector_args=copy_json(parsed),
        )

    def _request(self, context: RunContext, prepared: _Prepared, now_ms: int) -> AdmissionRequest:
        token = _exact_text(self._token_factory())
        if type(token) is not str or not token:
            raise TypeError("token_factory must return a non-empty str")
        return AdmissionRequest(
            run_id=_check_context(context).run_id,
            tool_call_id=prepared.tool_call_id,
            tool_name=prepared.tool.name,
            request_json=prepared.arguments,
            invocation_token=token,
            now_ms=now_ms,
        )

    # -- steps 3-5: kernel transitions on the executor's and projector's outcomes -----

    def _after_execution(
        self, created: CanonicalRecord, outcome: _Outcome, now_ms: int
    ) -> CanonicalRecord | ErrorCode:
        """Apply the executor's outcome: Failed(...) or RawReceived (CIS-FAIL-2..4, CIS-SIZE-3)."""
        name = created.tool_name
        if outcome.timed_out:
            self._log.warning("tool %s executor timed out: %s", name, ErrorCode.EXECUTION_TIMEOUT.value)
            return transition(created, Failed(code=ErrorCode.EXECUTION_TIMEOUT, now_ms=now_ms), self.limits)
        if outcome.failure is not None:
            self._log.warning(
                "tool %s executor raised %s: %s",
                name,
                _safe_name(outcome.failure),
                ErrorCode.EXECUTION_FAILED.value,
            )
            return transition(created, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now_ms), self.limits)
        raw = _raw_text(outcome.value)
        if raw is None:
            self._log.warning(
                "tool %s executor returned an unserializable %s: %s",
                name,
                _type_name(outcome.value),
                ErrorCode.SERIALIZATION_FAILED.value,
            )
            return transition(
                created, Failed(code=ErrorCode.SERIALIZATION_FAILED, now_ms=now_ms), self.limits
            )
        return transition(created, RawReceived(raw_response=raw, now_ms=now_ms), self.limits)

    def _after_projection(
        self, record: CanonicalRecord, outcome: _Outcome, now_ms: int
    ) -> CanonicalRecord | ErrorCode:
        """Apply the projector's outcome; the raw response stays in the record (CIS-EVID-5, CIS-FAIL-6)."""
        name = record.tool_name
        if outcome.failure is not None:
            self._log.warning(
                "tool %s projector raised %s: %s",
                name,
                _safe_name(outcome.failure),
                ErrorCode.PROJECTION_FAILED.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=now_ms), self.limits)
        projection = outcome.value
        if not isinstance(projection, Projection):
            self._log.warning(
                "tool %s projector returned a %s: %s",
                name,
                _type_name(projection),
                ErrorCode.PROJECTION_INVALID.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), self.limits)
        try:
            projection = _exact_projection(projection)
        except Exception as exc:  # noqa: BLE001 - a Projection whose fields cannot be read is invalid
            self._log.warning(
                "tool %s projection unreadable (%s): %s",
                name,
                _type_name(exc),
                ErrorCode.PROJECTION_INVALID.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), self.limits)
        return transition(record, ProjectionReceived(projection=projection, now_ms=now_ms), self.limits)

    # -- step 7: results and failures ---------------------------------------------------

    def _admission_refused(self, admitted: ErrorCode, echo: str | None) -> BoundaryResult:
        self._log.info("tool call refused at admission: %s", admitted.value)
        return _failure(admitted, echo)

    def _own_replay(self, admitted: Admission, request: AdmissionRequest, claimed: bool) -> bool:
        """Is this replayed admission our own create, retried by the client library?

        Yes when no other call of this boundary ever drew the token (``claimed``, and
        still the sole use when the replay comes back) and the record is still
        exactly what ``request`` created: this call's token (128
        random bits, drawn for this call only), PROJECTING without a raw response,
        the same ids, tool and request text, ``created_at_ms == request.now_ms``
        (CIS-RETRY-2). Anything else is a replay of another call (CIS-BND-6).
        """
        if claimed and self._sole_use(request.invocation_token) and _is_own_create(admitted.record, request):
            self._log.info("create retried by the store client: recognised as this invocation")
            return True
        return False

    def _replayed(self, echo: str | None) -> BoundaryResult:
        # Not our own create: the token factory repeated itself, and the record is
        # another call's (or has moved on). Treat it as the duplicate it is (CIS-BND-6).
        self._log.warning("invocation token reused: %s", ErrorCode.DUPLICATE_TOOL_CALL.value)
        return _failure(ErrorCode.DUPLICATE_TOOL_CALL, echo)

    def _kernel_refused(self, code: ErrorCode, echo: str | None) -> BoundaryResult:
        # The kernel refused a transition of our own PROJECTING record: it expired
        # while the tool ran (CIS-TTL-4). Nothing can be written any more.
        self._log.warning("tool call transition refused: %s", code.value)
        return _failure(code, echo)

    def _finish(
        self, final: CanonicalRecord, stored: CanonicalRecord | ErrorCode, echo: str | None
    ) -> BoundaryResult:
        if isinstance(stored, ErrorCode):
            # e.g. INVALID_TRANSITION: a sweep completed the record first (CIS-LIFE-7).
            self._log.warning("tool %s completion refused: %s", final.tool_name, stored.value)
            return _failure(stored, echo)
        _telemetry.record_completed(final)
        return _from_record(final)

    def _store_failed(self, exc: StoreUnavailableError, operation: str, echo: str | None) -> BoundaryResult:
        code = _code_of(exc)
        self._log.error("store %s failed with %s: %s", operation, _cause(exc), code.value)
        return _failure(code, echo)

    def _store_failed_code(self, exc: StoreUnavailableError, operation: str) -> ErrorCode:
        code = _code_of(exc)
        self._log.error("store %s failed with %s: %s", operation, _cause(exc), code.value)
        return code

    def _store_failed_raise(self, exc: StoreUnavailableError, operation: str) -> StoreUnavailableError:
        self._log.error("store %s failed with %s", operation, _cause(exc))
        return exc


def _is_own_create(record: CanonicalRecord, request: AdmissionRequest) -> bool:
    """``record`` is exactly the PROJECTING record ``request`` creates (CIS-RETRY-2)."""
    return (
        record.status is InvocationStatus.PROJECTING
        and record.raw_response is None
        and record.invocation_token == request.invocation_token
        and record.run_id == request.run_id
        and record.tool_call_id == request.tool_call_id
        and record.tool_name == request.tool_name
        and record.request_json == request.request_json
        and record.created_at_ms == request.now_ms
    )


def _is_projecting(record: CanonicalRecord | None) -> bool:
    return record is not None and record.status is InvocationStatus.PROJECTING


def _awaits_projection(record: CanonicalRecord) -> bool:
    return record.status is InvocationStatus.PROJECTING and record.raw_response is not None


# ---------------------------------------------------------------------------
# Sync


def _execute(tool: ToolSpec, arguments: dict[str, Any]) -> _Outcome:
    """The sync executor call: inline without a time limit, else on a persistent worker."""
    if tool.timeout_ms is None:
        return call_inline(tool.executor, arguments)
    return call_with_timeout(tool.executor, tool.timeout_ms, arguments)


class ToolBoundary(_Core):
    """The synchronous boundary harnesses call for every tool call (CIS-BND-1, CIS-BND-5).

    ``store``: an :class:`~invocation_store.adapters.InvocationStore` (MemoryStore,
    RedisStore or your own). ``registry``: the harness's tools. ``limits``: byte
    limits (UTF-8 bytes). ``token_factory``: draws the per-invocation retry token
    (CIS-RETRY-1; never an id, never derived from one). ``logger``: where type names
    and codes are logged (default ``invocation_store.boundary``).

    Thread-safe when the store is: one boundary may serve many threads of a run.
    Raises ``TypeError`` if the registry holds an async executor or projector (use
    :class:`AsyncToolBoundary`).
    """

    def __init__(
        self,
        store: InvocationStore,
        registry: ToolRegistry,
        *,
        limits: Limits = _DEFAULT_LIMITS,
        token_factory: Callable[[], str] = _new_token,
        logger: logging.Logger | None = None,
        completion_retry: CompletionRetry = DEFAULT_COMPLETION_RETRY,
    ) -> None:
        super().__init__(registry, limits, token_factory, logger)
        self.store = store
        #: Completions the store could not apply yet, with their raw responses (CIS-DUR-5).
        self.completions = PendingCompletions(completion_retry)
        for name in registry.names():
            tool = registry.get(name)
            assert tool is not None
            _require_sync(tool)

    def now_ms(self) -> int:
        """The store's clock in integer ms (for absolute deadlines: ``now_ms() + budget``)."""
        return self.store.now_ms()

    # -- runs -----------------------------------------------------------------------

    @_telemetry.observed_run
    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """Open an ACTIVE run and return its :class:`RunContext` (CIS-RUN-1).

        ``deadline_ms`` is absolute (epoch ms, e.g. ``boundary.now_ms() + 60_000``);
        calls at or after it are RUN_DEADLINE_EXCEEDED (CIS-RUN-4). ``ttl_ms`` is the
        TTL every record of the run gets at creation (CIS-TTL-1); ``tool_call_budget``
        the most calls admitted (CIS-RUN-5); ``byte_budget`` the run's cumulative UTF-8
        bytes (CIS-RUN-6). Budgets are enforced atomically in the store, so worker
        processes sharing the run cannot overspend it.

        Domain failures are returned, never raised: RUN_MISMATCH for an unsafe run id,
        INVALID_TRANSITION for a live run opened with other parameters (reopening with
        the same ones returns the same context, CIS-RETRY-3), STORE_UNAVAILABLE when
        the store fails. Raises ``ValueError`` (programming errors) for a parameter
        that is not an int, a negative deadline or budget, a non-positive TTL, any
        value above ``2**53 - 1`` or ``deadline_ms + ttl_ms`` above it (the largest
        integer every store keeps exactly, kernel ``MAX_SAFE_INT``).
        """
        _check_run_parameters(deadline_ms, ttl_ms, tool_call_budget, byte_budget)
        run_id = _exact_text(run_id)
        if not is_safe_id(run_id):
            return ErrorCode.RUN_MISMATCH
        try:
            result = _sync_store(
                self.store.open_run,
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "open_run")
        return result if isinstance(result, ErrorCode) else RunContext(run_id=run_id)

    @_telemetry.observed_run
    def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Returns the new run state, or RUN_INACTIVE (unknown or expired run),
        INVALID_TRANSITION (already cancelled or closed), STORE_UNAVAILABLE. Calls
        already running finish normally.
        """
        context = _check_context(context)
        try:
            return _sync_store(self.store.cancel_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "cancel_run")

    @_telemetry.observed_run
    def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Same returns as :meth:`cancel_run`. Records are kept: progress and citations
        still read them until their TTL.
        """
        context = _check_context(context)
        try:
            return _sync_store(self.store.close_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "close_run")

    # -- one call -------------------------------------------------------------------

    @_telemetry.observed_invoke
    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """Run one tool call from envelope to bounded result (CIS-BND-1, CIS-BND-2).

        ``context`` is the harness's explicit run (the source of truth for the run id,
        CIS-PRE-3); ``envelope`` the call as the model framework produced it (see
        :mod:`invocation_store.providers`). Returns a :class:`BoundaryResult`: every
        executor, projector and store failure is a code in it, never an exception
        (CIS-FAIL-1). A rejected call writes nothing and never reaches the executor
        (CIS-PRE-1); the executor runs at most once per (run, tool_call_id)
        (CIS-BND-6), and once when the store client resent this call's create
        (CIS-RETRY-2). A success costs two store round trips: create, complete.
        Envelope text is read as exact ``str`` copies (module docstring, "Text at
        the edge").

        Raises ``TypeError`` only for programming errors: a context that is not a
        RunContext, an envelope that is not a ToolCallEnvelope, an async tool, a
        token factory returning a non-string.
        """
        prepared = self._prepare(context, envelope)
        if isinstance(prepared, BoundaryResult):
            return prepared
        tool = prepared.tool
        _require_sync(tool)
        echo = prepared.tool_call_id
        held = self.completions.retry_of(context.run_id, echo, tool.name, prepared.arguments)
        if held is not None:  # the harness retries a call whose completion we hold (CIS-DUR-5)
            return self._finish_held(held, echo)
        operation = "create"
        try:
            request = self._request(context, prepared, _sync_store(self.store.now_ms))
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        claimed = self._claim(request.invocation_token)
        try:
            admitted = _sync_store(self.store.create, request, self.limits)
            if isinstance(admitted, ErrorCode):
                return self._admission_refused(admitted, echo)
            if admitted.replayed and not self._own_replay(admitted, request, claimed):
                return self._replayed(echo)
            created = admitted.record
            operation = "clock"
            with _telemetry.phase("execute"):
                executed = _execute(tool, prepared.executor_args)
            final = self._after_execution(created, executed, _sync_store(self.store.now_ms))
            if isinstance(final, CanonicalRecord) and _awaits_projection(final):
                with _telemetry.phase("project"):
                    projected = call_inline(tool.projector, final.raw_response, prepared.projector_args)
                final = self._after_projection(final, projected, _sync_store(self.store.now_ms))
            if isinstance(final, ErrorCode):
                return self._kernel_refused(final, echo)
            operation = "complete"
            stored = self.completions.apply(
                PendingCompletion(created=created, final=final),
                lambda: _sync_store(self.store.complete, created, final),
            )
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        return self._finish(final, stored, echo)

    # -- reads ----------------------------------------------------------------------

    def _finish_held(self, held: PendingCompletion, echo: str | None) -> BoundaryResult:
        """Apply a held completion (retried within the budget); the call's result, or STORE_UNAVAILABLE."""
        try:
            stored = self.completions.apply(
                held, lambda: _sync_store(self.store.complete, held.created, held.final)
            )
        except StoreUnavailableError as exc:
            return self._store_failed(exc, "complete", echo)
        return self._finish(held.final, stored, echo)

    def finish_pending(self, context: RunContext) -> dict[str, BoundaryResult]:
        """Apply every completion this boundary holds for the run; results by tool_call_id (CIS-DUR-5).

        A completion the store takes (or answers with a code, e.g. INVALID_TRANSITION
        after a sweep) is no longer held; one that still fails stays held and its
        result is STORE_UNAVAILABLE. See :meth:`pending_completions`.
        """
        context = _check_context(context)
        return {
            tool_call_id: self._finish_held(held, tool_call_id)
            for _, tool_call_id in self.completions.keys(context.run_id)
            if (held := self.completions.get(context.run_id, tool_call_id)) is not None
        }

    @_telemetry.observed_run
    def project_progress(self, context: RunContext) -> ProgressReport:
        """The run's completed calls as bounded observed facts (CIS-PROG-1..5).

        Reads the run's ordered completed ids (the tracker keeps identities only),
        resolves them in ONE batched read of only the fields facts need (the store's
        ``get_progress``, else ``get_many`` without raw responses, CIS-PERF-3), and lets the
        kernel keep READY records of this run in execution order, capped by
        ``limits.max_facts`` and ``limits.max_fact_bytes`` (a fact that does not fit
        is omitted whole, never truncated). Missing, expired, other-run, PROJECTING
        and ERROR identities are counted by reason in ``excluded``; NO_EVIDENCE facts
        are marked ``negative``. Raises :class:`StoreUnavailableError` (fixed, safe
        message) if the store fails.
        """
        context = _check_context(context)
        run_id = context.run_id
        try:
            identities = _sync_store(self.store.completed, run_id)
            records = _sync_store(progress_reader(self.store), run_id, identities) if identities else {}
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "progress") from None
        return project_progress(run_id, identities, records, now_ms, self.limits)

    @_telemetry.observed_run
    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """May the agent cite this call? (CIS-REF-1..3).

        READY + EVIDENCE_FOUND of this run: EVIDENCE with its content and scope;
        READY + NO_EVIDENCE: NEGATIVE_OBSERVATION with its scope; anything else
        (ERROR, PROJECTING, missing, expired, other run, unsafe id):
        NOT_REFERENCABLE with its reason. An unsafe id is answered without touching
        the store, as NOT_REFERENCABLE/UNSAFE_ID with ``tool_call_id`` None: its text is
        never echoed (CIS-ERR-1). A ``str`` subclass id is read as
        an exact copy of its characters. Never raw data. Raises
        :class:`StoreUnavailableError` if the store fails.
        """
        context = _check_context(context)
        tool_call_id = _exact_text(tool_call_id)
        if not is_safe_id(tool_call_id):
            return cite(context.run_id, tool_call_id, None, 0)
        try:
            record = _sync_store(self.store.get, context.run_id, tool_call_id)
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "cite") from None
        return cite(context.run_id, tool_call_id, record, now_ms)

    @_telemetry.observed_run
    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """Move this run's PROJECTING records at least ``older_than_ms`` old to ERROR (CIS-LIFE-7).

        Each stale record becomes ERROR/STALE_PROJECTION through the kernel's
        SweptStale event and one compare-and-set (a raw response it held stays,
        harness-only); younger records are left alone (NOT_STALE). A worker completing
        concurrently either wins its compare-and-set or gets INVALID_TRANSITION, never
        both writes. Returns the number of records swept. Raises
        :class:`StoreUnavailableError` if the store fails, ``ValueError`` for a
        negative age.
        """
        context = _check_context(context)
        _check_older_than(older_than_ms)
        run_id = context.run_id
        swept = 0
        try:
            # An id re-admitted after its record expired is listed twice: sweep it once.
            ids = tuple(dict.fromkeys(_sync_store(self.store.calls, run_id)))
            records = _sync_store(self.store.get_many, run_id, ids) if ids else {}
            for tool_call_id in ids:
                record = records.get(tool_call_id)
                if record is None or not _is_projecting(record):
                    continue
                event = SweptStale(now_ms=_sync_store(self.store.now_ms), older_than_ms=older_than_ms)
                after = transition(record, event, self.limits)
                if isinstance(after, ErrorCode):
                    continue  # NOT_STALE, or expired meanwhile
                if isinstance(_sync_store(self.store.complete, record, after), CanonicalRecord):
                    swept += 1
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "sweep") from None
        if swept:
            self._log.info("swept %d records: %s", swept, ErrorCode.STALE_PROJECTION.value)
        return swept


# ---------------------------------------------------------------------------
# Async


class AsyncToolBoundary(_Core):
    """The asyncio twin of :class:`ToolBoundary`, same contract per method (CIS-BND-1).

    ``store`` is an :class:`~invocation_store.adapters.AsyncInvocationStore`
    (AsyncMemoryStore, AsyncRedisStore). Executors and projectors may be sync (each
    call in its own daemon worker thread, never blocking the loop) or async (each
    call in a task of its own in the loop, abandoned after its timeout). Concurrent
    ``invoke`` calls of one run (``asyncio.gather``) are safe: the store decides
    duplicates and budgets atomically (CIS-RUN-5).
    """

    def __init__(
        self,
        store: AsyncInvocationStore,
        registry: ToolRegistry,
        *,
        limits: Limits = _DEFAULT_LIMITS,
        token_factory: Callable[[], str] = _new_token,
        logger: logging.Logger | None = None,
        completion_retry: CompletionRetry = DEFAULT_COMPLETION_RETRY,
    ) -> None:
        super().__init__(registry, limits, token_factory, logger)
        self.store = store
        #: Completions the store could not apply yet, with their raw responses (CIS-DUR-5).
        self.completions = PendingCompletions(completion_retry)

    def now_ms(self) -> int:
        """The store's clock in integer ms (for absolute deadlines)."""
        return self.store.now_ms()

    @_telemetry.observed_run
    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """See :meth:`ToolBoundary.open_run` (CIS-RUN-1)."""
        _check_run_parameters(deadline_ms, ttl_ms, tool_call_budget, byte_budget)
        run_id = _exact_text(run_id)
        if not is_safe_id(run_id):
            return ErrorCode.RUN_MISMATCH
        try:
            result = await _async_store(
                self.store.open_run,
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "open_run")
        return result if isinstance(result, ErrorCode) else RunContext(run_id=run_id)

    @_telemetry.observed_run
    async def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.cancel_run` (CIS-RUN-2)."""
        context = _check_context(context)
        try:
            return await _async_store(self.store.cancel_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "cancel_run")

    @_telemetry.observed_run
    async def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.close_run` (CIS-RUN-2)."""
        context = _check_context(context)
        try:
            return await _async_store(self.store.close_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "close_run")

    @_telemetry.observed_ainvoke
    async def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """See :meth:`ToolBoundary.invoke` (CIS-BND-1, CIS-BND-2).

        Cancelling the task awaiting this propagates ``CancelledError`` (the tool's
        own task is cancelled, not awaited) and leaves the record PROJECTING, for
        :meth:`sweep_stale`. A ``CancelledError`` the tool raises while this task is
        not being cancelled is EXECUTION_FAILED (PROJECTION_FAILED from a projector),
        and a tool over its ``timeout_ms`` is EXECUTION_TIMEOUT even if it ignores
        cancellation (CIS-FAIL-2, CIS-FAIL-3).
        """
        prepared = self._prepare(context, envelope)
        if isinstance(prepared, BoundaryResult):
            return prepared
        tool = prepared.tool
        echo = prepared.tool_call_id
        held = self.completions.retry_of(context.run_id, echo, tool.name, prepared.arguments)
        if held is not None:  # the harness retries a call whose completion we hold (CIS-DUR-5)
            return await self._finish_held(held, echo)
        operation = "create"
        try:
            request = self._request(context, prepared, _sync_store(self.store.now_ms))
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        claimed = self._claim(request.invocation_token)
        try:
            admitted = await _async_store(self.store.create, request, self.limits)
            if isinstance(admitted, ErrorCode):
                return self._admission_refused(admitted, echo)
            if admitted.replayed and not self._own_replay(admitted, request, claimed):
                return self._replayed(echo)
            created = admitted.record
            operation = "clock"
            with _telemetry.phase("execute"):
                executed = await acall(tool.executor, tool.timeout_ms, prepared.executor_args)
            final = self._after_execution(created, executed, _sync_store(self.store.now_ms))
            if isinstance(final, CanonicalRecord) and _awaits_projection(final):
                with _telemetry.phase("project"):
                    projected = await acall(tool.projector, None, final.raw_response, prepared.projector_args)
                final = self._after_projection(final, projected, _sync_store(self.store.now_ms))
            if isinstance(final, ErrorCode):
                return self._kernel_refused(final, echo)
            operation = "complete"
            stored = await self.completions.aapply(
                PendingCompletion(created=created, final=final),
                lambda: _async_store(self.store.complete, created, final),
            )
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        return self._finish(final, stored, echo)

    async def _finish_held(self, held: PendingCompletion, echo: str | None) -> BoundaryResult:
        """See :meth:`ToolBoundary._finish_held`."""
        try:
            stored = await self.completions.aapply(
                held, lambda: _async_store(self.store.complete, held.created, held.final)
            )
        except StoreUnavailableError as exc:
            return self._store_failed(exc, "complete", echo)
        return self._finish(held.final, stored, echo)

    async def finish_pending(self, context: RunContext) -> dict[str, BoundaryResult]:
        """See :meth:`ToolBoundary.finish_pending` (CIS-DUR-5)."""
        context = _check_context(context)
        results: dict[str, BoundaryResult] = {}
        for _, tool_call_id in self.completions.keys(context.run_id):
            held = self.completions.get(context.run_id, tool_call_id)
            if held is not None:
                results[tool_call_id] = await self._finish_held(held, tool_call_id)
        return results

    @_telemetry.observed_run
    async def project_progress(self, context: RunContext) -> ProgressReport:
        """See :meth:`ToolBoundary.project_progress` (CIS-PROG-1..5)."""
        context = _check_context(context)
        run_id = context.run_id
        try:
            identities = await _async_store(self.store.completed, run_id)
            records = (
                await _async_store(async_progress_reader(self.store), run_id, identities)
                if identities
                else {}
            )
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "progress") from None
        return project_progress(run_id, identities, records, now_ms, self.limits)

    @_telemetry.observed_run
    async def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """See :meth:`ToolBoundary.cite` (CIS-REF-1..3)."""
        context = _check_context(context)
        tool_call_id = _exact_text(tool_call_id)
        if not is_safe_id(tool_call_id):
            return cite(context.run_id, tool_call_id, None, 0)
        try:
            record = await _async_store(self.store.get, context.run_id, tool_call_id)
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "cite") from None
        return cite(context.run_id, tool_call_id, record, now_ms)

    @_telemetry.observed_run
    async def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """See :meth:`ToolBoundary.sweep_stale` (CIS-LIFE-7)."""
        context = _check_context(context)
        _check_older_than(older_than_ms)
        run_id = context.run_id
        swept = 0
        try:
            ids = tuple(dict.fromkeys(await _async_store(self.store.calls, run_id)))
            records = await _async_store(self.store.get_many, run_id, ids) if ids else {}
            for tool_call_id in ids:
                record = records.get(tool_call_id)
                if record is None or not _is_projecting(record):
                    continue
                event = SweptStale(now_ms=_sync_store(self.store.now_ms), older_than_ms=older_than_ms)
                after = transition(record, event, self.limits)
                if isinstance(after, ErrorCode):
                    continue
                if isinstance(await _async_store(self.store.complete, record, after), CanonicalRecord):
                    swept += 1
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "sweep") from None
        if swept:
            self._log.info("swept %d records: %s", swept, ErrorCode.STALE_PROJECTION.value)
        return swept
