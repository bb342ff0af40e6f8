"""What a failing tool logs: its exception's type name, on every path a tool runs (CIS-ERR-2, CIS-FAIL-2).

The type name is read from the log record, sync and async, for executors inline, on a
worker and in a task, and for projectors: a path that reported ``"ValueError: <text>"``
would be logged ``UnprintableType`` (the boundary re-sanitises) and these tests fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    ErrorCode,
    MemoryStore,
    RunContext,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)

from ._fakes import RUN, FakeProjector, envelope

SECRET = "secret-text-6d1f"


class Boom(Exception):
    """A tool's own exception type."""


def _raise(kind: type[BaseException]) -> BaseException:
    return kind(SECRET)


def sync_executor(kind: type[BaseException]) -> Callable[[Any], object]:
    def executor(arguments: Any) -> object:
        raise _raise(kind)

    return executor


def async_executor(kind: type[BaseException]) -> Callable[[Any], Any]:
    async def executor(arguments: Any) -> object:
        await asyncio.sleep(0)
        raise _raise(kind)

    return executor


def sync_projector(kind: type[BaseException]) -> Callable[[str, Any], Any]:
    def projector(raw: str, arguments: Any) -> Any:
        raise _raise(kind)

    return projector


def async_projector(kind: type[BaseException]) -> Callable[[str, Any], Any]:
    async def projector(raw: str, arguments: Any) -> Any:
        raise _raise(kind)

    return projector


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("invocation_store")]


def _sync(spec: ToolSpec) -> Any:
    store = MemoryStore()
    boundary = ToolBoundary(store, ToolRegistry([spec]))
    context = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    return boundary.invoke(context, envelope("call_1"))


def _async(spec: ToolSpec) -> Any:
    async def scenario() -> Any:
        store = AsyncMemoryStore()
        boundary = AsyncToolBoundary(store, ToolRegistry([spec]))
        context = await boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        return await boundary.invoke(context, envelope("call_1"))

    return asyncio.run(scenario())


KINDS = [ValueError, Boom, SystemExit, KeyboardInterrupt]


def _name(value: object) -> str:
    """A stable test id (a function's name, not its address: xdist workers must agree)."""
    return str(getattr(value, "__name__", value))


# (flavour, how the executor runs): inline (no limit), on a worker (a limit), in a task (async).
EXECUTOR_PATHS = [
    ("sync", "inline", sync_executor, None),
    ("sync", "worker", sync_executor, 5_000),
    ("async", "worker", sync_executor, 5_000),
    ("async", "task", async_executor, 5_000),
]


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
@pytest.mark.parametrize(
    ("flavour", "path", "make", "timeout_ms"),
    EXECUTOR_PATHS,
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_an_executor_failure_logs_its_type_name(
    caplog: pytest.LogCaptureFixture,
    kind: type[BaseException],
    flavour: str,
    path: str,
    make: Callable[[type[BaseException]], Any],
    timeout_ms: int | None,
) -> None:
    """CIS-ERR-2, CIS-FAIL-2: EXECUTION_FAILED, and the log names the exception's type, never its text."""
    caplog.set_level(logging.WARNING, logger="invocation_store")
    spec = ToolSpec(name="search", executor=make(kind), projector=FakeProjector(), timeout_ms=timeout_ms)
    result = _sync(spec) if flavour == "sync" else _async(spec)
    assert result.code is ErrorCode.EXECUTION_FAILED
    messages = _messages(caplog)
    assert f"tool search executor raised {kind.__name__}: EXECUTION_FAILED" in messages, messages
    assert all(SECRET not in message for message in messages)


PROJECTOR_PATHS = [("sync", sync_projector), ("async", sync_projector), ("async", async_projector)]


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
@pytest.mark.parametrize(
    ("flavour", "make"), PROJECTOR_PATHS, ids=lambda value: getattr(value, "__name__", str(value))
)
def test_a_projector_failure_logs_its_type_name(
    caplog: pytest.LogCaptureFixture,
    kind: type[BaseException],
    flavour: str,
    make: Callable[[type[BaseException]], Any],
) -> None:
    """CIS-ERR-2, CIS-FAIL-2: PROJECTION_FAILED, and the log names the exception's type, never its text."""
    caplog.set_level(logging.WARNING, logger="invocation_store")
    spec = ToolSpec(name="search", executor=lambda arguments: "raw", projector=make(kind), timeout_ms=None)
    result = _sync(spec) if flavour == "sync" else _async(spec)
    assert result.code is ErrorCode.PROJECTION_FAILED
    messages = _messages(caplog)
    assert f"tool search projector raised {kind.__name__}: PROJECTION_FAILED" in messages, messages
    assert all(SECRET not in message for message in messages)
