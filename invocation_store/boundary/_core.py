"""The steps both boundaries share: every one a kernel call, a log line or a result (CIS-BND-2).

:class:`Core` holds the boundary's state (registry, limits, token window, held
completions, logger) and the pure steps of one call, in the order ``invoke`` runs
them: preflight (:meth:`Core._prepare`), the admission request
(:meth:`Core._request`), the replay test after admission (:meth:`Core._own_replay`,
kernel ``is_own_create``), the kernel transitions on the executor's and the
projector's outcomes (:meth:`Core._after_execution`, :meth:`Core._after_projection`)
and the result (:meth:`Core._finish`, kernel ``agent_view``; failures through kernel
``failure_view``). Store failures become codes here too (:meth:`Core._store_failed`).
Nothing here awaits or blocks on a tool or a store: the boundary classes
(``_async/boundary.py`` and the ``_sync`` module generated from it) do that
between these steps.
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from .. import _telemetry
from .._completion import CompletionRetry, PendingCompletions
from .._runners import Outcome, safe_name, type_name
from ..adapters import StoreUnavailableError
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Failed,
    InvocationStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    ToolCallEnvelope,
    agent_view,
    duplicate_code,
    is_own_create,
    transition,
)
from ..kernel._preflight import parse_envelope
from ._edge import check_context, copy_json, exact_envelope, exact_projection, exact_text, raw_text
from ._registry import ToolRegistry, ToolSpec, vetted
from ._result import BoundaryResult, failure, result_of

__all__ = [
    "DEFAULT_LIMITS",
    "LOGGER",
    "Core",
    "Prepared",
    "awaits_projection",
    "new_token",
    "read_clock",
    "unavailable",
]

LOGGER: Final = logging.getLogger("invocation_store.boundary")
DEFAULT_LIMITS: Final = Limits()

#: How many recent invocation tokens a boundary remembers to recognise a token
#: factory that repeats itself (CIS-RETRY-1); older repeats cannot be detected.
_TOKEN_WINDOW = 65_536


def new_token() -> str:
    """The default invocation token: 128 random bits as hex (CIS-RETRY-1)."""
    return secrets.token_hex(16)


class Prepared(NamedTuple):
    """A call that passed preflight 1-6: its tool, exact id, exact arguments text and
    two independent copies of the parsed arguments (one for the executor, one for
    the projector; CIS-PERF-2). A named tuple: built once per call."""

    tool: ToolSpec
    tool_call_id: str
    arguments: str
    executor_args: dict[str, Any]
    projector_args: dict[str, Any]


def _cause(exc: BaseException) -> str:
    """A store failure for logs: its type name, and for a StoreUnavailableError its operator text.

    ``operator_text()`` is this library's own fixed text (a cause label, or the setting
    an operator must change, e.g. an evicting ``maxmemory-policy``), never foreign
    exception text; a third-party store's cause is reduced to a safe name (CIS-FAIL-5).
    """
    name = type_name(exc)
    if not isinstance(exc, StoreUnavailableError):
        return name
    if type(exc).__module__.startswith("invocation_store."):
        text = exc.operator_text()
        return f"{name}: {text}" if safe_name(text) != text else f"{name}({text})"
    return f"{name}({safe_name(getattr(exc, 'cause', None))})"


def unavailable(exc: BaseException) -> StoreUnavailableError:
    """A safe StoreUnavailableError for any store exception: type names only (CIS-FAIL-5)."""
    if isinstance(exc, StoreUnavailableError):
        return exc
    return StoreUnavailableError(type_name(exc))


def _code_of(exc: StoreUnavailableError) -> ErrorCode:
    code = getattr(exc, "code", None)
    return code if isinstance(code, ErrorCode) else ErrorCode.STORE_UNAVAILABLE


def read_clock(now_ms: Callable[[], int]) -> int:
    """The store's clock (``store.now_ms``, sync in both flavours); a failure is a safe
    StoreUnavailableError (CIS-FAIL-5)."""
    try:
        with _telemetry.phase("store"):
            return now_ms()
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE (CIS-FAIL-5)
        raise unavailable(exc) from None


def awaits_projection(record: CanonicalRecord) -> bool:
    """The executor's raw response was received and kept: the projector runs next."""
    return record.status is InvocationStatus.PROJECTING and record.raw_response is not None


class Core:
    """State and pure steps shared by :class:`ToolBoundary` and :class:`AsyncToolBoundary`."""

    def __init__(
        self,
        registry: ToolRegistry,
        limits: Limits,
        token_factory: Callable[[], str],
        logger: logging.Logger | None,
        completion_retry: CompletionRetry,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError("registry must be a ToolRegistry")
        if not isinstance(limits, Limits):
            raise TypeError("limits must be a Limits")
        self.registry = registry
        self.limits = limits
        self._token_factory = token_factory
        self._log = _telemetry.CallLogger(logger if logger is not None else LOGGER)
        #: Completions the store could not apply yet, with their raw responses (CIS-DUR-5).
        self.completions = PendingCompletions(completion_retry)
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
        context = check_context(context)
        return self.completions.drop(context.run_id, tool_call_id)

    # -- step 1: preflight 1-6 and argument parsing (nothing written) ----------------

    def _prepare(self, context: RunContext, envelope: ToolCallEnvelope) -> Prepared | BoundaryResult:
        """Preflight checks 1-6; the executor gets the object the I-JSON check parsed
        and the projector an independent copy of it, never a second parse (an executor
        mutating its arguments cannot change what the projector sees, CIS-PERF-2)."""
        context = check_context(context)
        if not isinstance(envelope, ToolCallEnvelope):
            raise TypeError("envelope must be a ToolCallEnvelope")
        envelope = exact_envelope(envelope)
        tool = self.registry.get(envelope.tool_name)
        parsed = parse_envelope(context, envelope, None if tool is None else vetted(tool)[0], self.limits)
        if isinstance(parsed, ErrorCode):
            self._log.info("tool call rejected at preflight: %s", parsed.value)
            return failure(parsed, envelope.tool_call_id)
        assert tool is not None
        assert isinstance(envelope.tool_call_id, str)
        assert isinstance(envelope.arguments, str)
        return Prepared(
            tool=tool,
            tool_call_id=envelope.tool_call_id,
            arguments=envelope.arguments,
            executor_args=parsed,
            projector_args=copy_json(parsed),
        )

    def _request(self, context: RunContext, prepared: Prepared) -> AdmissionRequest:
        token = exact_text(self._token_factory())
        if type(token) is not str or not token:
            raise TypeError("token_factory must return a non-empty str")
        return AdmissionRequest(
            run_id=check_context(context).run_id,
            tool_call_id=prepared.tool_call_id,
            tool_name=prepared.tool.name,
            request_json=prepared.arguments,
            invocation_token=token,
        )

    # -- steps 3-5: kernel transitions on the executor's and projector's outcomes -----

    def _after_execution(
        self, created: CanonicalRecord, outcome: Outcome, now_ms: int
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
                safe_name(outcome.failure),
                ErrorCode.EXECUTION_FAILED.value,
            )
            return transition(created, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now_ms), self.limits)
        raw = raw_text(outcome.value)
        if raw is None:
            self._log.warning(
                "tool %s executor returned an unserializable %s: %s",
                name,
                type_name(outcome.value),
                ErrorCode.SERIALIZATION_FAILED.value,
            )
            return transition(
                created, Failed(code=ErrorCode.SERIALIZATION_FAILED, now_ms=now_ms), self.limits
            )
        return transition(created, RawReceived(raw_response=raw, now_ms=now_ms), self.limits)

    def _after_projection(
        self, record: CanonicalRecord, outcome: Outcome, now_ms: int
    ) -> CanonicalRecord | ErrorCode:
        """Apply the projector's outcome; the raw response stays in the record (CIS-EVID-5, CIS-FAIL-6)."""
        name = record.tool_name
        if outcome.failure is not None:
            self._log.warning(
                "tool %s projector raised %s: %s",
                name,
                safe_name(outcome.failure),
                ErrorCode.PROJECTION_FAILED.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=now_ms), self.limits)
        projection = outcome.value
        if not isinstance(projection, Projection):
            self._log.warning(
                "tool %s projector returned a %s: %s",
                name,
                type_name(projection),
                ErrorCode.PROJECTION_INVALID.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), self.limits)
        try:
            projection = exact_projection(projection)
        except Exception as exc:  # noqa: BLE001 - a Projection whose fields cannot be read is invalid
            self._log.warning(
                "tool %s projection unreadable (%s): %s",
                name,
                type_name(exc),
                ErrorCode.PROJECTION_INVALID.value,
            )
            return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), self.limits)
        return transition(record, ProjectionReceived(projection=projection, now_ms=now_ms), self.limits)

    # -- step 7: results and failures ---------------------------------------------------

    def _admission_refused(self, admitted: ErrorCode, echo: str | None) -> BoundaryResult:
        self._log.info("tool call refused at admission: %s", admitted.value)
        return failure(admitted, echo)

    def _own_replay(
        self, admitted: Admission, request: AdmissionRequest, claimed: bool, not_before_ms: int
    ) -> bool:
        """Is this replayed admission our own create, retried by the client library?

        Yes when no other call of this boundary ever drew the token (``claimed``, and
        still the sole use when the replay comes back) and the record is still
        exactly what ``request`` created (kernel ``is_own_create``: this call's token,
        128 random bits drawn for this call only, PROJECTING without a raw response,
        the same ids, tool and request text, created no earlier than ``not_before_ms``,
        the store clock read before the create was sent, CIS-RETRY-2). Anything else is
        a replay of another call (CIS-BND-6).
        """
        own = is_own_create(admitted.record, request, not_before_ms)
        if claimed and self._sole_use(request.invocation_token) and own:
            self._log.info("create retried by the store client: recognised as this invocation")
            return True
        return False

    def _replayed(self, admitted: Admission, echo: str | None) -> BoundaryResult:
        # Not our own create: the token factory repeated itself, and the record is
        # another call's (or has moved on). Refuse it as the duplicate it is, with
        # that call's fate (CIS-BND-6, CIS-ID-5).
        code = duplicate_code(admitted.record)
        self._log.warning("invocation token reused: %s", code.value)
        return failure(code, echo)

    def _kernel_refused(self, code: ErrorCode, echo: str | None) -> BoundaryResult:
        # The kernel refused a transition of our own PROJECTING record: it expired
        # while the tool ran (CIS-TTL-4). Nothing can be written any more.
        self._log.warning("tool call transition refused: %s", code.value)
        return failure(code, echo)

    def _finish(
        self, final: CanonicalRecord, stored: CanonicalRecord | ErrorCode, echo: str | None
    ) -> BoundaryResult:
        if isinstance(stored, ErrorCode):
            # e.g. INVALID_TRANSITION: a sweep completed the record first (CIS-LIFE-7).
            self._log.warning("tool %s completion refused: %s", final.tool_name, stored.value)
            return failure(stored, echo)
        _telemetry.record_completed(final)
        return result_of(agent_view(final))

    def _corrupt_found(self, run_id: str, corrupt: dict[str, str]) -> None:
        """Log each corrupt record a sweep left as it is: tool_call_id and cause label, no payload."""
        for tool_call_id, cause in sorted(corrupt.items()):
            self._log.warning(
                "sweep of run %s left corrupt record %s as it is (%s): %s",
                run_id,
                tool_call_id,
                cause,
                ErrorCode.STORE_UNAVAILABLE.value,
            )

    def _swept(self, swept: int) -> int:
        if swept:
            self._log.info("swept %d records: %s", swept, ErrorCode.STALE_PROJECTION.value)
        return swept

    def _store_failed(self, exc: StoreUnavailableError, operation: str, echo: str | None) -> BoundaryResult:
        code = _code_of(exc)
        self._log.error("store %s failed with %s: %s", operation, _cause(exc), code.value)
        return failure(code, echo)

    def _store_failed_code(self, exc: StoreUnavailableError, operation: str) -> ErrorCode:
        code = _code_of(exc)
        self._log.error("store %s failed with %s: %s", operation, _cause(exc), code.value)
        return code

    def _store_failed_raise(self, exc: StoreUnavailableError, operation: str) -> StoreUnavailableError:
        self._log.error("store %s failed with %s", operation, _cause(exc))
        return exc
