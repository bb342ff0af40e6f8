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
   store, CIS-PRE-8). Round trip 1.
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
(CIS-ERR-2). Exceptions that do escape are programming errors of the caller: a
non-:class:`RunContext` context, a non-envelope, an async tool on the sync boundary.

Timeouts and threads: every sync executor (and, on the async boundary, every sync
projector) runs in a fresh daemon thread of its own, whose outcome arrives through
a :class:`concurrent.futures.Future`; the sync boundary waits on it for
``timeout_ms``, the async one awaits it (``asyncio.wrap_future``) under
:func:`asyncio.wait_for`. Python cannot kill a thread: an executor that overruns
keeps running in the background until it returns by itself; its result is then
discarded, the record being already ERROR/EXECUTION_TIMEOUT. Tools should therefore
enforce their own deadlines too. Because each call has its own thread, a hung tool
never occupies a shared pool worker (such as the loop's default executor behind
``asyncio.to_thread``, only ``min(32, CPUs + 4)`` wide), and being a daemon it never
delays interpreter exit nor the end of ``asyncio.run``. A coroutine executor over
its timeout is cancelled by ``asyncio.wait_for``.

A call interrupted by the caller (``KeyboardInterrupt``, task cancellation) leaves
its record PROJECTING; :meth:`ToolBoundary.sweep_stale` moves it to
ERROR/STALE_PROJECTION later (CIS-LIFE-7).

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

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import json
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias, TypeVar

from attrs import field, frozen

from .adapters import AsyncInvocationStore, InvocationStore, StoreUnavailableError
from .kernel import (
    ERROR_MESSAGES,
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
    check_envelope,
    cite,
    is_safe_id,
    project_progress,
    transition,
)

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


def _positive_int(_inst: object, _attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("timeout_ms must be a positive int (milliseconds)")


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
      call is EXECUTION_TIMEOUT (CIS-FAIL-3).

    The async boundary accepts sync and async callables; the sync boundary only sync
    ones. Construction raises ``ValueError`` for a non-positive timeout and
    ``TypeError`` for a non-callable executor or projector.
    """

    name: str
    executor: Executor | AsyncExecutor = field(validator=_callable)
    projector: Projector | AsyncProjector = field(validator=_callable)
    authorized: bool = True
    read_only: bool = True
    timeout_ms: int = field(default=30_000, validator=_positive_int)

    @property
    def policy(self) -> ToolPolicy:
        """The kernel's view of this tool (CIS-PRE-5, CIS-PRE-6)."""
        return ToolPolicy(
            name=self.name, authorized=self.authorized, read_only=self.read_only, timeout_ms=self.timeout_ms
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
    """

    ok: bool
    tool_call_id: str | None
    code: ErrorCode | None = None
    message: str | None = None
    evidence_status: EvidenceStatus | None = None
    content: str | None = None
    scope: str | None = None
    negative: bool = False

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


@frozen
class _Outcome:
    """What a guarded executor/projector call produced: a value, or a failure."""

    value: object = None
    failure: str | None = None  # exception type name, for logs only
    timed_out: bool = False


@frozen
class _Prepared:
    """A call that passed preflight 1-6: its tool, exact id, exact arguments text and
    two independent parses of the arguments (one for the executor, one for the
    projector)."""

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
    if isinstance(value, str):
        return str.__str__(value) if type(value) is not str else value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except Exception:  # noqa: BLE001 - any failure to serialize is SERIALIZATION_FAILED (CIS-FAIL-4)
        return None


def _is_async_callable(fn: object) -> bool:
    """True for coroutine functions, partials of them and objects with an async ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - looking for an async __call__, not callability
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _require_sync(tool: ToolSpec) -> None:
    if _is_async_callable(tool.executor) or _is_async_callable(tool.projector):
        raise TypeError("ToolBoundary runs sync tools only; use AsyncToolBoundary for async ones")


def _check_context(context: object) -> None:
    if not isinstance(context, RunContext):
        raise TypeError("context must be a RunContext")


def _check_older_than(older_than_ms: object) -> None:
    if isinstance(older_than_ms, bool) or not isinstance(older_than_ms, int) or older_than_ms < 0:
        raise ValueError("older_than_ms must be a non-negative int (milliseconds)")


def _check_run_parameters(
    deadline_ms: object, ttl_ms: object, tool_call_budget: object, byte_budget: object
) -> None:
    for name, value, minimum in (
        ("deadline_ms", deadline_ms, 0),
        ("ttl_ms", ttl_ms, 1),
        ("tool_call_budget", tool_call_budget, 0),
        ("byte_budget", byte_budget, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an int >= {minimum}")


def _cause(exc: BaseException) -> str:
    """Type name of a store failure, for logs (the original type for a StoreUnavailableError)."""
    if isinstance(exc, StoreUnavailableError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, str) and cause.isidentifier():
            return f"{type(exc).__name__}({cause})"
    return type(exc).__name__


def _unavailable(exc: BaseException) -> StoreUnavailableError:
    """A safe StoreUnavailableError for any store exception: type names only (CIS-FAIL-5)."""
    if isinstance(exc, StoreUnavailableError):
        return exc
    return StoreUnavailableError(type(exc).__name__)


def _code_of(exc: StoreUnavailableError) -> ErrorCode:
    code = getattr(exc, "code", None)
    return code if isinstance(code, ErrorCode) else ErrorCode.STORE_UNAVAILABLE


def _sync_store(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a store method; any exception it raises becomes a safe StoreUnavailableError."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE (CIS-FAIL-5)
        raise _unavailable(exc) from None


async def _async_store(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await a store method; any exception it raises becomes a safe StoreUnavailableError."""
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE (CIS-FAIL-5)
        raise _unavailable(exc) from None


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
        self._log = logger if logger is not None else _LOGGER

    # -- step 1: preflight 1-6 and argument parsing (nothing written) ----------------

    def _prepare(self, context: RunContext, envelope: ToolCallEnvelope) -> _Prepared | BoundaryResult:
        """Preflight checks 1-6, then parse the arguments twice (executor and projector
        each get their own copy, so an executor mutating its arguments cannot change
        what the projector sees)."""
        if not isinstance(context, RunContext):
            raise TypeError("context must be a RunContext")
        if not isinstance(envelope, ToolCallEnvelope):
            raise TypeError("envelope must be a ToolCallEnvelope")
        tool = self.registry.get(envelope.tool_name)
        code = check_envelope(context, envelope, None if tool is None else tool.policy, self.limits)
        if code is not None:
            self._log.info("tool call rejected at preflight: %s", code.value)
            return _failure(code, _echo(envelope))
        assert tool is not None
        assert isinstance(envelope.tool_call_id, str)
        assert isinstance(envelope.arguments, str)
        executor_args = _parse_object(envelope.arguments)
        projector_args = _parse_object(envelope.arguments)
        if executor_args is None or projector_args is None:  # defensive: preflight proved I-JSON
            return _failure(ErrorCode.INVALID_ARGUMENTS, envelope.tool_call_id)
        return _Prepared(
            tool=tool,
            tool_call_id=envelope.tool_call_id,
            arguments=envelope.arguments,
            executor_args=executor_args,
            projector_args=projector_args,
        )

    def _request(self, context: RunContext, prepared: _Prepared, now_ms: int) -> AdmissionRequest:
        token = self._token_factory()
        if not isinstance(token, str) or not token:
            raise TypeError("token_factory must return a non-empty str")
        return AdmissionRequest(
            run_id=context.run_id,
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
                "tool %s executor raised %s: %s", name, outcome.failure, ErrorCode.EXECUTION_FAILED.value
            )
            return transition(created, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now_ms), self.limits)
        raw = _raw_text(outcome.value)
        if raw is None:
            self._log.warning(
                "tool %s executor returned an unserializable %s: %s",
                name,
                type(outcome.value).__name__,
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
                "tool %s projector raised %s: %s", name, outcome.failure, ErrorCode.PROJECTION_FAILED.value
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=now_ms), self.limits)
        projection = outcome.value
        if not isinstance(projection, Projection):
            self._log.warning(
                "tool %s projector returned a %s: %s",
                name,
                type(projection).__name__,
                ErrorCode.PROJECTION_INVALID.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), self.limits)
        return transition(record, ProjectionReceived(projection=projection, now_ms=now_ms), self.limits)

    # -- step 7: results and failures ---------------------------------------------------

    def _admission_refused(self, admitted: ErrorCode, echo: str | None) -> BoundaryResult:
        self._log.info("tool call refused at admission: %s", admitted.value)
        return _failure(admitted, echo)

    def _replayed(self, echo: str | None) -> BoundaryResult:
        # A fresh token is drawn per invocation, so a "replay" means the token
        # factory repeated itself: treat it as the duplicate it is (CIS-BND-6).
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


def _parse_object(arguments: str) -> dict[str, Any] | None:
    try:
        value = json.loads(arguments)
    except Exception:  # noqa: BLE001 - defensive: preflight already validated the text
        return None
    return value if isinstance(value, dict) else None


def _is_projecting(record: CanonicalRecord | None) -> bool:
    return record is not None and record.status is InvocationStatus.PROJECTING


def _awaits_projection(record: CanonicalRecord) -> bool:
    return record.status is InvocationStatus.PROJECTING and record.raw_response is not None


# ---------------------------------------------------------------------------
# Sync


class _WorkerExit(Exception):  # noqa: N818 - carries a BaseException's type name, not an error of ours
    """A worker thread's ``SystemExit``/``KeyboardInterrupt``, handed over as a plain failure."""


def _start_thread(fn: Callable[..., object], *args: object) -> concurrent.futures.Future[object]:
    """Run ``fn(*args)`` in a fresh daemon thread; its outcome lands in the returned future.

    Every call gets its own thread, so a hung tool never holds a pool worker that
    other calls (or ``asyncio.to_thread`` users) need. The thread cannot be killed:
    after a timeout it runs on until ``fn`` returns, and its result is discarded.
    Being a daemon, it never blocks interpreter exit (nor ``asyncio.run`` at its
    end). The caller's context variables are visible to ``fn``.
    """
    future: concurrent.futures.Future[object] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            value = context.run(fn, *args)
        except Exception as exc:  # noqa: BLE001 - handed to the caller as a failure (CIS-FAIL-2)
            future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - never re-raised in the caller's thread
            future.set_exception(_WorkerExit(type(exc).__name__))
        else:
            future.set_result(value)

    threading.Thread(target=work, name="invocation-store-tool", daemon=True).start()
    return future


def _failure_name(exc: BaseException) -> str:
    return exc.args[0] if isinstance(exc, _WorkerExit) else type(exc).__name__


def _run_in_thread(fn: Callable[..., object], timeout_ms: int, *args: object) -> _Outcome:
    """Run ``fn(*args)`` in a worker thread, waiting at most ``timeout_ms`` (CIS-FAIL-3)."""
    future = _start_thread(fn, *args)
    done, _ = concurrent.futures.wait([future], timeout=timeout_ms / 1000)
    if not done:
        return _Outcome(timed_out=True)
    exc = future.exception()
    if exc is not None:
        return _Outcome(failure=_failure_name(exc))
    return _sync_value(future.result())


def _call_sync(fn: Callable[..., object], *args: object) -> _Outcome:
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 - every projector failure is a code (CIS-EVID-5)
        return _Outcome(failure=type(exc).__name__)
    return _sync_value(value)


def _sync_value(value: object) -> _Outcome:
    if inspect.isawaitable(value):
        # A sync boundary cannot await: a callable that returned an awaitable failed.
        if inspect.iscoroutine(value):
            value.close()
        return _Outcome(failure="AwaitableOnSyncBoundary")
    return _Outcome(value=value)


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
    ) -> None:
        super().__init__(registry, limits, token_factory, logger)
        self.store = store
        for name in registry.names():
            tool = registry.get(name)
            assert tool is not None
            _require_sync(tool)

    def now_ms(self) -> int:
        """The store's clock in integer ms (for absolute deadlines: ``now_ms() + budget``)."""
        return self.store.now_ms()

    # -- runs -----------------------------------------------------------------------

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
        the store fails. Raises ``ValueError`` for a negative deadline or budget or a
        non-positive TTL (programming errors).
        """
        _check_run_parameters(deadline_ms, ttl_ms, tool_call_budget, byte_budget)
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

    def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Returns the new run state, or RUN_INACTIVE (unknown or expired run),
        INVALID_TRANSITION (already cancelled or closed), STORE_UNAVAILABLE. Calls
        already running finish normally.
        """
        _check_context(context)
        try:
            return _sync_store(self.store.cancel_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "cancel_run")

    def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Same returns as :meth:`cancel_run`. Records are kept: progress and citations
        still read them until their TTL.
        """
        _check_context(context)
        try:
            return _sync_store(self.store.close_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "close_run")

    # -- one call -------------------------------------------------------------------

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """Run one tool call from envelope to bounded result (CIS-BND-1, CIS-BND-2).

        ``context`` is the harness's explicit run (the source of truth for the run id,
        CIS-PRE-3); ``envelope`` the call as the model framework produced it (see
        :mod:`invocation_store.providers`). Returns a :class:`BoundaryResult`: every
        executor, projector and store failure is a code in it, never an exception
        (CIS-FAIL-1). A rejected call writes nothing and never reaches the executor
        (CIS-PRE-1); the executor runs at most once per (run, tool_call_id)
        (CIS-BND-6). A success costs two store round trips: create, complete.

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
        operation = "create"
        try:
            request = self._request(context, prepared, _sync_store(self.store.now_ms))
            admitted = _sync_store(self.store.create, request, self.limits)
            if isinstance(admitted, ErrorCode):
                return self._admission_refused(admitted, echo)
            if admitted.replayed:
                return self._replayed(echo)
            created = admitted.record
            operation = "clock"
            executed = _run_in_thread(tool.executor, tool.timeout_ms, prepared.executor_args)
            final = self._after_execution(created, executed, _sync_store(self.store.now_ms))
            if isinstance(final, CanonicalRecord) and _awaits_projection(final):
                projected = _call_sync(tool.projector, final.raw_response, prepared.projector_args)
                final = self._after_projection(final, projected, _sync_store(self.store.now_ms))
            if isinstance(final, ErrorCode):
                return self._kernel_refused(final, echo)
            operation = "complete"
            stored = _sync_store(self.store.complete, created, final)
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        return self._finish(final, stored, echo)

    # -- reads ----------------------------------------------------------------------

    def project_progress(self, context: RunContext) -> ProgressReport:
        """The run's completed calls as bounded observed facts (CIS-PROG-1..5).

        Reads the run's ordered completed ids (the tracker keeps identities only),
        resolves them in ONE batched read that skips raw responses, and lets the
        kernel keep READY records of this run in execution order, capped by
        ``limits.max_facts`` and ``limits.max_fact_bytes`` (a fact that does not fit
        is omitted whole, never truncated). Missing, expired, other-run, PROJECTING
        and ERROR identities are counted by reason in ``excluded``; NO_EVIDENCE facts
        are marked ``negative``. Raises :class:`StoreUnavailableError` (fixed, safe
        message) if the store fails.
        """
        _check_context(context)
        run_id = context.run_id
        try:
            identities = _sync_store(self.store.completed, run_id)
            records = (
                _sync_store(self.store.get_many, run_id, identities, include_raw=False) if identities else {}
            )
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "progress") from None
        return project_progress(run_id, identities, records, now_ms, self.limits)

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """May the agent cite this call? (CIS-REF-1..3).

        READY + EVIDENCE_FOUND of this run: EVIDENCE with its content and scope;
        READY + NO_EVIDENCE: NEGATIVE_OBSERVATION with its scope; anything else
        (ERROR, PROJECTING, missing, expired, other run, unsafe id):
        NOT_REFERENCABLE with its reason. An unsafe id is answered without touching
        the store. Never raw data. Raises :class:`StoreUnavailableError` if the store
        fails.
        """
        _check_context(context)
        if not is_safe_id(tool_call_id):
            return cite(context.run_id, tool_call_id, None, 0)
        try:
            record = _sync_store(self.store.get, context.run_id, tool_call_id)
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "cite") from None
        return cite(context.run_id, tool_call_id, record, now_ms)

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
        _check_context(context)
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


async def _acall(fn: Callable[..., object], *args: object) -> _Outcome:
    """Call an async callable in the loop, or a sync one in its own worker thread
    (see :func:`_start_thread`); an awaitable it returns is awaited. Failures become
    outcomes."""
    try:
        if _is_async_callable(fn):
            value = fn(*args)
        else:
            value = await asyncio.wrap_future(_start_thread(fn, *args))
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # noqa: BLE001 - every executor/projector failure is a code (CIS-BND-2)
        return _Outcome(failure=_failure_name(exc))
    return _Outcome(value=value)


async def _acall_with_timeout(fn: Callable[..., object], timeout_ms: int, *args: object) -> _Outcome:
    """:func:`_acall` bounded by ``timeout_ms``; only the timeout itself is ``timed_out``."""
    try:
        return await asyncio.wait_for(_acall(fn, *args), timeout=timeout_ms / 1000)
    except TimeoutError:
        return _Outcome(timed_out=True)


class AsyncToolBoundary(_Core):
    """The asyncio twin of :class:`ToolBoundary`, same contract per method (CIS-BND-1).

    ``store`` is an :class:`~invocation_store.adapters.AsyncInvocationStore`
    (AsyncMemoryStore, AsyncRedisStore). Executors and projectors may be sync (each
    call in its own daemon worker thread, never blocking the loop) or async
    (awaited in the loop). Concurrent ``invoke`` calls of one run (``asyncio.gather``) are safe: the
    store decides duplicates and budgets atomically (CIS-RUN-5).
    """

    def __init__(
        self,
        store: AsyncInvocationStore,
        registry: ToolRegistry,
        *,
        limits: Limits = _DEFAULT_LIMITS,
        token_factory: Callable[[], str] = _new_token,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(registry, limits, token_factory, logger)
        self.store = store

    def now_ms(self) -> int:
        """The store's clock in integer ms (for absolute deadlines)."""
        return self.store.now_ms()

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """See :meth:`ToolBoundary.open_run` (CIS-RUN-1)."""
        _check_run_parameters(deadline_ms, ttl_ms, tool_call_budget, byte_budget)
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

    async def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.cancel_run` (CIS-RUN-2)."""
        _check_context(context)
        try:
            return await _async_store(self.store.cancel_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "cancel_run")

    async def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.close_run` (CIS-RUN-2)."""
        _check_context(context)
        try:
            return await _async_store(self.store.close_run, context.run_id)
        except StoreUnavailableError as exc:
            return self._store_failed_code(exc, "close_run")

    async def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """See :meth:`ToolBoundary.invoke` (CIS-BND-1, CIS-BND-2).

        Cancelling the task awaiting this propagates ``CancelledError`` and leaves
        the record PROJECTING, for :meth:`sweep_stale`.
        """
        prepared = self._prepare(context, envelope)
        if isinstance(prepared, BoundaryResult):
            return prepared
        tool = prepared.tool
        echo = prepared.tool_call_id
        operation = "create"
        try:
            request = self._request(context, prepared, _sync_store(self.store.now_ms))
            admitted = await _async_store(self.store.create, request, self.limits)
            if isinstance(admitted, ErrorCode):
                return self._admission_refused(admitted, echo)
            if admitted.replayed:
                return self._replayed(echo)
            created = admitted.record
            operation = "clock"
            executed = await _acall_with_timeout(tool.executor, tool.timeout_ms, prepared.executor_args)
            final = self._after_execution(created, executed, _sync_store(self.store.now_ms))
            if isinstance(final, CanonicalRecord) and _awaits_projection(final):
                projected = await _acall(tool.projector, final.raw_response, prepared.projector_args)
                final = self._after_projection(final, projected, _sync_store(self.store.now_ms))
            if isinstance(final, ErrorCode):
                return self._kernel_refused(final, echo)
            operation = "complete"
            stored = await _async_store(self.store.complete, created, final)
        except StoreUnavailableError as exc:
            return self._store_failed(exc, operation, echo)
        return self._finish(final, stored, echo)

    async def project_progress(self, context: RunContext) -> ProgressReport:
        """See :meth:`ToolBoundary.project_progress` (CIS-PROG-1..5)."""
        _check_context(context)
        run_id = context.run_id
        try:
            identities = await _async_store(self.store.completed, run_id)
            records = (
                await _async_store(self.store.get_many, run_id, identities, include_raw=False)
                if identities
                else {}
            )
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "progress") from None
        return project_progress(run_id, identities, records, now_ms, self.limits)

    async def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """See :meth:`ToolBoundary.cite` (CIS-REF-1..3)."""
        _check_context(context)
        if not is_safe_id(tool_call_id):
            return cite(context.run_id, tool_call_id, None, 0)
        try:
            record = await _async_store(self.store.get, context.run_id, tool_call_id)
            now_ms = _sync_store(self.store.now_ms)
        except StoreUnavailableError as exc:
            raise self._store_failed_raise(exc, "cite") from None
        return cite(context.run_id, tool_call_id, record, now_ms)

    async def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """See :meth:`ToolBoundary.sweep_stale` (CIS-LIFE-7)."""
        _check_context(context)
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
