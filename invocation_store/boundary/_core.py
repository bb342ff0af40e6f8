"""What a boundary holds: its tools, limits, token window, held calls and logger (CIS-BND-1).

:class:`Core` is the state both boundary classes share and the invocation pipeline
(:mod:`._async.pipeline`) works on: the registry and limits, the token factory and the
window of recent tokens (CIS-RETRY-1), the completions and creates held because the
store did not confirm them (:mod:`invocation_store._completion`, CIS-DUR-5,
CIS-BND-7), and the logger. Its methods answer questions about that state; the steps
of a call are the pipeline's. The store-failure helpers here turn a
:class:`StoreUnavailableError` into the code and the log line every operation uses
(CIS-FAIL-5).
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Final

from .._completion import CompletionRetry, HeldCreates, PendingCompletions
from .._logs import CallLogger, package_logger
from .._runners import safe_name, type_name
from ..adapters import StoreUnavailableError
from ..kernel import ErrorCode, Limits, RunContext
from ._edge import check_context
from ._registry import ToolRegistry

__all__ = ["DEFAULT_LIMITS", "LOGGER", "Core", "code_of", "new_token", "unavailable"]

LOGGER: Final = package_logger("invocation_store.boundary")
DEFAULT_LIMITS: Final = Limits()

#: How many recent invocation tokens a boundary remembers to recognise a token
#: factory that repeats itself (CIS-RETRY-1); older repeats cannot be detected.
_TOKEN_WINDOW = 65_536


def new_token() -> str:
    """The default invocation token: 128 random bits as hex (CIS-RETRY-1)."""
    return secrets.token_hex(16)


def unavailable(exc: BaseException) -> StoreUnavailableError:
    """A safe StoreUnavailableError for any store exception: type names only (CIS-FAIL-5)."""
    if isinstance(exc, StoreUnavailableError):
        return exc
    return StoreUnavailableError(type_name(exc))


def code_of(exc: StoreUnavailableError) -> ErrorCode:
    """The code a store failure answers: its own ``code`` (an ErrorCode), else STORE_UNAVAILABLE."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, ErrorCode) else ErrorCode.STORE_UNAVAILABLE


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


class Core:
    """State shared by :class:`ToolBoundary` and :class:`AsyncToolBoundary` (see the module docstring)."""

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
        self.token_factory = token_factory
        #: Logs through the package logger (or the harness's): codes and type names only (CIS-OBS-2).
        self.log: logging.Logger | CallLogger = LOGGER if logger is None else CallLogger(logger)
        #: Completions the store could not apply yet, with their raw responses (CIS-DUR-5).
        self.completions = PendingCompletions(completion_retry)
        #: Creates whose outcome is unknown, with their tokens (CIS-BND-7).
        self.creates = HeldCreates(completion_retry)
        # How many calls of this boundary drew each recent token (a bounded LRU
        # window). A replay is our own create only while exactly one call ever drew
        # its token: a factory that repeats itself, concurrently or one call after
        # another, makes every later replay under that token a DUPLICATE (fail
        # closed: the executor never runs twice, a leftover PROJECTING is swept).
        self._token_uses: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._token_lock = threading.Lock()

    # -- the token window ------------------------------------------------------------------

    def claim(self, token: str) -> bool:
        """Count one more call drawing ``token``; True if it is the first in the window."""
        with self._token_lock:
            uses = self._token_uses.pop(token, 0) + 1
            self._token_uses[token] = uses
            if len(self._token_uses) > _TOKEN_WINDOW:
                self._token_uses.popitem(last=False)
            return uses == 1

    def sole_use(self, token: str) -> bool:
        """False once a second call of this boundary drew ``token`` within the window.

        The window holds the last 65,536 draws; a token drawn before it (a create held
        while that many others were drawn) counts as drawn once. That is safe: of one
        call (key, tool, arguments) a boundary has one token in flight or held, so a
        repeated token that left the window can only belong to another call, which the
        kernel's ``is_own_create`` tells apart by its ids, tool, request text and time.
        """
        with self._token_lock:
            return self._token_uses.get(token, 1) == 1

    # -- held calls (see invocation_store._completion) -------------------------------------

    def pending_completions(self, run_id: str | None = None) -> tuple[tuple[str, str], ...]:
        """(run_id, tool_call_id) of every completion held because the store could not apply it.

        Each is a call whose tool ran and whose agent was told STORE_UNAVAILABLE; its
        record is PROJECTING in the store, its raw response kept here. Apply them with
        ``finish_pending`` (or by the harness re-sending the call), or drop one with
        :meth:`drop_pending` and sweep its record (CIS-DUR-5). Oldest first; of
        ``run_id`` only, if given.
        """
        return self.completions.keys(run_id)

    def pending_creates(self, run_id: str | None = None) -> tuple[tuple[str, str], ...]:
        """(run_id, tool_call_id) of every create held because its outcome is unknown (CIS-BND-7).

        Each is a call whose create failed with STORE_UNAVAILABLE (past the store's
        retries) or was interrupted: the store may hold its PROJECTING record, and its
        tool has not run. The harness re-sending the same call (same tool and arguments)
        sends the create again with the same invocation token: the tool then runs
        exactly once. :meth:`drop_pending` forgets one (a re-send then gets the stored
        record's fate: CALL_IN_PROGRESS, or STALE_PROJECTION once swept). Bounded by
        ``CompletionRetry.max_pending``; oldest first; of ``run_id`` only, if given.
        """
        return self.creates.keys(run_id)

    def drop_pending(self, context: RunContext, tool_call_id: str) -> bool:
        """Forget the completion (and its raw response) or the create held for this call.

        True if one was held; then ``sweep_stale`` ends a record left PROJECTING
        (CIS-DUR-5, CIS-BND-7).
        """
        context = check_context(context)
        dropped_completion = self.completions.drop(context.run_id, tool_call_id)
        dropped_create = self.creates.drop(context.run_id, tool_call_id)
        return dropped_completion or dropped_create

    # -- store failures: a code and a log line ---------------------------------------------

    def store_failed(self, exc: StoreUnavailableError, operation: str) -> ErrorCode:
        """Log ``operation``'s failure (type name and operator text only) and return its code."""
        code = code_of(exc)
        self.log.error("store %s failed with %s: %s", operation, _cause(exc), code.value)
        return code

    def store_failed_raise(self, exc: StoreUnavailableError, operation: str) -> StoreUnavailableError:
        """Log ``operation``'s failure and return ``exc`` for the caller to raise."""
        self.log.error("store %s failed with %s", operation, _cause(exc))
        return exc

    def corrupt_found(self, run_id: str, corrupt: dict[str, str]) -> None:
        """Log each corrupt record a sweep left as it is: tool_call_id and cause label, no payload."""
        for tool_call_id, cause in sorted(corrupt.items()):
            self.log.warning(
                "sweep of run %s left corrupt record %s as it is (%s): %s",
                run_id,
                tool_call_id,
                cause,
                ErrorCode.STORE_UNAVAILABLE.value,
            )

    def swept(self, swept: int) -> int:
        """Log a sweep's count (if any); returns it."""
        if swept:
            self.log.info("swept %d records: %s", swept, ErrorCode.STALE_PROJECTION.value)
        return swept
