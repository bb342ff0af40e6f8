"""What a harness author reads when the boundary is misused: the exact type and text, sync and async.

Each row misuses one public entry point and pins the whole message (a harness author
searches for it, so a changed or emptied text is a regression). The async rows go
through ``AsyncToolBoundary``, whose pipeline is a separate module from the sync one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    ErrorCode,
    Limits,
    MemoryStore,
    RunContext,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)

from ._fakes import RUN, FakeProjector, envelope


def _spec(**fields: Any) -> ToolSpec:
    base: dict[str, Any] = {
        "name": "search",
        "executor": lambda arguments: "raw",
        "projector": FakeProjector(),
    }
    return ToolSpec(**{**base, **fields})


async def _async_executor(arguments: Any) -> str:
    return "raw"


def _sync_invoke(context: Any, env: Any = None, **options: Any) -> Any:
    store = MemoryStore()
    boundary = ToolBoundary(store, ToolRegistry([_spec()]), **options)
    opened = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
    )
    assert isinstance(opened, RunContext)
    return boundary.invoke(opened if context is None else context, envelope() if env is None else env)


def _async_invoke(context: Any, env: Any = None, **options: Any) -> Any:
    async def scenario() -> Any:
        store = AsyncMemoryStore()
        boundary = AsyncToolBoundary(store, ToolRegistry([_spec()]), **options)
        opened = await boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(opened, RunContext)
        return await boundary.invoke(
            opened if context is None else context, envelope() if env is None else env
        )

    return asyncio.run(scenario())


def _sweep(flavour: str, older_than_ms: Any) -> Any:
    if flavour == "sync":
        boundary: Any = ToolBoundary(MemoryStore(), ToolRegistry([_spec()]))
        return boundary.sweep_stale(RunContext(run_id=RUN), older_than_ms)
    async_boundary = AsyncToolBoundary(AsyncMemoryStore(), ToolRegistry([_spec()]))
    return asyncio.run(async_boundary.sweep_stale(RunContext(run_id=RUN), older_than_ms))


def _register_twice() -> None:
    registry = ToolRegistry([_spec()])
    registry.register(_spec())


#: (id, misuse, exception type, the whole message).
ROWS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "register-not-a-spec",
        lambda: ToolRegistry().register("search"),  # type: ignore[arg-type]
        TypeError,
        "register takes a ToolSpec",
    ),
    ("register-twice", _register_twice, ValueError, "tool already registered"),
    (
        "timeout-zero",
        lambda: _spec(timeout_ms=0),
        ValueError,
        "timeout_ms must be None or an int in [1, 2**53 - 1] (milliseconds)",
    ),
    ("executor-not-callable", lambda: _spec(executor="run"), TypeError, "executor must be callable"),
    ("projector-not-callable", lambda: _spec(projector=None), TypeError, "projector must be callable"),
    (
        "registry-not-a-registry",
        lambda: ToolBoundary(MemoryStore(), [_spec()]),  # type: ignore[arg-type]
        TypeError,
        "registry must be a ToolRegistry",
    ),
    (
        "limits-not-limits",
        lambda: AsyncToolBoundary(AsyncMemoryStore(), ToolRegistry(), limits={}),  # type: ignore[arg-type]
        TypeError,
        "limits must be a Limits",
    ),
    (
        "sync-boundary-async-tool",
        lambda: ToolBoundary(MemoryStore(), ToolRegistry([_spec(executor=_async_executor)])),
        TypeError,
        "ToolBoundary runs sync tools only; use AsyncToolBoundary for async ones",
    ),
    *[
        (f"{flavour}-context-not-a-context", lambda run=run: run("run-1"), TypeError, message)
        for flavour, run, message in (
            ("sync", _sync_invoke, "context must be a RunContext; got str"),
            ("async", _async_invoke, "context must be a RunContext; got str"),
        )
    ],
    *[
        (
            f"{flavour}-context-is-a-refusal",
            lambda run=run: run(ErrorCode.RUN_INACTIVE),
            TypeError,
            "context must be a RunContext; got ErrorCode.RUN_INACTIVE: open_run refused the run "
            "(check its result before invoking; the boundary's log says why)",
        )
        for flavour, run in (("sync", _sync_invoke), ("async", _async_invoke))
    ],
    *[
        (
            f"{flavour}-envelope-not-an-envelope",
            lambda run=run: run(None, {"tool_call_id": "call_1"}),
            TypeError,
            "envelope must be a ToolCallEnvelope",
        )
        for flavour, run in (("sync", _sync_invoke), ("async", _async_invoke))
    ],
    *[
        (
            f"{flavour}-token-factory-{name}",
            lambda run=run, factory=factory: run(None, token_factory=factory),
            TypeError,
            "token_factory must return a non-empty str",
        )
        for flavour, run in (("sync", _sync_invoke), ("async", _async_invoke))
        for name, factory in (("empty", lambda: ""), ("bytes", lambda: b"token"))
    ],
    *[
        (
            f"{flavour}-sweep-negative-age",
            lambda flavour=flavour: _sweep(flavour, -1),
            ValueError,
            "older_than_ms must be an int in [0, 2**53 - 1] (milliseconds)",
        )
        for flavour in ("sync", "async")
    ],
]


@pytest.mark.parametrize(
    ("misuse", "kind", "message"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_each_misuse_raises_its_exact_message(
    misuse: Callable[[], Any], kind: type[Exception], message: str
) -> None:
    """The exception's exact type (not a subclass) and its whole text."""
    with pytest.raises(Exception) as caught:
        misuse()
    assert type(caught.value) is kind
    assert str(caught.value) == message


def test_limits_is_checked_before_anything_runs() -> None:
    """A valid Limits passes the same check (the row above is not refusing every value)."""
    assert ToolBoundary(MemoryStore(), ToolRegistry(), limits=Limits()).limits == Limits()
