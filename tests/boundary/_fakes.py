"""Fake executors, projectors and store wrappers for the boundary tests.

The fakes count their calls so that tests can assert "never called" and "called
once". Store wrappers delegate every method to a real store (memory or Redis) and
add one behaviour each: counting calls, failing with leaky exception text, or
injecting tracker identities and records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from invocation_store import (
    EvidenceStatus,
    Limits,
    Projection,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.kernel import CanonicalRecord, ProgressView

RUN = "run-1"
OTHER_RUN = "run-2"
TTL_MS = 3_600_000
DEADLINE_MS = 600_000
#: A marker placed in raw responses and requests: it must never reach the agent.
MARKER = "RAW-MARKER-5b9e1c"
#: A Redis URL holding a password, and a key: they must never reach the agent or a log.
PASSWORD = "hunter2-s3cr3t-pw"
SECRET_URL = f"redis://default:{PASSWORD}@127.0.0.1:6390/0"
SECRET_KEY = "cis:{run-1}:call:call_1"


class FakeExecutor:
    """Returns ``result`` (or raises ``raises``); optionally blocks until released."""

    def __init__(
        self,
        result: object = '{"hits":["disk full on db-1"]}',
        *,
        raises: BaseException | None = None,
        block: bool = False,
        on_call: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        self.result = result
        self.raises = raises
        self.calls: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.block = block
        self.on_call = on_call
        self._lock = threading.Lock()

    def __call__(self, args: Mapping[str, Any]) -> object:
        with self._lock:
            self.calls.append(dict(args))
        if self.on_call is not None:
            self.on_call(args)
        if self.block:
            self.release.wait(10)
        if self.raises is not None:
            raise self.raises
        return self.result


class FakeProjector:
    """Returns ``projection`` (or raises ``raises``), recording (raw, args) of each call."""

    def __init__(
        self,
        projection: object = None,
        *,
        raises: BaseException | None = None,
    ) -> None:
        self.projection = (
            projection
            if projection is not None
            else Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="db-1 disk full", scope="logs"
            )
        )
        self.raises = raises
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, raw: str, args: Mapping[str, Any]) -> Any:
        with self._lock:
            self.calls.append((raw, dict(args)))
        if self.raises is not None:
            raise self.raises
        return self.projection


def no_evidence(scope: str = "logs of db-1, last 24h") -> Projection:
    """A valid NO_EVIDENCE projection with a scope."""
    return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="no matching lines", scope=scope)


def tool(
    executor: Any = None,
    projector: Any = None,
    *,
    name: str = "search",
    authorized: Any = True,
    read_only: Any = True,
    timeout_ms: int = 5_000,
) -> ToolSpec:
    """A ToolSpec with fakes by default."""
    return ToolSpec(
        name=name,
        executor=executor if executor is not None else FakeExecutor(),
        projector=projector if projector is not None else FakeProjector(),
        authorized=authorized,
        read_only=read_only,
        timeout_ms=timeout_ms,
    )


def envelope(
    tool_call_id: Any = "call_1",
    *,
    run_id: Any = RUN,
    tool_name: Any = "search",
    arguments: Any = '{"q":"disk"}',
) -> ToolCallEnvelope:
    """An envelope; any field may be hostile."""
    return ToolCallEnvelope(
        run_id=run_id, tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments
    )


def boundary_for(store: Any, *tools: ToolSpec, limits: Limits | None = None, **kwargs: Any) -> ToolBoundary:
    """A sync boundary over ``store`` with ``tools`` (default: one fake ``search`` tool)."""
    registry = ToolRegistry(list(tools) if tools else [tool()])
    return ToolBoundary(store, registry, limits=limits or Limits(), **kwargs)


def open_run(
    boundary: Any,
    run_id: str = RUN,
    *,
    deadline_ms: int = DEADLINE_MS,
    ttl_ms: int = TTL_MS,
    tool_call_budget: int = 100,
    byte_budget: int = 1 << 24,
) -> RunContext:
    """Open a run on a sync boundary, deadline relative to the store's clock."""
    context = boundary.open_run(
        run_id,
        deadline_ms=boundary.now_ms() + deadline_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    assert isinstance(context, RunContext), context
    return context


class StoreWrapper:
    """Delegates every attribute to ``inner``; subclasses override what they change."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CountingStore(StoreWrapper):
    """Records the name of every store method called (``now_ms`` excluded: no round trip)."""

    METHODS = (
        "open_run",
        "cancel_run",
        "close_run",
        "get_run",
        "create",
        "complete",
        "get",
        "get_many",
        "get_progress",
        "completed",
        "calls",
        "ttl_remaining_ms",
    )

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.log: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.METHODS:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.log.append(name)
            return attr(*args, **kwargs)

        return counted


class LeakyStoreError(ConnectionError):
    """What a careless driver raises: its text holds a URL with a password, a key, a payload."""

    def __init__(self) -> None:
        super().__init__(f"Error 111 connecting to {SECRET_URL}; key {SECRET_KEY}; value {MARKER}")


class FailingStore(StoreWrapper):
    """Raises ``error()`` from the methods named in ``fail_on`` (sync or async alike)."""

    def __init__(
        self,
        inner: Any,
        fail_on: Sequence[str],
        error: Callable[[], BaseException] = LeakyStoreError,
        *,
        is_async: bool = False,
    ) -> None:
        super().__init__(inner)
        self.fail_on = set(fail_on)
        self.error = error
        self.is_async = is_async

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        # A failing clock fails both ways the boundary reads it (``synced_now_ms`` for decisions).
        clock_fails = name == "synced_now_ms" and "now_ms" in self.fail_on
        if name not in self.fail_on and not clock_fails:
            return attr
        if self.is_async and name != "now_ms":

            async def failing_async(*_args: Any, **_kwargs: Any) -> Any:
                raise self.error()

            return failing_async

        def failing(*_args: Any, **_kwargs: Any) -> Any:
            raise self.error()

        return failing


class TrackerStore(StoreWrapper):
    """Adds identities to the run's completed list and substitutes records read for them.

    Simulates a tracker holding identities that must be excluded from progress:
    ``extra_ids`` are appended to ``completed``; ``records`` replace what
    ``get_many`` and ``get_progress`` return for their ids (e.g. an other-run or an
    expired record).
    """

    def __init__(
        self, inner: Any, extra_ids: Sequence[str], records: Mapping[str, CanonicalRecord | None]
    ) -> None:
        super().__init__(inner)
        self.extra_ids = tuple(extra_ids)
        self.records = dict(records)
        self.get_many_calls = 0

    def completed(self, run_id: str) -> tuple[str, ...]:
        return tuple(self.inner.completed(run_id)) + self.extra_ids

    def get_many(
        self, run_id: str, ids: Sequence[str], **kwargs: Any
    ) -> Mapping[str, CanonicalRecord | None]:
        self.get_many_calls += 1
        found = dict(self.inner.get_many(run_id, ids, **kwargs))
        found.update({k: v for k, v in self.records.items() if k in ids})
        return found

    def get_progress(self, run_id: str, ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        self.get_many_calls += 1
        found = dict(self.inner.get_progress(run_id, ids))
        found.update(
            {k: None if v is None else ProgressView.of(v) for k, v in self.records.items() if k in ids}
        )
        return found
