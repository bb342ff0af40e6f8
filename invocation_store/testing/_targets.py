"""Targets: one store plus its boundary, driven through one synchronous face.

The machine applies every operation to a list of targets (one for a single-store
run, several for the differential run) and compares what they observe. A
:class:`SyncTarget` wraps an :class:`~invocation_store.adapters.InvocationStore`
and a :class:`~invocation_store.boundary.ToolBoundary`; an :class:`AsyncTarget`
wraps an :class:`~invocation_store.adapters.AsyncInvocationStore` and an
:class:`~invocation_store.boundary.AsyncToolBoundary`, running each operation to
completion on its own event loop (an :class:`asyncio.Runner` per machine).

A :class:`Snapshot` is everything a store lets one observe of the machine's runs and
keys after a step: run states, call and completed lists, records (with raw) and
remaining TTLs. It is read in one go per step and shared by every invariant.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeAlias

from ..boundary import AsyncToolBoundary, BoundaryResult, ToolBoundary, ToolRegistry
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Citation,
    ErrorCode,
    Limits,
    ProgressReport,
    RunContext,
    RunState,
    ToolCallEnvelope,
)
from ._clock import FakeClock
from ._model import Key
from ._tools import ToolKit

__all__ = [
    "AnyStore",
    "AsyncTarget",
    "BoundaryFactory",
    "LogCapture",
    "Snapshot",
    "StoreFactory",
    "SyncTarget",
    "Target",
    "capturing_logger",
    "is_async_store",
    "make_target",
]

#: Most creates one race sends at once.
RACE_WORKERS = 4
_RACE_POOL: list[ThreadPoolExecutor] = []
_RACE_POOL_LOCK = threading.Lock()


def _race_pool() -> ThreadPoolExecutor:
    """One pool of racing workers for the process (idle between races; threads are costly to start)."""
    with _RACE_POOL_LOCK:
        if not _RACE_POOL:
            _RACE_POOL.append(ThreadPoolExecutor(RACE_WORKERS, thread_name_prefix="invocation-machine-race"))
        return _RACE_POOL[0]


#: A sync or async store (checked structurally by the targets).
AnyStore: TypeAlias = Any
#: Builds a fresh store on the machine's clock: ``factory(clock) -> store``.
StoreFactory: TypeAlias = Callable[[FakeClock], AnyStore]
#: Builds the boundary: ``factory(store, registry, limits, token_factory, logger) -> boundary``.
#: ``None`` means ToolBoundary/AsyncToolBoundary; mutants plant faulty boundaries here.
BoundaryFactory: TypeAlias = Callable[
    [AnyStore, ToolRegistry, Limits, Callable[[], str], logging.Logger], Any
]


class LogCapture(logging.Handler):
    """Keeps every message a boundary logs, so the machine can scan them (CIS-ERR-2)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Store the formatted message (with any exception text, which must not be there)."""
        message = record.getMessage()
        if record.exc_info:
            message += " " + logging.Formatter().formatException(record.exc_info)
        self.messages.append(message)


class _CapturingLogger(logging.Logger):
    """A logger that always records: ``logging.disable`` must not blind the CIS-ERR-2 check."""

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - overrides logging's name
        """Every level from DEBUG up is recorded."""
        return level >= logging.DEBUG


def capturing_logger(name: str) -> tuple[logging.Logger, LogCapture]:
    """A standalone logger (not in the logging tree, so nothing is printed) and its capture."""
    logger = _CapturingLogger(f"invocation_store.testing.{name}", logging.DEBUG)
    capture = LogCapture()
    logger.addHandler(capture)
    return logger, capture


class Snapshot:
    """What one store shows of the machine's runs and keys after a step.

    ``runs``: run id -> state or None; ``calls``/``completed``: run id -> ids;
    ``records``: key -> record (with raw) or None; ``ttl``: key -> remaining ms or None.
    """

    __slots__ = ("calls", "completed", "records", "runs", "ttl")

    def __init__(self) -> None:
        self.runs: dict[str, RunState | None] = {}
        self.calls: dict[str, tuple[str, ...]] = {}
        self.completed: dict[str, tuple[str, ...]] = {}
        self.records: dict[Key, CanonicalRecord | None] = {}
        self.ttl: dict[Key, int | None] = {}


def is_async_store(store: object) -> bool:
    """True if ``store.create`` is a coroutine function (an AsyncInvocationStore)."""
    return inspect.iscoroutinefunction(getattr(store, "create", None))


class Target(abc.ABC):
    """One store and its boundary, as the machine drives them (see the module doc)."""

    name: str
    store: AnyStore
    boundary: Any
    clock: FakeClock
    kit: ToolKit
    asynchronous: ClassVar[bool]
    #: The library's boundary of the flavour (``ToolBoundary`` or ``AsyncToolBoundary``).
    boundary_class: ClassVar[type[Any]]
    logs: LogCapture

    def __init__(
        self,
        name: str,
        store: AnyStore,
        *,
        clock: FakeClock,
        limits: Limits,
        token_factory: Callable[[], str],
        boundary_factory: BoundaryFactory | None,
    ) -> None:
        """The state every flavour holds: its store, clock, tools, logs and boundary
        (``boundary_factory``, else the library's boundary of the flavour, ``boundary_class``)."""
        self.name = name
        self.store = store
        self.clock = clock
        self.kit = ToolKit(clock.advance, asynchronous=self.asynchronous)
        logger, self.logs = capturing_logger(name)
        if boundary_factory is None:
            self.boundary = self.boundary_class(
                store, self.kit.registry, limits=limits, token_factory=token_factory, logger=logger
            )
        else:
            self.boundary = boundary_factory(store, self.kit.registry, limits, token_factory, logger)

    @abc.abstractmethod
    def open_run(self, run_id: str, **params: int) -> RunContext | ErrorCode:
        """``boundary.open_run``."""

    @abc.abstractmethod
    def end_run(self, context: RunContext, *, cancel: bool) -> RunState | ErrorCode:
        """``boundary.cancel_run`` or ``boundary.close_run``."""

    @abc.abstractmethod
    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """``boundary.invoke``."""

    @abc.abstractmethod
    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """``boundary.cite``."""

    @abc.abstractmethod
    def progress(self, context: RunContext) -> ProgressReport:
        """``boundary.project_progress``."""

    @abc.abstractmethod
    def sweep(self, context: RunContext, older_than_ms: int) -> int:
        """``boundary.sweep_stale``."""

    @abc.abstractmethod
    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """``store.create`` (a worker that creates and then crashes)."""

    @abc.abstractmethod
    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """``store.complete`` (a late or replaying worker)."""

    @abc.abstractmethod
    def race(self, requests: Sequence[AdmissionRequest], limits: Limits) -> list[Admission | ErrorCode]:
        """``store.create`` of every request at once (threads or tasks)."""

    @abc.abstractmethod
    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """``store.get``."""

    @abc.abstractmethod
    def snapshot(
        self, run_ids: Sequence[str], tool_call_ids: Sequence[str], ttl_keys: Sequence[Key]
    ) -> Snapshot:
        """Read everything observable about ``run_ids`` x ``tool_call_ids``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the tools, the store and (async) the event loop."""


class SyncTarget(Target):
    """A sync store behind a :class:`ToolBoundary` (or a planted faulty boundary)."""

    asynchronous = False
    boundary_class: ClassVar[type[Any]] = ToolBoundary

    def open_run(self, run_id: str, **params: int) -> RunContext | ErrorCode:
        """See :class:`Target`."""
        result: RunContext | ErrorCode = self.boundary.open_run(run_id, **params)
        return result

    def end_run(self, context: RunContext, *, cancel: bool) -> RunState | ErrorCode:
        """See :class:`Target`."""
        method = self.boundary.cancel_run if cancel else self.boundary.close_run
        result: RunState | ErrorCode = method(context)
        return result

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """See :class:`Target`."""
        result: BoundaryResult = self.boundary.invoke(context, envelope)
        return result

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """See :class:`Target`."""
        result: Citation = self.boundary.cite(context, tool_call_id)
        return result

    def progress(self, context: RunContext) -> ProgressReport:
        """See :class:`Target`."""
        result: ProgressReport = self.boundary.project_progress(context)
        return result

    def sweep(self, context: RunContext, older_than_ms: int) -> int:
        """See :class:`Target`."""
        result: int = self.boundary.sweep_stale(context, older_than_ms)
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """See :class:`Target`."""
        result: Admission | ErrorCode = self.store.create(request, limits)
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """See :class:`Target`."""
        result: CanonicalRecord | ErrorCode = self.store.complete(before, after)
        return result

    def race(self, requests: Sequence[AdmissionRequest], limits: Limits) -> list[Admission | ErrorCode]:
        """One worker thread per request, released together by a barrier (CIS-RUN-5).

        The worker threads are shared by every machine of the process (at most
        :data:`RACE_WORKERS` creates per race). Raises ``ValueError`` for more.
        """
        if len(requests) > RACE_WORKERS:
            raise ValueError(f"at most {RACE_WORKERS} racing creates")
        barrier = threading.Barrier(len(requests))
        store = self.store

        def work(request: AdmissionRequest) -> Admission | ErrorCode:
            barrier.wait(timeout=10)
            result: Admission | ErrorCode = store.create(request, limits)
            return result

        return list(_race_pool().map(work, requests, timeout=30))

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """See :class:`Target`."""
        result: CanonicalRecord | None = self.store.get(run_id, tool_call_id)
        return result

    def snapshot(
        self, run_ids: Sequence[str], tool_call_ids: Sequence[str], ttl_keys: Sequence[Key]
    ) -> Snapshot:
        """See :class:`Target`."""
        store = self.store
        snap = Snapshot()
        for run_id in run_ids:
            snap.runs[run_id] = store.get_run(run_id)
            snap.calls[run_id] = tuple(store.calls(run_id))
            snap.completed[run_id] = tuple(store.completed(run_id))
            found = store.get_many(run_id, tool_call_ids)
            for tcid in tool_call_ids:
                snap.records[(run_id, tcid)] = found.get(tcid)
        for key in ttl_keys:
            snap.ttl[key] = store.ttl_remaining_ms(*key)
        return snap

    def close(self) -> None:
        """See :class:`Target`."""
        self.kit.release()
        self.store.close()


class AsyncTarget(Target):
    """An async store behind an :class:`AsyncToolBoundary`, on a private event loop."""

    asynchronous = True
    boundary_class: ClassVar[type[Any]] = AsyncToolBoundary

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """See :class:`Target`; the boundary runs on a private event loop."""
        super().__init__(*args, **kwargs)
        self._runner = asyncio.Runner()

    def _run(self, awaitable: Any) -> Any:
        async def wrapper() -> Any:
            return await awaitable

        return self._runner.run(wrapper())

    def open_run(self, run_id: str, **params: int) -> RunContext | ErrorCode:
        """See :class:`Target`."""
        result: RunContext | ErrorCode = self._run(self.boundary.open_run(run_id, **params))
        return result

    def end_run(self, context: RunContext, *, cancel: bool) -> RunState | ErrorCode:
        """See :class:`Target`."""
        method = self.boundary.cancel_run if cancel else self.boundary.close_run
        result: RunState | ErrorCode = self._run(method(context))
        return result

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """See :class:`Target`."""
        result: BoundaryResult = self._run(self.boundary.invoke(context, envelope))
        return result

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """See :class:`Target`."""
        result: Citation = self._run(self.boundary.cite(context, tool_call_id))
        return result

    def progress(self, context: RunContext) -> ProgressReport:
        """See :class:`Target`."""
        result: ProgressReport = self._run(self.boundary.project_progress(context))
        return result

    def sweep(self, context: RunContext, older_than_ms: int) -> int:
        """See :class:`Target`."""
        result: int = self._run(self.boundary.sweep_stale(context, older_than_ms))
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """See :class:`Target`."""
        result: Admission | ErrorCode = self._run(self.store.create(request, limits))
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """See :class:`Target`."""
        result: CanonicalRecord | ErrorCode = self._run(self.store.complete(before, after))
        return result

    def race(self, requests: Sequence[AdmissionRequest], limits: Limits) -> list[Admission | ErrorCode]:
        """Every create as a task of one ``asyncio.gather`` (CIS-RUN-5)."""

        async def all_at_once() -> list[Admission | ErrorCode]:
            return list(await asyncio.gather(*(self.store.create(r, limits) for r in requests)))

        result: list[Admission | ErrorCode] = self._runner.run(all_at_once())
        return result

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """See :class:`Target`."""
        result: CanonicalRecord | None = self._run(self.store.get(run_id, tool_call_id))
        return result

    def snapshot(
        self, run_ids: Sequence[str], tool_call_ids: Sequence[str], ttl_keys: Sequence[Key]
    ) -> Snapshot:
        """See :class:`Target`; all reads in one pass of the loop."""
        store = self.store

        async def read() -> Snapshot:
            snap = Snapshot()
            for run_id in run_ids:
                snap.runs[run_id] = await store.get_run(run_id)
                snap.calls[run_id] = tuple(await store.calls(run_id))
                snap.completed[run_id] = tuple(await store.completed(run_id))
                found = await store.get_many(run_id, tool_call_ids)
                for tcid in tool_call_ids:
                    snap.records[(run_id, tcid)] = found.get(tcid)
            for key in ttl_keys:
                snap.ttl[key] = await store.ttl_remaining_ms(*key)
            return snap

        result: Snapshot = self._runner.run(read())
        return result

    def close(self) -> None:
        """See :class:`Target`."""
        self.kit.release()
        try:
            self._runner.run(self.store.close())
        finally:
            self._runner.close()


def make_target(
    name: str,
    store: AnyStore,
    *,
    clock: FakeClock,
    limits: Limits,
    token_factory: Callable[[], str],
    boundary_factory: BoundaryFactory | None = None,
) -> Target:
    """A :class:`SyncTarget` or :class:`AsyncTarget`, chosen by the store's ``create``."""
    cls = AsyncTarget if is_async_store(store) else SyncTarget
    return cls(
        name,
        store,
        clock=clock,
        limits=limits,
        token_factory=token_factory,
        boundary_factory=boundary_factory,
    )
