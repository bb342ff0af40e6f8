"""Which call a log record is about: ``run_id`` and ``tool_call_id`` on every record (CIS-OBS-2).

Theory of operation
-------------------
The boundary binds the call it is running (:func:`bind_call`: the run context and the
envelope, or a run id alone for run-level operations) in a context variable, so each
thread and each asyncio task sees its own. Nothing is computed when it is bound: the
ids are derived only when a record is made, which keeps an invoke that logs nothing
free of the work.

Every logger of the package carries :class:`CallIdsFilter`, which sets the two
attributes on every record it handles that lacks them: the safe id, or ``None`` (the
documented empty value) when a record is about no run or no call, or when the value
is not a safe id (CIS-ID-3). A formatter naming ``%(run_id)s`` and
``%(tool_call_id)s`` therefore never fails on a record of this package. Modules make
their loggers with :func:`package_logger`; the loggers of modules that make theirs
with ``logging.getLogger`` are listed in :data:`PACKAGE_LOGGERS` and get the filter
when this module is imported, which the package's ``__init__`` does (this module
imports nothing of the package at import time, so the cost is ``logging`` alone).
``tests/boundary/test_telemetry.py`` fails for a logger of the package without it.
The harness's own logger, if it gives the boundary one, is wrapped in
:class:`CallLogger`, which passes the same ids as ``extra``.

Messages carry codes, registered tool names and exception type names only, never
payloads, keys or exception text (CIS-ERR-2).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import MutableMapping
from typing import Any, Final

__all__ = [
    "PACKAGE_LOGGERS",
    "CallIdsFilter",
    "CallLogger",
    "bind_call",
    "call_ids",
    "package_logger",
    "unbind_call",
]

#: The call being run: (run context or run id, envelope or None), as the caller passed them.
_CALL: Final[contextvars.ContextVar[tuple[object, object] | None]] = contextvars.ContextVar(
    "invocation_store_call", default=None
)


def bind_call(run: object, envelope: object = None) -> contextvars.Token[tuple[object, object] | None]:
    """Bind the call the current thread or task runs: ``run`` (a RunContext or a run id) and its envelope.

    Returns the token for :func:`unbind_call`. Nothing is validated or copied here: the
    ids are derived (safe ids only) when a record asks for them.
    """
    return _CALL.set((run, envelope))


def unbind_call(token: contextvars.Token[tuple[object, object] | None]) -> None:
    """Restore the binding in force before :func:`bind_call` returned ``token``."""
    _CALL.reset(token)


def _safe(value: object) -> str | None:
    """An exact ``str`` copy of ``value`` if it is a safe id, else None (a subclass cannot lie)."""
    from .kernel import is_safe_id  # noqa: PLC0415 - only when a record is made: the package imports this module

    if not issubclass(type(value), str):
        return None
    text = str.__str__(value)
    return text if is_safe_id(text) else None


def call_ids() -> tuple[str | None, str | None]:
    """``(run_id, tool_call_id)`` of the bound call: safe ids, or None each (CIS-OBS-2, CIS-ID-3)."""
    bound = _CALL.get()
    if bound is None:
        return None, None
    from .kernel import RunContext, ToolCallEnvelope  # noqa: PLC0415 - see _safe

    run, envelope = bound
    run_id = _safe(run.run_id if isinstance(run, RunContext) else run)
    tool_call_id = _safe(envelope.tool_call_id) if isinstance(envelope, ToolCallEnvelope) else None
    return run_id, tool_call_id


class CallIdsFilter(logging.Filter):
    """Sets ``run_id`` and ``tool_call_id`` (:func:`call_ids`) on a record that lacks them; drops none."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (hasattr(record, "run_id") and hasattr(record, "tool_call_id")):
            run_id, tool_call_id = call_ids()
            if not hasattr(record, "run_id"):
                record.run_id = run_id
            if not hasattr(record, "tool_call_id"):
                record.tool_call_id = tool_call_id
        return True


_FILTER: Final = CallIdsFilter()


def package_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with :class:`CallIdsFilter` installed once (a logger of this package)."""
    logger = logging.getLogger(name)
    if not any(isinstance(existing, CallIdsFilter) for existing in logger.filters):
        logger.addFilter(_FILTER)
    return logger


#: Loggers the package's other modules make with ``logging.getLogger``: they get the
#: filter here, so that those modules need not import this one.
PACKAGE_LOGGERS: Final = (
    "invocation_store",
    "invocation_store.redis",
    "invocation_store.testing.workload",
)
for _name in PACKAGE_LOGGERS:
    package_logger(_name)


class CallLogger(logging.LoggerAdapter[logging.Logger]):
    """A harness's logger as the boundary uses it: records get ``run_id`` and ``tool_call_id`` (CIS-OBS-2).

    The ids are :func:`call_ids`'s; an ``extra`` given at a call site is merged over them.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        run_id, tool_call_id = call_ids()
        kwargs["extra"] = {"run_id": run_id, "tool_call_id": tool_call_id, **(kwargs.get("extra") or {})}
        return msg, kwargs
